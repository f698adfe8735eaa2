//! `bundle import`: every example of the seed documents imports, or fails exactly as the
//! document says it should; the result passes `bundle check`.

use std::io::{Read, Write};

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, run, testdata};

fn path(rel: &str) -> String {
    testdata(rel).display().to_string()
}

#[test]
fn import_agentcli_minimal_example_passes_check_and_reports_unmapped_fields() {
    let env = Env::new();
    env.run(&["init", "clock"]).expect_code(0);
    let out = env.run(&[
        "import",
        "--from",
        "agentcli",
        &path("import/agentcli/minimal.json"),
        "-o",
        "clock/tools.json",
        "--force",
        "--exec-root",
        "/opt/clock",
    ]);
    out.expect_code(0);
    assert_run_snapshot!(out);
    let tools: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.path().join("clock/tools.json")).unwrap()).unwrap();
    assert_eq!(tools["tools"][0]["id"], "get_time");
    assert_eq!(tools["tools"][0]["transport"]["command"], "/opt/clock/tools/bin/get_time");
    env.run(&["lock", "clock"]).expect_code(0);
    env.run(&["check", "clock"]).expect_code(0);
}

#[test]
fn import_agentcli_windows_example_resolves_against_the_manifest_folder() {
    let out = run(&["import", "--from", "agentcli", &path("import/agentcli/windows.json"), "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let command = j["document"]["tools"][0]["transport"]["command"].as_str().unwrap().to_owned();
    assert_eq!(command, path("import/agentcli/tools/bin/get_time.exe"));
    assert_run_snapshot!(out);
}

#[test]
fn import_agentcli_common_mistakes_fail_with_the_documents_own_texts() {
    let out = run(&["import", "--from", "agentcli", &path("import/agentcli/mistakes.json"), "--format", "json"]);
    out.expect_code(1);
    let messages: Vec<String> = out.json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        messages,
        [
            "tool[0]: name is required",
            "tool[2] \"a\": duplicate name",
            "tool[3] \"empty\": command must have at least program name",
            "tool[4] \"prefix\": relative command[0] must start with ./tools/bin/",
            "tool[5] \"escape\": command[0] escapes ./tools/bin after normalization (got \"./tools/bin/../hack\" -> \"./tools/hack\")",
            "tool[6] \"env1\": envPassthrough[0]: invalid name \"OAI-API-KEY\" (must match [A-Z_][A-Z0-9_]*)",
            "tool[7] \"env2\": envPassthrough[1]: invalid name \"1BAD\" (must match [A-Z_][A-Z0-9_]*)",
        ]
    );
}

#[test]
fn import_rap_toolsets_map_endpoint_destructive_and_annotations() {
    let out = run(&[
        "import",
        "--from",
        "rap",
        &path("import/rap/github-tools.json"),
        &path("import/rap/time-tools.json"),
        "--format",
        "json",
    ]);
    out.expect_code(0);
    let doc = &out.json()["document"];
    let tools = doc["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0]["transport"]["url"], "https://tool.example.com/invoke");
    assert_eq!(tools[0]["observability"]["tags"], serde_json::json!(["rap.readOnly", "rap.requiresAuth=github"]));
    assert_eq!(tools[1]["id"], "delete-branch");
    assert_eq!(tools[1]["requires_confirmation"], true);
    assert_eq!(tools[2]["transport"]["url"], "https://time.example.com/invoke");
}

#[test]
fn import_rap_invalid_toolset_loads_nothing_and_lists_every_problem() {
    let out = run(&["import", "--from", "rap", &path("import/rap/invalid.json"), &path("import/rap/empty.json")]);
    out.expect_code(1);
    assert!(out.stdout.is_empty(), "no partial loading: {}", out.stdout);
    for text in [
        "toolset name MUST be between 1 and 128 characters",
        "endpoint MUST be a valid URL",
        "MUST NOT contain spaces",
        "MUST be unique within a toolset",
        "inputSchema is required",
        "inputSchema MUST be a valid JSON Schema object",
        "tools MUST contain at least one tool",
    ] {
        assert!(out.stderr.contains(text), "missing {text:?} in\n{}", out.stderr);
    }
}

#[test]
fn import_rap_same_tool_name_in_two_toolsets_loads_neither() {
    let out = run(&["import", "--from", "rap", &path("import/rap/time-tools.json"), &path("import/rap/clash.json")]);
    out.expect_code(1);
    assert_run_snapshot!(out);
}

#[test]
fn import_rap_over_http_from_the_well_known_path() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = std::fs::read_to_string(testdata("import/rap/time-tools.json")).unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    let out = run(&["import", "--from", "rap", &format!("http://127.0.0.1:{port}"), "--format", "json"]);
    let request = server.join().unwrap();
    out.expect_code(0);
    assert!(request.starts_with("GET /.well-known/rap-toolset HTTP/1.1"), "{request}");
    assert!(request.to_ascii_lowercase().contains("accept: application/json"), "{request}");
    assert_eq!(out.json()["document"]["tools"][0]["id"], "get_current_time");
}

#[test]
fn import_rune_process_maps_to_exec_and_other_runtimes_are_reported() {
    let out = run(&["import", "--from", "rune", &path("import/rune"), "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let tools = j["document"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["id"], "search_kb");
    assert_eq!(tools[0]["transport"]["command"], path("import/rune/tools/search_kb.py"));
    let text = out.stdout;
    insta::assert_snapshot!(crate::snapshot::filtered(&text));
}

/// (severity, code, file name, path, line, column) of every diagnostic of a `--format json` run.
type Located = (String, String, String, Option<String>, u64, u64);

fn located(run: &crate::support::Run) -> Vec<Located> {
    run.json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let file = d["file"].as_str().unwrap();
            (
                d["severity"].as_str().unwrap().to_owned(),
                d["code"].as_str().unwrap().to_owned(),
                file.rsplit('/').next().unwrap().to_owned(),
                d["path"].as_str().map(str::to_owned),
                d["line"].as_u64().unwrap_or(0),
                d["column"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn at(code: &str, file: &str, path: Option<&str>, line: u64, column: u64) -> Located {
    ("error".to_owned(), code.to_owned(), file.to_owned(), path.map(str::to_owned), line, column)
}

#[test]
fn import_agentcli_duplicate_key_is_reported_with_path_and_line_column() {
    // serde_json would keep the second `command` (`/bin/rm -rf /`) silently.
    let file = path("import/agentcli/duplicate-keys.json");
    let out = run(&["import", "--from", "agentcli", &file, "--format", "json"]);
    out.expect_code(1);
    assert_eq!(located(&out), [at("duplicate_key", "duplicate-keys.json", Some("tools[0].command"), 7, 7)]);
    assert!(out.json()["document"].is_null());

    let human = run(&["import", "--from", "agentcli", &file]);
    human.expect_code(1);
    assert_run_snapshot!(human);
    assert!(human.stdout.is_empty(), "nothing imported: {}", human.stdout);
}

#[test]
fn import_rap_duplicate_key_is_reported_with_path_and_line_column() {
    let file = path("import/rap/duplicate-keys.json");
    let out = run(&["import", "--from", "rap", &file, "--format", "json"]);
    out.expect_code(1);
    assert_eq!(
        located(&out),
        [at("duplicate_key", "duplicate-keys.json", Some("tools[0].annotations.destructive"), 9, 64)]
    );
    let human = run(&["import", "--from", "rap", &file]);
    human.expect_code(1);
    assert_run_snapshot!(human);
}

#[test]
fn import_agentcli_syntax_error_is_invalid_json_with_line_column() {
    let out = run(&["import", "--from", "agentcli", &path("import/agentcli/syntax-error.json"), "--format", "json"]);
    out.expect_code(1);
    assert_eq!(located(&out), [at("invalid_json", "syntax-error.json", None, 3, 48)]);
}

#[test]
fn import_agentcli_problems_carry_json_path_and_line_column() {
    let file = path("import/agentcli/mistakes.json");
    let out = run(&["import", "--from", "agentcli", &file, "--format", "json"]);
    out.expect_code(1);
    let f = "mistakes.json";
    assert_eq!(
        located(&out),
        [
            at("invalid_import", f, Some("tools[0].name"), 3, 5), // missing: the tool's object
            at("invalid_import", f, Some("tools[2].name"), 5, 14),
            at("invalid_import", f, Some("tools[3].command"), 6, 34),
            at("invalid_import", f, Some("tools[4].command[0]"), 7, 36),
            at("invalid_import", f, Some("tools[5].command[0]"), 8, 36),
            at("invalid_import", f, Some("tools[6].envPassthrough[0]"), 9, 71),
            at("invalid_import", f, Some("tools[7].envPassthrough[1]"), 10, 82),
        ]
    );
    assert!(out.json()["diagnostics"][1]["help"].as_str().unwrap().contains("agentcli Tools Manifest Reference"));
    let human = run(&["import", "--from", "agentcli", &file]);
    human.expect_code(1);
    assert_run_snapshot!(human);
}

#[test]
fn import_rap_problems_carry_json_path_and_line_column() {
    let out = run(&["import", "--from", "rap", &path("import/rap/invalid.json"), "--format", "json"]);
    out.expect_code(1);
    let f = "invalid.json";
    assert_eq!(
        located(&out),
        [
            at("invalid_import", f, Some("name"), 2, 11),
            at("invalid_import", f, Some("endpoint"), 3, 15),
            at("invalid_import", f, Some("tools[1].name"), 6, 15),
            at("invalid_import", f, Some("tools[2].name"), 7, 15),
            at("invalid_import", f, Some("tools[3].inputSchema"), 8, 5),
            at("invalid_import", f, Some("tools[4].inputSchema.type"), 9, 83),
        ]
    );
    let human = run(&["import", "--from", "rap", &path("import/rap/invalid.json")]);
    assert_run_snapshot!(human);
}

#[test]
fn import_rap_clash_is_located_at_the_second_definition() {
    let out = run(&[
        "import",
        "--from",
        "rap",
        &path("import/rap/time-tools.json"),
        &path("import/rap/clash.json"),
        "--format",
        "json",
    ]);
    out.expect_code(1);
    assert_eq!(located(&out), [at("invalid_import", "clash.json", Some("tools[0].name"), 5, 15)]);
}

#[test]
fn import_rune_problems_carry_key_path_and_line_column() {
    let dir = path("import/rune-invalid");
    let out = run(&["import", "--from", "rune", &dir, "--format", "json"]);
    out.expect_code(1);
    assert_eq!(
        located(&out),
        [
            at("duplicate_key", "duplicate.yaml", Some("name"), 3, 1),
            at("invalid_import", "escape.yaml", Some("module"), 3, 1),
            at("invalid_import", "typo.yaml", Some("retry_policy.backoff"), 6, 3),
            at("invalid_import", "wrong-type.yaml", Some("timeout_ms"), 3, 13),
        ]
    );
    let human = run(&["import", "--from", "rune", &dir]);
    human.expect_code(1);
    assert_run_snapshot!(human);
}

/// Issue 17: `-o AGENT/tools.json` leaves the agent passing `bundle check` right away, for
/// every import format: the manifest is relocked, and `--grant` grants what the tools need.
#[test]
fn import_into_an_agent_folder_relocks_and_grants_for_every_format() {
    let cases: Vec<Vec<String>> = vec![
        ["agentcli", &path("import/agentcli/minimal.json"), "--exec-root", "/opt/clock"].map(str::to_owned).to_vec(),
        ["rap", &path("import/rap/github-tools.json")].map(str::to_owned).to_vec(),
        ["rune", &path("import/rune"), "--exec-root", "/opt/kb"].map(str::to_owned).to_vec(),
        ["openai", &path("import/openai/responses.json"), "--http", "POST", "https://fn.example.com/{tool}", "--grant"]
            .map(str::to_owned)
            .to_vec(),
        ["mcp", &path("import/mcp/output-schema.json"), "--http", "GET", "https://mcp.example.com/{tool}", "--grant"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for case in cases {
        let env = Env::new();
        env.run(&["init", "agents/x"]).expect_code(0);
        let mut args = vec!["import", "--from"];
        args.extend(case.iter().map(String::as_str));
        args.extend(["-o", "agents/x/tools.json", "--force"]);
        let out = env.run(&args);
        out.expect_code(0);
        assert!(out.stderr.contains("relocked agents/x/manifest.toml"), "{case:?}: {}", out.stderr);
        env.run(&["check", "agents/x"]).expect_code(0);
    }
}

#[test]
fn import_http_tools_without_grant_hint_at_it_and_check_names_the_capability() {
    let env = Env::new();
    env.run(&["init", "x"]).expect_code(0);
    let file = path("import/openai/chat-completions.json");
    let out = env.run(&[
        "import",
        "--from",
        "openai",
        &file,
        "--http",
        "POST",
        "https://fn.example.com/{tool}",
        "-o",
        "x/tools.json",
        "--force",
    ]);
    out.expect_code(0);
    assert_run_snapshot!(out);
    let check = env.run(&["check", "x", "--format", "json"]);
    check.expect_code(1);
    assert_run_snapshot!(check);
    // --grant needs an agent folder to grant in.
    let out = env.run(&[
        "import",
        "--from",
        "openai",
        &file,
        "--http",
        "POST",
        "https://fn.example.com/{tool}",
        "-o",
        "loose.json",
        "--grant",
    ]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

/// Issue 17: `--exec-root` applies to Rune too, and a command resolved against the importing
/// machine's folder is a `local_path` warning (printed once with a count when repeated).
#[test]
fn exec_root_applies_to_rune_and_machine_paths_are_warned_about() {
    let out = run(&["import", "--from", "rune", &path("import/rune"), "--exec-root", "/opt/kb", "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    assert_eq!(j["document"]["tools"][0]["transport"]["command"], "/opt/kb/tools/search_kb.py");
    assert_run_snapshot!(out);
    let out = run(&["import", "--from", "rune", &path("import/rune"), "--format", "json"]);
    out.expect_code(0);
    assert_run_snapshot!(out);
    let out = run(&["import", "--from", "agentcli", &path("import/agentcli/minimal.json")]);
    out.expect_code(0);
    assert_run_snapshot!(out);
}
