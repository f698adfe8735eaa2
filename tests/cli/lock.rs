//! `bundle lock` and the stale-digest half of `bundle check`.

use std::time::{Duration, SystemTime};

use crate::support::{Env, testdata};

fn hex_of(path: &std::path::Path) -> String {
    blake3::hash(&std::fs::read(path).unwrap()).to_hex().to_string()
}

#[test]
fn lock_writes_library_digests_then_check_passes_and_relock_is_a_no_op() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    std::fs::write(
        dir.join("manifest.toml"),
        "[bundle]\nformat = 1\n\n[agent]\nname = \"mailer\"\nversion = \"1.0.0\"\n",
    )
    .unwrap();
    let out = env.run(&["check", "--format", "json", "mailer"]);
    out.expect_code(1);
    assert!(
        out.json()["diagnostics"].as_array().unwrap().iter().all(|d| d["code"] == "stale_digest"),
        "{}",
        out.stdout
    );

    env.run(&["lock", "mailer"]).expect_code(0);
    let manifest = std::fs::read_to_string(dir.join("manifest.toml")).unwrap();
    let parsed: toml_edit::DocumentMut = manifest.parse().unwrap();
    assert_eq!(parsed["artifacts"]["tools"]["blake3"].as_str().unwrap(), hex_of(&dir.join("tools.json")));
    assert_eq!(
        parsed["artifacts"]["tools"]["size"].as_integer().unwrap() as u64,
        std::fs::metadata(dir.join("tools.json")).unwrap().len()
    );
    assert_eq!(parsed["artifacts"]["tools"]["version"].as_integer(), Some(1));
    assert_eq!(parsed["artifacts"]["policy"]["blake3"].as_str().unwrap(), hex_of(&dir.join("policy.caps")));
    assert_eq!(
        parsed["files"]["prompts/system.md"]["blake3"].as_str().unwrap(),
        hex_of(&dir.join("prompts/system.md"))
    );
    env.run(&["check", "mailer"]).expect_code(0);

    // An unchanged manifest is not rewritten: same bytes, same mtime.
    let old = SystemTime::now() - Duration::from_secs(3600);
    let f = std::fs::File::options().write(true).open(dir.join("manifest.toml")).unwrap();
    f.set_modified(old).unwrap();
    drop(f);
    let out = env.run(&["lock", "--format", "json", "mailer"]);
    out.expect_code(0);
    assert_eq!(out.json()["agents"][0]["written"], false);
    assert_eq!(std::fs::read_to_string(dir.join("manifest.toml")).unwrap(), manifest);
    assert_eq!(std::fs::metadata(dir.join("manifest.toml")).unwrap().modified().unwrap(), old);
}

#[test]
fn lock_preserves_comments_and_layout_of_a_commented_manifest() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    std::fs::copy(testdata("manifests/commented.toml"), dir.join("manifest.toml")).unwrap();
    std::fs::write(dir.join("prompts/new.md"), "new prompt\n").unwrap();
    env.run(&["lock", "mailer"]).expect_code(0);
    let after = std::fs::read_to_string(dir.join("manifest.toml")).unwrap();
    let before = std::fs::read_to_string(testdata("manifests/commented.toml")).unwrap();
    // Every comment line the author wrote survives, in the same order.
    let comments = |s: &str| s.lines().filter_map(|l| l.find('#').map(|i| l[i..].to_owned())).collect::<Vec<_>>();
    let (mut cb, ca) = (comments(&before), comments(&after));
    // ...except the one on the entry of the file that no longer exists.
    cb.retain(|c| c != "# gone");
    assert!(cb.iter().all(|c| ca.contains(c)), "lost comments:\nbefore {cb:?}\nafter {ca:?}");
    assert!(after.starts_with(before.lines().next().unwrap()), "{after}");
    // The stale entry is gone, the new file is in sorted position.
    assert!(!after.contains("prompts/removed.md"), "{after}");
    let new = after.find("\"prompts/new.md\"").unwrap();
    let system = after.find("\"prompts/system.md\"").unwrap();
    assert!(new < system, "{after}");
    env.run(&["check", "mailer"]).expect_code(0);
}

#[test]
fn check_reports_each_kind_of_stale_digest() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    env.run(&["lock", "mailer"]).expect_code(0);
    std::fs::write(dir.join("prompts/system.md"), "changed\n").unwrap();
    std::fs::write(dir.join("prompts/extra.md"), "new\n").unwrap();
    std::fs::remove_file(dir.join("schemas/shared/mail.draft.v1.json")).unwrap();
    let out = env.run(&["check", "--format", "json", "mailer"]);
    out.expect_code(1);
    let found: Vec<(String, String)> = out.json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["code"].as_str().unwrap().to_owned(), d["path"].as_str().unwrap_or("-").to_owned()))
        .collect();
    for key in ["files.\"prompts/system.md\"", "files.\"prompts/extra.md\""] {
        assert!(found.contains(&("stale_digest".into(), key.into())), "{key}: {found:?}");
    }
    // The deleted schema is reported twice over: unresolved by tools.json, and stale.
    assert!(
        found.contains(&("stale_digest".into(), "files.\"schemas/shared/mail.draft.v1.json\"".into())),
        "{found:?}"
    );
    assert_eq!(out.stderr, "", "--format json writes nothing else");
}

#[test]
fn lock_refuses_symlinks_secrets_and_case_collisions_and_changes_nothing() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    let before = std::fs::read(dir.join("manifest.toml")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("/etc/passwd", dir.join("prompts/link.md")).unwrap();
    std::fs::write(dir.join(".env"), "TOKEN=x\n").unwrap();
    std::fs::write(dir.join("deploy.pem"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
    std::fs::write(dir.join("prompts/System.md"), "collides\n").unwrap();
    let out = env.run(&["lock", "--format", "json", "mailer"]);
    out.expect_code(1);
    let codes: Vec<String> =
        out.json()["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect();
    for code in ["unsupported_file_type", "secret_file", "unsafe_path"] {
        assert!(codes.contains(&code.to_owned()), "{code}: {codes:?}");
    }
    assert_eq!(codes.iter().filter(|c| *c == "secret_file").count(), 2, "{codes:?}");
    assert_eq!(std::fs::read(dir.join("manifest.toml")).unwrap(), before, "manifest must be untouched");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn bundleignore_and_default_ignores_exclude_files_and_allow_secret_files_admits_one() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    std::fs::write(dir.join(".git/HEAD"), "ref\n").unwrap();
    std::fs::write(dir.join("notes.swp"), "x").unwrap();
    std::fs::create_dir_all(dir.join("scratch")).unwrap();
    std::fs::write(dir.join("scratch/a.txt"), "x").unwrap();
    std::fs::write(dir.join(".bundleignore"), "scratch/\n").unwrap();
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    std::fs::write(dir.join("certs/ca.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    let manifest = std::fs::read_to_string(dir.join("manifest.toml")).unwrap();
    std::fs::write(
        dir.join("manifest.toml"),
        manifest.replacen("format = 1", "format = 1\nallow_secret_files = [\"certs/ca.pem\"]", 1),
    )
    .unwrap();
    env.run(&["lock", "mailer"]).expect_code(0);
    let after = std::fs::read_to_string(dir.join("manifest.toml")).unwrap();
    insta::assert_snapshot!(crate::snapshot::filtered(&after));
    for ignored in [".git", "notes.swp", "scratch", ".bundleignore"] {
        assert!(!after.contains(ignored), "{ignored} should be ignored:\n{after}");
    }
}

#[test]
fn unknown_manifest_keys_are_errors_with_suggestions() {
    let env = Env::new();
    let dir = env.copy("agents/minimal", "m");
    std::fs::write(dir.join("manifest.toml"), "[bundle]\nformat = 1\n\n[agent]\nname = \"m\"\nversoin = \"1.0.0\"\n")
        .unwrap();
    let out = env.run(&["check", "--format", "json", "m"]);
    out.expect_code(1);
    let d = &out.json()["diagnostics"];
    let unknown = d.as_array().unwrap().iter().find(|d| d["code"] == "unknown_field").expect("unknown_field");
    assert_eq!(unknown["path"], "agent.versoin");
    assert_eq!(unknown["line"], 6);
    assert!(unknown["help"].as_str().unwrap().contains("`version`"));
}
