//! Output that scripts can rely on: `--format github` notices on success, one JSON document
//! for every outcome.

use crate::support::{Env, testdata};

fn key(name: &str) -> String {
    testdata(&format!("keys/{name}")).display().to_string()
}

/// The `::notice` lines of a run's stdout, asserting that it succeeded.
#[track_caller]
fn notices(env: &Env, args: &[&str]) -> Vec<String> {
    let mut args = args.to_vec();
    args.extend(["--format", "github"]);
    let out = env.run(&args);
    out.expect_code(0);
    let lines: Vec<String> = out.stdout.lines().filter(|l| l.starts_with("::notice ")).map(str::to_owned).collect();
    assert!(!lines.is_empty(), "`bundle {}` printed no ::notice line:\n{}", args.join(" "), out.stdout);
    lines
}

#[test]
fn github_format_prints_a_notice_for_every_success() {
    let env = Env::new();
    env.copy("agents/mailer", "agents/mailer");
    let pubkey = key("test.pub");
    let check = notices(&env, &["check", "."]);
    assert_eq!(check.len(), 1, "{check:?}");
    assert!(check[0].starts_with("::notice file=agents/mailer/manifest.toml,title=checked::mailer "), "{check:?}");
    notices(&env, &["lock", "agents/mailer"]);
    notices(&env, &["pack", "agents/mailer", "--key", &key("test.key"), "-o", "m.agent.bundle"]);
    notices(&env, &["verify", "m.agent.bundle", "--key", &pubkey]);
    notices(&env, &["inspect", "m.agent.bundle", "--key", &pubkey]);
    notices(&env, &["unpack", "m.agent.bundle", "out", "--key", &pubkey]);
    notices(&env, &["baseline", "snapshot", "m.agent.bundle", "-o", "approved.toml"]);
    notices(&env, &["baseline", "approve", "approved.toml", "--from", "agents/mailer", "mail.smtp_send"]);
    notices(&env, &["export", "--to", "openai", "agents/mailer", "-o", "openai.json"]);
    let input = testdata("import/agentcli/minimal.json").display().to_string();
    notices(&env, &["import", "--from", "agentcli", &input, "-o", "imported.json"]);
}
