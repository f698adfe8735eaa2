//! What users see, pinned by snapshots (tests/cli/snapshot.rs): the human, JSON and GitHub
//! renderings of `bundle check` over every testdata/invalid case, `bundle verify` over the
//! hostile corpus, `inspect` and `diff`. The `--help` of every command is pinned by the generated command
//! reference (tests/cli/docs.rs).

use serde_json::json;

use crate::snapshot::{bundle_snapshot, in_env, in_repo};
use crate::support::{Env, edit_tools, set_version, testdata, tool};

/// The entries of `testdata/DIR` whose names end in `suffix`, without it, sorted.
fn fixtures(dir: &str, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(testdata(dir))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_string_lossy().strip_suffix(suffix).map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// Runs `check` for every case and fails once at the end, naming every case whose snapshot
/// differs (insta prints each diff as it goes).
fn each_case(cases: &[String], check: impl Fn(&str)) {
    let failed: Vec<&String> = cases
        .iter()
        .filter(|case| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(case))).is_err())
        .collect();
    assert!(failed.is_empty(), "{} of {} snapshots differ: {failed:?}", failed.len(), cases.len());
}

fn invalid_cases() -> Vec<String> {
    let cases = fixtures("invalid", "");
    assert!(cases.len() >= 60, "expected the full fixture set, found {}", cases.len());
    cases
}

#[test]
fn check_human_over_invalid_cases() {
    each_case(&invalid_cases(), |case| {
        bundle_snapshot!(format!("check_human@{case}"), in_repo(&["check", &format!("testdata/invalid/{case}")]));
    });
}

/// A few cases in the machine formats (the human one covers them all): a JSON syntax error
/// with its position, a warning beside an error, a problem in a referenced schema file, one in
/// manifest.toml, a missing file and several problems at once.
const CHECK_MACHINE: &[&str] = &[
    "invalid_json-trailing-comma",
    "capability_not_granted",
    "invalid_schema-resolved-file",
    "invalid_version-not-semver",
    "missing_file-tools-json",
    "unknown_field-tool-typo",
];

#[test]
fn check_json_and_github_of_some_cases() {
    for case in CHECK_MACHINE {
        let dir = format!("testdata/invalid/{case}");
        for format in ["json", "github"] {
            bundle_snapshot!(format!("check_{format}@{case}"), in_repo(&["check", "--format", format, &dir]));
        }
    }
}

/// A fixed clock for verify: the corpus's expiry cases would otherwise print the time now.
const NOW: &str = "2026-06-01T00:00:00Z";

fn verify_hostile(case: &str, format: &str) -> std::process::Command {
    let bundle = format!("testdata/hostile/{case}.agent.bundle");
    in_repo(&["verify", &bundle, "--key", "testdata/keys/test.pub", "--now", NOW, "--format", format])
}

#[test]
fn verify_human_over_hostile_corpus() {
    let cases = fixtures("hostile", ".agent.bundle");
    assert!(cases.len() >= 100, "expected the full corpus, found {}", cases.len());
    each_case(&cases, |case| bundle_snapshot!(format!("verify_human@{case}"), verify_hostile(case, "human")));
}

/// One case of each kind of rejection, in the machine formats.
const HOSTILE_MACHINE: &[&str] = &[
    "ok",
    "bad_signature-comment-edited",
    "digest_mismatch-prompt-replaced",
    "unsafe_path-dotdot",
    "unsupported_entry_type-symlink",
    "limit_exceeded-window-log-27",
];

#[test]
fn verify_json_and_github_of_rejections() {
    for case in HOSTILE_MACHINE {
        for format in ["json", "github"] {
            bundle_snapshot!(format!("verify_{format}@{case}"), verify_hostile(case, format));
        }
    }
}

/// The mailer agent packed with the test key in a temp dir: `mailer-1.0.0.agent.bundle`.
fn packed_mailer() -> Env {
    let env = Env::new();
    env.packed_mailer("mailer", "mailer-1.0.0.agent.bundle");
    env
}

#[test]
fn inspect_with_and_without_key() {
    let env = packed_mailer();
    let key = crate::support::testdata("keys/test.pub");
    let key = key.to_str().unwrap();
    let temp = env.path();
    bundle_snapshot!("inspect_unchecked", in_env(&env, &["inspect", "mailer-1.0.0.agent.bundle"]), [temp]);
    bundle_snapshot!("inspect_human", in_env(&env, &["inspect", "mailer-1.0.0.agent.bundle", "--key", key]), [temp]);
    bundle_snapshot!(
        "inspect_json",
        in_env(&env, &["inspect", "mailer-1.0.0.agent.bundle", "--key", key, "--format", "json"]),
        [temp]
    );
    bundle_snapshot!(
        "inspect_github",
        in_env(&env, &["inspect", "mailer-1.0.0.agent.bundle", "--key", key, "--format", "github"]),
        [temp]
    );
}

#[test]
fn inspect_of_a_hostile_bundle() {
    bundle_snapshot!(
        "inspect_rejected",
        in_repo(&["inspect", "testdata/hostile/digest_mismatch-prompt-replaced.agent.bundle"])
    );
}

/// The release-gate story's v2: the send tool moves host and gains a secret; the draft
/// renderer's input gains a required property; a read-only tool is added.
fn release_pair() -> Env {
    let env = Env::new();
    env.copy("agents/mailer", "v1");
    let v2 = env.copy("agents/mailer", "v2");
    set_version(&v2, "1.1.0");
    edit_tools(&v2, |doc| {
        let send = tool(doc, "mail.smtp_send");
        send["transport"]["url"] = json!("https://relay.mail.example/v1/mailboxes/{mailbox}/send");
        send["transport"]["headers"]["X-Archive-Key"] = json!("${secret:runloop/mail/archive_key}");
        send["secrets"] = json!(["runloop/mail/smtp_api_key", "runloop/mail/archive_key"]);
        send["capabilities"] = json!(["net:relay.mail.example"]);
        doc["tools"].as_array_mut().unwrap().push(json!({
            "id": "mail.status",
            "description": "Is the mail relay up?",
            "transport": {"kind": "http", "method": "GET", "url": "https://status.mail.example/v1"},
            "input_schema": {"type": "object"},
            "result_schema": {"type": "object"}
        }));
    });
    env
}

#[test]
fn diff_in_every_format() {
    let env = release_pair();
    let temp = env.path();
    bundle_snapshot!("diff_human", in_env(&env, &["diff", "v1", "v2"]), [temp]);
    bundle_snapshot!("diff_json", in_env(&env, &["diff", "v1", "v2", "--format", "json"]), [temp]);
    bundle_snapshot!(
        "diff_github_fail_on_widening",
        in_env(&env, &["diff", "v1", "v2", "--format", "github", "--fail-on", "widening"]),
        [temp]
    );
    bundle_snapshot!("diff_unchanged", in_env(&env, &["diff", "v1", "v1"]), [temp]);
}
