//! `bundle diff`: every kind of change, classified; fingerprints that ignore formatting;
//! `--fail-on` for pipelines. Each case copies the mailer agent twice and edits the copy.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::snapshot::assert_run_snapshot;
use crate::snapshot::{bundle_snapshot, in_env};
use crate::support::{Env, Run, edit_tools, testdata, tool};

/// Two copies of the mailer agent, `old` and `new`; `edit` changes the new one's tools.json.
fn pair(edit: impl FnOnce(&mut Value)) -> (Env, PathBuf) {
    let env = Env::new();
    env.copy("agents/mailer", "old");
    let new = env.copy("agents/mailer", "new");
    edit_tools(&new, edit);
    (env, new)
}

fn diff_json(env: &Env, extra: &[&str]) -> (Run, Value) {
    let mut args = vec!["diff", "old", "new", "--format", "json"];
    args.extend_from_slice(extra);
    let out = env.run(&args);
    let json = out.json();
    (out, json)
}

/// `(tool, kind, impact, at)` of every change.
fn changes(json: &Value) -> BTreeSet<(String, String, String, String)> {
    json["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["tool"].as_str().unwrap_or("policy.caps").to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["impact"].as_str().unwrap().to_owned(),
                c["at"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn set(items: &[(&str, &str, &str, &str)]) -> BTreeSet<(String, String, String, String)> {
    items.iter().map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string())).collect()
}

const SEND: &str = "mail.smtp_send";

#[test]
fn identical_releases_have_no_changes_and_pass_every_fail_on() {
    let (env, _) = pair(|_| {});
    let (out, j) = diff_json(&env, &["--fail-on", "any"]);
    out.expect_code(0);
    assert_eq!(j["ok"], true);
    assert_eq!(j["summary"]["changes"], 0);
    assert_eq!(j["summary"]["tools_unchanged"], 4);
    let out = env.run(&["diff", "old", "new"]);
    out.expect_code(0);
    assert_run_snapshot!(out);
}

#[test]
fn tools_added_and_removed() {
    let (env, _) = pair(|doc| {
        let tools = doc["tools"].as_array_mut().unwrap();
        tools.retain(|t| t["id"] != "contacts.lookup");
        let mut extra = tools[0].clone();
        extra["id"] = json!("mail.archive_search");
        tools.push(extra);
    });
    let (out, j) = diff_json(&env, &[]);
    out.expect_code(0);
    assert_eq!(
        changes(&j),
        set(&[
            ("mail.archive_search", "tool_added", "widening", "tools"),
            ("contacts.lookup", "tool_removed", "breaking", "tools"),
        ])
    );
    let statuses: Vec<(&str, &str)> = j["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    assert!(statuses.contains(&("mail.archive_search", "added")) && statuses.contains(&("contacts.lookup", "removed")));
    let added = j["tools"].as_array().unwrap().iter().find(|t| t["id"] == "mail.archive_search").unwrap();
    assert_eq!(added["new"]["risk"], json!(["network", "secret-using"]));
}

#[test]
fn capabilities_widened_narrowed_and_refined() {
    let (env, _) = pair(|doc| {
        tool(doc, SEND)["capabilities"] = json!(["net:api.mail.example", "net:relay.mail.example"]);
        tool(doc, "mail.draft_render")["capabilities"] = json!([]);
        tool(doc, "contacts.lookup")["capabilities"] = json!(["net:*.mail.example"]);
    });
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            (SEND, "capability_added", "widening", "capabilities"),
            // Still an exec tool: still write-capable.
            ("mail.draft_render", "capability_removed", "narrowing", "capabilities"),
            ("contacts.lookup", "capability_added", "widening", "capabilities"),
            ("contacts.lookup", "capability_removed", "narrowing", "capabilities"),
        ])
    );
    // Narrowing a wildcard to one host is not a widening.
    let (env, _) = pair(|doc| tool(doc, "contacts.lookup")["capabilities"] = json!(["net:*.mail.example"]));
    env.copy("agents/mailer", "newer");
    std::fs::remove_dir_all(env.path().join("old")).unwrap();
    std::fs::rename(env.path().join("new"), env.path().join("old")).unwrap();
    std::fs::rename(env.path().join("newer"), env.path().join("new")).unwrap();
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            ("contacts.lookup", "capability_added", "neutral", "capabilities"),
            ("contacts.lookup", "capability_removed", "narrowing", "capabilities"),
        ])
    );
}

#[test]
fn secrets_added_and_removed() {
    let (env, _) = pair(|doc| {
        tool(doc, "contacts.lookup")["secrets"] = json!(["runloop/contacts/directory_token", "runloop/contacts/admin"]);
        tool(doc, "mail.mailbox_search")["secrets"] = json!([]);
        tool(doc, "mail.mailbox_search")["transport"]["headers"] = json!({"Accept": "application/json"});
    });
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            ("contacts.lookup", "secret_added", "widening", "secrets"),
            ("mail.mailbox_search", "secret_removed", "narrowing", "secrets"),
            ("mail.mailbox_search", "http_header_removed", "narrowing", "transport.headers"),
            ("mail.mailbox_search", "risk_lowered", "narrowing", "risk"),
        ])
    );
}

#[test]
fn http_host_method_url_and_headers() {
    let (env, _) = pair(|doc| {
        let t = &mut tool(doc, SEND)["transport"];
        t["url"] = json!("https://relay.mail.example/v1/mailboxes/{mailbox}/send");
        t["method"] = json!("DELETE");
        t["headers"]["X-Trace"] = json!("on");
        t["headers"]["Content-Type"] = json!("text/plain");
        let s = &mut tool(doc, "mail.mailbox_search")["transport"];
        s["url"] = json!("https://api.mail.example/v2/mailboxes/{mailbox}/messages?q={query}");
        s["method"] = json!("HEAD");
    });
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            (SEND, "http_host_changed", "widening", "transport.url"),
            (SEND, "http_method_changed", "widening", "transport.method"),
            (SEND, "http_header_added", "widening", "transport.headers"),
            (SEND, "http_header_changed", "widening", "transport.headers"),
            ("mail.mailbox_search", "http_url_changed", "widening", "transport.url"),
            ("mail.mailbox_search", "http_method_changed", "neutral", "transport.method"),
        ])
    );
    let host = j["changes"].as_array().unwrap().iter().find(|c| c["kind"] == "http_host_changed").unwrap();
    assert_eq!(host["message"], "http host https://api.mail.example -> https://relay.mail.example");
    assert_eq!(host["new"], "https://relay.mail.example/v1/mailboxes/{mailbox}/send");

    // A write method going back to GET narrows, and the risk falls with it.
    let (env, _) = pair(|doc| {
        tool(doc, SEND)["transport"]["method"] = json!("GET");
        tool(doc, SEND)["requires_confirmation"] = json!(true);
    });
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            (SEND, "http_method_changed", "narrowing", "transport.method"),
            (SEND, "risk_lowered", "narrowing", "risk")
        ])
    );
}

#[test]
fn exec_command_args_and_transport_kind() {
    let (env, _) = pair(|doc| {
        tool(doc, "contacts.lookup")["transport"]["command"] = json!("/opt/contacts/bin/contacts");
        tool(doc, "mail.draft_render")["transport"]["args"] = json!(["render", "--format", "html"]);
        tool(doc, "mail.mailbox_search")["transport"] =
            json!({"kind": "exec", "command": "/usr/local/bin/mail-search"});
    });
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            ("contacts.lookup", "exec_command_changed", "widening", "transport.command"),
            ("mail.draft_render", "exec_args_changed", "widening", "transport.args"),
            ("mail.mailbox_search", "transport_changed", "widening", "transport"),
            ("mail.mailbox_search", "risk_raised", "widening", "risk"),
        ])
    );
}

#[test]
fn confirmation_budget_and_description() {
    let (env, _) = pair(|doc| {
        let send = tool(doc, SEND);
        send["requires_confirmation"] = json!(false);
        send["budget"] = json!({"tokens": 8000, "usd": 0.01});
        send["description"] = json!("Send drafts.");
        tool(doc, "contacts.lookup")["requires_confirmation"] = json!(true);
        tool(doc, "mail.mailbox_search").as_object_mut().unwrap().remove("budget");
    });
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            // Not a lower risk: a removed guard.
            (SEND, "confirmation_removed", "widening", "requires_confirmation"),
            (SEND, "budget_raised", "widening", "budget.tokens"),
            (SEND, "budget_lowered", "narrowing", "budget.usd"),
            (SEND, "description_changed", "neutral", "description"),
            ("contacts.lookup", "confirmation_added", "narrowing", "requires_confirmation"),
            ("mail.mailbox_search", "budget_raised", "widening", "budget.tokens"),
        ])
    );
}

#[test]
fn input_schema_changes_are_breaking_or_compatible() {
    let (env, _) = pair(|doc| {
        let s = &mut tool(doc, "mail.mailbox_search")["input_schema"];
        s["properties"]["folder"] = json!({"type": "string"}); // required below: breaking
        s["properties"]["since"] = json!({"type": "string"}); // optional: compatible
        s["properties"].as_object_mut().unwrap().remove("limit"); // removed: breaking
        s["required"] = json!(["mailbox", "query", "folder"]);
        let d = &mut tool(doc, "mail.draft_render")["input_schema"]["properties"];
        d["template"]["enum"] = json!(["reply", "follow_up", "announcement"]); // one removed, one added
        d["context"]["type"] = json!(["string", "null"]); // widened: compatible
        let c = &mut tool(doc, "contacts.lookup")["input_schema"]["properties"]["name"];
        c["type"] = json!("integer"); // string -> integer: neither
        c["minLength"] = json!(3); // tightened: breaking
    });
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            ("mail.mailbox_search", "required_property_added", "breaking", "input_schema.folder"),
            ("mail.mailbox_search", "property_added", "compatible", "input_schema.since"),
            ("mail.mailbox_search", "property_removed", "breaking", "input_schema.limit"),
            ("mail.draft_render", "enum_value_removed", "breaking", "input_schema.template/enum"),
            ("mail.draft_render", "enum_value_added", "compatible", "input_schema.template/enum"),
            ("mail.draft_render", "type_widened", "compatible", "input_schema.context/type"),
            ("contacts.lookup", "schema_changed", "breaking", "input_schema.name/type"),
            ("contacts.lookup", "constraint_tightened", "breaking", "input_schema.name/minLength"),
        ])
    );
}

#[test]
fn result_schema_changes_are_judged_from_the_consumer_side() {
    let (env, _) = pair(|doc| {
        let r = &mut tool(doc, "contacts.lookup")["result_schema"];
        r["items"]["properties"]["phone"] = json!({"type": "string"}); // added: compatible
        r["items"]["required"] = json!(["email", "display_name"]); // now guaranteed: compatible
        r["items"]["properties"]["email"]["type"] = json!(["string", "null"]); // widened: breaking
        r["maxItems"] = json!(100); // loosened: breaking
    });
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            ("contacts.lookup", "property_added", "compatible", "result_schema[].phone"),
            ("contacts.lookup", "property_required", "compatible", "result_schema[].display_name"),
            ("contacts.lookup", "type_widened", "breaking", "result_schema[].email/type"),
            ("contacts.lookup", "constraint_loosened", "breaking", "result_schema/maxItems"),
        ])
    );
}

#[test]
fn referenced_schema_files_are_part_of_the_contract() {
    let env = Env::new();
    env.copy("agents/mailer", "old");
    let new = env.copy("agents/mailer", "new");
    let path = new.join("schemas/mail.send.request.v1.json");
    let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    schema["properties"]["priority"] = json!({"enum": ["low", "high"]});
    schema["required"].as_array_mut().unwrap().push(json!("priority"));
    std::fs::write(&path, serde_json::to_string_pretty(&schema).unwrap()).unwrap();
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(changes(&j), set(&[(SEND, "required_property_added", "breaking", "input_schema.priority")]));
}

#[test]
fn policy_grants_added_and_removed() {
    let (env, new) = pair(|_| {});
    std::fs::write(
        env.path().join("old/policy.caps"),
        "net:*.mail.example\nfs:/srv/mail/templates\nnet:legacy.example\n",
    )
    .unwrap();
    std::fs::write(
        new.join("policy.caps"),
        "net:*.mail.example\nfs:/srv/mail/templates\nnet:hooks.example\nnet:api.mail.example   # already covered\n",
    )
    .unwrap();
    let (_, j) = diff_json(&env, &[]);
    assert_eq!(
        changes(&j),
        set(&[
            ("policy.caps", "grant_added", "widening", "policy.caps"),
            ("policy.caps", "grant_added", "neutral", "policy.caps"),
            ("policy.caps", "grant_removed", "narrowing", "policy.caps"),
        ])
    );
}

#[test]
fn fingerprints_ignore_key_order_whitespace_and_where_a_schema_is_kept() {
    let env = Env::new();
    let old = env.copy("agents/mailer", "old");
    let new = env.copy("agents/mailer", "new");
    // Every object's keys reversed, compact, and the send request schema inlined.
    fn reverse(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(m.iter().rev().map(|(k, v)| (k.clone(), reverse(v))).collect()),
            Value::Array(a) => Value::Array(a.iter().map(reverse).collect()),
            other => other.clone(),
        }
    }
    let request: Value =
        serde_json::from_str(&std::fs::read_to_string(old.join("schemas/mail.send.request.v1.json")).unwrap()).unwrap();
    edit_tools(&new, |doc| {
        tool(doc, SEND)["input_schema"] = request;
        // Defaults spelled out or left out, sets in another order or repeated: the same contract.
        tool(doc, "mail.mailbox_search").as_object_mut().unwrap().remove("requires_confirmation");
        tool(doc, "contacts.lookup")["capabilities"] =
            json!(["net:directory.mail.example", "net:directory.mail.example"]);
        *doc = reverse(doc);
    });
    let text = std::fs::read_to_string(new.join("tools.json")).unwrap();
    std::fs::write(
        new.join("tools.json"),
        serde_json::to_string(&serde_json::from_str::<Value>(&text).unwrap()).unwrap(),
    )
    .unwrap();
    let (out, j) = diff_json(&env, &["--fail-on", "any"]);
    out.expect_code(0);
    assert_eq!(j["summary"]["changes"], 0, "{}", out.stdout);
    for t in j["tools"].as_array().unwrap() {
        assert_eq!(t["old"]["fingerprint"], t["new"]["fingerprint"]);
        assert_eq!(t["new"]["fingerprint"].as_str().unwrap().len(), 64);
    }
}

#[test]
fn fail_on_selects_what_makes_a_pipeline_fail() {
    // One widening (a secret) and one breaking change (a required input).
    let (env, _) = pair(|doc| {
        tool(doc, "contacts.lookup")["secrets"] = json!(["runloop/contacts/directory_token", "runloop/contacts/admin"]);
        tool(doc, "contacts.lookup")["input_schema"]["required"] = json!(["name", "org"]);
    });
    let (out, j) = diff_json(&env, &["--fail-on", "widening"]);
    out.expect_code(1);
    assert_eq!((j["ok"].clone(), j["matched"].clone()), (json!(false), json!(1)));
    env.run(&["diff", "old", "new", "--fail-on", "breaking"]).expect_code(1);
    env.run(&["diff", "old", "new", "--fail-on", "widening,breaking"]).expect_code(1);
    env.run(&["diff", "old", "new"]).expect_code(0);
    // Only a compatible change: widening and breaking pass, any fails.
    let (env, _) = pair(|doc| {
        tool(doc, "contacts.lookup")["input_schema"]["properties"]["org"] = json!({"type": "string"});
    });
    env.run(&["diff", "old", "new", "--fail-on", "widening", "--fail-on", "breaking"]).expect_code(0);
    bundle_snapshot!("fail_on_any_compatible", in_env(&env, &["diff", "old", "new", "--fail-on", "any"]), [env.path()]);
    env.run(&["diff", "old", "new", "--fail-on", "everything"]).expect_code(2);
}

#[test]
fn human_output_reads_in_seconds() {
    let (env, new) = pair(|doc| {
        let send = tool(doc, SEND);
        send["transport"]["url"] = json!("https://relay.mail.example/v1/mailboxes/{mailbox}/send");
        send["capabilities"] = json!(["net:relay.mail.example"]);
        send["requires_confirmation"] = json!(false);
        doc["tools"].as_array_mut().unwrap().retain(|t| t["id"] != "contacts.lookup");
    });
    std::fs::write(new.join("policy.caps"), "net:*.mail.example\nfs:/srv/mail/templates\nnet:hooks.example\n").unwrap();
    crate::support::set_version(&new, "1.1.0");
    let out = env.run(&["diff", "old", "new", "--color", "never"]);
    out.expect_code(0);
    assert_eq!(
        out.stdout,
        "\
mailer 1.0.0 (old) -> mailer 1.1.0 (new)

  policy.caps
    widening    grant net:hooks.example added

  ~ mail.smtp_send (write-capable, network, secret-using)
    widening    http host https://api.mail.example -> https://relay.mail.example
    widening    capability net:relay.mail.example added
    narrowing   capability net:api.mail.example removed
    widening    confirmation removed: calls no longer wait for a person

  - contacts.lookup (write-capable, network, secret-using)
    breaking    tool removed

6 changes: 4 widening, 1 breaking, 1 narrowing; tools: 1 changed, 0 added, 1 removed, 2 unchanged
"
    );
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}

#[test]
fn github_format_annotates_each_change() {
    let (env, _) = pair(|doc| tool(doc, SEND)["requires_confirmation"] = json!(false));
    let out = env.run(&["diff", "old", "new", "--format", "github", "--fail-on", "widening"]);
    out.expect_code(1);
    // The annotation lands on the changed tool's `"id"` line of NEW's tools.json.
    let text = std::fs::read_to_string(env.path().join("new/tools.json")).unwrap();
    let line = text.lines().position(|l| l.contains(&format!("\"id\": \"{SEND}\""))).unwrap() + 1;
    assert_eq!(
        out.stdout,
        format!(
            "::error file=new/tools.json,line={line},title=widening confirmation_removed::mail.smtp_send: \
             confirmation removed: calls no longer wait for a person\n"
        )
    );
}

#[test]
fn bundles_and_folders_compare_alike_and_bad_sides_are_errors() {
    let (env, _) = pair(|doc| tool(doc, SEND)["secrets"] = json!(["runloop/mail/smtp_api_key", "runloop/mail/x"]));
    let key = testdata("keys/test.key").display().to_string();
    env.run(&["pack", "old", "--key", &key, "-o", "old.agent.bundle"]).expect_code(0);
    let (_, folders) = diff_json(&env, &[]);
    let out = env.run(&["diff", "old.agent.bundle", "new", "--format", "json"]);
    out.expect_code(0);
    assert_eq!(changes(&out.json()), changes(&folders));
    assert_eq!(out.json()["old"]["version"], "1.0.0");

    env.run(&["diff", "old", "missing"]).expect_code(2);
    std::fs::write(env.path().join("junk.agent.bundle"), "not a bundle").unwrap();
    bundle_snapshot!("junk_bundle", in_env(&env, &["diff", "junk.agent.bundle", "new"]), [env.path()]);
    edit_tools(&env.path().join("new"), |doc| tool(doc, SEND)["capabilities"] = json!(["net:evil.example"]));
    bundle_snapshot!("side_that_fails_check", in_env(&env, &["diff", "old", "new"]), [env.path()]);
}

#[test]
fn inspect_shows_each_tools_risk_and_fingerprint() {
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    let out = env.run(&["inspect", "m.agent.bundle", "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let send = j["tools"].as_array().unwrap().iter().find(|t| t["id"] == SEND).unwrap().clone();
    assert_eq!(send["risk"], json!(["write-capable", "network", "secret-using", "destructive"]));
    let (_, d) = diff_json_of(&env, "m.agent.bundle", "mailer");
    let from_diff =
        d["tools"].as_array().unwrap().iter().find(|t| t["id"] == SEND).unwrap()["new"]["fingerprint"].clone();
    assert_eq!(send["fingerprint"], from_diff);
    let human = env.run(&["inspect", "m.agent.bundle"]);
    let short = &send["fingerprint"].as_str().unwrap()[..16];
    let row = human.stdout.lines().find(|l| l.trim_start().starts_with(SEND)).unwrap();
    assert!(row.contains(short) && row.contains("write-capable,network,secret-using,destructive"), "{row}");
}

fn diff_json_of(env: &Env, old: &str, new: &str) -> (Run, Value) {
    let out = env.run(&["diff", old, new, "--format", "json"]);
    let json = out.json();
    (out, json)
}
