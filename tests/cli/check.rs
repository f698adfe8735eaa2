//! `bundle check` and `bundle init` over the fixtures.

use std::collections::BTreeSet;

use crate::snapshot::assert_run_snapshot;
use crate::snapshot::{bundle_snapshot, in_env, in_repo};
use crate::support::{self, Env, run, testdata};

/// Every diagnostic of a `check --format json` run as `severity code file location`, with the
/// file relative to the agent folder.
fn diagnostic_lines(json: &serde_json::Value, agent_prefix: &str) -> BTreeSet<String> {
    json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let file = d["file"].as_str().unwrap();
            let file = file.strip_prefix(agent_prefix).unwrap_or(file);
            let location = d["path"].as_str().unwrap_or("-");
            format!("{} {} {} {}", d["severity"].as_str().unwrap(), d["code"].as_str().unwrap(), file, location)
        })
        .collect()
}

fn invalid_cases() -> Vec<String> {
    let mut cases: Vec<String> = std::fs::read_dir(testdata("invalid"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| testdata("invalid").join(n).is_dir())
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_invalid_fixture_reports_exactly_its_expected_diagnostics() {
    let cases = invalid_cases();
    assert!(cases.len() >= 60, "expected the full fixture set, found {}", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let rel = format!("testdata/invalid/{case}");
        let out = run(&["check", "--format", "json", &rel]);
        let expected: BTreeSet<String> = std::fs::read_to_string(testdata(&format!("invalid/{case}/expected")))
            .unwrap_or_else(|e| panic!("{case}: no expected file: {e}"))
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_owned)
            .collect();
        let found = diagnostic_lines(&out.json(), &format!("{rel}/"));
        let has_error = expected.iter().any(|l| l.starts_with("error "));
        let want_code = if has_error { 1 } else { 0 };
        if found != expected || out.code != want_code {
            failures.push(format!(
                "{case}: exit {} (want {want_code})\n  expected: {expected:?}\n  found:    {found:?}",
                out.code
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn valid_agents_pass() {
    for agent in ["agents/mailer", "agents/minimal"] {
        let out = run(&["check", "--format", "json", &format!("testdata/{agent}")]);
        out.expect_code(0);
        assert_eq!(out.json()["errors"], 0, "{agent}: {}", out.stdout);
    }
}

#[test]
fn check_reports_all_problems_of_all_agents_at_once() {
    let env = Env::new();
    env.copy("invalid/duplicate_id", "agents/one");
    env.copy("invalid/hardcoded_credential-bearer", "agents/two");
    let out = env.run(&["check", "--format", "json"]);
    out.expect_code(1);
    let json = out.json();
    assert_eq!(json["agents"].as_array().unwrap().len(), 2);
    let codes: Vec<&str> =
        json["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"duplicate_id") && codes.contains(&"hardcoded_credential"), "{codes:?}");
}

// The human, JSON and GitHub renderings of every invalid case are snapshots in output.rs
// (`check_human@unknown_field-tool-typo`: file, line:column, the source line, "did you mean").

#[test]
fn a_diagnostic_on_a_very_long_line_shows_a_window_around_the_span() {
    let env = Env::new();
    let dir = env.copy("agents/minimal", "a");
    // Single-line JSON, as servers send it: the problem sits 330 characters in.
    let line =
        format!(r#"{{"version":1,"tools":[],"a":"{}","bogus":true,"c":"{}"}}"#, "x".repeat(300), "y".repeat(300));
    std::fs::write(dir.join("tools.json"), &line).unwrap();
    let out = env.run(&["check", "--color", "never", "a"]);
    out.expect_code(1);
    assert_run_snapshot!(out);
    let shown = out.stderr.lines().find(|l| l.contains(r#""bogus":true"#)).expect("the source line is shown");
    assert!(shown.chars().count() < 140, "a window, not the whole line: {shown}");
    assert!(shown.contains("…x") && shown.contains("y…"), "ellipses where the line goes on: {shown}");
    assert!(out.stderr.lines().all(|l| l.chars().count() < 140), "{}", out.stderr);
}

#[test]
fn names_from_input_are_sanitised() {
    let env = Env::new();
    let dir = env.copy("agents/minimal", "a");
    // Escaped in JSON: the key's decoded name reaches the message.
    std::fs::write(dir.join("tools.json"), r#"{"version": 1, "tools": [], "x\u202e\u001b[31m": 1}"#).unwrap();
    let out = env.run(&["check", "--color", "never", "a"]);
    assert!(!out.stderr.contains('\u{202e}') && !out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
    bundle_snapshot!("sanitised_key_name", in_env(&env, &["check", "--color", "never", "a"]), [env.path()]);
    // Raw in the file: the quoted source line must not carry them either.
    std::fs::write(dir.join("tools.json"), "{\"version\": 1, \"tools\": [], \"x\u{202e}\": 1}").unwrap();
    let out = env.run(&["check", "--color", "never", "a"]);
    out.expect_code(1);
    assert!(!out.stderr.contains('\u{202e}'), "{:?}", out.stderr);
}

#[test]
fn usage_and_io_errors_exit_2() {
    run(&["check", "testdata/does-not-exist"]).expect_code(2);
    run(&["check", "--format", "yaml"]).expect_code(2);
    run(&["frobnicate"]).expect_code(2);
}

#[test]
fn init_scaffolds_an_agent_that_passes_check_and_refuses_to_overwrite() {
    let env = Env::new();
    env.run(&["init", "agents/mail-bot"]).expect_code(0);
    let manifest = std::fs::read_to_string(env.path().join("agents/mail-bot/manifest.toml")).unwrap();
    insta::assert_snapshot!(crate::snapshot::filtered(&manifest));
    let tools: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.path().join("agents/mail-bot/tools.json")).unwrap()).unwrap();
    assert_eq!(tools["version"], 1);
    assert!(tools["$schema"].as_str().unwrap().ends_with("tools.v1.schema.json"));
    env.run(&["check"]).expect_code(0);

    std::fs::write(env.path().join("agents/mail-bot/tools.json"), "{}").unwrap();
    let out = env.run(&["init", "agents/mail-bot"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    assert_eq!(std::fs::read_to_string(env.path().join("agents/mail-bot/tools.json")).unwrap(), "{}");
    env.run(&["init", "agents/mail-bot", "--force"]).expect_code(0);
    env.run(&["init", "x", "--name", "Bad Name"]).expect_code(2);
}

#[test]
fn init_takes_the_first_version_and_name() {
    let env = Env::new();
    env.run(&["init", "agents/kb", "--version", "2.3.0-rc.1", "--name", "knowledge-base"]).expect_code(0);
    let out = env.run(&["check", "--format", "json", "agents/kb"]);
    out.expect_code(0);
    assert_eq!(out.json()["agents"][0]["version"], "2.3.0-rc.1");
    assert_eq!(out.json()["agents"][0]["name"], "knowledge-base");
    let out = env.run(&["init", "agents/x", "--version", "1.0"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    assert!(!env.path().join("agents/x").exists());
    // `bundle --version` still prints the program's version.
    assert!(env.run(&["--version"]).expect_code(0).stdout.starts_with("bundle "));
}

#[test]
fn non_utf8_tools_json_is_an_error_not_a_panic() {
    let env = Env::new();
    let dir = env.copy("agents/minimal", "a");
    std::fs::write(dir.join("tools.json"), b"{\"version\": 1, \"tools\": [\"\xff\"]}").unwrap();
    let out = env.run(&["check", "--format", "json", "a"]);
    out.expect_code(1);
    assert_eq!(out.json()["diagnostics"][0]["code"], "invalid_utf8");
}

/// The published JSON Schema and the validator agree: on every fixture, the schema rejects
/// tools.json exactly when the validator reports a structural problem (one a JSON Schema can
/// express); semantic problems (grants, references, credentials, duplicate keys) are the
/// validator's alone.
#[test]
fn published_schema_agrees_with_the_validator() {
    const STRUCTURAL: &[&str] = &[
        "unsupported_version",
        "unknown_field",
        "missing_field",
        "wrong_type",
        "invalid_id",
        "empty_description",
        "unknown_transport",
        "invalid_command",
        "invalid_method",
        "invalid_url",
        "invalid_schema_ref",
        "invalid_capability",
        "invalid_secret",
        "duplicate_secret",
        "invalid_budget",
    ];
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(support::repo().join("schemas/tools.v1.schema.json")).unwrap())
            .unwrap();
    jsonschema::meta::validate(&schema).expect("the published schema is itself valid");
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut dirs: Vec<String> = invalid_cases().into_iter().map(|c| format!("invalid/{c}")).collect();
    dirs.extend(["agents/mailer".to_owned(), "agents/minimal".to_owned()]);
    let mut disagreements = Vec::new();
    let mut compared = 0;
    for dir in dirs {
        let Ok(text) = std::fs::read_to_string(testdata(&format!("{dir}/tools.json"))) else {
            continue;
        };
        let Ok(instance) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let out = run(&["check", "--format", "json", &format!("testdata/{dir}")]);
        let structural = out.json()["diagnostics"].as_array().unwrap().iter().any(|d| {
            d["severity"] == "error"
                && d["file"].as_str().unwrap().ends_with("/tools.json")
                && STRUCTURAL.contains(&d["code"].as_str().unwrap())
        });
        let schema_ok = validator.is_valid(&instance);
        compared += 1;
        // JSON Schema treats 1.0 as the integer 1; only the validator sees the raw number.
        if dir == "invalid/unsupported_version-float" {
            assert!(schema_ok && structural, "the one known difference changed");
            continue;
        }
        if schema_ok == structural {
            disagreements.push(format!(
                "{dir}: schema says {}, validator structural error: {structural}",
                if schema_ok { "valid" } else { "invalid" }
            ));
        }
    }
    assert!(compared >= 50, "compared only {compared} fixtures");
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

#[test]
fn a_missing_folder_is_an_io_error_said_once() {
    bundle_snapshot!("missing_folder", in_repo(&["check", "/nonexistent/agent"]));
}
