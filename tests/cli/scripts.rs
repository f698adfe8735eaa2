//! Output that scripts can rely on: `--format github` notices on success, one JSON document
//! (or an ::error line) for every exit-2 outcome.

use crate::support::{Env, key, testdata};

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

/// Runs that stop with exit 2, each with the code its JSON document must carry.
fn exit_2_cases(env: &Env) -> Vec<(Vec<String>, &'static str)> {
    let pubkey = key("test.pub");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["verify", "missing.agent.bundle", "--key", &pubkey], "io_error"),
        (vec!["verify", "m.agent.bundle", "--key", "missing.pub"], "io_error"),
        (vec!["verify", "m.agent.bundle", "--key", &pubkey, "--bogus"], "usage"),
        (vec!["verify", "--key", &pubkey], "usage"),
        (vec!["inspect", "missing.agent.bundle"], "io_error"),
        (vec!["unpack", "missing.agent.bundle", "out", "--key", &pubkey], "io_error"),
        (vec!["check", "missing"], "io_error"),
        (vec!["lock", "missing"], "io_error"),
        (vec!["pack", "agents/mailer", "--key", "missing.key"], "io_error"),
        (vec!["diff", "missing.agent.bundle", "agents/mailer"], "io_error"),
        (vec!["baseline", "snapshot", "missing"], "io_error"),
        (vec!["export", "--to", "openai", "missing"], "io_error"),
        (vec!["import", "--from", "rap", "missing.json"], "io_error"),
        (vec!["tool", "list", "missing"], "io_error"),
        (vec!["tool", "remove", "agents/mailer", "no.such_tool"], "usage"),
    ];
    let _ = env;
    cases.into_iter().map(|(a, c)| (a.into_iter().map(str::to_owned).collect(), c)).collect()
}

#[test]
fn json_format_prints_one_document_for_every_exit_2() {
    let env = Env::new();
    env.copy("agents/mailer", "agents/mailer");
    let mut wrong = Vec::new();
    for (args, code) in exit_2_cases(&env) {
        for spelling in [["--format", "json"].as_slice(), ["--format=json"].as_slice()] {
            let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
            argv.extend(spelling);
            let out = env.run(&argv);
            let doc: Option<serde_json::Value> = serde_json::from_str(&out.stdout).ok();
            let found = doc.as_ref().map(|d| (d["ok"].clone(), d["code"].as_str().unwrap_or("-").to_owned()));
            if out.code != 2
                || found != Some((false.into(), code.to_owned()))
                || doc.unwrap()["message"].as_str().is_none()
            {
                wrong.push(format!("bundle {}: exit {}, stdout {:?}", argv.join(" "), out.code, out.stdout));
            }
        }
    }
    assert!(wrong.is_empty(), "not one JSON error document:\n{}", wrong.join("\n"));
}

#[test]
fn github_format_prints_an_error_annotation_for_every_exit_2() {
    let env = Env::new();
    env.copy("agents/mailer", "agents/mailer");
    let mut wrong = Vec::new();
    for (args, _) in exit_2_cases(&env) {
        let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
        argv.extend(["--format", "github"]);
        let out = env.run(&argv);
        if out.code != 2 || !out.stdout.lines().any(|l| l.starts_with("::error ")) {
            wrong.push(format!("bundle {}: exit {}, stdout {:?}", argv.join(" "), out.code, out.stdout));
        }
    }
    assert!(wrong.is_empty(), "no ::error line:\n{}", wrong.join("\n"));
}
