//! `bundle import --from mcp` and `bundle export --to mcp`: the MCP specification's own
//! examples, the reference server `mcp-server-time` started live, and a hostile fake server
//! (testdata/import/mcp/fake_server.py) for each way a server can fail.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::snapshot::assert_run_snapshot;
use crate::snapshot::{bundle_snapshot, in_repo};
use crate::support::{Env, Run, edit_tools, require_tool, run, testdata};

fn path(rel: &str) -> String {
    testdata(rel).display().to_string()
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// (code, path) of every diagnostic.
fn coded(out: &Run) -> Vec<(String, String)> {
    out.json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["code"].as_str().unwrap().to_owned(), d["path"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

const HTTP: [&str; 3] = ["--http", "GET", "https://tools.example.com/mcp/{tool}"];

#[test]
fn import_mcp_spec_tools_list_response_keeps_title_and_reports_icons_and_cursor() {
    let file = path("import/mcp/tools-list-response.json");
    let out = run(&["import", "--from", "mcp", &file, HTTP[0], HTTP[1], HTTP[2], "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let tool = &j["document"]["tools"][0];
    assert_eq!(tool["id"], "get_weather");
    assert_eq!(tool["description"], "Get current weather information for a location");
    assert_eq!(tool["transport"]["url"], "https://tools.example.com/mcp/get_weather");
    assert_eq!(tool["capabilities"], serde_json::json!(["net:tools.example.com"]));
    assert_eq!(tool["observability"]["tags"], serde_json::json!(["mcp.title=Weather Information Provider"]));
    // No annotations: the spec's defaults (not read-only, destructive) ask for confirmation.
    assert_eq!(tool["requires_confirmation"], true);
    assert_eq!(tool["result_schema"], serde_json::json!({}));
    let coded = coded(&out);
    assert!(coded.contains(&("not_carried_over".into(), "result.tools[0].icons".into())), "{coded:?}");
    assert!(coded.contains(&("not_carried_over".into(), "result.nextCursor".into())), "{coded:?}");
}

#[test]
fn import_mcp_output_schema_becomes_the_result_schema() {
    let file = path("import/mcp/output-schema.json");
    let out = run(&["import", "--from", "mcp", &file, HTTP[0], HTTP[1], HTTP[2], "--format", "json"]);
    out.expect_code(0);
    let original = read_json(&testdata("import/mcp/output-schema.json"));
    let tool = &out.json()["document"]["tools"][0];
    assert_eq!(tool["result_schema"], original[0]["outputSchema"]);
    assert_eq!(tool["input_schema"], original[0]["inputSchema"]);
}

#[test]
fn import_mcp_annotations_map_to_confirmation_and_unfitting_fields_are_reported() {
    let file = path("import/mcp/annotations.json");
    let out =
        run(&["import", "--from", "mcp", &file, "--exec", "/opt/mcp/call", "--arg", "{tool}", "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let tools = j["document"]["tools"].as_array().unwrap();
    let ids: Vec<&str> = tools.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["admin.tools.list", "data_export_v2", "getuser"]);
    let confirm: Vec<bool> = tools.iter().map(|t| t["requires_confirmation"].as_bool().unwrap()).collect();
    assert_eq!(confirm, [false, false, true], "readOnlyHint, destructiveHint false, and the default");
    assert_eq!(tools[1]["transport"]["args"], serde_json::json!(["data_export_v2"]));
    assert!(tools[0].get("capabilities").is_none(), "an exec transport needs no net: capability");
    let coded = coded(&out);
    for (code, at) in [
        ("renamed_tool", "DATA_EXPORT_v2"),
        ("not_carried_over", "tools[0].annotations.title"),
        // An exec tool is write-capable in tools.json, whatever the server says.
        ("not_carried_over", "tools[0].annotations.readOnlyHint"),
        ("not_carried_over", "tools[1].annotations.idempotentHint"),
        ("not_carried_over", "tools[2].execution"),
        ("not_carried_over", "tools[2]._meta"),
    ] {
        assert!(coded.contains(&(code.to_owned(), at.to_owned())), "{code} at {at}: {coded:?}");
    }
}

#[test]
fn import_mcp_spec_violations_are_errors_with_their_paths() {
    let out = run(&["import", "--from", "mcp", &path("import/mcp/invalid.json"), "--exec", "/x", "--format", "json"]);
    out.expect_code(1);
    let coded = coded(&out);
    let errors: Vec<&str> = coded.iter().filter(|(c, _)| c == "invalid_import").map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        errors,
        ["tools[0]", "tools[1]", "tools[2].outputSchema", "tools[3].annotations.readOnlyHint", "tools[5].name"]
    );
    let out = run(&["import", "--from", "mcp", &path("import/mcp/error-response.json"), "--exec", "/x"]);
    out.expect_code(1);
    assert_run_snapshot!(out);
}

#[test]
fn import_mcp_or_openai_without_a_transport_is_a_usage_error() {
    for (from, file) in [("mcp", "import/mcp/output-schema.json"), ("openai", "import/openai/responses.json")] {
        let out = run(&["import", "--from", from, &path(file)]);
        out.expect_code(2);
        assert!(out.stderr.contains("give --http METHOD URL or --exec PATH"), "{}", out.stderr);
    }
    let out = run(&["import", "--from", "mcp", &path("import/mcp/output-schema.json"), "--exec", "relative/call"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

/// An agent with one read-only http tool whose result schema is a `schema:` reference, one
/// exec tool with a string result, and a DELETE.
fn export_agent(env: &Env) {
    env.run(&["init", "ag"]).expect_code(0);
    std::fs::create_dir_all(env.path().join("ag/schemas")).unwrap();
    std::fs::write(
        env.path().join("ag/schemas/weather.json"),
        r#"{"type": "object", "properties": {"temperature": {"type": "number"}}, "required": ["temperature"]}"#,
    )
    .unwrap();
    edit_tools(&env.path().join("ag"), |doc| {
        doc["tools"] = serde_json::json!([
            {"id": "weather.get", "description": "Current weather.",
             "transport": {"kind": "http", "method": "GET", "url": "https://api.example.com/weather"},
             "input_schema": {"type": "object"}, "result_schema": {"$ref": "schema:weather"},
             "schema_refs": {"weather": "schemas/weather.json"},
             "capabilities": ["net:api.example.com"],
             "observability": {"tags": ["mcp.title=Weather"]}},
            {"id": "render", "description": "Render text.",
             "transport": {"kind": "exec", "command": "/usr/bin/render"},
             "input_schema": {"type": "object"}, "result_schema": {"type": "string"}},
            {"id": "weather.forget", "description": "Delete a stored forecast.",
             "transport": {"kind": "http", "method": "DELETE", "url": "https://api.example.com/weather"},
             "input_schema": {"properties": {"day": {"type": "string"}}}, "result_schema": {},
             "capabilities": ["net:api.example.com"]}
        ]);
    });
    std::fs::write(env.path().join("ag/policy.caps"), "net:api.example.com\n").unwrap();
    env.run(&["lock", "-q", "ag"]).expect_code(0);
    env.run(&["check", "ag"]).expect_code(0);
}

#[test]
fn export_mcp_writes_contract_annotations_output_schema_and_title() {
    let env = Env::new();
    export_agent(&env);
    let out = env.run(&["export", "--to", "mcp", "ag", "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let tools = j["document"]["tools"].as_array().unwrap();
    let hints = |i: usize| {
        let a = &tools[i]["annotations"];
        [&a["readOnlyHint"], &a["destructiveHint"], &a["idempotentHint"], &a["openWorldHint"]]
            .map(|v| v.as_bool().unwrap())
    };
    assert_eq!(hints(0), [true, false, true, true], "GET with net: is read-only, idempotent, open-world");
    assert_eq!(hints(1), [false, false, false, false], "exec writes, but is not destructive");
    assert_eq!(hints(2), [false, true, false, true], "DELETE is destructive");
    assert_eq!(tools[0]["title"], "Weather");
    // The schema: reference is inlined; an object schema stays as it is.
    assert_eq!(tools[0]["outputSchema"]["required"], serde_json::json!(["temperature"]));
    // A string result is wrapped, since MCP output schemas are objects, and reported.
    assert_eq!(tools[1]["outputSchema"]["properties"]["result"], serde_json::json!({"type": "string"}));
    assert_eq!(tools[1]["outputSchema"]["type"], "object");
    // "Any JSON" has no output schema.
    assert!(tools[2].get("outputSchema").is_none());
    // MCP arguments are an object: an input schema that leaves the type open says so.
    assert_eq!(tools[2]["inputSchema"]["type"], "object");
    assert_eq!(tools[2]["inputSchema"]["properties"]["day"]["type"], "string");
    assert_run_snapshot!(out);
}

#[test]
fn export_rap_marks_read_only_tools() {
    let env = Env::new();
    export_agent(&env);
    let out =
        env.run(&["export", "--to", "rap", "ag", "--endpoint", "https://api.example.com/rap", "--format", "json"]);
    out.expect_code(0);
    let tools = out.json()["document"]["tools"].clone();
    assert_eq!(tools[0]["annotations"]["readOnly"], true);
    assert!(tools[1]["annotations"].get("readOnly").is_none());
}

#[test]
fn mcp_import_export_import_gives_the_same_tools_json() {
    let env = Env::new();
    for file in ["tools-list-response.json", "output-schema.json", "annotations.json", "schema-examples.json"] {
        let first = env.run(&[
            "import",
            "--from",
            "mcp",
            &path(&format!("import/mcp/{file}")),
            HTTP[0],
            HTTP[1],
            HTTP[2],
            "--format",
            "json",
        ]);
        first.expect_code(0);
        env.run(&["init", "rt"]).expect_code(0);
        let doc = first.json()["document"].clone();
        std::fs::write(env.path().join("rt/tools.json"), serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        std::fs::write(env.path().join("rt/policy.caps"), "net:tools.example.com\n").unwrap();
        env.run(&["lock", "-q", "rt"]).expect_code(0);
        env.run(&["export", "--to", "mcp", "rt", "-o", "exported.json"]).expect_code(0);
        let second =
            env.run(&["import", "--from", "mcp", "exported.json", HTTP[0], HTTP[1], HTTP[2], "--format", "json"]);
        second.expect_code(0);
        assert_eq!(second.json()["document"], doc, "{file}");
        std::fs::remove_dir_all(env.path().join("rt")).unwrap();
    }
}

#[test]
fn import_mcp_from_the_live_reference_server_passes_check() {
    if !require_tool("mcp-server-time") {
        return;
    }
    let env = Env::new();
    env.run(&["init", "clock"]).expect_code(0);
    let out = env.run(&[
        "import",
        "--from",
        "mcp",
        "--stdio",
        "--http",
        "POST",
        "https://time.example.com/mcp/{tool}",
        "-o",
        "clock/tools.json",
        "--force",
        "--grant",
        "--",
        "mcp-server-time",
        "--local-timezone",
        "Etc/UTC",
    ]);
    out.expect_code(0);
    assert_run_snapshot!(out);
    let tools = read_json(&env.path().join("clock/tools.json"));
    let ids: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["get_current_time", "convert_time"]);
    // The server says its tools are read-only: no confirmation.
    assert_eq!(tools["tools"][0]["requires_confirmation"], false);
    assert!(tools["tools"][0]["result_schema"]["properties"]["datetime"].is_object(), "its outputSchema");
    env.run(&["check", "clock"]).expect_code(0);
}

fn fake(mode: &str) -> Vec<String> {
    ["python3", &path("import/mcp/fake_server.py"), mode].map(str::to_owned).to_vec()
}

fn import_fake(env: &Env, mode: &str, extra: &[&str]) -> Run {
    let mut args = vec!["import", "--from", "mcp", "--stdio", "--exec", "/opt/call", "--format", "json"];
    args.extend_from_slice(extra);
    args.push("--");
    let server = fake(mode);
    args.extend(server.iter().map(String::as_str));
    env.run(&args)
}

/// The server's failure: exit 2, one `mcp_server_failed` error, its message.
fn failure(out: &Run) -> String {
    out.expect_code(2);
    let j = out.json();
    assert_eq!(j["ok"], false);
    let d = &j["diagnostics"][0];
    assert_eq!(d["code"], "mcp_server_failed", "{j}");
    d["message"].as_str().unwrap().to_owned()
}

/// Gone, or a zombie waiting for a reaper (killed; its parent exited first). SIGKILL is
/// delivered asynchronously, so a process on its way out gets a moment.
fn is_gone(pid: &str) -> bool {
    let dead = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
    };
    let until = Instant::now() + Duration::from_secs(1);
    while !dead() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn import_mcp_stdio_follows_next_cursor_across_pages() {
    if !require_tool("python3") {
        return;
    }
    let env = Env::new();
    let out = import_fake(&env, "paged", &[]);
    out.expect_code(0);
    let j = out.json();
    let ids: Vec<&str> = j["document"]["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["tool_0_0", "tool_0_1", "tool_1_0", "tool_1_1", "tool_2_0", "tool_2_1"]);
    // Success: the server's stderr is not shown.
    assert_run_snapshot!(out);
}

#[test]
fn import_mcp_stdio_server_that_never_answers_times_out_and_is_killed_with_its_children() {
    if !require_tool("python3") {
        return;
    }
    let env = Env::new();
    let pids = env.path().join("pids");
    let started = Instant::now();
    let mut args =
        vec!["import", "--from", "mcp", "--stdio", "--timeout", "1", "--exec", "/opt/call", "--format", "json"];
    args.push("--");
    let server = fake("silent");
    args.extend(server.iter().map(String::as_str));
    let pid_arg = pids.display().to_string();
    args.push(&pid_arg);
    let out = env.run(&args);
    let message = failure(&out);
    assert!(message.contains("no answer to `initialize` within 1 s"), "{message}");
    // 1 s timeout, then 1 s after closing stdin and 1 s after SIGTERM (ignored) before SIGKILL.
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    let text = std::fs::read_to_string(&pids).unwrap();
    let ids: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(ids.len(), 2);
    for pid in ids {
        assert!(is_gone(pid), "process {pid} is still running after the command returned");
    }
}

#[test]
fn import_mcp_stdio_server_that_exits_early_shows_its_stderr() {
    if !require_tool("python3") {
        return;
    }
    let message = failure(&import_fake(&Env::new(), "exit-early", &[]));
    insta::assert_snapshot!(crate::snapshot::filtered(&message));
    assert!(
        message.contains("fake server: starting in mode exit-early ⏎ fake server: cannot read config.toml"),
        "{message}"
    );
}

#[test]
fn import_mcp_stdio_server_writing_garbage_is_refused() {
    if !require_tool("python3") {
        return;
    }
    let message = failure(&import_fake(&Env::new(), "garbage", &[]));
    insta::assert_snapshot!(crate::snapshot::filtered(&message));
}

#[test]
fn import_mcp_stdio_server_flooding_stdout_stops_at_the_cap() {
    if !require_tool("python3") {
        return;
    }
    let started = Instant::now();
    let message = failure(&import_fake(&Env::new(), "flood", &[]));
    insta::assert_snapshot!(crate::snapshot::filtered(&message));
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn import_mcp_stdio_server_that_never_reads_its_stdin_cannot_block_the_import() {
    if !require_tool("python3") {
        return;
    }
    // Pings without end, answers never read: the client's writes must not block it.
    let started = Instant::now();
    let message = failure(&import_fake(&Env::new(), "ping-flood", &["--timeout", "5"]));
    insta::assert_snapshot!(crate::snapshot::filtered(&message));
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
}

#[test]
fn import_mcp_stdio_protocol_breaches_are_failures() {
    if !require_tool("python3") {
        return;
    }
    let env = Env::new();
    assert!(failure(&import_fake(&env, "cursor-loop", &[])).contains("already given (a loop)"));
    assert!(failure(&import_fake(&env, "old-version", &[])).contains("\"1999-01-01\" is not one this client knows"));
    let out = env.run(&[
        "import",
        "--from",
        "mcp",
        "--stdio",
        "--exec",
        "/x",
        "--format",
        "json",
        "--",
        "/nonexistent/server",
    ]);
    assert!(failure(&out).contains("cannot start `/nonexistent/server`"));
}

#[test]
fn import_mcp_spec_example_as_a_user_sees_it() {
    bundle_snapshot!(
        "import_mcp_spec_example",
        in_repo(&[
            "import",
            "--from",
            "mcp",
            "testdata/import/mcp/tools-list-response.json",
            HTTP[0],
            HTTP[1],
            HTTP[2]
        ])
    );
}

#[test]
fn import_mcp_stdio_failure_as_a_user_sees_it() {
    if !require_tool("python3") {
        return;
    }
    let fake = "testdata/import/mcp/fake_server.py";
    bundle_snapshot!(
        "import_mcp_stdio_exit_early",
        in_repo(&["import", "--from", "mcp", "--stdio", "--exec", "/opt/call", "--", "python3", fake, "exit-early"])
    );
}

/// Issue 23 item 1: the server gets a cleared environment plus HOME, LOGNAME, PATH, SHELL,
/// TERM, USER and what `--env` names; a value of ours that it echoes anyway is not printed.
#[test]
fn the_server_gets_an_allowlisted_environment_and_our_secrets_are_never_echoed() {
    if !require_tool("python3") {
        return;
    }
    let env = Env::new();
    let mut args = vec!["import", "--from", "mcp", "--stdio", "--exec", "/opt/call", "--format", "json"];
    args.extend(["--env", "PASSED_ON", "--env", "SET_HERE=visible-value", "--"]);
    let server = fake("print-env");
    args.extend(server.iter().map(String::as_str));
    let out: Run = crate::support::bin()
        .current_dir(env.path())
        .args(&args)
        .env("BUNDLE_REGISTRY_PASSWORD", "hunter2-registry-secret")
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-value-123")
        .env("PASSED_ON", "passed-on-secret")
        .output()
        .unwrap()
        .into();
    let message = failure(&out);
    assert!(!message.contains("BUNDLE_REGISTRY_PASSWORD"), "{message}");
    assert!(!message.contains("AWS_SECRET_ACCESS_KEY"), "{message}");
    assert!(!message.contains("hunter2-registry-secret") && !out.stderr.contains("hunter2"), "{message}");
    // Passed on as asked, but its value is not echoed back.
    assert!(message.contains("PASSED_ON=$PASSED_ON"), "{message}");
    assert!(!message.contains("passed-on-secret"), "{message}");
    assert!(message.contains("SET_HERE=visible-value"), "{message}");
    assert!(message.contains("PATH="), "{message}");
}

/// Issue 23 item 2: a live server's answer is held to the caps of a JSON file.
#[test]
fn a_huge_value_in_a_live_answer_is_refused_within_the_json_caps() {
    if !require_tool("python3") {
        return;
    }
    let env = Env::new();
    let out = import_fake(&env, "huge-value", &[]);
    let message = failure(&out);
    assert!(message.contains("more than 200000 JSON values"), "{message}");
}

/// Issue 23 item 6: line breaks from a server are escaped on the way to human output.
#[test]
fn line_breaks_in_a_servers_names_do_not_make_output_lines() {
    if !require_tool("python3") {
        return;
    }
    let env = Env::new();
    let mut args = vec!["import", "--from", "mcp", "--stdio", "--exec", "/opt/call", "--"];
    let server = fake("forged-lines");
    args.extend(server.iter().map(String::as_str));
    let out = env.run(&args);
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        assert!(!line.starts_with("signed by:") && !line.starts_with("error: forged"), "forged line: {line}");
        assert!(!line.starts_with("verified x"), "forged line: {line}");
    }
    assert!(!out.stderr.contains('\u{2028}'), "{}", out.stderr);
}
