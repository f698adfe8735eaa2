//! Signed A2A agent cards: `bundle agentcard` writes them, `bundle verify --agent-card` checks
//! them offline. Both directions are checked with the real A2A Python SDK (`a2a-sdk` from
//! PyPI, testdata/a2a/card.py): its verifier accepts our cards, and we accept the cards its
//! signer makes, with non-ASCII text and numbers in every position a card holds them.

use std::path::Path;
use std::process::Command;

use crate::snapshot::{in_env, shown};
use crate::support::{Env, copy_dir, key, require_python_module, testdata};

const URL: &str = "https://agents.example/mäiler";

/// The mailer with two skills (one with non-ASCII text), packed.
fn packed(env: &Env) -> std::path::PathBuf {
    let agent = env.copy("agents/mailer", "mailer");
    for s in ["pdf-report", "reply-drafting"] {
        copy_dir(&testdata(&format!("skills/{s}")), &agent.join("skills").join(s));
    }
    env.pack("mailer", "m.agent.bundle").expect_code(0);
    env.path().join("m.agent.bundle")
}

fn card_py(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new("python3").arg(testdata("a2a/card.py")).args(args).current_dir(dir).output().expect("python3")
}

#[test]
fn a2a_sdk_verifies_our_signed_card() {
    if !require_python_module("a2a.utils.signing") {
        return;
    }
    let env = Env::new();
    packed(&env);
    env.run(&[
        "agentcard",
        "m.agent.bundle",
        "--url",
        URL,
        "--name",
        "Mäiler ☃ 日本語",
        "--description",
        "Sends mail — 送信, \"quoted\" \\ and \u{2028}",
        "--key",
        &key("test.key"),
        "-o",
        "card.json",
    ])
    .expect_code(0);
    let out = card_py(&["verify", "card.json", &key("test.pub")], env.path());
    assert!(out.status.success(), "a2a-sdk refused our card: {}", String::from_utf8_lossy(&out.stderr));
    // A card changed after signing is refused by the SDK too (so the check above can fail).
    let text = std::fs::read_to_string(env.path().join("card.json")).unwrap();
    std::fs::write(env.path().join("changed.json"), text.replace("送信", "送信!")).unwrap();
    assert!(!card_py(&["verify", "changed.json", &key("test.pub")], env.path()).status.success());
    env.run(&["verify", "--agent-card", "changed.json", "--key", &key("test.pub")]).expect_code(1);
}

#[test]
fn we_accept_a_card_the_a2a_sdk_signed_with_non_ascii_text_and_numbers_everywhere() {
    if !require_python_module("a2a.utils.signing") {
        return;
    }
    let env = Env::new();
    let out = card_py(&["sign", "sdk.json", "sdk.pub"], env.path());
    assert!(out.status.success(), "card.py sign: {}", String::from_utf8_lossy(&out.stderr));
    let run = env.run(&["verify", "--agent-card", "sdk.json", "--key", "sdk.pub", "--format", "json"]);
    run.expect_code(0);
    assert_eq!(run.json()["signatures"][0]["status"], "valid");
    // An integer beyond 2^53 written as an integer is the double it rounds to, for both.
    let text = std::fs::read_to_string(env.path().join("sdk.json")).unwrap();
    assert!(text.contains("9007199254740992.0"), "{text}");
    std::fs::write(env.path().join("int.json"), text.replace("9007199254740992.0", "9007199254740993")).unwrap();
    env.run(&["verify", "--agent-card", "int.json", "--key", "sdk.pub"]).expect_code(0);
    assert!(card_py(&["verify", "int.json", "sdk.pub"], env.path()).status.success());
    // One digit of one number changed: both refuse.
    std::fs::write(env.path().join("num.json"), text.replace("-3e+30", "-4e+30")).unwrap();
    env.run(&["verify", "--agent-card", "num.json", "--key", "sdk.pub"]).expect_code(1);
    assert!(!card_py(&["verify", "num.json", "sdk.pub"], env.path()).status.success());
}

#[test]
fn a_card_names_its_bundle_and_is_refused_for_another() {
    let env = Env::new();
    let bundle = packed(&env);
    env.run(&["agentcard", "m.agent.bundle", "--url", URL, "--key", &key("test.key"), "-o", "card.json"])
        .expect_code(0);
    let card: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.path().join("card.json")).unwrap()).unwrap();
    let params = &card["capabilities"]["extensions"][0]["params"];
    let sha = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(std::fs::read(&bundle).unwrap()))
    };
    assert_eq!(params["bundle_sha256"], sha);
    assert_eq!(params["tools"].as_array().unwrap().len(), 4);
    assert_eq!(card["skills"].as_array().unwrap().len(), 6, "4 tools and 2 skills");
    insta::assert_snapshot!(shown(
        &mut in_env(&env, &["verify", "--agent-card", "card.json", "m.agent.bundle", "--key", &key("test.pub")]),
        &[env.path()]
    ));
    // Another release of the agent: the card does not describe it.
    let md = env.path().join("mailer/skills/pdf-report/SKILL.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, text.replace("# Quarterly", "# The quarterly")).unwrap();
    env.pack("mailer", "m2.agent.bundle").expect_code(0);
    insta::assert_snapshot!(shown(
        &mut in_env(&env, &["verify", "--agent-card", "card.json", "m2.agent.bundle", "--key", &key("test.pub")]),
        &[env.path()]
    ));
}

#[test]
fn unsigned_untrusted_and_malformed_cards_have_their_codes() {
    let env = Env::new();
    packed(&env);
    env.run(&["agentcard", "mailer", "--url", URL, "--key", &key("test.key"), "-o", "card.json"]).expect_code(0);
    let text = std::fs::read_to_string(env.path().join("card.json")).unwrap();
    let mut card: serde_json::Value = serde_json::from_str(&text).unwrap();
    let code = |name: &str, body: &str, pubkey: &str| {
        std::fs::write(env.path().join(name), body).unwrap();
        let run = env.run(&["verify", "--agent-card", name, "--key", pubkey, "--format", "json"]);
        run.expect_code(if run.json()["ok"] == true { 0 } else { 1 });
        run.json()["code"].as_str().map(str::to_owned)
    };
    assert_eq!(code("ok.json", &text, &key("test.pub")), None, "a card made from the agent folder verifies");
    assert_eq!(code("other.json", &text, &key("minisign-nopw.pub")).as_deref(), Some("card_untrusted_key"));
    let signatures = card["signatures"].take();
    assert_eq!(code("unsigned.json", &card.to_string(), &key("test.pub")).as_deref(), Some("card_unsigned"));
    card["signatures"] = serde_json::json!([{"protected": "not base64!", "signature": "AA"}]);
    assert_eq!(code("garbled.json", &card.to_string(), &key("test.pub")).as_deref(), Some("card_signature_malformed"));
    card["signatures"] = signatures;
    card["version"] = "9.9.9".into();
    assert_eq!(code("changed.json", &card.to_string(), &key("test.pub")).as_deref(), Some("card_bad_signature"));
    assert_eq!(code("array.json", "[]", &key("test.pub")).as_deref(), Some("card_malformed"));
}
