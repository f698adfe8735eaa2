//! What a newcomer hits (issue 24): the messages for common mistakes say what is wrong and
//! what to do, once, and the commands take the inputs the others take. Each case is a
//! snapshot of what the user sees.

use crate::snapshot::{bundle_snapshot, in_env};
use crate::support::{Env, testdata};

/// Two agents, `kb` and `mailer`, packed into dist/ with the test key.
fn two_agents() -> Env {
    let env = Env::new();
    env.run(&["init", "agents/kb"]).expect_code(0);
    env.run(&["init", "agents/mailer"]).expect_code(0);
    let key = testdata("keys/test.key").display().to_string();
    env.run(&["pack", "agents/", "--key", &key, "-o", "dist/"]).expect_code(0);
    env
}

fn pubkey() -> String {
    testdata("keys/test.pub").display().to_string()
}

#[test]
fn verify_with_a_missing_baseline_folder_says_how_to_make_it_once() {
    let env = two_agents();
    let (temp, key) = (env.path(), pubkey());
    let args = ["verify", "dist/kb-0.1.0.agent.bundle", "dist/mailer-0.1.0.agent.bundle", "--key", &key];
    let mut with = args.to_vec();
    with.extend(["--baseline", "baselines/"]);
    bundle_snapshot!("newcomer_missing_baseline_folder", in_env(&env, &with), [temp]);
    let mut other = args.to_vec();
    other.extend(["--baseline", "approved/"]);
    bundle_snapshot!("newcomer_missing_baseline_other_folder", in_env(&env, &other), [temp]);
}

#[test]
fn verify_with_a_missing_baseline_file_says_how_to_make_it() {
    let env = two_agents();
    let (temp, key) = (env.path(), pubkey());
    bundle_snapshot!(
        "newcomer_missing_baseline_file",
        in_env(&env, &["verify", "dist/kb-0.1.0.agent.bundle", "--key", &key, "--baseline", "approved.toml"]),
        [temp]
    );
}

#[test]
fn baseline_snapshot_takes_a_folder_of_agents_and_writes_one_file_per_agent() {
    let env = two_agents();
    let temp = env.path();
    bundle_snapshot!("newcomer_baseline_snapshot_agents", in_env(&env, &["baseline", "snapshot", "agents/"]), [temp]);
    for agent in ["kb", "mailer"] {
        assert!(temp.join(format!("baselines/{agent}.toml")).is_file(), "{agent}");
    }
    // What it wrote is what verify holds the bundles to.
    let key = pubkey();
    let verify = ["verify", "dist/kb-0.1.0.agent.bundle", "dist/mailer-0.1.0.agent.bundle", "--key", &key];
    let mut with = verify.to_vec();
    with.extend(["--baseline", "baselines/"]);
    env.run(&with).expect_code(0);
    // Again without --force: each file is refused, and the run fails (exit 2).
    bundle_snapshot!(
        "newcomer_baseline_snapshot_agents_again",
        in_env(&env, &["baseline", "snapshot", "agents/"]),
        [temp]
    );
}

#[test]
fn baseline_snapshot_takes_many_bundles_into_a_folder() {
    let env = two_agents();
    let temp = env.path();
    let args =
        ["baseline", "snapshot", "dist/kb-0.1.0.agent.bundle", "dist/mailer-0.1.0.agent.bundle", "-o", "approved"];
    bundle_snapshot!("newcomer_baseline_snapshot_bundles", in_env(&env, &args), [temp]);
    assert!(temp.join("approved/kb.toml").is_file());
    assert!(temp.join("approved/mailer.toml").is_file());
}

#[test]
fn verify_of_a_folder_says_verify_takes_a_bundle() {
    let env = two_agents();
    let (temp, key) = (env.path(), pubkey());
    bundle_snapshot!("newcomer_verify_a_folder", in_env(&env, &["verify", "agents/kb", "--key", &key]), [temp]);
    bundle_snapshot!("newcomer_inspect_a_folder", in_env(&env, &["inspect", "agents/kb"]), [temp]);
    bundle_snapshot!(
        "newcomer_unpack_a_folder",
        in_env(&env, &["unpack", "agents/kb", "deploy/kb", "--key", &key]),
        [temp]
    );
    assert!(!temp.join("deploy").exists());
}

#[test]
fn pack_of_a_missing_folder_says_it_does_not_exist() {
    let env = two_agents();
    let temp = env.path();
    let key = testdata("keys/test.key").display().to_string();
    bundle_snapshot!(
        "newcomer_pack_a_missing_folder",
        in_env(&env, &["pack", "agents/knowledge", "--key", &key]),
        [temp]
    );
    bundle_snapshot!("newcomer_check_a_missing_folder", in_env(&env, &["check", "agents/knowledge"]), [temp]);
}

#[test]
fn lock_refuses_to_lock_an_agent_whose_check_fails_and_writes_nothing() {
    let env = two_agents();
    let temp = env.path();
    std::fs::write(temp.join("agents/kb/tools.json"), "{\n  \"version\": 1,\n  \"tools\": [\n").unwrap();
    std::fs::write(temp.join("agents/mailer/notes.md"), "stale\n").unwrap();
    let before = std::fs::read(temp.join("agents/kb/manifest.toml")).unwrap();
    bundle_snapshot!("newcomer_lock_a_broken_agent", in_env(&env, &["lock"]), [temp]);
    assert_eq!(std::fs::read(temp.join("agents/kb/manifest.toml")).unwrap(), before, "kb must not be relocked");
    // The other agent was locked: one broken agent does not stop the rest.
    env.run(&["check", "agents/mailer"]).expect_code(0);
}

#[test]
fn lock_is_quiet_about_agents_it_left_as_they_were() {
    let env = two_agents();
    let temp = env.path();
    bundle_snapshot!("newcomer_lock_nothing_changed", in_env(&env, &["lock"]), [temp]);
    std::fs::write(temp.join("agents/mailer/notes.md"), "new\n").unwrap();
    bundle_snapshot!("newcomer_lock_one_changed", in_env(&env, &["lock"]), [temp]);
}

#[test]
fn diff_github_annotations_land_on_the_changed_tool_and_grant_lines() {
    let env = Env::new();
    let temp = env.path();
    let dir = env.copy("agents/mailer", "agents/mailer");
    let key = testdata("keys/test.key").display().to_string();
    env.run(&["pack", "agents/mailer", "--key", &key, "-o", "v1.agent.bundle"]).expect_code(0);
    let tools = dir.join("tools.json");
    let text = std::fs::read_to_string(&tools).unwrap();
    let edited = text.replace(
        "https://api.mail.example/v1/mailboxes/{mailbox}/send",
        "https://relay.mail.example/v1/mailboxes/{mailbox}/send",
    );
    assert_ne!(text, edited);
    std::fs::write(&tools, edited).unwrap();
    let caps = dir.join("policy.caps");
    let mut policy = std::fs::read_to_string(&caps).unwrap();
    policy.push_str("net:relay.example\n");
    std::fs::write(&caps, policy).unwrap();
    bundle_snapshot!(
        "newcomer_diff_github_file_and_line",
        in_env(&env, &["diff", "v1.agent.bundle", "agents/mailer", "--format", "github", "--fail-on", "widening"]),
        [temp]
    );
}

#[test]
fn inspect_fits_100_columns_and_json_keeps_every_field() {
    let env = Env::new();
    env.copy("agents/mailer", "agents/mailer");
    let key = testdata("keys/test.key").display().to_string();
    env.run(&["pack", "agents/mailer", "--key", &key, "-o", "m.agent.bundle"]).expect_code(0);
    let pubkey = pubkey();
    let out = env.run(&["inspect", "m.agent.bundle", "--key", &pubkey]);
    out.expect_code(0);
    for line in out.stdout.lines() {
        assert!(line.chars().count() <= 100, "{} columns: {line}", line.chars().count());
    }
    let json = env.run(&["inspect", "m.agent.bundle", "--key", &pubkey, "--format", "json"]).json();
    let tools = json["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 4);
    assert!(tools.iter().all(|t| t["fingerprint"].as_str().is_some_and(|f| f.len() == 64)), "{json}");
}

#[test]
fn an_expiry_counted_from_the_clock_is_shown_in_whole_seconds() {
    let env = Env::new();
    env.run(&["init", "agents/kb"]).expect_code(0);
    let key = testdata("keys/test.key").display().to_string();
    env.run(&["pack", "agents/kb", "--key", &key, "--expires-in", "90d", "-o", "kb.agent.bundle"]).expect_code(0);
    let out = env.run(&["inspect", "kb.agent.bundle", "--key", &pubkey()]);
    let expires = out.stdout.lines().find(|l| l.starts_with("expires")).unwrap().to_string();
    assert!(!expires.contains('.'), "no fractional seconds: {expires}");
}

#[test]
fn interactive_tool_add_on_a_missing_agent_fails_before_asking() {
    if !crate::support::require_tool("script") {
        return;
    }
    let env = Env::new();
    let out = std::process::Command::new("script")
        .args(["-qec", &format!("{} tool add agents/kb", env!("CARGO_BIN_EXE_bundle")), "/dev/null"])
        .current_dir(env.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run script");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(!shown.contains("Tool id"), "asked before saying the agent is missing: {shown}");
    assert!(
        shown.contains("agents/kb has no tools.json; create the agent first with `bundle init agents/kb`"),
        "{shown}"
    );
}

/// Issue 24 item 5: `export` prints one summary of what the target format cannot carry and one
/// of the renamed tools; `--verbose` lists each, and JSON always gives each.
#[test]
fn export_summarises_what_the_format_cannot_carry() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let temp = env.path();
    bundle_snapshot!(
        "newcomer_export_summary",
        in_env(&env, &["export", "--to", "openai", "mailer", "-o", "openai.json"]),
        [temp]
    );
    let verbose = env.run(&["export", "--to", "openai", "mailer", "-o", "v.json", "--verbose"]);
    assert_eq!(verbose.expect_code(0).stderr.matches("warning[").count(), 8, "{}", verbose.stderr);
    let json = env.run(&["export", "--to", "openai", "mailer", "-o", "j.json", "--format", "json"]);
    assert_eq!(json.expect_code(0).json()["diagnostics"].as_array().unwrap().len(), 16);
}

/// Issue 24 item 5: `stale_digest` errors after hand edits are one error listing each file,
/// under one help.
#[test]
fn stale_digests_are_grouped_under_one_help() {
    let env = Env::new();
    let agent = env.copy("agents/mailer", "mailer");
    for file in ["prompts/system.md", "tools.json", "policy.caps"] {
        let path = agent.join(file);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push('\n');
        std::fs::write(path, text).unwrap();
    }
    let temp = env.path();
    bundle_snapshot!("newcomer_stale_digests_grouped", in_env(&env, &["check", "mailer"]), [temp]);
    let json = env.run(&["check", "mailer", "--format", "json"]);
    let stale = json.expect_code(1).json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "stale_digest")
        .count();
    assert_eq!(stale, 3, "JSON keeps each");
}

/// Issue 24 item 9: a past `--expires` is the flag's fault (exit 2, named), not manifest.toml's.
#[test]
fn a_past_expires_flag_is_blamed_on_the_flag() {
    let env = Env::new();
    env.copy("agents/minimal", "minimal");
    let temp = env.path();
    let key = testdata("keys/test.key").display().to_string();
    bundle_snapshot!(
        "newcomer_past_expires_flag",
        in_env(
            &env,
            &["pack", "minimal", "--key", &key, "--expires", "2020-01-01T00:00:00Z", "--now", "2026-02-01T00:00:00Z"]
        ),
        [temp]
    );
    assert!(!temp.join("minimal-1.0.0.agent.bundle").exists());
}

/// Issue 24 item 9: `tool list` shows an exec tool's arguments (tools imported from one MCP
/// server differ only there).
#[test]
fn tool_list_shows_exec_arguments() {
    let env = Env::new();
    env.run(&["init", "agents/clock"]).expect_code(0);
    for tool in ["clock.now", "clock.convert"] {
        let args = [
            "tool",
            "add",
            "agents/clock",
            "--id",
            tool,
            "--description",
            "Time.",
            "--exec",
            "/opt/bin/mcp-call",
            "--arg",
            "--tool",
            "--arg",
            tool,
            "--arg",
            "two words",
        ];
        env.run(&args).expect_code(0);
    }
    let temp = env.path();
    bundle_snapshot!("newcomer_tool_list_exec_arguments", in_env(&env, &["tool", "list", "agents/clock"]), [temp]);
    let json = env.run(&["tool", "list", "agents/clock", "--format", "json"]).json();
    assert_eq!(json["tools"][0]["args"], serde_json::json!(["--tool", "clock.now", "two words"]));
}

/// Issue 24 item 9: `diff` of two different agents says so, in every format.
#[test]
fn diff_of_two_different_agents_says_so() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    env.copy("agents/minimal", "minimal");
    let temp = env.path();
    bundle_snapshot!("newcomer_diff_of_two_agents", in_env(&env, &["diff", "minimal", "mailer"]), [temp]);
    let json = env.run(&["diff", "minimal", "mailer", "--format", "json"]).json();
    assert_eq!(json["different_agents"], true);
    let same = env.run(&["diff", "mailer", "mailer", "--format", "json"]).json();
    assert_eq!(same["different_agents"], false);
    let github = env.run(&["diff", "minimal", "mailer", "--format", "github"]);
    assert!(github.stdout.starts_with("::warning title=different agents::"), "{}", github.stdout);
}
