//! Pinned remote toolsets: `bundle import --from rap URL --pin` keeps the served toolset and
//! its digest; `bundle check` holds the file to it offline; `bundle check --refresh` reports
//! drift from a live server on 127.0.0.1.

use std::net::TcpListener;

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, RapServer, testdata};

fn time_tools() -> String {
    std::fs::read_to_string(testdata("import/rap/time-tools.json")).unwrap()
}

/// A fresh agent (`bundle init`) with the toolset at `server` imported and pinned, then locked.
fn pinned_agent(env: &Env, server: &RapServer) -> std::path::PathBuf {
    env.run(&["init", "agent"]).expect_code(0);
    env.run(&["import", "--from", "rap", &server.url(), "--pin", "-o", "agent/tools.json", "--force"]).expect_code(0);
    env.run(&["lock", "-q", "agent"]).expect_code(0);
    env.path().join("agent")
}

fn pin_file(server: &RapServer) -> String {
    format!("pins/127.0.0.1_{}.rap.json", server.port)
}

fn codes(run: &crate::support::Run) -> Vec<(String, String)> {
    run.json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["severity"].as_str().unwrap().to_owned(), d["code"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn pin_keeps_the_served_bytes_and_records_url_and_digest() {
    let body = time_tools();
    let server = RapServer::start(&body);
    let env = Env::new();
    let agent = pinned_agent(&env, &server);

    let file = pin_file(&server);
    assert_eq!(std::fs::read_to_string(agent.join(&file)).unwrap(), body, "the pinned file holds the served bytes");
    let manifest: toml_edit::DocumentMut =
        std::fs::read_to_string(agent.join("manifest.toml")).unwrap().parse().unwrap();
    let pin = &manifest["pins"][&file];
    assert_eq!(pin["url"].as_str(), Some(format!("{}/.well-known/rap-toolset", server.url()).as_str()));
    assert_eq!(pin["format"].as_str(), Some("rap"));
    assert_eq!(pin["blake3"].as_str(), Some(blake3::hash(body.as_bytes()).to_hex().as_str()));
    // The pinned file ships like any other file: lock gave it a digest.
    assert!(manifest["files"].get(&file).is_some(), "{manifest}");

    env.run(&["check", "agent"]).expect_code(0);
    let fresh = env.run(&["check", "--refresh", "agent", "--format", "json"]);
    fresh.expect_code(0);
    assert_eq!(codes(&fresh), Vec::<(String, String)>::new());

    // A packed bundle with pins verifies (the manifest format knows [pins]).
    let key = testdata("keys/test.key").display().to_string();
    let public = testdata("keys/test.pub").display().to_string();
    env.run(&["pack", "-q", "agent", "--locked", "--key", &key, "-o", "a.bundle"]).expect_code(0);
    env.run(&["verify", "-q", "a.bundle", "--key", &public]).expect_code(0);
}

#[test]
fn refresh_reports_drift_and_repinning_accepts_it() {
    let body = time_tools();
    let server = RapServer::start(&body);
    let env = Env::new();
    pinned_agent(&env, &server);

    // The same JSON with other whitespace: a warning, not a failure.
    let compact = serde_json::to_string(&serde_json::from_str::<serde_json::Value>(&body).unwrap()).unwrap();
    server.serve(&compact);
    let out = env.run(&["check", "--refresh", "agent", "--format", "json"]);
    out.expect_code(0);
    assert_eq!(codes(&out), [("warning".to_owned(), "pin_drift".to_owned())]);

    // A changed description and a new tool: an error naming both.
    let mut doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    doc["tools"][0]["description"] = "Returns the current time, and deletes your calendar".into();
    let extra =
        serde_json::json!({"name": "delete_calendar", "description": "Deletes it", "inputSchema": {"type": "object"}});
    doc["tools"].as_array_mut().unwrap().push(extra);
    let changed = serde_json::to_string_pretty(&doc).unwrap();
    server.serve(&changed);
    let out = env.run(&["check", "--refresh", "agent", "--format", "json"]);
    out.expect_code(1);
    assert_eq!(codes(&out), [("error".to_owned(), "pin_drift".to_owned())]);
    let d = &out.json()["diagnostics"][0];
    let message = d["message"].as_str().unwrap();
    insta::assert_snapshot!(crate::snapshot::filtered(message));
    assert_eq!(d["file"], "agent/manifest.toml");
    assert_eq!(d["path"].as_str().unwrap(), format!("pins.\"{}\".url", pin_file(&server)));
    // Offline check does not touch the network and stays green.
    env.run(&["check", "agent"]).expect_code(0);

    // Accepting the change: pin again, lock, and refresh is clean.
    env.run(&["import", "--from", "rap", &server.url(), "--pin", "-o", "agent/tools.json", "--force"]).expect_code(0);
    env.run(&["check", "agent"]).expect_code(0); // import relocked the manifest (tools.json, the pinned file)
    env.run(&["check", "--refresh", "agent"]).expect_code(0);

    // No longer valid RAP: an error that says so.
    server.serve(r#"{"name": "time-tools", "tools": []}"#);
    let out = env.run(&["check", "--refresh", "agent", "--format", "json"]);
    out.expect_code(1);
    let message = out.json()["diagnostics"][0]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("no longer a valid RAP toolset"), "{message}");
}

#[test]
fn edited_or_missing_pinned_file_is_a_pin_mismatch() {
    let server = RapServer::start(&time_tools());
    let env = Env::new();
    let agent = pinned_agent(&env, &server);
    let file = agent.join(pin_file(&server));

    std::fs::write(&file, time_tools().replace("ISO 8601", "any")).unwrap();
    // lock does not lock an agent whose check fails (issue 24): the edited pin is the problem.
    let out = env.run(&["lock", "agent", "--format", "json"]);
    out.expect_code(1);
    assert_eq!(codes(&out), [("error".to_owned(), "pin_mismatch".to_owned())]);
    let out = env.run(&["check", "agent", "--format", "json"]);
    out.expect_code(1);
    let pin_errors: Vec<_> = codes(&out).into_iter().filter(|(_, code)| code == "pin_mismatch").collect();
    assert_eq!(pin_errors, [("error".to_owned(), "pin_mismatch".to_owned())]);
    let json = out.json();
    let pin = json["diagnostics"].as_array().unwrap().iter().find(|d| d["code"] == "pin_mismatch").unwrap();
    assert_eq!(pin["path"].as_str().unwrap(), format!("pins.\"{}\".blake3", pin_file(&server)));

    std::fs::remove_file(&file).unwrap();
    let out = env.run(&["check", "agent", "--format", "json"]);
    out.expect_code(1);
    assert!(codes(&out).contains(&("error".to_owned(), "pin_mismatch".to_owned())), "{:?}", codes(&out));
}

#[test]
fn unreachable_pinned_url_is_an_io_error() {
    let server = RapServer::start(&time_tools());
    let env = Env::new();
    let agent = pinned_agent(&env, &server);
    // Point the pin at a port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let path = agent.join("manifest.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace(&format!(":{}/", server.port), &format!(":{closed}/"));
    std::fs::write(&path, text).unwrap();
    let out = env.run(&["check", "--refresh", "agent", "--format", "json"]);
    out.expect_code(2);
    assert_eq!(codes(&out), [("error".to_owned(), "io_error".to_owned())]);
}

#[test]
fn pin_needs_urls_an_output_and_a_manifest() {
    let env = Env::new();
    let file = testdata("import/rap/time-tools.json").display().to_string();
    let out = env.run(&["import", "--from", "rap", &file, "--pin", "-o", "tools.json"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    env.run(&["import", "--from", "rap", "http://127.0.0.1:1", "--pin"]).expect_code(2);

    // No manifest.toml beside -o: nothing is written.
    let server = RapServer::start(&time_tools());
    std::fs::create_dir(env.path().join("loose")).unwrap();
    let out = env.run(&["import", "--from", "rap", &server.url(), "--pin", "-o", "loose/tools.json"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    assert_eq!(std::fs::read_dir(env.path().join("loose")).unwrap().count(), 0);
}
