//! `bundle pack`, `verify`, `inspect`, `unpack` and `keygen` end to end, including interop
//! with the stock tools (tar, bsdtar, zstd, b3sum, minisign).

use std::path::Path;
use std::process::Command;

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, key, make_old, require_tool};

#[test]
fn pack_then_verify_accepts_and_reports_the_agent() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    env.run(&["pack", "mailer", "--key", &key("test.key")]).expect_code(0);
    assert!(env.path().join("mailer-1.0.0.agent.bundle").is_file(), "default name");
    let out = env.run(&["verify", "mailer-1.0.0.agent.bundle", "--key", &key("test.pub"), "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    assert_eq!(j["ok"], true);
    assert_eq!(j["agent"]["name"], "mailer");
    assert_eq!(j["agent"]["version"], "1.0.0");
    assert!(j["code"].is_null());
    let pubkey = std::fs::read_to_string(key("test.pub")).unwrap();
    assert!(pubkey.contains(j["key_id"].as_str().unwrap()), "key id {} not in {pubkey}", j["key_id"]);
}

#[test]
fn verify_rejects_an_untrusted_key_and_a_key_scoped_to_other_agents() {
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    let out = env.run(&["verify", "m.agent.bundle", "--key", &key("minisign-nopw.pub"), "--format", "json"]);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "untrusted_key");

    let b64 = std::fs::read_to_string(key("test.pub")).unwrap().lines().nth(1).unwrap().to_owned();
    std::fs::write(env.path().join("trusted"), format!("# team keys\n{b64} kb-* search\n")).unwrap();
    let out = env.run(&["verify", "m.agent.bundle", "--trusted-keys", "trusted", "--format", "json"]);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "untrusted_key");
    assert!(out.json()["message"].as_str().unwrap().contains("kb-*"));
    std::fs::write(env.path().join("trusted"), format!("{b64} mail*\n")).unwrap();
    env.run(&["verify", "m.agent.bundle", "--trusted-keys", "trusted"]).expect_code(0);
    let out =
        env.run(&["verify", "m.agent.bundle", "--trusted-keys", "trusted", "--name", "other", "--format", "json"]);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "name_mismatch");
}

#[test]
fn malformed_key_files_are_usage_errors() {
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    std::fs::write(env.path().join("bad.pub"), "untrusted comment: x\nnot base64!\n").unwrap();
    let out = env.run(&["verify", "m.agent.bundle", "--key", "bad.pub"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    std::fs::write(env.path().join("bad.key"), "garbage").unwrap();
    let out = env.run(&["pack", "mailer", "--key", "bad.key", "-o", "x.agent.bundle"]);
    out.expect_code(2);
    assert!(!env.path().join("x.agent.bundle").exists());
}

#[test]
fn packs_are_byte_identical_across_mtimes_modes_paths_and_umask() {
    let env = Env::new();
    let a = env.copy("agents/mailer", "one/mailer");
    let b = env.copy("agents/mailer", "elsewhere/deeper/mailer");
    // Different mtimes and group/world permission bits on the second copy.
    for entry in walk(&b) {
        let f = std::fs::File::options().write(true).open(&entry).unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_234_567)).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o664)).unwrap();
        }
    }
    env.pack(a.to_str().unwrap(), "a.agent.bundle").expect_code(0);
    env.pack(b.to_str().unwrap(), "b.agent.bundle").expect_code(0);
    let (x, y) = (
        std::fs::read(env.path().join("a.agent.bundle")).unwrap(),
        std::fs::read(env.path().join("b.agent.bundle")).unwrap(),
    );
    assert!(x == y, "bundles differ ({} vs {} bytes)", x.len(), y.len());
    // And again from the same source: still identical.
    env.pack(a.to_str().unwrap(), "c.agent.bundle").expect_code(0);
    assert!(x == std::fs::read(env.path().join("c.agent.bundle")).unwrap());
    // SOURCE_DATE_EPOCH is honoured (and so changes the bytes).
    let out = crate::support::bin()
        .current_dir(env.path())
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .args(["pack", a.to_str().unwrap(), "--key", &key("test.key"), "-o", "d.agent.bundle"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(x != std::fs::read(env.path().join("d.agent.bundle")).unwrap());
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

#[test]
fn executable_bit_is_kept_and_other_modes_are_normalised() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("bin/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("bin/run.sh"), std::fs::Permissions::from_mode(0o775)).unwrap();
    }
    env.pack("mailer", "m.agent.bundle").expect_code(0);
    env.run(&["unpack", "m.agent.bundle", "out", "--key", &key("test.pub")]).expect_code(0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| std::fs::metadata(env.path().join("out").join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("bin/run.sh"), 0o755);
        assert_eq!(mode("tools.json"), 0o644);
    }
    assert_eq!(
        std::fs::read(env.path().join("out/tools.json")).unwrap(),
        std::fs::read(dir.join("tools.json")).unwrap()
    );
    assert!(env.path().join("out/manifest.toml").is_file());
    // unpack never writes into an existing folder.
    env.run(&["unpack", "m.agent.bundle", "out", "--key", &key("test.pub")]).expect_code(2);
}

#[test]
fn locked_pack_refuses_a_stale_manifest_and_plain_pack_relocks() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    env.run(&["lock", "mailer"]).expect_code(0);
    std::fs::write(dir.join("prompts/system.md"), "edited after review\n").unwrap();
    let out =
        env.run(&["pack", "mailer", "--key", &key("test.key"), "--locked", "-o", "m.agent.bundle", "--format", "json"]);
    out.expect_code(1);
    assert_run_snapshot!(out);
    assert!(!env.path().join("m.agent.bundle").exists());
    let out = env.run(&["pack", "mailer", "--key", &key("test.key"), "-o", "m.agent.bundle", "--format", "json"]);
    out.expect_code(0);
    assert_eq!(out.json()["relocked"], true);
    env.run(&["pack", "mailer", "--key", &key("test.key"), "--locked", "-o", "m2.agent.bundle"]).expect_code(0);
}

#[test]
fn locked_pack_catches_a_same_size_edit_while_archiving_and_writes_nothing() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    let prompt = std::fs::read_to_string(dir.join("prompts/system.md")).unwrap();
    // Same length, different bytes: only the hash (computed while archiving) can tell.
    std::fs::write(dir.join("prompts/system.md"), prompt.to_uppercase()).unwrap();
    assert_eq!(prompt.len(), prompt.to_uppercase().len());
    let out =
        env.run(&["pack", "mailer", "--key", &key("test.key"), "--locked", "-o", "m.agent.bundle", "--format", "json"]);
    out.expect_code(1);
    assert_run_snapshot!(out);
    let names: Vec<String> =
        std::fs::read_dir(env.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["mailer".to_owned()], "no bundle and no temp file");
}

#[test]
fn an_invalid_agent_writes_nothing() {
    let env = Env::new();
    env.copy("invalid/hardcoded_credential-bearer", "bad");
    let out = env.pack("bad", "bad.agent.bundle");
    out.expect_code(1);
    assert_run_snapshot!(out);
    let names: Vec<String> =
        std::fs::read_dir(env.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["bad".to_owned()], "nothing but the agent folder");
}

#[test]
fn signing_key_from_the_environment() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let out = crate::support::bin()
        .current_dir(env.path())
        .env("BUNDLE_SIGNING_KEY", std::fs::read_to_string(key("test.key")).unwrap())
        .args(["pack", "mailer", "-o", "m.agent.bundle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let secret_line = std::fs::read_to_string(key("test.key")).unwrap().lines().nth(1).unwrap().to_owned();
    assert!(!stderr.contains(&secret_line), "the key must never be printed");
    env.run(&["verify", "m.agent.bundle", "--key", &key("test.pub")]).expect_code(0);
    env.run(&["pack", "mailer", "-o", "n.agent.bundle"]).expect_code(2);
}

#[test]
fn keys_made_by_minisign_sign_bundles() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    env.run(&["pack", "mailer", "--key", &key("minisign-nopw.key"), "-o", "a.agent.bundle"]).expect_code(0);
    env.run(&["verify", "a.agent.bundle", "--key", &key("minisign-nopw.pub")]).expect_code(0);
    let out = crate::support::bin()
        .current_dir(env.path())
        .env("PW", "test-password")
        .args(["pack", "mailer", "--key", &key("minisign-pw.key"), "--password-env", "PW", "-o", "b.agent.bundle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    env.run(&["verify", "b.agent.bundle", "--key", &key("minisign-pw.pub")]).expect_code(0);
    // Encrypted key, no password available: a clear usage error.
    let out = env.run(&["pack", "mailer", "--key", &key("minisign-pw.key"), "-o", "c.agent.bundle"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

#[test]
fn keygen_writes_a_private_key_and_refuses_to_overwrite() {
    let env = Env::new();
    env.run(&["keygen", "release"]).expect_code(0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(env.path().join("release.key")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let first = std::fs::read(env.path().join("release.key")).unwrap();
    let out = env.run(&["keygen", "release"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    assert_eq!(std::fs::read(env.path().join("release.key")).unwrap(), first);
    env.run(&["keygen", "release", "--force"]).expect_code(0);
    assert_ne!(std::fs::read(env.path().join("release.key")).unwrap(), first);
    env.copy("agents/mailer", "mailer");
    env.run(&["pack", "mailer", "--key", "release.key", "-o", "m.agent.bundle"]).expect_code(0);
    env.run(&["verify", "m.agent.bundle", "--key", "release.pub"]).expect_code(0);
}

#[test]
fn inspect_says_whether_the_signature_was_checked() {
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    let out = env.run(&["inspect", "m.agent.bundle"]);
    out.expect_code(0);
    assert_run_snapshot!(out);
    let out = env.run(&["inspect", "m.agent.bundle", "--key", &key("test.pub"), "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    assert_eq!(j["signature_checked"], true);
    let send = j["tools"].as_array().unwrap().iter().find(|t| t["id"] == "mail.smtp_send").unwrap();
    assert_eq!(send["requires_confirmation"], true);
    assert_eq!(send["transport"], "http");
}

// ---- interop with stock tools: required in CI (BUNDLE_REQUIRE_TOOLS=1) ----

fn sh(dir: &Path, cmd: &str, args: &[&str]) -> std::process::Output {
    let out = Command::new(cmd).current_dir(dir).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn stock_tar_bsdtar_and_zstd_read_bundles_and_b3sum_agrees_with_the_manifest() {
    let (tar, bsdtar, zstd, b3sum) =
        (require_tool("tar"), require_tool("bsdtar"), require_tool("zstd"), require_tool("b3sum"));
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    let p = env.path();
    if zstd {
        sh(p, "zstd", &["-t", "m.agent.bundle"]);
    }
    if bsdtar {
        let list = String::from_utf8(sh(p, "bsdtar", &["-tf", "m.agent.bundle"]).stdout).unwrap();
        assert_eq!(list.lines().take(2).collect::<Vec<_>>(), ["manifest.toml", "manifest.toml.minisig"]);
    }
    // GNU tar's --zstd runs the zstd command.
    if tar && zstd {
        let list = String::from_utf8(sh(p, "tar", &["--zstd", "-tf", "m.agent.bundle"]).stdout).unwrap();
        assert!(list.lines().any(|l| l == "tools.json"), "{list}");
        std::fs::create_dir(p.join("x")).unwrap();
        sh(p, "tar", &["--zstd", "-xf", "m.agent.bundle", "-C", "x"]);
        if b3sum {
            let manifest: toml_edit::DocumentMut =
                std::fs::read_to_string(p.join("x/manifest.toml")).unwrap().parse().unwrap();
            let mut lines = String::new();
            lines.push_str(&format!("{}  tools.json\n", manifest["artifacts"]["tools"]["blake3"].as_str().unwrap()));
            lines.push_str(&format!("{}  policy.caps\n", manifest["artifacts"]["policy"]["blake3"].as_str().unwrap()));
            for (path, entry) in manifest["files"].as_table_like().unwrap().iter() {
                lines.push_str(&format!("{}  {path}\n", entry["blake3"].as_str().unwrap()));
            }
            std::fs::write(p.join("sums.txt"), lines).unwrap();
            let out = sh(&p.join("x"), "b3sum", &["--check", "../sums.txt"]);
            assert!(String::from_utf8_lossy(&out.stdout).contains("tools.json: OK"));
        }
    }
}

#[test]
fn minisign_verifies_the_extracted_manifest_signature() {
    if !require_tool("minisign") || !require_tool("tar") || !require_tool("zstd") {
        return;
    }
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    let p = env.path();
    std::fs::create_dir(p.join("x")).unwrap();
    sh(p, "tar", &["--zstd", "-xf", "m.agent.bundle", "-C", "x"]);
    let out = sh(&p.join("x"), "minisign", &["-V", "-p", &key("test.pub"), "-m", "manifest.toml"]);
    let text = String::from_utf8_lossy(&out.stdout);
    insta::assert_snapshot!(crate::snapshot::filtered(&text));
    // A tampered manifest fails minisign too.
    let mut m = std::fs::read(p.join("x/manifest.toml")).unwrap();
    m.push(b'\n');
    std::fs::write(p.join("x/manifest.toml"), m).unwrap();
    let out = Command::new("minisign")
        .current_dir(p.join("x"))
        .args(["-V", "-p", &key("test.pub"), "-m", "manifest.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn a_key_made_now_by_minisign_signs_and_verifies() {
    if !require_tool("minisign") {
        return;
    }
    let env = Env::new();
    let p = env.path();
    sh(p, "minisign", &["-G", "-W", "-p", "live.pub", "-s", "live.key"]);
    env.copy("agents/mailer", "mailer");
    env.run(&["pack", "mailer", "--key", "live.key", "-o", "m.agent.bundle"]).expect_code(0);
    env.run(&["verify", "m.agent.bundle", "--key", "live.pub"]).expect_code(0);
    // And the other way: a key from `bundle keygen` signs with minisign.
    env.run(&["keygen", "ours"]).expect_code(0);
    std::fs::write(p.join("file.txt"), "hello\n").unwrap();
    let out = Command::new("minisign")
        .current_dir(p)
        .args(["-S", "-s", "ours.key", "-m", "file.txt"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    sh(p, "minisign", &["-V", "-p", "ours.pub", "-m", "file.txt"]);
}

#[test]
fn unpack_removes_staging_folders_of_killed_unpacks() {
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    std::fs::create_dir(env.path().join("deploy")).unwrap();
    // What a SIGKILLed unpack leaves: a staging folder with part of the agent.
    let old = env.path().join("deploy/.bundle-unpack.AbC123");
    std::fs::create_dir_all(old.join("prompts")).unwrap();
    std::fs::write(old.join("prompts/system.md"), "partial").unwrap();
    // An old one whose unpack still runs (it holds the lock): it stays.
    let running = env.path().join("deploy/.bundle-unpack.Run456");
    std::fs::create_dir(&running).unwrap();
    let held = std::fs::File::open(&running).unwrap();
    held.lock().unwrap();
    make_old(&old);
    make_old(&running);
    // A fresh one may belong to an unpack still running: it stays.
    let fresh = env.path().join("deploy/.bundle-unpack.XyZ789");
    std::fs::create_dir(&fresh).unwrap();
    env.run(&["unpack", "m.agent.bundle", "deploy/mailer", "--key", &key("test.pub")]).expect_code(0);
    assert!(!old.exists(), "the stale staging folder is removed");
    assert!(fresh.exists(), "a recent staging folder is left alone");
    assert!(running.exists(), "a locked staging folder is left alone");
    drop(held);
    let mut left: Vec<String> = std::fs::read_dir(env.path().join("deploy"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".bundle-unpack.Run456", ".bundle-unpack.XyZ789", "mailer"]);
}

/// The names and contents of every file under `dir`, sorted.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = walk(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| (p.strip_prefix(dir).unwrap().display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn unpack_replace_swaps_in_the_new_tree_and_leaves_the_old_one_on_a_refusal() {
    use std::os::unix::fs::MetadataExt;
    let env = Env::new();
    env.packed_mailer("mailer", "v1.agent.bundle");
    crate::support::set_version(&env.path().join("mailer"), "1.1.0");
    std::fs::remove_file(env.path().join("mailer/prompts/system.md")).unwrap();
    env.pack("mailer", "v2.agent.bundle").expect_code(0);
    let pubkey = key("test.pub");
    env.run(&["unpack", "v1.agent.bundle", "deploy/mailer", "--key", &pubkey]).expect_code(0);
    let deployed = env.path().join("deploy/mailer");
    let v1 = tree(&deployed);

    // Without --replace an existing folder is refused, and says how to redeploy.
    let out = env.run(&["unpack", "v2.agent.bundle", "deploy/mailer", "--key", &pubkey]);
    out.expect_code(2);
    assert_run_snapshot!(out);

    // A bundle that fails the gate (an untrusted key) leaves the old folder as it was: the
    // same folder (inode), the same files.
    let inode = std::fs::metadata(&deployed).unwrap().ino();
    let out = env.run(&["unpack", "v2.agent.bundle", "deploy/mailer", "--key", &key("minisign-nopw.pub"), "--replace"]);
    out.expect_code(1);
    assert_eq!(std::fs::metadata(&deployed).unwrap().ino(), inode);
    assert_eq!(tree(&deployed), v1);
    let tampered = env.path().join("tampered.agent.bundle");
    let mut bytes = std::fs::read(env.path().join("v2.agent.bundle")).unwrap();
    let n = bytes.len();
    bytes[n - 40] ^= 1;
    std::fs::write(&tampered, bytes).unwrap();
    env.run(&["unpack", "tampered.agent.bundle", "deploy/mailer", "--key", &pubkey, "--replace"]).expect_code(1);
    assert_eq!(tree(&deployed), v1);

    // The redeploy: a new folder swapped in whole (another inode), the removed file gone, and
    // nothing left beside it.
    let out =
        env.run(&["unpack", "v2.agent.bundle", "deploy/mailer", "--key", &pubkey, "--replace", "--format", "json"]);
    out.expect_code(0);
    assert_eq!(out.json()["agent"]["version"], "1.1.0");
    assert_ne!(std::fs::metadata(&deployed).unwrap().ino(), inode, "swapped, not written into");
    let v2 = tree(&deployed);
    assert!(v1.iter().any(|(p, _)| p == "prompts/system.md") && !v2.iter().any(|(p, _)| p == "prompts/system.md"));
    let manifest = String::from_utf8(v2.iter().find(|(p, _)| p == "manifest.toml").unwrap().1.clone()).unwrap();
    insta::assert_snapshot!(crate::snapshot::filtered(&manifest));
    let left: Vec<String> = std::fs::read_dir(env.path().join("deploy"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["mailer"]);
    // `.` (or any path without a folder name of its own) cannot be swapped.
    let out =
        crate::support::run_in(&deployed, &["unpack", "../../v2.agent.bundle", ".", "--key", &pubkey, "--replace"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    assert_eq!(tree(&deployed), v2);
    // A file where the folder should be is not replaced.
    std::fs::write(env.path().join("deploy/file"), "x").unwrap();
    env.run(&["unpack", "v2.agent.bundle", "deploy/file", "--key", &pubkey, "--replace"]).expect_code(2);
    assert_eq!(std::fs::read_to_string(env.path().join("deploy/file")).unwrap(), "x");
}
