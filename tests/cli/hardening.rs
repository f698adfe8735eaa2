//! Hostile inputs outside a bundle (issue 16): special files in an agent folder, oversized and
//! endless import inputs, writes through symlinks, malformed state files, limits `pack` must
//! share with `verify`, and names printed by every output format.
//!
//! Commands that would read `/dev/zero` or wait on a FIFO before the fix run under `ulimit -v`
//! and a `timeout` guard, so that a regression fails the test instead of hanging the suite.

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, RapServer, Run, key, testdata};

/// `bundle ARGS` in `env`, under a 512 MiB address-space limit and a 120 s guard.
fn bounded(env: &Env, args: &[&str]) -> Run {
    let script = "ulimit -v 524288 && exec timeout 120 \"$0\" \"$@\"";
    let mut cmd = std::process::Command::new("sh");
    cmd.current_dir(env.path()).args(["-c", script, env!("CARGO_BIN_EXE_bundle")]).args(args);
    cmd.env_remove("NO_COLOR").output().expect("run bundle").into()
}

fn codes(run: &Run) -> Vec<(String, String)> {
    run.json()["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics: {}{}", run.stdout, run.stderr))
        .iter()
        .map(|d| (d["code"].as_str().unwrap().to_owned(), d["file"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

#[cfg(unix)]
fn mkfifo(path: &std::path::Path) {
    assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[cfg(unix)]
#[test]
fn fifos_and_device_links_in_an_agent_folder_are_refused_before_they_are_read() {
    for name in ["tools.json", "policy.caps", "manifest.toml", ".bundleignore"] {
        for kind in ["fifo", "/dev/zero"] {
            let env = Env::new();
            let dir = env.copy("agents/mailer", "mailer");
            let path = dir.join(name);
            let _ = std::fs::remove_file(&path);
            if kind == "fifo" {
                mkfifo(&path);
            } else {
                std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
            }
            for command in ["check", "pack"] {
                let mut args = vec![command, "mailer", "--format", "json"];
                let k = key("test.key");
                if command == "pack" {
                    args.extend(["--key", &k, "-o", "out.agent.bundle"]);
                }
                let out = bounded(&env, &args);
                assert_eq!(out.code, 1, "{command} with {name} as {kind}: {}{}", out.stdout, out.stderr);
                let found = codes(&out);
                assert!(
                    found.iter().any(|(c, f)| c == "unsupported_file_type" && f.ends_with(name)),
                    "{command} with {name} as {kind}: {found:?}"
                );
            }
        }
    }
}

#[test]
fn pack_refuses_what_verify_would_refuse() {
    let env = Env::new();
    let k = key("test.key");
    // A policy.caps over 4 MiB is not held by verify (it would grant nothing there).
    let dir = env.copy("agents/mailer", "mailer");
    let mut policy = std::fs::read_to_string(dir.join("policy.caps")).unwrap();
    policy.push_str(&"# padding\n".repeat(450_000));
    std::fs::write(dir.join("policy.caps"), policy).unwrap();
    let out = env.run(&["pack", "mailer", "--key", &k, "--format", "json", "-o", "m.agent.bundle"]);
    out.expect_code(1);
    assert!(codes(&out).contains(&("limit_exceeded".into(), "mailer/policy.caps".into())), "{:?}", codes(&out));
    assert!(!env.path().join("m.agent.bundle").exists());

    // An expiry whose UTC form is in the year 10000, and an mtime no ustar header holds.
    let fresh = env.copy("agents/mailer", "fresh");
    let out =
        env.run(&["pack", "fresh", "--key", &k, "--expires", "9999-12-31T23:59:59-23:59", "-o", "f.agent.bundle"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    let mut cmd = crate::support::bin();
    cmd.current_dir(env.path()).env("SOURCE_DATE_EPOCH", "9223372036854775808");
    let out: Run = cmd.args(["pack", "fresh", "--key", &k, "-o", "f.agent.bundle"]).output().unwrap().into();
    out.expect_code(2);
    assert_run_snapshot!(out);
    assert!(!env.path().join("f.agent.bundle").exists());
    drop(fresh);
}

#[cfg(unix)]
#[test]
fn import_reads_only_regular_files_within_their_caps() {
    let env = Env::new();
    std::os::unix::fs::symlink("/dev/zero", env.path().join("zero.json")).unwrap();
    let out = bounded(&env, &["import", "--from", "rap", "zero.json"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_run_snapshot!(out);

    // A Rune descriptor in a folder is never read through a symlink.
    std::fs::create_dir_all(env.path().join("rune/tools")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", env.path().join("rune/tools/zero.yaml")).unwrap();
    let out = bounded(&env, &["import", "--from", "rune", "rune"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_run_snapshot!(out);

    // 100 000 levels of `[` in 200 KB: refused before the YAML parser (quadratic in depth) runs.
    std::fs::remove_file(env.path().join("rune/tools/zero.yaml")).unwrap();
    let deep = format!("name: deep\nx: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    std::fs::write(env.path().join("rune/tools/deep.yaml"), deep).unwrap();
    let out = bounded(&env, &["import", "--from", "rune", "rune", "--format", "json"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(codes(&out).iter().any(|(c, _)| c == "limit_exceeded"), "{:?}", codes(&out));
}

#[cfg(unix)]
#[test]
fn import_pin_never_writes_through_a_symlinked_pins_folder() {
    let body = std::fs::read_to_string(testdata("import/rap/time-tools.json")).unwrap();
    let server = RapServer::start(&body);
    let env = Env::new();
    env.run(&["init", "agent"]).expect_code(0);
    std::fs::create_dir(env.path().join("outside")).unwrap();
    std::os::unix::fs::symlink("../outside", env.path().join("agent/pins")).unwrap();
    let out = env.run(&["import", "--from", "rap", &server.url(), "--pin", "-o", "agent/tools.json", "--force"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    assert_eq!(std::fs::read_dir(env.path().join("outside")).unwrap().count(), 0, "nothing written outside");
}

#[test]
fn a_state_file_with_a_key_twice_stops_the_gate() {
    let env = Env::new();
    let hash = blake3::hash(b"m").to_hex();
    let entry = format!(r#"{{"version":"9.0.0","manifest_blake3":"{hash}"}}"#);
    let state =
        format!(r#"{{"format":1,"accepted":{{"hostile":{{"8E081C7E25586CAE":{entry},"8E081C7E25586CAE":{entry}}}}}}}"#);
    std::fs::write(env.path().join("state.json"), state).unwrap();
    let bundle = testdata("hostile/ok.agent.bundle").display().to_string();
    let out = env.run(&["verify", &bundle, "--key", &key("test.pub"), "--state", "state.json", "--format", "json"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

#[test]
fn a_key_listed_twice_in_trusted_keys_may_sign_what_any_of_its_lines_allows() {
    let env = Env::new();
    let public = std::fs::read_to_string(testdata("keys/test.pub")).unwrap();
    let line = public.lines().nth(1).unwrap().trim().to_owned();
    let bundle = testdata("hostile/ok.agent.bundle").display().to_string();
    std::fs::write(env.path().join("one"), format!("{line} other-*\n")).unwrap();
    let out = env.run(&["verify", &bundle, "--trusted-keys", "one", "--format", "json"]);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "untrusted_key");
    // The union of both lines' patterns (as OpenSSH's allowed_signers), whichever comes first.
    for order in [format!("{line} other-*\n{line} host*\n"), format!("{line} host*\n{line} other-*\n")] {
        std::fs::write(env.path().join("two"), order).unwrap();
        env.run(&["verify", &bundle, "--trusted-keys", "two"]).expect_code(0);
    }
}

#[test]
fn json_output_sanitises_names_from_checked_files() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    std::fs::write(dir.join("prompts/evil\u{202e}dm.txt"), "x\n").unwrap();
    env.run(&["pack", "-q", "mailer", "--key", &key("test.key"), "-o", "m.agent.bundle"]).expect_code(0);
    for args in [
        vec!["inspect", "m.agent.bundle", "--format", "json"],
        vec!["verify", "m.agent.bundle", "--key", &key("test.pub"), "--format", "json"],
        vec!["lock", "mailer", "--format", "json"],
    ] {
        let out = env.run(&args);
        assert!(!out.stdout.contains('\u{202e}'), "{args:?} printed a raw U+202E: {}", out.stdout);
    }
    let out = env.run(&["inspect", "m.agent.bundle", "--format", "json"]);
    assert_run_snapshot!(out);
}
