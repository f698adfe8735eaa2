//! `bundle export`: OpenAI, RAP and MCP documents from an agent folder or a bundle, with every
//! `schema:` reference resolved, and round trips through import.

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, key, run, testdata};

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
    assert_run_snapshot!(out);
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

/// A temp dir with the mailer example as `mailer/` and packed, signed with the test key, as
/// `mailer.agent.bundle`.
fn packed_mailer(extra: &[&str]) -> Env {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let k = key("test.key");
    let mut args = vec!["pack", "-q", "mailer", "--key", &k, "-o", "mailer.agent.bundle"];
    args.extend_from_slice(extra);
    env.run(&args).expect_code(0);
    env
}

fn codes(run: &crate::support::Run) -> Vec<String> {
    run.json()["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn export_from_a_packed_bundle_matches_the_folder_for_openai_rap_and_mcp() {
    let env = packed_mailer(&[]);
    let public = key("test.pub");
    for (to, extra) in [
        ("openai", &[][..]),
        ("mcp", &[][..]),
        ("rap", &["--endpoint", "https://tools.example.com/invoke", "--name", "mailer-tools"][..]),
    ] {
        let export = |input: &str, more: &[&str]| {
            let mut args = vec!["export", "--to", to, input];
            args.extend_from_slice(extra);
            args.extend_from_slice(more);
            env.run(&args)
        };
        let folder = export("mailer", &["--format", "json"]);
        folder.expect_code(0);
        let verified = export("mailer.agent.bundle", &["--key", &public, "--format", "json"]);
        verified.expect_code(0);
        let unchecked = export("mailer.agent.bundle", &["--format", "json"]);
        unchecked.expect_code(0);
        let document = &folder.json()["document"];
        assert!(document.is_object() || document.is_array(), "{to}: {document}");
        assert!(no_schema_refs(document), "{to}: {document}");
        assert_eq!(&verified.json()["document"], document, "{to}: bundle with --key");
        assert_eq!(&unchecked.json()["document"], document, "{to}: bundle without --key");
        // The same warnings as from the folder; without --key, one more saying so.
        assert_eq!(codes(&verified), codes(&folder), "{to}");
        assert_eq!(codes(&unchecked)[0], "unchecked_signature", "{to}");
        assert_eq!(codes(&unchecked)[1..], codes(&folder)[..], "{to}");

        // The document a user pipes somewhere is the same bytes.
        let folder_text = export("mailer", &[]);
        let bundle_text = export("mailer.agent.bundle", &["--key", &public]);
        bundle_text.expect_code(0);
        assert_eq!(bundle_text.stdout, folder_text.stdout, "{to}");
    }
}

#[test]
fn export_without_key_warns_that_the_signature_was_not_checked() {
    let env = packed_mailer(&[]);
    let out = env.run(&["export", "--to", "mcp", "mailer.agent.bundle", "-o", "tools-list.json"]);
    out.expect_code(0);
    assert_run_snapshot!(out);
    assert!(env.path().join("tools-list.json").exists());

    let out = env.run(&["export", "--to", "mcp", "mailer.agent.bundle", "--key", &key("test.pub")]);
    out.expect_code(0);
    assert_run_snapshot!(out);
}

#[test]
fn export_with_key_rejects_a_bundle_signed_by_another_key_and_writes_nothing() {
    let env = packed_mailer(&[]);
    let other = key("minisign-nopw.pub");
    let out = env.run(&["export", "--to", "openai", "mailer.agent.bundle", "--key", &other, "-o", "out.json"]);
    out.expect_code(1);
    assert_run_snapshot!(out);
    assert!(!env.path().join("out.json").exists(), "nothing is exported from a rejected bundle");
    let out = env.run(&["export", "--to", "openai", "mailer.agent.bundle", "--key", &other, "--format", "json"]);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "untrusted_key");
    assert!(out.json().get("document").is_none(), "{}", out.stdout);
    // Several keys: any trusted one will do, as with verify.
    env.run(&["export", "--to", "openai", "mailer.agent.bundle", "--key", &other, "--key", &key("test.pub")])
        .expect_code(0);
}

#[test]
fn export_with_key_verifies_fully_including_expiry() {
    let env = packed_mailer(&["--expires", "2030-01-01T00:00:00Z"]);
    let public = key("test.pub");
    let args = ["export", "--to", "openai", "mailer.agent.bundle", "--key", &public, "--format", "json"];
    let out = env.run(&[&args[..], &["--now", "2029-12-31T00:00:00Z"]].concat());
    out.expect_code(0);
    let out = env.run(&[&args[..], &["--now", "2030-01-02T00:00:00Z"]].concat());
    out.expect_code(1);
    assert_eq!(out.json()["code"], "expired");
}

#[test]
fn export_with_key_rejects_a_tampered_manifest_that_only_the_signature_catches() {
    // prompts/system.md replaced and its digest updated in the manifest, the old signature kept:
    // every digest matches, only the signature check can tell.
    let bundle = testdata("hostile/bad_signature-manifest-tampered.agent.bundle").display().to_string();
    let out = run(&["export", "--to", "mcp", &bundle, "--key", &key("test.pub"), "--format", "json"]);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "bad_signature");
    // Without --key it is exported, and the warning is the only sign of it.
    let out = run(&["export", "--to", "mcp", &bundle, "--format", "json"]);
    out.expect_code(0);
    assert_eq!(codes(&out), ["unchecked_signature"]);
}

#[test]
fn export_from_a_bundle_with_a_wrong_digest_is_rejected_with_or_without_key() {
    let bundle = testdata("hostile/digest_mismatch-prompt-replaced.agent.bundle").display().to_string();
    let verify = run(&["verify", &bundle, "--key", &key("test.pub"), "--format", "json"]);
    verify.expect_code(1);
    for more in [&[][..], &["--key", &key("test.pub")][..]] {
        let out = run(&[&["export", "--to", "openai", &bundle, "--format", "json"][..], more].concat());
        out.expect_code(1);
        assert_eq!(out.json()["code"], "digest_mismatch", "{more:?}");
        assert_eq!(out.json()["code"], verify.json()["code"], "the same verdict as bundle verify");
        let human = run(&[&["export", "--to", "openai", &bundle][..], more].concat());
        human.expect_code(1);
        assert!(human.stderr.contains("[digest_mismatch]"), "{}", human.stderr);
        assert!(human.stdout.is_empty(), "{}", human.stdout);
    }
}

#[test]
fn export_key_on_an_agent_folder_is_a_usage_error() {
    let out =
        run(&["export", "--to", "openai", &testdata("agents/mailer").display().to_string(), "--key", &key("test.pub")]);
    out.expect_code(2);
    assert_run_snapshot!(out);
}
