//! A repository of many agents: `agents/` (at any depth), `baselines/`, `dist/`; commands
//! that take several agents or bundles at once.

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, key};

/// A repository with three agents, one of them in a grouping folder.
fn repo() -> Env {
    let env = Env::new();
    env.copy("agents/mailer", "agents/mailer");
    env.copy("agents/minimal", "agents/kb");
    env.copy("agents/base", "agents/team-a/base");
    env
}

fn dirs(json: &serde_json::Value) -> Vec<String> {
    json["agents"].as_array().unwrap().iter().map(|a| a["dir"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_folder_of_agent_folders_means_all_of_them_at_any_depth_in_sorted_order() {
    let env = repo();
    let all = ["agents/kb", "agents/mailer", "agents/team-a/base"];
    for path in ["agents", "agents/", "."] {
        let out = env.run(&["check", path, "--format", "json"]);
        out.expect_code(0);
        assert_eq!(dirs(&out.json()), all, "check {path}");
    }
    let out = env.run(&["check", "agents/team-a", "--format", "json"]);
    assert_eq!(dirs(&out.json()), ["agents/team-a/base"]);
    let out = env.run(&["lock", "agents", "--format", "json"]);
    out.expect_code(0);
    assert_eq!(dirs(&out.json()), all);
}

#[test]
fn the_agent_search_skips_hidden_and_linked_folders_and_reports_an_empty_agent() {
    let env = repo();
    env.copy("agents/minimal", "agents/.trash/old");
    env.copy("agents/minimal", "agents/target/debug/x");
    std::fs::write(env.path().join("agents/target/CACHEDIR.TAG"), "Signature: 8a477f597d28d172789f06886806bc55")
        .unwrap();
    env.copy("agents/minimal", "agents/team-a/node_modules/x");
    std::os::unix::fs::symlink(env.path().join("agents/mailer"), env.path().join("agents/team-a/link")).unwrap();
    let out = env.run(&["check", "agents", "--format", "json"]);
    assert_eq!(dirs(&out.json()), ["agents/kb", "agents/mailer", "agents/team-a/base"]);
    // A folder right in agents/ without its files is still an agent: check says what it lacks.
    std::fs::create_dir(env.path().join("agents/new")).unwrap();
    let out = env.run(&["check", "agents", "--format", "json"]);
    out.expect_code(1);
    assert!(dirs(&out.json()).contains(&"agents/new".to_owned()));
    assert_eq!(out.json()["diagnostics"][0]["code"], "missing_file");
    let empty = Env::new();
    std::fs::create_dir(empty.path().join("nothing")).unwrap();
    let out = empty.run(&["check", "nothing"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}

#[test]
fn export_of_a_folder_of_agents_writes_one_document_per_agent() {
    let env = repo();
    let out = env.run(&["export", "--to", "openai", "agents"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    let out = env.run(&["export", "--to", "openai", "agents", "-o", "dist/openai", "--format", "json"]);
    out.expect_code(0);
    let json = out.json();
    let outputs: Vec<&str> =
        json["results"].as_array().unwrap().iter().map(|e| e["output"].as_str().unwrap()).collect();
    assert_eq!(
        outputs,
        ["dist/openai/kb.openai.json", "dist/openai/mailer.openai.json", "dist/openai/base.openai.json"]
    );
    let mailer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.path().join("dist/openai/mailer.openai.json")).unwrap())
            .unwrap();
    let single = env.run(&["export", "--to", "openai", "agents/mailer"]);
    assert_eq!(mailer, single.json(), "the same document as exporting the agent alone");
    // One agent under agents/: `.` exports it as before.
    let one = Env::new();
    one.copy("agents/mailer", "agents/mailer");
    let out = one.run(&["export", "--to", "openai", "."]);
    out.expect_code(0);
    assert_eq!(out.json(), mailer);
}

#[test]
fn pack_takes_several_agents_into_one_output_folder_it_creates() {
    let env = repo();
    let out = env.run(&["pack", "agents", "--key", &key("test.key"), "--locked", "-o", "dist", "--format", "json"]);
    out.expect_code(0);
    let json = out.json();
    let bundles: Vec<&str> =
        json["results"].as_array().unwrap().iter().map(|r| r["bundle"].as_str().unwrap()).collect();
    assert_eq!(bundles.len(), 3, "{json}");
    for b in &bundles {
        assert!(b.starts_with("dist/") && b.ends_with(".agent.bundle"), "{b}");
        assert!(env.path().join(b).is_file(), "{b}");
    }
    // Folders and agent folders mixed; one agent that fails is reported and the others packed.
    crate::support::edit_tools(&env.path().join("agents/kb"), |doc| doc["tools"] = "nope".into());
    std::fs::remove_dir_all(env.path().join("dist")).unwrap();
    let out = env.run(&["pack", "agents/kb", "agents/mailer", "--key", &key("test.key"), "-o", "dist/"]);
    out.expect_code(1);
    assert_run_snapshot!(out);
    assert_eq!(std::fs::read_dir(env.path().join("dist")).unwrap().count(), 1);
    // One agent keeps the single document; `-o` ending in / is a folder.
    let out = env.run(&["pack", "agents/mailer", "--key", &key("test.key"), "-o", "one/", "--format", "json"]);
    out.expect_code(0);
    assert!(out.json()["bundle"].as_str().unwrap().starts_with("one/mailer-"), "{}", out.stdout);
}

/// The three agents packed into dist/; returns the bundle paths (relative to the repo).
fn packed(env: &Env) -> Vec<String> {
    let out = env.run(&["pack", "agents", "--key", &key("test.key"), "-o", "dist", "--format", "json"]);
    out.expect_code(0);
    out.json()["results"].as_array().unwrap().iter().map(|r| r["bundle"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn verify_and_inspect_take_several_bundles_and_report_each() {
    let env = repo();
    let bundles = packed(&env);
    let pubkey = key("test.pub");
    let mut args: Vec<&str> = vec!["verify", "--key", &pubkey];
    args.extend(bundles.iter().map(String::as_str));
    let out = env.run(&args);
    out.expect_code(0);
    assert_run_snapshot!(out);

    // One tampered bundle among good ones: each is reported, exit 1.
    std::fs::write(env.path().join("dist/bad.agent.bundle"), b"not a bundle").unwrap();
    args.insert(3, "dist/bad.agent.bundle");
    args.extend(["--format", "json"]);
    let out = env.run(&args);
    out.expect_code(1);
    let json = out.json();
    assert_eq!(json["ok"], false);
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0]["bundle"], "dist/bad.agent.bundle");
    assert_eq!(results[0]["ok"], false);
    assert!(results[0]["code"].is_string(), "{json}");
    assert!(results[1..].iter().all(|r| r["ok"] == true), "{json}");
    // A missing one is an I/O error (exit 2), and still every other bundle is judged.
    let mut missing = args.clone();
    missing.insert(3, "dist/missing.agent.bundle");
    let out = env.run(&missing);
    out.expect_code(2);
    let json = out.json();
    assert_eq!(json["results"][0]["code"], "io_error");
    assert_eq!(json["results"].as_array().unwrap().len(), 5);
    // The single-bundle document is unchanged.
    let out = env.run(&["verify", &bundles[0], "--key", &pubkey, "--format", "json"]);
    assert_eq!(out.json()["ok"], true);
    assert!(out.json().get("results").is_none());

    let mut args: Vec<&str> = vec!["inspect", "--format", "json"];
    args.extend(bundles.iter().map(String::as_str));
    let out = env.run(&args);
    out.expect_code(0);
    let json = out.json();
    let names: Vec<&str> =
        json["results"].as_array().unwrap().iter().filter_map(|r| r["agent"]["name"].as_str()).collect();
    assert_eq!(names, ["minimal", "mailer", "base"]);
    let mut args: Vec<&str> = vec!["inspect", "dist/bad.agent.bundle"];
    args.extend(bundles.iter().map(String::as_str));
    let out = env.run(&args);
    out.expect_code(1);
    assert_eq!(out.stdout.matches("bundle     dist/").count(), 3, "{}", out.stdout);
}

#[test]
fn verify_baseline_dir_picks_each_agents_baseline_and_names_a_missing_one() {
    let env = repo();
    let bundles = packed(&env);
    env.run(&["baseline", "snapshot", "agents/mailer"]).expect_code(0);
    env.run(&["baseline", "snapshot", "agents/kb"]).expect_code(0);
    let pubkey = key("test.pub");
    let mailer = bundles.iter().find(|b| b.contains("mailer")).unwrap();
    let out = env.run(&["verify", mailer, "--key", &pubkey, "--baseline", "baselines", "--format", "json"]);
    out.expect_code(0);
    assert_eq!(out.json()["baseline"]["file"], "baselines/mailer.toml");
    // The drifted release is stopped by its own agent's baseline.
    crate::support::edit_tools(&env.path().join("agents/mailer"), |doc| {
        crate::support::tool(doc, "mail.smtp_send")["transport"]["url"] = "https://relay.example/{mailbox}/send".into();
    });
    env.run(&["pack", "agents/mailer", "--key", &key("test.key"), "-o", "drifted.agent.bundle"]).expect_code(0);
    let out =
        env.run(&["verify", "drifted.agent.bundle", "--key", &pubkey, "--baseline", "baselines", "--format", "json"]);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "contract_drift");
    // An agent without a baseline: exit 2, naming the file looked for.
    let base = bundles.iter().find(|b| b.contains("base")).unwrap();
    let out = env.run(&["verify", base, "--key", &pubkey, "--baseline", "baselines"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    let out = env.run(&["verify", base, "--key", &pubkey, "--baseline", "baselines", "--state", "state.json"]);
    out.expect_code(2);
    assert!(
        !std::fs::read_to_string(env.path().join("state.json")).unwrap_or_default().contains("base"),
        "not recorded"
    );
}

/// Issue 23 item 12: two agents with the same name and version are refused before anything is
/// written (no bundle, no `dist/`, no manifest locked), naming both folders.
#[test]
fn pack_refuses_two_agents_that_share_a_bundle_name() {
    let env = Env::new();
    env.copy("agents/mailer", "agents/a/mailer");
    let stale = env.copy("agents/mailer", "agents/b/mailer");
    env.copy("agents/minimal", "agents/a/kb");
    crate::support::edit_tools(&stale, |doc| doc["tools"][0]["description"] = serde_json::json!("Stale now."));
    let manifest = std::fs::read(stale.join("manifest.toml")).unwrap();
    let out = env.run(&["pack", "agents", "--key", &key("test.key"), "-o", "dist", "--format", "json"]);
    out.expect_code(2);
    let json = out.json();
    assert_eq!(json["ok"], false);
    assert_eq!(
        json["message"],
        "agents/a/mailer and agents/b/mailer are both mailer 1.0.0: both would be packed to \
         dist/mailer-1.0.0.agent.bundle; nothing was written: rename one agent or bump [agent] version in one"
    );
    assert!(!env.path().join("dist").exists(), "something was written before the clash was found");
    assert_eq!(std::fs::read(stale.join("manifest.toml")).unwrap(), manifest, "an agent was locked");
    let human = env.run(&["pack", "agents", "--key", &key("test.key")]);
    human.expect_code(2);
    let bundles =
        std::fs::read_dir(env.path()).unwrap().flatten().filter(|e| e.path().extension() == Some("bundle".as_ref()));
    assert_eq!(bundles.count(), 0, "a bundle was written before the clash was found");
}
