//! `bundle guard`: an MCP session held to the tool definitions a bundle signed, through the
//! official MCP Python SDK client (testdata/mcp/guard_client.py) against the real
//! `mcp-server-time` and a hostile server (testdata/mcp/hostile_server.py) with one mode per
//! attack. The pins are taken by a raw JSON-RPC lister that is not ours
//! (testdata/mcp/list_raw.py), put in an agent and signed with `bundle pack`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::{
    Env, Stopped, everything_over_http, hostile_over_http, key, require_python_module, require_tool, testdata,
};

fn script(name: &str) -> String {
    testdata(&format!("mcp/{name}")).display().to_string()
}

/// An agent with the pins of `server` (listed from `command`), packed and signed; the bundle.
fn pinned_bundle(env: &Env, server: &str, command: &[&str]) -> PathBuf {
    let agent = env.copy("agents/minimal", "agent");
    std::fs::create_dir_all(agent.join("pins")).unwrap();
    let pin = agent.join(format!("pins/{server}.mcp.json"));
    let status = Command::new("python3")
        .arg(script("list_raw.py"))
        .args([server, pin.to_str().unwrap(), "--"])
        .args(command)
        .status()
        .unwrap();
    assert!(status.success(), "listing {command:?} for the pins failed");
    env.run(&["lock", "agent"]).expect_code(0);
    env.pack("agent", "agent.bundle").expect_code(0);
    env.path().join("agent.bundle")
}

fn hostile(mode: &str, log: &Path) -> Vec<String> {
    vec!["python3".into(), script("hostile_server.py"), mode.into(), log.display().to_string()]
}

/// What the SDK client saw, step by step, and the stderr of the client and guard together.
struct Session {
    steps: Vec<Value>,
    stderr: String,
}

impl Session {
    /// The result of the `n`th step (0 is initialize).
    fn step(&self, n: usize) -> &Value {
        self.steps.get(n).unwrap_or_else(|| panic!("no step {n}: {:#?}\nstderr:\n{}", self.steps, self.stderr))
    }

    fn names(&self, n: usize) -> Vec<&str> {
        let step = self.step(n);
        step["names"]
            .as_array()
            .unwrap_or_else(|| panic!("step {n} is not a list: {step}\nstderr:\n{}", self.stderr))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect()
    }

    /// The JSON-RPC error code of step `n`.
    fn error(&self, n: usize) -> i64 {
        let step = self.step(n);
        step["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("step {n} is not an error: {step}\nstderr:\n{}", self.stderr))
    }

    /// The text of step `n`'s successful call result.
    fn text(&self, n: usize) -> &str {
        let step = self.step(n);
        assert_eq!(step["result"]["isError"], false, "step {n}: {step}\nstderr:\n{}", self.stderr);
        step["result"]["content"][0]["text"].as_str().unwrap()
    }
}

/// Runs the SDK client over `bundle guard BUNDLE --key test.pub --server NAME ARGS -- COMMAND`.
fn through_guard(bundle: &Path, server: &str, args: &[&str], command: &[String], steps: Value) -> Session {
    let mut guard = vec![
        env!("CARGO_BIN_EXE_bundle").to_owned(),
        "guard".into(),
        bundle.display().to_string(),
        "--key".into(),
        key("test.pub"),
        "--server".into(),
        server.into(),
    ];
    guard.extend(args.iter().map(|a| a.to_string()));
    guard.push("--".into());
    guard.extend(command.iter().cloned());
    let out = Command::new("python3")
        .arg(script("guard_client.py"))
        .arg(steps.to_string())
        .arg("--")
        .args(&guard)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let steps = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    Session { steps, stderr }
}

fn ready() -> bool {
    require_python_module("mcp") && require_python_module("rfc8785")
}

fn calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_owned).collect()
}

const NOT_EXPOSED: i64 = -32090;
const ARGUMENTS_INVALID: i64 = -32091;
const DUPLICATE: i64 = -32092;
const TOO_LARGE: i64 = -32094;
const TIMEOUT: i64 = -32095;
const NOT_READING: i64 = -32096;

fn list() -> Value {
    json!({"op": "list"})
}

fn call(name: &str, args: Value) -> Value {
    json!({"op": "call", "name": name, "args": args})
}

/// A hostile session: the bundle pins the honest server, the session runs `mode`.
fn attack(mode: &str, args: &[&str], steps: Value) -> Option<(Session, Vec<String>)> {
    if !ready() {
        return None;
    }
    let env = Env::new();
    let log = env.path().join("calls.log");
    let bundle = pinned_bundle(&env, "hostile", &["python3", &script("hostile_server.py"), "honest"]);
    let session = through_guard(&bundle, "hostile", args, &hostile(mode, &log), steps);
    Some((session, calls(&log)))
}

#[test]
fn guard_passes_the_honest_tools_of_mcp_server_time_and_audits_without_values() {
    if !ready() || !require_tool("mcp-server-time") {
        return;
    }
    let env = Env::new();
    let bundle = pinned_bundle(&env, "time", &["mcp-server-time"]);
    let audit = env.path().join("audit.jsonl");
    let s = through_guard(
        &bundle,
        "time",
        &["--audit", audit.to_str().unwrap()],
        &["mcp-server-time".to_owned()],
        json!([
            list(),
            call("get_current_time", json!({"timezone": "Europe/Warsaw"})),
            call(
                "convert_time",
                json!({"source_timezone": "Europe/Warsaw", "time": "12:00", "target_timezone": "Asia/Tokyo"})
            ),
            call("get_current_time", json!({"timezone": 5})),
            call("run_shell", json!({})),
        ]),
    );
    assert_eq!(s.names(1), ["get_current_time", "convert_time"]);
    assert!(s.text(2).contains("Europe/Warsaw"), "{}", s.text(2));
    assert!(s.text(3).contains("Asia/Tokyo"), "{}", s.text(3));
    assert_eq!(s.error(4), ARGUMENTS_INVALID);
    assert_eq!(s.step(4)["error"]["data"]["reason"], "mcp_arguments_invalid");
    assert_eq!(s.error(5), NOT_EXPOSED);
    assert!(s.step(5)["error"]["message"].as_str().unwrap().contains("`run_shell`"));
    let text = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let decisions: Vec<(&str, &str, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["event"].as_str().unwrap(),
                l["tool"].as_str().unwrap(),
                l["decision"].as_str().unwrap(),
                l["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("tools/list", "get_current_time", "pass", "mcp_tool_identical"),
            ("tools/list", "convert_time", "pass", "mcp_tool_identical"),
            ("tools/call", "get_current_time", "pass", "mcp_call_allowed"),
            ("tools/call", "convert_time", "pass", "mcp_call_allowed"),
            ("tools/call", "get_current_time", "block", "mcp_arguments_invalid"),
            ("tools/call", "run_shell", "block", "mcp_tool_not_exposed"),
        ]
    );
    assert!(lines.iter().all(|l| l["server"] == "time" && l["time"].is_string()));
    assert_eq!(lines[0]["served"], lines[0]["signed"]);
    // Never argument values, results or the environment.
    for secret in ["Warsaw", "Tokyo", "12:00", std::env::var("HOME").unwrap().as_str()] {
        assert!(!text.contains(secret), "the audit log holds `{secret}`:\n{text}");
    }
}

#[test]
fn guard_pins_match_an_independent_rfc8785_implementation() {
    if !ready() {
        return;
    }
    let env = Env::new();
    let pin = env.path().join("p.json");
    let status = Command::new("python3")
        .arg(script("list_raw.py"))
        .args(["hostile", pin.to_str().unwrap(), "--", "python3", &script("hostile_server.py"), "honest"])
        .status()
        .unwrap();
    assert!(status.success());
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&pin).unwrap()).unwrap();
    let code = "import json,sys,rfc8785,hashlib\n\
                for t in json.load(open(sys.argv[1]))['tools']: sys.stdout.write(rfc8785.dumps(t).hex()+'\\n')";
    let out = Command::new("python3").args(["-c", code, pin.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect();
    for (tool, hex) in doc["tools"].as_array().unwrap().iter().zip(&theirs) {
        let bytes: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        assert_eq!(
            agent_bundle::guard::judge::fingerprint(tool),
            blake3::hash(&bytes).to_hex().to_string(),
            "{}",
            tool["name"]
        );
    }
    assert_eq!(theirs.len(), 3);
}

#[test]
fn guard_blocks_a_description_changed_after_the_first_list() {
    let Some((s, _)) = attack(
        "drift-later",
        &[],
        json!([
            list(),
            call("echo", json!({"text": "hi"})),
            list(),
            call("echo", json!({"text": "hi"})),
            call("add", json!({"a": 1, "b": 2}))
        ]),
    ) else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "add", "wipe"]);
    assert_eq!(s.text(2), "hi");
    assert_eq!(s.names(3), ["add", "wipe"], "the poisoned echo is not shown");
    assert_eq!(s.error(4), NOT_EXPOSED);
    assert_eq!(s.text(5), "3");
    assert!(s.stderr.contains("blocked `echo` [mcp_tool_drift]"), "{}", s.stderr);
}

#[test]
fn guard_on_drift_warn_read_only_passes_read_only_drift_and_never_risky_drift() {
    let Some((s, _)) = attack(
        "drift-later",
        &["--on-drift", "warn-read-only"],
        json!([list(), list(), call("echo", json!({"text": "hi"}))]),
    ) else {
        return;
    };
    assert_eq!(s.names(2), ["echo", "add", "wipe"]);
    assert_eq!(s.text(3), "hi");
    assert!(
        s.stderr.contains("warning: tool `echo` differs from its signed definition (description_changed description)"),
        "{}",
        s.stderr
    );
    // wipe is signed as destructive: served as read-only, it is drift of a risky tool.
    let Some((s, _)) = attack("flip", &["--on-drift", "warn-read-only"], json!([list(), call("wipe", json!({}))]))
    else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "add"]);
    assert_eq!(s.error(2), NOT_EXPOSED);
}

#[test]
fn guard_blocks_a_widened_input_schema() {
    let Some((s, log)) = attack(
        "widen",
        &[],
        json!([list(), call("add", json!({"a": 1, "b": 2, "c": 3})), call("echo", json!({"text": "ok"}))]),
    ) else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "wipe"]);
    assert_eq!(s.error(2), NOT_EXPOSED);
    assert_eq!(s.text(3), "ok", "the honest tools keep working");
    assert_eq!(log, ["echo"]);
    assert!(s.stderr.contains("blocked `add` [mcp_tool_drift]"), "{}", s.stderr);
}

#[test]
fn guard_blocks_a_flipped_annotation() {
    let Some((s, log)) =
        attack("flip", &[], json!([list(), call("wipe", json!({})), call("echo", json!({"text": "ok"}))]))
    else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "add"]);
    assert_eq!(s.error(2), NOT_EXPOSED);
    assert_eq!(s.text(3), "ok");
    assert_eq!(log, ["echo"]);
    assert!(s.stderr.contains("blocked `wipe` [mcp_tool_drift]"), "{}", s.stderr);
}

#[test]
fn guard_blocks_a_renamed_tool() {
    let Some((s, log)) = attack(
        "rename",
        &[],
        json!([
            list(),
            call("add_numbers", json!({"a": 1, "b": 2})),
            call("add", json!({"a": 1, "b": 2})),
            call("echo", json!({"text": "ok"}))
        ]),
    ) else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "wipe"]);
    assert_eq!(s.error(2), NOT_EXPOSED);
    assert_eq!(s.error(3), NOT_EXPOSED, "add is signed but not served: not callable");
    assert_eq!(s.text(4), "ok", "the honest tools keep working");
    assert_eq!(log, ["echo"]);
    assert!(s.stderr.contains("blocked `add_numbers` [mcp_tool_not_pinned]"), "{}", s.stderr);
}

#[test]
fn guard_blocks_an_added_tool_and_a_call_to_a_hidden_tool() {
    let Some((s, log)) = attack(
        "added",
        &[],
        json!([list(), call("exfiltrate", json!({})), call("secret", json!({})), call("add", json!({"a": 2, "b": 2}))]),
    ) else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "add", "wipe"]);
    assert_eq!(s.error(2), NOT_EXPOSED);
    assert_eq!(s.error(3), NOT_EXPOSED);
    assert_eq!(s.step(3)["error"]["data"], json!({"reason": "mcp_tool_not_exposed", "tool": "secret"}));
    assert_eq!(s.text(4), "4");
    assert_eq!(log, ["add"], "the blocked calls never reached the server");
    assert!(s.stderr.contains("blocked `exfiltrate` [mcp_tool_not_pinned]"), "{}", s.stderr);
}

#[test]
fn guard_refuses_a_list_with_duplicate_names_and_keeps_the_honest_tools() {
    let Some((s, _)) = attack(
        "duplicate",
        &[],
        json!([list(), list(), call("echo", json!({"text": "x"})), call("add", json!({"a": 1, "b": 1}))]),
    ) else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "add", "wipe"]);
    assert_eq!(s.error(2), DUPLICATE);
    assert_eq!(s.step(2)["error"]["data"]["tool"], "echo");
    assert_eq!(s.error(3), NOT_EXPOSED, "neither definition of echo may be called");
    assert_eq!(s.text(4), "2");
}

#[test]
fn guard_judges_a_tool_removed_and_added_back_against_its_pin_again() {
    let Some((s, _)) = attack(
        "readd",
        &[],
        json!([
            list(),
            list(),
            call("echo", json!({"text": "a"})),
            list(),
            call("echo", json!({"text": "a"})),
            call("add", json!({"a": 1, "b": 1}))
        ]),
    ) else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "add", "wipe"]);
    assert_eq!(s.names(2), ["add", "wipe"]);
    assert_eq!(s.error(3), NOT_EXPOSED, "a tool the server stopped listing cannot be called");
    assert_eq!(s.names(4), ["add", "wipe"], "the poisoned echo that came back is judged against its pin");
    assert_eq!(s.error(5), NOT_EXPOSED);
    assert_eq!(s.text(6), "2");
}

#[test]
fn guard_judges_the_new_list_before_the_client_hears_of_list_changed() {
    let Some((s, log)) = attack(
        "rug-pull",
        &[],
        json!([list(), call("add", json!({"a": 1, "b": 1})), {"op": "wait_list_changed"}, call("echo", json!({"text": "a"})), list()]),
    ) else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "add", "wipe"]);
    assert_eq!(s.text(2), "2");
    assert_eq!(s.step(3)["ok"], true, "the client hears of the change: {:?}", s.steps);
    assert_eq!(s.error(4), NOT_EXPOSED, "the poisoned echo was judged before the client could call it");
    assert_eq!(s.names(5), ["add", "wipe"]);
    assert_eq!(log, ["add"]);
}

#[test]
fn guard_refuses_arguments_outside_the_signed_schema() {
    let Some((s, log)) = attack(
        "honest",
        &[],
        json!([
            list(),
            call("echo", json!({"text": 5})),
            call("echo", json!({"text": "x".repeat(101)})),
            call("echo", json!({"text": "hi", "path": "/etc/passwd"})),
            call("echo", json!({})),
            call("echo", json!({"text": "hi"})),
        ]),
    ) else {
        return;
    };
    for n in 2..=5 {
        assert_eq!(s.error(n), ARGUMENTS_INVALID, "step {n}");
    }
    assert_eq!(s.text(6), "hi");
    assert_eq!(log, ["echo"], "only the valid call reached the server");
}

#[test]
fn guard_check_results_replaces_a_result_outside_the_output_schema() {
    let Some((s, _)) = attack(
        "bad-result",
        &["--check-results"],
        json!([list(), call("echo", json!({"text": "a"})), call("add", json!({"a": 1, "b": 1}))]),
    ) else {
        return;
    };
    let result = &s.step(2)["result"];
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("does not match its signed outputSchema") && text.contains("[mcp_result_invalid]"), "{text}");
    assert!(result.get("structuredContent").is_none());
    assert_eq!(s.text(3), "2");
}

#[test]
fn guard_drops_oversized_and_deeply_nested_answers_and_keeps_going() {
    for mode in ["oversized", "deep"] {
        let Some((s, _)) = attack(
            mode,
            &[],
            json!([list(), call("echo", json!({"text": "a"})), call("add", json!({"a": 1, "b": 1}))]),
        ) else {
            return;
        };
        assert_eq!(s.error(2), TOO_LARGE, "{mode}");
        assert_eq!(s.step(2)["error"]["data"]["reason"], "mcp_message_too_large");
        assert_eq!(s.text(3), "2", "{mode}");
    }
}

#[test]
fn guard_answers_for_a_server_that_never_answers() {
    let Some((s, _)) = attack(
        "silent",
        &["--request-timeout", "2"],
        json!([list(), call("echo", json!({"text": "a"})), call("add", json!({"a": 1, "b": 1}))]),
    ) else {
        return;
    };
    assert_eq!(s.error(2), TIMEOUT);
    assert_eq!(s.text(3), "2");
}

/// The guard's memory bound for a hostile server (issue 34: 100 MiB), in KiB.
const MEMORY_BOUND_KIB: u64 = 100 << 10;

#[test]
fn guard_answers_every_request_with_an_error_when_the_server_stops_reading() {
    // 1000 calls at once: more than the pipe and the guard's queue hold. The guard neither
    // grows nor waits: what it cannot queue is answered at once (mcp_server_not_reading), what
    // it queued when the deadline passes (mcp_server_timeout).
    let Some((s, _)) = attack(
        "stops-reading",
        &["--request-timeout", "3"],
        json!([
            list(),
            call("wipe", json!({})),
            {"op": "concurrent", "n": 1000, "name": "echo", "args": {"text": "x".repeat(100)}},
            {"op": "child_peak_rss"},
        ]),
    ) else {
        return;
    };
    assert_eq!(s.text(2), "wiped");
    let codes = s.step(3)["codes"].as_object().unwrap_or_else(|| panic!("{}\n{}", s.step(3), s.stderr));
    let count = |code: i64| codes.get(&code.to_string()).and_then(Value::as_u64).unwrap_or(0);
    assert_eq!(count(NOT_READING) + count(TIMEOUT), 1000, "every call got an error: {codes:?}");
    assert!(count(NOT_READING) > 0 && count(TIMEOUT) > 0, "{codes:?}");
    let kib = s.step(4)["kib"].as_u64().unwrap();
    assert!(kib > 0 && kib < MEMORY_BOUND_KIB, "the guard's peak RSS: {kib} KiB");
    // A thousand blocks in a few seconds: the host's log gets at most 10 lines a second and a
    // count of the rest (the audit log, when asked for, keeps every decision).
    let blocked = s.stderr.lines().filter(|l| l.starts_with("bundle guard: blocked")).count();
    assert!(blocked > 0 && blocked <= 200, "{blocked} block lines on stderr");
    assert!(s.stderr.contains("more warnings and blocks were not shown (at most 10 a second"), "{}", s.stderr);
}

#[test]
fn guard_stays_within_its_memory_bound_when_the_server_floods() {
    // 90 MiB of log notifications, 50 MiB of it in messages over the cap, around one answer.
    let Some((s, _)) = attack(
        "flood",
        &[],
        json!([list(), call("echo", json!({"text": "a"})), call("add", json!({"a": 1, "b": 1})), {"op": "child_peak_rss"}]),
    ) else {
        return;
    };
    assert_eq!(s.text(2), "a", "the answer after the flood arrives");
    assert_eq!(s.text(3), "2");
    let kib = s.step(4)["kib"].as_u64().unwrap();
    assert!(kib > 0 && kib < MEMORY_BOUND_KIB, "the guard's peak RSS: {kib} KiB");
}

#[test]
fn guard_follows_every_page_of_tools_list() {
    let Some((s, _)) = attack("paged", &[], json!([list(), call("wipe", json!({}))])) else {
        return;
    };
    assert_eq!(s.names(1), ["echo", "add", "wipe"]);
    assert_eq!(s.step(1)["pages"], 3);
    assert_eq!(s.text(2), "wiped");
}

/// Raw JSON-RPC lines into `bundle guard`, its exit code, stdout lines and stderr.
fn raw_session(bundle: &Path, command: &[String], lines: &[Value]) -> (i32, Vec<Value>, String) {
    let mut child = crate::support::bin()
        .args(["guard", bundle.to_str().unwrap(), "--key", &key("test.pub"), "--server", "hostile", "--"])
        .args(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    let mut lines_out = stdout.lines();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
        if line.get("id").is_some() {
            match lines_out.next() {
                Some(Ok(answer)) => answers.push(serde_json::from_str(&answer).unwrap()),
                _ => break,
            }
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), answers, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
}

#[test]
fn guard_ends_with_exit_2_and_a_clear_error_when_the_server_dies() {
    if !ready() {
        return;
    }
    let env = Env::new();
    let log = env.path().join("calls.log");
    let bundle = pinned_bundle(&env, "hostile", &["python3", &script("hostile_server.py"), "honest"]);
    let (code, answers, stderr) = raw_session(
        &bundle,
        &hostile("dies", &log),
        &[
            initialize(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wipe", "arguments": {}}}),
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(answers[2]["error"]["code"], -32098, "{answers:?}");
    assert_eq!(answers[2]["error"]["data"]["reason"], "mcp_server_exited");
    assert!(stderr.contains("error[mcp_server_failed]: the MCP server `hostile`"), "{stderr}");
    assert!(stderr.contains("exit status 3") && stderr.contains("hostile server: giving up"), "{stderr}");
}

#[test]
fn guard_refuses_a_bundle_the_gate_refuses_and_never_starts_the_server() {
    let env = Env::new();
    let bundle = env.packed_mailer("mailer", "mailer.bundle");
    let started = env.path().join("started");
    let out = env.run(&[
        "guard",
        bundle.to_str().unwrap(),
        "--key",
        &key("minisign-nopw.pub"),
        "--server",
        "x",
        "--",
        "touch",
        started.to_str().unwrap(),
    ]);
    out.expect_code(1);
    assert!(out.stderr.contains("[untrusted_key]") || out.stderr.contains("rejected"), "{}", out.stderr);
    assert!(!started.exists(), "the server was started");
    // A bundle that passes but pins no such server: exit 2, nothing started.
    let out = env.run(&[
        "guard",
        bundle.to_str().unwrap(),
        "--key",
        &key("test.pub"),
        "--server",
        "x",
        "--",
        "touch",
        started.to_str().unwrap(),
    ]);
    out.expect_code(2);
    assert!(out.stderr.contains("no pins for server `x` (pins/x.mcp.json)"), "{}", out.stderr);
    assert!(!started.exists());
}

#[test]
fn guard_passes_the_honest_tools_of_server_everything_over_stdio() {
    if !ready() || !require_tool("mcp-server-everything") {
        return;
    }
    let env = Env::new();
    let bundle = pinned_bundle(&env, "everything", &["mcp-server-everything", "stdio"]);
    let pinned: Value =
        serde_json::from_str(&std::fs::read_to_string(env.path().join("agent/pins/everything.mcp.json")).unwrap())
            .unwrap();
    let names: Vec<&str> = pinned["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let s = through_guard(
        &bundle,
        "everything",
        &["--check-results"],
        &["mcp-server-everything".to_owned(), "stdio".to_owned()],
        json!([
            list(),
            call("echo", json!({"message": "through the guard"})),
            call("get-sum", json!({"a": 2, "b": 40})),
            call("get-structured-content", json!({"location": "Chicago"})),
            {"op": "call", "name": "trigger-long-running-operation", "args": {"duration": 1, "steps": 3}, "progress": true},
            call("get-sum", json!({"a": "2", "b": 40})),
            {"op": "resources"},
            {"op": "prompts"},
            {"op": "ping"},
        ]),
    );
    assert_eq!(s.names(1), names);
    assert!(names.len() >= 10, "{names:?}");
    assert!(s.text(2).contains("through the guard"), "{}", s.text(2));
    assert!(s.text(3).contains("42"), "{}", s.text(3));
    assert_eq!(s.step(4)["result"]["isError"], false, "{}", s.step(4));
    assert!(s.step(4)["result"]["structuredContent"].is_object());
    assert_eq!(s.step(5)["progress"], 3, "progress notifications pass through: {}", s.step(5));
    assert_eq!(s.error(6), ARGUMENTS_INVALID);
    assert!(s.step(7)["count"].as_u64().unwrap() > 0, "resources pass through");
    assert!(s.step(8)["count"].as_u64().unwrap() > 0, "prompts pass through");
    assert_eq!(s.step(9)["ok"], true);
}

/// `bundle guard BUNDLE --server NAME --upstream UPSTREAM --listen 127.0.0.1:0 ARGS`, stopped
/// when dropped; the endpoint it listens at (the first line of its stderr).
fn guard_over_http(bundle: &Path, server: &str, upstream: &str, args: &[&str]) -> (Stopped, String) {
    let mut guard = Stopped(
        crate::support::bin()
            .args(["guard", bundle.to_str().unwrap(), "--key", &key("test.pub"), "--server", server])
            .args(["--upstream-plain-http", "--upstream", upstream, "--listen", "127.0.0.1:0"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(guard.0.stderr.take().unwrap()).read_line(&mut first).unwrap();
    let url = first.trim().strip_prefix("bundle guard: listening on ").unwrap_or_else(|| panic!("{first}")).to_owned();
    (guard, url)
}

/// Runs the SDK client over streamable HTTP at `url`.
fn sdk_over_http(url: &str, steps: Value) -> Session {
    let out = Command::new("python3")
        .arg(script("guard_client.py"))
        .arg(steps.to_string())
        .args(["--url", url])
        .output()
        .unwrap();
    Session {
        steps: String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn guard_proxies_server_everything_over_streamable_http() {
    if !ready() || !require_tool("mcp-server-everything") {
        return;
    }
    let env = Env::new();
    let bundle = pinned_bundle(&env, "everything", &["mcp-server-everything", "stdio"]);
    let (_server, upstream) = everything_over_http();
    let audit = env.path().join("audit.jsonl");
    let (_guard, url) = guard_over_http(&bundle, "everything", &upstream, &["--audit", audit.to_str().unwrap()]);
    let s = sdk_over_http(
        &url,
        json!([
            list(),
            call("echo", json!({"message": "over http"})),
            call("run_shell", json!({})),
            call("get-sum", json!({"a": "x", "b": 1})),
            {"op": "call", "name": "trigger-long-running-operation", "args": {"duration": 1, "steps": 3}, "progress": true},
        ]),
    );
    assert!(s.names(1).contains(&"echo") && s.names(1).len() >= 10, "{:?}", s.names(1));
    assert_eq!(s.text(2), "Echo: over http");
    assert_eq!(s.error(3), NOT_EXPOSED);
    assert_eq!(s.error(4), ARGUMENTS_INVALID);
    assert_eq!(s.step(5)["progress"], 3, "progress arrives through the SSE stream: {}", s.step(5));
    let audit = std::fs::read_to_string(&audit).unwrap();
    assert!(audit.contains(r#""tool":"run_shell","decision":"block","reason":"mcp_tool_not_exposed""#), "{audit}");
    assert!(!audit.contains("over http"), "no argument values in the audit log");
}

#[test]
fn guard_refuses_a_plain_http_upstream_unless_asked() {
    let env = Env::new();
    let bundle = env.copy("agents/guarded", "guarded");
    env.pack("guarded", "g.bundle").expect_code(0);
    let _ = bundle;
    let out = env.run(&[
        "guard",
        "g.bundle",
        "--key",
        &key("test.pub"),
        "--server",
        "hostile",
        "--upstream",
        "http://127.0.0.1:9/mcp",
        "--listen",
        "127.0.0.1:0",
    ]);
    out.expect_code(2);
    assert!(out.stderr.contains("needs --upstream-plain-http"), "{}", out.stderr);
}

#[test]
fn guard_over_streamable_http_judges_the_new_list_before_the_client_hears_of_list_changed() {
    if !ready() {
        return;
    }
    let env = Env::new();
    let log = env.path().join("calls.log");
    let bundle = pinned_bundle(&env, "hostile", &["python3", &script("hostile_server.py"), "honest"]);
    let (_server, upstream) = hostile_over_http("rug-pull", Some(&log));
    let (_guard, url) = guard_over_http(&bundle, "hostile", &upstream, &[]);
    let s = sdk_over_http(
        &url,
        json!([list(), call("add", json!({"a": 1, "b": 1})), {"op": "wait_list_changed"}, call("echo", json!({"text": "a"})), list(), call("add", json!({"a": 2, "b": 2}))]),
    );
    assert_eq!(s.names(1), ["echo", "add", "wipe"]);
    assert_eq!(s.text(2), "2");
    assert_eq!(s.step(3)["ok"], true, "the client hears of the change: {:?}\n{}", s.steps, s.stderr);
    assert_eq!(s.error(4), NOT_EXPOSED, "the poisoned echo was judged before the client could call it");
    assert_eq!(s.names(5), ["add", "wipe"]);
    assert_eq!(s.text(6), "4", "the honest tools still work");
    assert_eq!(calls(&log), ["add", "add"]);
}

#[test]
fn guard_stopped_by_a_signal_stops_its_server_first() {
    // The server runs in a process group of its own, so a signal meant for the guard (an MCP
    // host's SIGTERM, a terminal's SIGINT or SIGHUP) does not reach it: the guard must stop it.
    // `stops-reading` keeps the server alive after its stdin closes, so a guard that just dies
    // would leave it running.
    use std::os::unix::process::ExitStatusExt;
    if !ready() {
        return;
    }
    let env = Env::new();
    let log = env.path().join("calls.log");
    let bundle = pinned_bundle(&env, "hostile", &["python3", &script("hostile_server.py"), "honest"]);
    for (number, name) in [(15, "TERM"), (2, "INT"), (1, "HUP")] {
        let mut guard = crate::support::bin()
            .args(["guard", bundle.to_str().unwrap(), "--key", &key("test.pub"), "--server", "hostile", "--"])
            .args(hostile("stops-reading", &log))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = guard.stdin.take().unwrap();
        let mut answers = BufReader::new(guard.stdout.take().unwrap()).lines();
        for line in [
            initialize(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wipe", "arguments": {}}}),
        ] {
            writeln!(stdin, "{line}").unwrap();
            answers.next().expect("an answer").unwrap();
        }
        let children = std::fs::read_dir(format!("/proc/{}/task", guard.id()))
            .unwrap()
            .flat_map(|task| {
                std::fs::read_to_string(task.unwrap().path().join("children"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        assert_eq!(children.len(), 1, "the guard's children: {children:?}");
        let server = Path::new("/proc").join(&children[0]);
        assert!(server.exists());
        let sent = Command::new("kill").args(["-s", name, &guard.id().to_string()]).status().unwrap();
        assert!(sent.success());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let status = loop {
            if let Some(status) = guard.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > until {
                let _ = guard.kill();
                panic!("the guard did not end within 10 s of SIG{name}");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut guard.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(!server.exists(), "the server ({}) still runs after the guard got SIG{name}", server.display());
        assert_eq!(status.signal(), Some(number), "it ends as SIG{name} would have ended it: {status:?}\n{stderr}");
        assert!(
            stderr.contains(&format!("the guard was stopped by SIG{name}; the MCP server `hostile` was stopped first")),
            "{stderr}"
        );
    }
}
