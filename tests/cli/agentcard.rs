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

/// Makes a P-256 key pair with the binary (`keygen --kind p256`): `<name>.key`, `<name>.pub`.
fn p256_key(env: &Env, name: &str) {
    env.run(&["keygen", "--kind", "p256", name]).expect_code(0);
}

#[test]
fn a2a_sdk_verifies_our_es256_card_signed_with_a_p256_key() {
    if !require_python_module("a2a.utils.signing") {
        return;
    }
    let env = Env::new();
    packed(&env);
    p256_key(&env, "card");
    let made = env.run(&[
        "agentcard",
        "m.agent.bundle",
        "--url",
        URL,
        "--name",
        "Mäiler ☃ 日本語",
        "--key",
        "card.key",
        "-o",
        "card.json",
        "--format",
        "json",
    ]);
    made.expect_code(0);
    let card: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.path().join("card.json")).unwrap()).unwrap();
    let protected = card["signatures"][0]["protected"].as_str().unwrap();
    let header: serde_json::Value = serde_json::from_slice(&b64url(protected)).unwrap();
    assert_eq!(header["alg"], "ES256");
    assert_eq!(header["kid"], made.json()["key_id"]);
    assert_eq!(b64url(card["signatures"][0]["signature"].as_str().unwrap()).len(), 64, "r || s, not DER");
    // The SDK finds the key by the RFC 7638 thumbprint it computes itself (card.py).
    let out = card_py(&["verify", "card.json", "card.pub"], env.path());
    assert!(out.status.success(), "a2a-sdk refused our ES256 card: {}", String::from_utf8_lossy(&out.stderr));
    // With the bundle: the card's P-256 key and the bundle's minisign key, side by side.
    env.run(&["verify", "--agent-card", "card.json", "m.agent.bundle", "--key", "card.pub", "--key", &key("test.pub")])
        .expect_code(0);
    let text = std::fs::read_to_string(env.path().join("card.json")).unwrap();
    std::fs::write(env.path().join("changed.json"), text.replace("日本語", "日本")).unwrap();
    assert!(!card_py(&["verify", "changed.json", "card.pub"], env.path()).status.success());
    let run = env.run(&["verify", "--agent-card", "changed.json", "--key", "card.pub", "--format", "json"]);
    run.expect_code(1);
    assert_eq!(run.json()["code"], "card_bad_signature");
}

#[test]
fn we_accept_an_es256_card_the_a2a_sdk_signed_with_non_ascii_text_and_numbers_everywhere() {
    if !require_python_module("a2a.utils.signing") {
        return;
    }
    let env = Env::new();
    let out = card_py(&["sign-es256", "sdk.json", "sdk.pub"], env.path());
    assert!(out.status.success(), "card.py sign-es256: {}", String::from_utf8_lossy(&out.stderr));
    let run = env.run(&["verify", "--agent-card", "sdk.json", "--key", "sdk.pub", "--format", "json"]);
    run.expect_code(0);
    assert_eq!(run.json()["signatures"][0]["alg"], "ES256");
    let text = std::fs::read_to_string(env.path().join("sdk.json")).unwrap();
    std::fs::write(env.path().join("num.json"), text.replace("-3e+30", "-4e+30")).unwrap();
    env.run(&["verify", "--agent-card", "num.json", "--key", "sdk.pub"]).expect_code(1);
    assert!(!card_py(&["verify", "num.json", "sdk.pub"], env.path()).status.success());
}

#[test]
fn es256_cards_refuse_der_signatures_other_keys_and_mixed_up_algorithms() {
    let env = Env::new();
    packed(&env);
    // A fixed key, so that the snapshots show its key id.
    for ext in ["key", "pub"] {
        std::fs::copy(key(&format!("p256-test.{ext}")), env.path().join(format!("card.{ext}"))).unwrap();
    }
    p256_key(&env, "other");
    env.run(&["agentcard", "mailer", "--url", URL, "--key", "card.key", "-o", "card.json"]).expect_code(0);
    env.run(&["agentcard", "mailer", "--url", URL, "--key", &key("test.key"), "-o", "ed.json"]).expect_code(0);
    let text = std::fs::read_to_string(env.path().join("card.json")).unwrap();
    let card: serde_json::Value = serde_json::from_str(&text).unwrap();
    let code = |name: &str, body: &str, keys: &[&str]| {
        std::fs::write(env.path().join(name), body).unwrap();
        let mut args = vec!["verify", "--agent-card", name, "--format", "json"];
        keys.iter().for_each(|k| args.extend(["--key", k]));
        let run = env.run(&args);
        run.expect_code(if run.json()["ok"] == true { 0 } else { 1 });
        run.json()["code"].as_str().map(str::to_owned)
    };
    assert_eq!(code("ok.json", &text, &["card.pub"]), None);
    assert_eq!(code("other.json", &text, &["other.pub"]).as_deref(), Some("card_untrusted_key"));
    let ed = std::fs::read_to_string(env.path().join("ed.json")).unwrap();
    assert_eq!(code("ed-p256.json", &ed, &["card.pub"]).as_deref(), Some("card_untrusted_key"));
    assert_eq!(code("es-minisign.json", &text, &[&key("test.pub")]).as_deref(), Some("card_untrusted_key"));
    // The same signature DER-encoded (as `openssl dgst -sign` writes it): refused, not parsed.
    let raw = b64url(card["signatures"][0]["signature"].as_str().unwrap());
    let der = der_of(&raw);
    let mut changed = card.clone();
    changed["signatures"][0]["signature"] = b64url_encode(&der).into();
    assert_eq!(code("der.json", &changed.to_string(), &["card.pub"]).as_deref(), Some("card_signature_malformed"));
    insta::assert_snapshot!(shown(
        &mut in_env(&env, &["verify", "--agent-card", "der.json", "--key", "card.pub"]),
        &[env.path()]
    ));
    // A signature by another key under the trusted key's kid.
    let other = env.run(&["agentcard", "mailer", "--url", URL, "--key", "other.key"]);
    let other: serde_json::Value = serde_json::from_str(&other.expect_code(0).stdout).unwrap();
    changed["signatures"][0]["signature"] = other["signatures"][0]["signature"].clone();
    assert_eq!(code("forged.json", &changed.to_string(), &["card.pub"]).as_deref(), Some("card_bad_signature"));
    insta::assert_snapshot!(shown(
        &mut in_env(&env, &["verify", "--agent-card", "forged.json", "--key", "card.pub"]),
        &[env.path()]
    ));
    insta::assert_snapshot!(shown(
        &mut in_env(&env, &["verify", "--agent-card", "card.json", "--key", "card.pub"]),
        &[env.path()]
    ));
    // `alg` none, HS256 (an HMAC keyed with the public key) and ES384: never accepted.
    for alg in ["none", "HS256", "ES384"] {
        let header = serde_json::json!({"alg": alg, "kid": card_kid(&card), "typ": "JOSE"});
        changed["signatures"][0]["protected"] = b64url_encode(header.to_string().as_bytes()).into();
        assert_eq!(
            code(&format!("{alg}.json"), &changed.to_string(), &["card.pub"]).as_deref(),
            Some("card_signature_malformed"),
            "{alg}"
        );
    }
}

fn card_kid(card: &serde_json::Value) -> String {
    let header: serde_json::Value =
        serde_json::from_slice(&b64url(card["signatures"][0]["protected"].as_str().unwrap())).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

fn b64url(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).unwrap()
}

fn b64url_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `r || s` as an ASN.1 DER SEQUENCE of two INTEGERs (what X.509 and OpenSSL use for ECDSA).
fn der_of(raw: &[u8]) -> Vec<u8> {
    let int = |b: &[u8]| {
        let mut v: Vec<u8> = b.iter().copied().skip_while(|&x| x == 0).collect();
        if v.first().is_none_or(|&x| x & 0x80 != 0) {
            v.insert(0, 0);
        }
        [vec![0x02, v.len() as u8], v].concat()
    };
    let body = [int(&raw[..32]), int(&raw[32..])].concat();
    [vec![0x30, body.len() as u8], body].concat()
}

/// Hostile card shapes within the documented caps: each refused with its code (exit 1), a card
/// over the size cap stops the command (exit 2); a `jku` is named, never fetched.
#[test]
fn hostile_cards_are_refused_each_with_its_code() {
    let env = Env::new();
    packed(&env);
    env.run(&["agentcard", "mailer", "--url", URL, "--key", &key("test.key"), "-o", "card.json"]).expect_code(0);
    let text = std::fs::read_to_string(env.path().join("card.json")).unwrap();
    let card: serde_json::Value = serde_json::from_str(&text).unwrap();
    let verdict = |name: &str, body: &str| {
        std::fs::write(env.path().join(name), body).unwrap();
        let run = env.run(&["verify", "--agent-card", name, "--key", &key("test.pub"), "--format", "json"]);
        run.expect_code(1);
        let doc = run.json();
        (doc["code"].as_str().unwrap().to_owned(), doc["message"].as_str().unwrap().to_owned())
    };
    // A repeated key: the signed value last (serde_json and Python keep it), another first
    // (readers that keep the first would see it): refused whatever the signature says.
    let twice = text.replacen("\"name\": \"mailer\",", "\"name\": \"evil\", \"name\": \"mailer\",", 1);
    assert_ne!(twice, text);
    let (code, message) = verdict("twice.json", &twice);
    assert_eq!(code, "card_malformed");
    assert!(message.contains("$.name appears twice"), "{message}");
    assert_eq!(verdict("deep.json", &format!("{}{}", "[".repeat(200), "]".repeat(200))).0, "card_malformed");
    let huge_number = text.replacen("\"version\": \"1.0.0\"", "\"version\": \"1.0.0\", \"x\": 1e400", 1);
    assert_eq!(verdict("inf.json", &huge_number).0, "card_malformed");
    assert_eq!(verdict("notjson.json", "{\"name\": ").0, "card_malformed");
    let header = |h: serde_json::Value| {
        let mut c = card.clone();
        c["signatures"][0]["protected"] = b64url_encode(h.to_string().as_bytes()).into();
        c.to_string()
    };
    let kid = card_kid(&card);
    let (code, message) =
        verdict("crit.json", &header(serde_json::json!({"alg": "EdDSA", "kid": kid, "crit": ["exp"], "exp": 1})));
    assert_eq!((code.as_str(), message.contains("`crit`")), ("card_signature_malformed", true));
    assert_eq!(verdict("nokid.json", &header(serde_json::json!({"alg": "EdDSA"}))).0, "card_signature_malformed");
    let (code, message) = verdict(
        "jku.json",
        &header(serde_json::json!({"alg": "EdDSA", "kid": "0000000000000000", "jku": "https://keys.example/jwks"})),
    );
    assert_eq!(code, "card_untrusted_key");
    assert!(message.contains("https://keys.example/jwks was not fetched"), "{message}");
    let mut short = card.clone();
    short["signatures"][0]["signature"] = "AAAA".into();
    assert_eq!(verdict("short.json", &short.to_string()).0, "card_signature_malformed");
    std::fs::write(env.path().join("big.json"), format!("{{\"name\": \"{}\"}}", "x".repeat(2 << 20))).unwrap();
    env.run(&["verify", "--agent-card", "big.json", "--key", &key("test.pub")]).expect_code(2);
}

/// The fingerprints a card names are the contracts `bundle inspect` shows for the same bundle:
/// the card carries them unchanged, and a card made from the agent folder names the same ones.
#[test]
fn a_card_keeps_the_contract_fingerprints_of_its_bundle() {
    let env = Env::new();
    packed(&env);
    let inspect = env.run(&["inspect", "m.agent.bundle", "--format", "json"]);
    inspect.expect_code(0);
    let inspected = inspect.json();
    let want: Vec<(String, String)> = inspected["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap().to_owned(), t["fingerprint"].as_str().unwrap().to_owned()))
        .collect();
    let skills: Vec<(String, String)> = inspected["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_owned(), s["digest"].as_str().unwrap().to_owned()))
        .collect();
    for input in ["m.agent.bundle", "mailer"] {
        let made = env.run(&["agentcard", input, "--url", URL, "--key", &key("test.key")]);
        let card: serde_json::Value = serde_json::from_str(&made.expect_code(0).stdout).unwrap();
        let params = &card["capabilities"]["extensions"][0]["params"];
        let got: Vec<(String, String)> = params["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["id"].as_str().unwrap().to_owned(), t["fingerprint"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(got, want, "{input}");
        let got: Vec<(String, String)> = params["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["name"].as_str().unwrap().to_owned(), s["digest"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(got, skills, "{input}");
    }
}

/// Under a trust policy a card counts a signature by a key signer the policy trusts for the
/// card's agent now: in scope, not revoked (the policy's chain is followed first, offline).
#[test]
fn a_card_is_checked_against_the_key_signers_of_a_trust_policy() {
    let env = Env::new();
    packed(&env);
    for name in ["alice", "bob", "carol"] {
        env.run(&["keygen", name]).expect_code(0);
    }
    let public = |name: &str| {
        std::fs::read_to_string(env.path().join(format!("{name}.pub"))).unwrap().lines().nth(1).unwrap().to_owned()
    };
    let policy = format!(
        "format = 1\nid = \"acme\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n\n[root]\nthreshold = 2\n\
         signers = [\"alice\", \"bob\"]\n\n\
         [[signer]]\nname = \"alice\"\npublic_key = \"{}\"\nagents = [\"mail*\"]\n\n\
         [[signer]]\nname = \"bob\"\npublic_key = \"{}\"\nagents = [\"payments-*\"]\n\n\
         [[signer]]\nname = \"carol\"\npublic_key = \"{}\"\nrevoked = true\n\n\
         [[rule]]\nagents = [\"*\"]\nthreshold = 1\n",
        public("alice"),
        public("bob"),
        public("carol")
    );
    std::fs::write(env.path().join("policy.toml"), policy).unwrap();
    for k in ["alice", "bob"] {
        env.run(&["trust", "sign", "policy.toml", "--key", &format!("{k}.key")]).expect_code(0);
    }
    let code = |signer: &str| {
        let card = format!("{signer}.json");
        let key = format!("{signer}.key");
        env.run(&["agentcard", "m.agent.bundle", "--url", URL, "--key", &key, "-o", &card]).expect_code(0);
        let run = env.run(&["verify", "--agent-card", &card, "--trust-policy", "policy.toml", "--format", "json"]);
        run.expect_code(if run.json()["ok"] == true { 0 } else { 1 });
        (run.json()["code"].as_str().map(str::to_owned), run.json()["message"].clone())
    };
    assert_eq!(code("alice").0, None, "alice may sign mail*");
    let (bob, message) = code("bob");
    assert_eq!(bob.as_deref(), Some("card_untrusted_key"));
    assert!(message.as_str().unwrap().contains("not for agent `mailer`"), "{message}");
    assert_eq!(code("carol").0.as_deref(), Some("card_untrusted_key"), "carol is revoked");
    // With the bundle: it was packed with test.key, which the policy does not trust.
    let run = env.run(&["verify", "--agent-card", "alice.json", "m.agent.bundle", "--trust-policy", "policy.toml"]);
    run.expect_code(1);
    assert!(run.stderr.contains("card_bundle_mismatch"), "{}", run.stderr);
}
