//! Freeze and rollback: `[bundle] expires` in the signed manifest, `verify --state FILE` and
//! `--min-version`. The clock is injected with the hidden `--now` flag.

use std::path::Path;

use agent_bundle::timestamp::Timestamp;

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, Run, key, testdata};

/// Copies the minimal agent as `minimal`, with the given version and extra `[bundle]` lines.
fn agent(env: &Env, version: &str, bundle_lines: &str) {
    let dir = env.path().join("minimal");
    if !dir.exists() {
        env.copy("agents/minimal", "minimal");
    }
    let text = std::fs::read_to_string(testdata("agents/minimal/manifest.toml")).unwrap();
    let text = text
        .replace("format = 1\n", &format!("format = 1\n{bundle_lines}"))
        .replace("version = \"1.0.0\"", &format!("version = \"{version}\""));
    std::fs::write(dir.join("manifest.toml"), text).unwrap();
}

fn pack(env: &Env, out: &str, now: &str) -> Run {
    env.run(&["pack", "minimal", "--key", &key("test.key"), "-o", out, "--now", now, "--format", "json"])
}

fn verify(env: &Env, bundle: &str, extra: &[&str]) -> Run {
    let public = key("test.pub");
    let mut args = vec!["verify", bundle, "--key", &public, "--format", "json"];
    args.extend_from_slice(extra);
    env.run(&args)
}

fn code(run: &Run) -> String {
    run.json()["code"].as_str().unwrap_or("ok").to_owned()
}

#[test]
fn an_expired_bundle_is_rejected_once_its_time_has_come() {
    let env = Env::new();
    agent(&env, "1.0.0", "expires = \"2027-01-01T00:00:00Z\"\n");
    pack(&env, "m.agent.bundle", "2026-06-01T00:00:00Z").expect_code(0);
    let before = verify(&env, "m.agent.bundle", &["--now", "2026-12-31T23:59:59Z"]);
    before.expect_code(0);
    let at = verify(&env, "m.agent.bundle", &["--now", "2027-01-01T00:00:00Z"]);
    at.expect_code(1);
    assert_eq!(code(&at), "expired");
    assert!(at.json()["message"].as_str().unwrap().contains("2027-01-01T00:00:00Z"), "{}", at.stdout);
    // An offset is the same instant: 01:00+01:00 is midnight UTC.
    let offset = verify(&env, "m.agent.bundle", &["--now", "2027-01-01T01:00:00+01:00"]);
    assert_eq!(code(&offset), "expired");
    // The real clock: this bundle expires in 2027, so it verifies until then.
    let today = verify(&env, "m.agent.bundle", &[]);
    let now = Timestamp::now();
    if now < "2027-01-01T00:00:00Z".parse().unwrap() {
        today.expect_code(0);
    } else {
        assert_eq!(code(&today), "expired");
    }
    // unpack is a gate too; inspect shows the expiry instead of enforcing it.
    let out = env.run(&[
        "unpack",
        "m.agent.bundle",
        "out",
        "--key",
        &key("test.pub"),
        "--now",
        "2030-01-01T00:00:00Z",
        "--format",
        "json",
    ]);
    assert_eq!(code(&out), "expired");
    assert!(!env.path().join("out").exists());
    let shown = env.run(&["inspect", "m.agent.bundle", "--now", "2030-01-01T00:00:00Z", "--format", "json"]);
    shown.expect_code(0);
    assert_eq!(shown.json()["expires"], "2027-01-01T00:00:00Z");
    assert_eq!(shown.json()["expired"], true);
    let human = env.run(&["inspect", "m.agent.bundle", "--now", "2030-01-01T00:00:00Z"]);
    assert_run_snapshot!(human);
}

#[test]
fn expiry_is_signed_so_it_cannot_be_stripped() {
    let env = Env::new();
    agent(&env, "1.0.0", "expires = 2027-01-01T00:00:00Z   # a TOML date-time works too\n");
    pack(&env, "m.agent.bundle", "2026-06-01T00:00:00Z").expect_code(0);
    let tar = zstd::stream::decode_all(&std::fs::read(env.path().join("m.agent.bundle")).unwrap()[..]).unwrap();
    // Comment the expiry out in place (same length, so the tar layout holds): the signature
    // no longer matches the manifest.
    let needle = b"expires = 2027-01-01T00:00:00Z";
    let at = tar.windows(needle.len()).position(|w| w == needle).expect("expires in the manifest");
    let mut edited = tar.clone();
    edited[at] = b'#';
    let mut encoder = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    encoder.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut encoder, &edited).unwrap();
    std::fs::write(env.path().join("stripped.agent.bundle"), encoder.finish().unwrap()).unwrap();
    let out = verify(&env, "stripped.agent.bundle", &["--now", "2030-01-01T00:00:00Z"]);
    assert_eq!(code(&out), "bad_signature", "{}", out.stdout);
}

#[test]
fn pack_refuses_an_expired_manifest_and_check_rejects_a_malformed_expiry() {
    let env = Env::new();
    agent(&env, "1.0.0", "expires = \"2020-01-01T00:00:00Z\"\n");
    let out = pack(&env, "m.agent.bundle", "2026-06-01T00:00:00Z");
    out.expect_code(1);
    assert_run_snapshot!(out);
    assert!(!env.path().join("m.agent.bundle").exists());

    for (value, want) in [
        ("\"2027-01-01\"", "invalid_expiry"),
        ("\"2027-01-01T00:00:00\"", "invalid_expiry"),
        ("2027-01-01T00:00:00", "invalid_expiry"),
        ("\"2027-02-30T00:00:00Z\"", "invalid_expiry"),
        ("2027", "wrong_type"),
    ] {
        agent(&env, "1.0.0", &format!("expires = {value}\n"));
        let out = env.run(&["check", "minimal", "--format", "json"]);
        out.expect_code(1);
        let json = out.json();
        let codes: Vec<&str> =
            json["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
        assert_eq!(codes, [want], "{value}: {}", out.stdout);
    }
}

#[test]
fn the_clock_flag_must_be_rfc3339() {
    let env = Env::new();
    let out = env.run(&["verify", "x.agent.bundle", "--key", &key("test.pub"), "--now", "yesterday"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

fn state_versions(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn state_file_rejects_rollback_and_records_the_highest_version() {
    let env = Env::new();
    for v in ["1.0.0", "1.1.0", "1.2.0"] {
        agent(&env, v, "");
        pack(&env, &format!("m-{v}.agent.bundle"), "2026-01-01T00:00:00Z").expect_code(0);
    }
    let state = env.path().join("state.json");
    let with_state = ["--state", "state.json"];

    verify(&env, "m-1.1.0.agent.bundle", &with_state).expect_code(0);
    let recorded = state_versions(&state);
    assert_eq!(recorded["format"], 1);
    let accepted = &recorded["accepted"]["minimal"]["8E081C7E25586CAE"];
    assert_eq!(accepted["version"], "1.1.0");
    let manifest = {
        let tar =
            zstd::stream::decode_all(&std::fs::read(env.path().join("m-1.1.0.agent.bundle")).unwrap()[..]).unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&tar[124..135]).unwrap(), 8).unwrap();
        blake3::hash(&tar[512..512 + size]).to_hex().to_string()
    };
    assert_eq!(accepted["manifest_blake3"], manifest);

    // The same bundle again is fine; an older one is a rollback and leaves the state alone.
    verify(&env, "m-1.1.0.agent.bundle", &with_state).expect_code(0);
    let before = std::fs::read(&state).unwrap();
    let old = verify(&env, "m-1.0.0.agent.bundle", &with_state);
    old.expect_code(1);
    assert_eq!(code(&old), "rollback");
    assert!(old.json()["message"].as_str().unwrap().contains("older than 1.1.0"), "{}", old.stdout);
    assert_eq!(std::fs::read(&state).unwrap(), before, "a rejection does not touch the state");

    verify(&env, "m-1.2.0.agent.bundle", &with_state).expect_code(0);
    assert_eq!(state_versions(&state)["accepted"]["minimal"]["8E081C7E25586CAE"]["version"], "1.2.0");
    assert_eq!(code(&verify(&env, "m-1.1.0.agent.bundle", &with_state)), "rollback");

    // Another bundle claiming 1.2.0 (a re-pack with changed content, same version).
    agent(&env, "1.2.0", "# re-packed without a version bump\n");
    pack(&env, "m-1.2.0-again.agent.bundle", "2026-01-01T00:00:00Z").expect_code(0);
    let again = verify(&env, "m-1.2.0-again.agent.bundle", &with_state);
    assert_eq!(code(&again), "rollback");
    assert!(again.json()["message"].as_str().unwrap().contains("new version"), "{}", again.stdout);

    // Without --state nothing is remembered; --min-version is a stateless floor.
    verify(&env, "m-1.0.0.agent.bundle", &[]).expect_code(0);
    let floor = verify(&env, "m-1.0.0.agent.bundle", &["--min-version", "1.1.0"]);
    assert_eq!(code(&floor), "rollback");
    verify(&env, "m-1.1.0.agent.bundle", &["--min-version", "1.1.0"]).expect_code(0);

    // unpack takes the same gate options.
    let out = env.run(&[
        "unpack",
        "m-1.1.0.agent.bundle",
        "out",
        "--key",
        &key("test.pub"),
        "--state",
        "state.json",
        "--format",
        "json",
    ]);
    assert_eq!(code(&out), "rollback");
    assert!(!env.path().join("out").exists());
}

#[test]
fn state_is_per_key_and_a_broken_state_file_stops_the_gate() {
    let env = Env::new();
    agent(&env, "2.0.0", "");
    pack(&env, "new.agent.bundle", "2026-01-01T00:00:00Z").expect_code(0);
    agent(&env, "1.0.0", "");
    env.run(&["pack", "minimal", "--key", &key("minisign-nopw.key"), "-o", "other.agent.bundle"]).expect_code(0);
    let b64 = |k: &str| std::fs::read_to_string(key(k)).unwrap().lines().nth(1).unwrap().to_owned();
    std::fs::write(env.path().join("trusted"), format!("{}\n{}\n", b64("test.pub"), b64("minisign-nopw.pub"))).unwrap();
    let gate = |bundle: &str| {
        env.run(&["verify", bundle, "--trusted-keys", "trusted", "--state", "state.json", "--format", "json"])
    };
    gate("new.agent.bundle").expect_code(0);
    gate("other.agent.bundle").expect_code(0);
    let s = state_versions(&env.path().join("state.json"));
    assert_eq!(s["accepted"]["minimal"].as_object().unwrap().len(), 2, "{s}");

    for broken in ["", "{\"format\": 1}", "not json", "{\"format\": 2, \"accepted\": {}}"] {
        std::fs::write(env.path().join("state.json"), broken).unwrap();
        let out = gate("new.agent.bundle");
        out.expect_code(2);
        assert!(out.stderr.contains("not a bundle state file"), "{broken}: {}", out.stderr);
        assert_eq!(std::fs::read_to_string(env.path().join("state.json")).unwrap(), broken, "left as it was");
    }
}

#[test]
fn concurrent_gates_sharing_a_state_file_keep_the_highest_version() {
    let env = Env::new();
    let versions: Vec<String> = (1..=8).map(|i| format!("1.{i}.0")).collect();
    for v in &versions {
        agent(&env, v, "");
        pack(&env, &format!("m-{v}.agent.bundle"), "2026-01-01T00:00:00Z").expect_code(0);
    }
    let children: Vec<_> = versions
        .iter()
        .map(|v| {
            crate::support::bin()
                .current_dir(env.path())
                .args(["verify", &format!("m-{v}.agent.bundle"), "--key", &key("test.pub"), "--state", "state.json"])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<i32> = children.into_iter().map(|c| c.wait_with_output().unwrap().status.code().unwrap()).collect();
    // Each gate either accepted its bundle or saw a newer one already accepted; never an error.
    assert!(codes.iter().all(|c| *c == 0 || *c == 1), "{codes:?}");
    let s = state_versions(&env.path().join("state.json"));
    assert_eq!(s["accepted"]["minimal"]["8E081C7E25586CAE"]["version"], "1.8.0", "{s}");
    let leftovers: Vec<_> = std::fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn pack_expires_in_signs_an_expiry_into_the_bundle_only() {
    let env = Env::new();
    agent(&env, "1.0.0", "");
    let source = std::fs::read(env.path().join("minimal/manifest.toml")).unwrap();
    let key_file = key("test.key");
    // Counted from SOURCE_DATE_EPOCH (2026-01-01T00:00:00Z), so two packs are identical.
    let pack_in = |out: &str, span: &str| -> Run {
        crate::support::bin()
            .current_dir(env.path())
            .env("SOURCE_DATE_EPOCH", "1767225600")
            .args(["pack", "minimal", "--key", &key_file, "-o", out, "--expires-in", span])
            .args(["--now", "2026-02-01T00:00:00Z"])
            .output()
            .unwrap()
            .into()
    };
    pack_in("a.agent.bundle", "90d").expect_code(0);
    pack_in("b.agent.bundle", "90d").expect_code(0);
    assert_eq!(
        std::fs::read(env.path().join("a.agent.bundle")).unwrap(),
        std::fs::read(env.path().join("b.agent.bundle")).unwrap()
    );
    let shown = env.run(&["inspect", "a.agent.bundle", "--format", "json"]);
    assert_eq!(shown.json()["expires"], "2026-04-01T00:00:00Z");
    assert_eq!(std::fs::read(env.path().join("minimal/manifest.toml")).unwrap(), source, "the agent is not changed");
    verify(&env, "a.agent.bundle", &["--now", "2026-03-31T23:59:59Z"]).expect_code(0);
    assert_eq!(code(&verify(&env, "a.agent.bundle", &["--now", "2026-04-01T00:00:00Z"])), "expired");

    // --expires replaces the agent's own expiry in the bundle.
    agent(&env, "1.0.0", "expires = \"2026-06-01T00:00:00Z\"   # the author's\n");
    let out = env.run(&[
        "pack",
        "minimal",
        "--key",
        &key_file,
        "-o",
        "c.agent.bundle",
        "--expires",
        "2027-01-01T00:00:00+01:00",
        "--now",
        "2026-02-01T00:00:00Z",
    ]);
    out.expect_code(0);
    let shown = env.run(&["inspect", "c.agent.bundle", "--format", "json"]);
    assert_eq!(shown.json()["expires"], "2026-12-31T23:00:00Z");

    // Past, malformed, zero, both: refused, nothing written.
    let past = pack(&env, "d.agent.bundle", "2026-02-01T00:00:00Z");
    past.expect_code(0); // the author's 2026-06-01 is still ahead
    std::fs::remove_file(env.path().join("d.agent.bundle")).unwrap();
    for (args, code) in [
        (vec!["--expires", "2020-01-01T00:00:00Z"], 2),
        (vec!["--expires", "next year"], 2),
        (vec!["--expires-in", "0d"], 2),
        (vec!["--expires-in", "90 days"], 2),
        (vec!["--expires-in", "99999999w"], 2),
        (vec!["--expires", "2027-01-01T00:00:00Z", "--expires-in", "9d"], 2),
    ] {
        let mut all =
            vec!["pack", "minimal", "--key", &key_file, "-o", "d.agent.bundle", "--now", "2026-02-01T00:00:00Z"];
        all.extend(args.iter().copied());
        env.run(&all).expect_code(code);
        assert!(!env.path().join("d.agent.bundle").exists(), "{args:?}");
    }
}

/// A malformed state file stops the gate (exit 2) with its own code, `state_error`, in the one
/// JSON document, for verify and unpack alike (the gate's error wraps the state file's).
#[test]
fn malformed_state_file_is_a_state_error_for_verify_and_unpack() {
    let env = Env::new();
    agent(&env, "1.0.0", "");
    pack(&env, "m.agent.bundle", "2026-01-01T00:00:00Z").expect_code(0);
    std::fs::write(env.path().join("state.json"), "not json").unwrap();
    let pubkey = key("test.pub");
    for args in [
        vec!["verify", "m.agent.bundle", "--key", &pubkey, "--state", "state.json", "--format", "json"],
        vec!["unpack", "m.agent.bundle", "out", "--key", &pubkey, "--state", "state.json", "--format", "json"],
    ] {
        let out = env.run(&args);
        out.expect_code(2);
        assert_eq!(out.json()["code"], "state_error", "{args:?}: {}", out.stdout);
    }
    assert!(!env.path().join("out").exists());
}
