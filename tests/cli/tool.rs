//! `bundle tool add`: from flags, on a terminal, and refusing what `check` would reject.

use std::process::{Command, Stdio};

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, require_tool};

fn tools_json(env: &Env, agent: &str) -> String {
    std::fs::read_to_string(env.path().join(agent).join("tools.json")).unwrap()
}

#[test]
fn tool_add_from_flags_writes_pretty_json_grants_and_relocks() {
    let env = Env::new();
    env.run(&["init", "agents/mailer"]).expect_code(0);
    let out = env.run(&[
        "tool",
        "add",
        "agents/mailer",
        "--id",
        "mail.send",
        "--description",
        "Send a rendered draft.",
        "--http",
        "post",
        "https://api.mail.example/v1/mailboxes/{mailbox}/send",
        "--header",
        "Authorization=Bearer ${secret:mail/api_key}",
        "--capability",
        "net:api.mail.example",
        "--requires-confirmation",
        "--grant",
    ]);
    out.expect_code(0);
    assert_run_snapshot!(out);
    let text = tools_json(&env, "agents/mailer");
    assert!(text.ends_with("}\n") && text.contains("\n  \"tools\": [\n    {\n      \"id\": \"mail.send\","), "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tool = &v["tools"][0];
    assert_eq!(tool["transport"]["method"], "POST");
    assert_eq!(tool["transport"]["headers"]["Authorization"], "Bearer ${secret:mail/api_key}");
    assert_eq!(tool["secrets"], serde_json::json!(["mail/api_key"]), "the header's secret is listed");
    assert_eq!(tool["input_schema"], serde_json::json!({"type": "object"}));
    assert_eq!(tool["requires_confirmation"], true);
    let policy = std::fs::read_to_string(env.path().join("agents/mailer/policy.caps")).unwrap();
    assert!(policy.ends_with("\nnet:api.mail.example\n"), "{policy}");
    env.run(&["check"]).expect_code(0);

    env.run(&[
        "tool",
        "add",
        "agents/mailer",
        "--id",
        "mail.render",
        "--description",
        "Render a draft.",
        "--exec",
        "/usr/bin/mail-render",
        "--arg",
        "--stdin",
        "--arg",
        "-v",
        "--input-schema",
        r#"{"type": "object", "properties": {"draft": {"type": "string"}}}"#,
    ])
    .expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&tools_json(&env, "agents/mailer")).unwrap();
    let ids: Vec<&str> = v["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mail.send", "mail.render"], "appended in order");
    assert_eq!(v["tools"][1]["transport"]["args"], serde_json::json!(["--stdin", "-v"]));
    assert_eq!(v["tools"][1]["input_schema"]["properties"]["draft"]["type"], "string");
    env.run(&["check"]).expect_code(0);
}

#[test]
fn tool_add_keeps_the_existing_key_order() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    let before: serde_json::Value = serde_json::from_str(&tools_json(&env, "mailer")).unwrap();
    // Keys in an order no serializer would choose: tools first, version last.
    let reordered = format!(
        "{{\"tools\": {}, \"$schema\": \"https://agent-bundle.dev/schemas/tools.v1.schema.json\", \"version\": 1}}",
        before["tools"]
    );
    std::fs::write(dir.join("tools.json"), reordered).unwrap();
    let first_keys =
        |v: &serde_json::Value| -> Vec<String> { v["tools"][0].as_object().unwrap().keys().cloned().collect() };
    let out =
        env.run(&["tool", "add", "mailer", "--id", "kb.search", "--description", "Search.", "--exec", "/usr/bin/kb"]);
    out.expect_code(0);
    let after: serde_json::Value = serde_json::from_str(&tools_json(&env, "mailer")).unwrap();
    let top: Vec<&String> = after.as_object().unwrap().keys().collect();
    assert_eq!(top, ["tools", "$schema", "version"]);
    assert_eq!(first_keys(&after), first_keys(&before), "an existing tool keeps its key order");
    assert_eq!(after["tools"].as_array().unwrap().len(), before["tools"].as_array().unwrap().len() + 1);
    for (old, new) in before["tools"].as_array().unwrap().iter().zip(after["tools"].as_array().unwrap()) {
        assert_eq!(old, new);
    }
    env.run(&["check", "mailer"]).expect_code(0);
}

#[test]
fn tool_add_refuses_an_invalid_tool_and_writes_nothing() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    let snapshot = || ["tools.json", "policy.caps", "manifest.toml"].map(|f| std::fs::read(dir.join(f)).unwrap());
    let before = snapshot();
    let add = |extra: &[&str]| {
        let mut args = vec!["tool", "add", "mailer", "--description", "x", "--color", "never"];
        args.extend(extra);
        env.run(&args)
    };

    let out = add(&["--id", "Mail.Send", "--exec", "/usr/bin/x"]);
    out.expect_code(1);
    assert_run_snapshot!(out);

    let out = add(&["--id", "mail.smtp_send", "--exec", "/usr/bin/x"]);
    out.expect_code(1);
    assert_run_snapshot!(out);

    let out = add(&["--id", "x.y", "--exec", "/usr/bin/x", "--capability", "net:other.example"]);
    out.expect_code(1);
    assert_run_snapshot!(out);

    let out = add(&[
        "--id",
        "x.y",
        "--http",
        "GET",
        "https://x.example/",
        "--header",
        "Authorization=Bearer abcdef0123456789abcdef",
    ]);
    out.expect_code(1);
    assert_run_snapshot!(out);

    add(&["--id", "x.y", "--exec", "relative/path"]).expect_code(1);
    add(&["--id", "x.y", "--exec", "/usr/bin/x", "--input-schema", "{not json"]).expect_code(2);
    add(&["--id", "x.y", "--exec", "/usr/bin/x", "--http", "GET", "https://x.example/"]).expect_code(2);
    assert_eq!(snapshot(), before, "nothing was written");
    let leftovers = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn tool_add_without_flags_or_a_terminal_is_a_usage_error() {
    let env = Env::new();
    env.run(&["init", "a"]).expect_code(0);
    let out = env.run(&["tool", "add", "a"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    let out = env.run(&["tool", "add", "nowhere", "--id", "a", "--description", "b", "--exec", "/x"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

#[test]
fn tool_add_asks_on_a_terminal() {
    if !require_tool("script") {
        return;
    }
    let env = Env::new();
    env.run(&["init", "agents/kb"]).expect_code(0);
    let answers = "kb.search\nSearch the knowledge base.\nhttp\nget\nhttps://kb.example/search?q={query}\n\n\n\nn\ny\n";
    let mut child = Command::new("script")
        .args(["-qec", &format!("{} tool add agents/kb", env!("CARGO_BIN_EXE_bundle")), "/dev/null"])
        .current_dir(env.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run script");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(answers.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("Tool id (e.g. mail.smtp_send): "), "{shown}");
    assert!(shown.contains("[net:kb.example]"), "the URL's host is offered as the capability: {shown}");
    assert!(shown.contains("grant it there? [Y/n]"), "{shown}");
    assert!(shown.contains("added tool `kb.search`"), "{shown}");
    let v: serde_json::Value = serde_json::from_str(&tools_json(&env, "agents/kb")).unwrap();
    assert_eq!(v["tools"][0]["transport"]["url"], "https://kb.example/search?q={query}");
    assert_eq!(v["tools"][0]["capabilities"], serde_json::json!(["net:kb.example"]));
    env.run(&["check"]).expect_code(0);
}

#[test]
fn tool_add_reads_a_schema_from_a_file() {
    let env = Env::new();
    env.run(&["init", "agents/kb"]).expect_code(0);
    std::fs::write(env.path().join("search.input.json"), r#"{"type": "object", "required": ["query"]}"#).unwrap();
    let out = env.run(&[
        "tool",
        "add",
        "agents/kb",
        "--id",
        "kb.search",
        "--description",
        "Search.",
        "--exec",
        "/usr/bin/kb",
        "--input-schema",
        "@search.input.json",
    ]);
    out.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&tools_json(&env, "agents/kb")).unwrap();
    assert_eq!(v["tools"][0]["input_schema"]["required"], serde_json::json!(["query"]));
    let out = env.run(&[
        "tool",
        "add",
        "agents/kb",
        "--id",
        "kb.x",
        "--description",
        "X.",
        "--exec",
        "/x",
        "--input-schema",
        "@nope.json",
    ]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

#[test]
fn tool_list_shows_every_tool_even_of_a_broken_file() {
    let env = Env::new();
    env.copy("agents/mailer", "agents/mailer");
    let out = env.run(&["tool", "list", "agents/mailer", "--format", "json"]);
    out.expect_code(0);
    let json = out.json();
    let ids: Vec<&str> = json["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mail.mailbox_search", "contacts.lookup", "mail.draft_render", "mail.smtp_send"]);
    let out = env.run(&["tool", "list", "agents/mailer"]);
    out.expect_code(0);
    assert!(out.stdout.lines().next().unwrap().starts_with("id "), "a header row: {}", out.stdout);
    assert_run_snapshot!(out);
    // A tool that fails check is still listed, so that it can be named for removal.
    crate::support::edit_tools(&env.path().join("agents/mailer"), |doc| doc["tools"][0]["id"] = "Bad Id".into());
    let out = env.run(&["tool", "list", "agents/mailer", "--format", "json"]);
    out.expect_code(0);
    assert_eq!(out.json()["tools"][0]["id"], "Bad Id");
    std::fs::write(env.path().join("agents/mailer/tools.json"), "{").unwrap();
    env.run(&["tool", "list", "agents/mailer"]).expect_code(1);
    env.run(&["tool", "list", "nowhere"]).expect_code(2);
}

#[test]
fn tool_remove_relocks_and_refuses_an_unknown_id_with_a_suggestion() {
    let env = Env::new();
    env.copy("agents/mailer", "agents/mailer");
    let before = tools_json(&env, "agents/mailer");
    let out = env.run(&["tool", "remove", "agents/mailer", "mail.smtp_snd"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    assert_eq!(tools_json(&env, "agents/mailer"), before, "nothing written");
    let out = env.run(&["tool", "remove", "agents/mailer", "zzz"]);
    out.expect_code(2);
    assert_run_snapshot!(out);

    let out = env.run(&["tool", "remove", "agents/mailer", "mail.draft_render"]);
    out.expect_code(0);
    assert_run_snapshot!(out);
    let v: serde_json::Value = serde_json::from_str(&tools_json(&env, "agents/mailer")).unwrap();
    assert!(v["tools"].as_array().unwrap().iter().all(|t| t["id"] != "mail.draft_render"));
    assert_eq!(v["tools"].as_array().unwrap().len(), 3);
    env.run(&["check", "agents/mailer"]).expect_code(0);
}
