//! What a newcomer meets in the first hour (issue 36): messages that say what is wrong and what
//! to do, flags with one meaning across commands, and output of one shape.

use crate::support::{Env, key, testdata};

fn ok_bundle() -> String {
    testdata("hostile/ok.agent.bundle").display().to_string()
}

#[test]
fn a_trust_policy_parse_error_prints_the_parsers_lines_and_escapes_what_is_in_them() {
    let env = Env::new();
    // A bidirectional override inside the line the parser quotes.
    std::fs::write(env.path().join("trust-policy.toml"), "format = 1\nid = \"x\"\nversion = [\"\u{202E}\"\n").unwrap();
    let out = env.run(&["verify", &ok_bundle(), "--trust-policy", "trust-policy.toml"]);
    out.expect_code(2);
    assert!(out.stderr.contains("not a usable trust policy:\nTOML parse error at line 3"), "{}", out.stderr);
    assert!(out.stderr.contains("\n3 | version = [\"\\u{202e}\"\n"), "{}", out.stderr);
    assert!(!out.stderr.contains("\\u{a}") && !out.stderr.contains('\u{202E}'), "{}", out.stderr);
    let json = env.run(&["verify", &ok_bundle(), "--trust-policy", "trust-policy.toml", "--format", "json"]).json();
    assert_eq!(json["code"], "policy_error");
    let message = json["message"].as_str().unwrap();
    assert!(message.contains("\n3 | version = [\"\\u{202e}\"\n"), "{message}");
}

#[test]
fn expires_is_a_date_in_every_command_and_a_span_given_to_it_gets_expires_in() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let out = env.run(&["pack", "mailer", "--key", &key("test.key"), "--expires", "90d"]);
    out.expect_code(2);
    assert!(out.stderr.contains("use --expires-in 90d"), "{}", out.stderr);
    let out = env.run(&["trust", "rotate", "policy.toml", "-o", "v2.toml", "--expires", "365d"]);
    out.expect_code(2);
    assert!(out.stderr.contains("use --expires-in 365d"), "{}", out.stderr);
    // --expires-in is the span in both.
    let help = env.run(&["trust", "rotate", "--help"]);
    assert!(help.stdout.contains("--expires-in <SPAN>"), "{}", help.stdout);
}

#[test]
fn verify_names_every_way_to_trust_in_its_usage_and_suggests_a_misspelt_flag() {
    let out = crate::support::run(&["verify", &ok_bundle()]);
    out.expect_code(2);
    assert!(out.stderr.contains("<--key <PUBLIC_KEY>|--trusted-keys <FILE>|--trust-policy <FILE>>"), "{}", out.stderr);
    let out = crate::support::run(&["verify", &ok_bundle(), "--kye", &key("test.pub")]);
    out.expect_code(2);
    assert!(out.stderr.contains("a similar argument exists: '--key'"), "{}", out.stderr);
}

#[test]
fn a_deleted_policy_caps_is_to_be_restored_not_locked() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    std::fs::remove_file(env.path().join("mailer/policy.caps")).unwrap();
    let out = env.run(&["check", "mailer"]);
    out.expect_code(1);
    assert!(out.stderr.contains("help: restore policy.caps (`git checkout -- mailer/policy.caps`"), "{}", out.stderr);
    assert!(!out.stderr.contains("run `bundle lock`"), "{}", out.stderr);
}

#[test]
fn diff_github_annotates_an_agent_with_problems_on_its_file_and_line() {
    let env = Env::new();
    env.copy("agents/mailer", "old");
    env.copy("agents/mailer", "new");
    let tools = env.path().join("new/tools.json");
    let text = std::fs::read_to_string(&tools).unwrap().replacen("\"id\": \"", "\"id\": \"Bad ", 1);
    std::fs::write(&tools, text).unwrap();
    let out = env.run(&["diff", "old", "new", "--format", "github"]);
    out.expect_code(2);
    assert!(out.stdout.starts_with("::error file=new/tools.json,line="), "{}", out.stdout);
}

#[test]
fn every_tool_a_test_requires_is_in_the_table_scripts_test_installs_from() {
    let table = crate::support::tools_table();
    assert!(
        table.iter().all(|(from, _, provides)| ["apt", "pip", "npm"].contains(&from.as_str()) && !provides.is_empty())
    );
    let provided = |what: &str| table.iter().any(|(_, _, p)| p.iter().any(|x| x == what));
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(crate::support::repo().join("tests/cli")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (call, prefix) in [("require_tool(\"", ""), ("require_python_module(\"", "py:")] {
            for rest in text.split(call).skip(1) {
                let name = format!("{prefix}{}", rest.split('"').next().unwrap());
                // bash and python3 come with the machine.
                if !provided(&name) && !["bash", "python3", "{name}"].contains(&name.as_str()) {
                    missing.push(format!("{}: {name}", path.display()));
                }
            }
        }
    }
    assert!(missing.is_empty(), "add a line to scripts/tools.txt for: {missing:?}");
}
