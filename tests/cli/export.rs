//! `bundle export`: OpenAI, RAP and MCP documents from an agent folder or a bundle, with every
//! `schema:` reference resolved, and round trips through import.

use crate::support::{Env, run, testdata};

fn no_schema_refs(v: &serde_json::Value) -> bool {
    !v.to_string().contains("\"schema:")
}

#[test]
fn export_openai_maps_dotted_ids_reversibly_and_resolves_refs() {
    let out = run(&["export", "--to", "openai", &testdata("agents/mailer").display().to_string(), "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let tools = j["document"].as_array().unwrap();
    assert!(tools.iter().all(|t| t["type"] == "function"));
    let names: Vec<&str> = tools.iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"mail__smtp_send"), "{names:?}");
    assert!(names.iter().all(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')));
    assert!(no_schema_refs(&j["document"]), "{}", j["document"]);
    assert!(out.stdout.contains("is exported as `mail__smtp_send`"));
}

#[test]
fn export_mcp_and_rap_from_an_agent_folder() {
    let agent = testdata("agents/mailer").display().to_string();
    let mcp = run(&["export", "--to", "mcp", &agent, "--format", "json"]);
    mcp.expect_code(0);
    let doc = &mcp.json()["document"];
    assert!(doc["tools"][0]["inputSchema"].is_object());
    assert!(no_schema_refs(doc));
    let rap =
        run(&["export", "--to", "rap", &agent, "--endpoint", "https://tools.example.com/invoke", "--format", "json"]);
    rap.expect_code(0);
    let doc = &rap.json()["document"];
    assert_eq!(doc["endpoint"], "https://tools.example.com/invoke");
    assert!(no_schema_refs(doc));
}

#[test]
fn import_rap_then_export_rap_keeps_names_descriptions_and_schemas() {
    let env = Env::new();
    env.run(&["init", "gh"]).expect_code(0);
    env.run(&[
        "import",
        "--from",
        "rap",
        &testdata("import/rap/github-tools.json").display().to_string(),
        "-o",
        "gh/tools.json",
        "--force",
    ])
    .expect_code(0);
    env.run(&["lock", "gh"]).expect_code(0);
    env.run(&["check", "gh"]).expect_code(0);
    let out = env.run(&["export", "--to", "rap", "gh", "--name", "github-tools", "--format", "json"]);
    out.expect_code(0);
    let exported = &out.json()["document"];
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(testdata("import/rap/github-tools.json")).unwrap()).unwrap();
    assert_eq!(exported["endpoint"], original["endpoint"]);
    for (a, b) in exported["tools"].as_array().unwrap().iter().zip(original["tools"].as_array().unwrap()) {
        assert_eq!(a["name"], b["name"]);
        assert_eq!(a["description"], b["description"]);
        assert_eq!(a["inputSchema"], b["inputSchema"]);
    }
    assert_eq!(exported["tools"][1]["annotations"]["destructive"], true);
}

#[test]
fn import_agentcli_then_export_openai_matches_the_seed_mapping() {
    let env = Env::new();
    env.run(&["init", "clock"]).expect_code(0);
    let manifest = testdata("import/agentcli/minimal.json");
    env.run(&["import", "--from", "agentcli", &manifest.display().to_string(), "-o", "clock/tools.json", "--force"])
        .expect_code(0);
    let out = env.run(&["export", "--to", "openai", "clock", "--format", "json"]);
    out.expect_code(0);
    let original: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    let f = &out.json()["document"][0]["function"];
    assert_eq!(f["name"], original["tools"][0]["name"]);
    assert_eq!(f["description"], original["tools"][0]["description"]);
    assert_eq!(f["parameters"], original["tools"][0]["schema"]);
}
