//! `[[models]]` with a Sigstore identity: a real OpenSSF model signature made with Sigstore's
//! public-good instance (`testdata/models/`, from sigstore/model-transparency) is checked by
//! `check`, `pack` and `verify` offline, under the production trusted root the operator gives
//! (`--trusted-root`); without a root it is refused, never skipped. The stock
//! `model_signing verify sigstore` (model-signing 1.1.1) agrees, offline, about the unpacked
//! folder.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;

use crate::support::{Env, Run, bin, require_python_module, require_tool, testdata};
use crate::vendor_models::{bundle, codes, forge};

const MODEL: &str = "models/vendor";
const IDENTITY: &str = "stefanb@us.ibm.com";
const ISSUER: &str = "https://sigstore.verify.ibm.com/oauth2";

fn entry(identity: &str) -> String {
    format!("\n[[models]]\npath = \"{MODEL}\"\n{identity}\nissuer = \"{ISSUER}\"\n")
}

/// The mailer agent with the vendor's Sigstore-signed model folder and a `[[models]]` entry
/// naming its identity (`identity_line`), locked (lock needs no trusted root).
fn agent_with_model(env: &Env, identity_line: &str) -> PathBuf {
    let agent = env.copy("agents/mailer", "mailer");
    crate::support::copy_dir(&testdata("models/v1.1.0-sigstore"), &agent.join(MODEL));
    set_entry(env, &agent, identity_line);
    agent
}

fn set_entry(env: &Env, agent: &Path, identity_line: &str) {
    let original = std::fs::read_to_string(testdata("agents/mailer/manifest.toml")).unwrap();
    let manifest = std::fs::read_to_string(agent.join("manifest.toml")).unwrap();
    // Keep the locked digests of the manifest as it is; replace only the [[models]] entry.
    let base = manifest.split("\n[[models]]").next().unwrap_or(&original).to_owned();
    std::fs::write(agent.join("manifest.toml"), base + &entry(identity_line)).unwrap();
    bundle(env.path(), &["lock", "mailer"]).expect_code(0);
}

fn production() -> String {
    testdata("sigstore/trusted_root.production.json").display().to_string()
}

fn contract_models(dir: &Path, bundle_file: &str) -> serde_json::Value {
    let contract = std::fs::read(dir.join(format!("{bundle_file}.contract.sigstore.json"))).unwrap();
    let contract: serde_json::Value = serde_json::from_slice(&contract).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload = b64.decode(contract["dsseEnvelope"]["payload"].as_str().unwrap()).unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    statement["predicate"]["models"].clone()
}

fn verify_forged(dir: &Path, public: &Path, forged: &Path, root: Option<&str>) -> Run {
    let mut cmd = bin();
    cmd.current_dir(dir).args(["verify", "--format", "json", "--key"]).arg(public).arg(forged);
    if let Some(root) = root {
        cmd.args(["--trusted-root", root]);
    }
    cmd.output().map(Run::from).unwrap()
}

#[test]
fn a_model_signed_with_a_sigstore_identity_is_checked_by_check_pack_and_verify_offline() {
    let env = Env::new();
    let dir = env.path();
    let agent = agent_with_model(&env, &format!("identity = \"{IDENTITY}\""));
    let root = production();
    // No trusted root: refused (the identity cannot be judged), by check and by pack.
    let out = bundle(dir, &["check", "--format", "json", "mailer"]);
    out.expect_code(1);
    assert_eq!(codes(&out), ["model_trusted_root_missing"], "{}", out.stdout);
    bundle(dir, &["keygen", "release"]).expect_code(0);
    let out = bundle(dir, &["pack", "mailer", "--key", "release.key", "--format", "json", "-o", "refused.bundle"]);
    out.expect_code(1);
    assert!(codes(&out).contains(&"model_trusted_root_missing".to_owned()), "{}", out.stdout);

    bundle(dir, &["check", "mailer", "--trusted-root", &root]).expect_code(0);
    let pack = ["pack", "mailer", "--key", "release.key", "--attest", "--trusted-root", &root, "-o", "m.agent.bundle"];
    bundle(dir, &pack).expect_code(0);
    let out = bundle(dir, &["verify", "m.agent.bundle", "--key", "release.pub", "--trusted-root", &root]);
    out.expect_code(0);
    let models = contract_models(dir, "m.agent.bundle");
    assert_eq!(models[0]["path"], MODEL);
    assert_eq!(models[0]["identity"], IDENTITY);
    assert_eq!(models[0]["issuer"], ISSUER);
    assert!(models[0].get("key_sha256").is_none(), "{models}");
    assert_eq!(models[0]["root_digest"]["sha256"], "61d4849d9d90076d6215f4d525f13d6574af8e3f67aef3e6f36fc40a14fdd226");
    // The verifier without the root refuses the bundle it would accept with it.
    let out = bundle(dir, &["verify", "m.agent.bundle", "--key", "release.pub", "--format", "json"]);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "model_trusted_root_missing", "{}", out.stdout);

    // push verifies before it uploads: refused without the root; with it, on to the registry
    // (none listens here: exit 2, after the bundle passed).
    let push = ["push", "m.agent.bundle", "oci://127.0.0.1:1/m:1", "--key", "release.pub", "--plain-http"];
    let out = bundle(dir, &[&push[..], &["--format", "json"]].concat());
    out.expect_code(1);
    assert_eq!(out.json()["code"], "model_trusted_root_missing", "{}", out.stdout);
    bundle(dir, &[&push[..], &["--trusted-root", &root]].concat()).expect_code(2);

    // The library's verifier agrees, given the root (`VerifyOptions::models_trusted_root`).
    use agent_bundle::api::{Bundle, TrustedKeys, VerifyOptions};
    let keys = TrustedKeys::read(dir.join("release.pub")).unwrap();
    let verdict = |opts: &VerifyOptions| Bundle::open(dir.join("m.agent.bundle")).unwrap().verify(opts).unwrap();
    assert!(verdict(&VerifyOptions::new(keys.clone()).models_trusted_root(&root)).is_ok());
    let refused = verdict(&VerifyOptions::new(keys));
    assert_eq!(refused.code().map(|c| c.as_str()), Some("model_trusted_root_missing"));

    // A pattern that matches the whole identity is accepted too.
    set_entry(&env, &agent, "identity_regexp = \"stefanb@us\\\\.ibm\\\\.com\"");
    bundle(dir, &["check", "mailer", "--trusted-root", &root]).expect_code(0);

    // The stock verifier agrees about the unpacked folder, offline, under the same root.
    bundle(dir, &["unpack", "m.agent.bundle", "unpacked", "--key", "release.pub", "--trusted-root", &root])
        .expect_code(0);
    if require_tool("model_signing") && require_python_module("sigstore") {
        let config = trust_config(dir, &root);
        let out = Command::new("model_signing")
            .current_dir(dir)
            .args(["verify", "sigstore", "--trust_config"])
            .arg(&config)
            .args(["--identity", IDENTITY, "--identity_provider", ISSUER])
            .args(["--signature", "unpacked/models/vendor/model.sig", "unpacked/models/vendor"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::write(dir.join("unpacked/models/vendor/signme-1"), "changed\n").unwrap();
        let out = Command::new("model_signing")
            .current_dir(dir)
            .args(["verify", "sigstore", "--trust_config"])
            .arg(&config)
            .args(["--identity", IDENTITY, "--identity_provider", ISSUER])
            .args(["--signature", "unpacked/models/vendor/model.sig", "unpacked/models/vendor"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "model_signing accepted a changed file");
    }
}

/// A client trust config (what `model_signing verify sigstore --trust_config` reads): the
/// trusted root with the production signing config the installed sigstore package ships (not
/// used to verify; the format requires it).
fn trust_config(dir: &Path, root: &str) -> PathBuf {
    let out = dir.join("trust_config.json");
    let script = r#"
import json, sys, importlib.resources as r
root = json.load(open(sys.argv[1]))
store = r.files("sigstore._store").joinpath("https%3A%2F%2Ftuf-repo-cdn.sigstore.dev")
signing = json.loads(store.joinpath("signing_config.v0.2.json").read_text())
json.dump({"mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
           "trustedRoot": root, "signingConfig": signing}, open(sys.argv[2], "w"))
"#;
    let status = Command::new("python3").args(["-c", script, root]).arg(&out).status().unwrap();
    assert!(status.success());
    out
}

#[test]
fn another_identity_another_root_and_a_changed_byte_are_refused_with_their_codes() {
    let env = Env::new();
    let dir = env.path();
    let agent = agent_with_model(&env, "identity = \"mallory@example.com\"");
    let root = production();
    let staging = testdata("sigstore/trusted_root.staging.json").display().to_string();
    let check = |root: &str| {
        let out = bundle(dir, &["check", "--format", "json", "mailer", "--trusted-root", root]);
        out.expect_code(1);
        codes(&out)
    };
    assert_eq!(check(&root), ["model_signature_wrong_identity"]);
    let public = forge(&agent, &dir.join("wrong-identity.bundle"));
    let out = verify_forged(dir, &public, &dir.join("wrong-identity.bundle"), Some(&root));
    out.expect_code(1);
    assert_eq!(out.json()["code"], "model_signature_wrong_identity", "{}", out.stdout);

    set_entry(&env, &agent, &format!("identity = \"{IDENTITY}\""));
    // Another Sigstore instance's root: the certificate does not chain to it.
    assert_eq!(check(&staging), ["model_signature_invalid"]);
    let public = forge(&agent, &dir.join("intact.bundle"));
    verify_forged(dir, &public, &dir.join("intact.bundle"), Some(&root)).expect_code(0);
    let out = verify_forged(dir, &public, &dir.join("intact.bundle"), Some(&staging));
    out.expect_code(1);
    assert_eq!(out.json()["code"], "model_signature_invalid", "{}", out.stdout);

    // One byte of a signed file: the files are not the ones signed.
    let file = agent.join(MODEL).join("signme-1");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    bundle(dir, &["lock", "mailer"]);
    assert_eq!(check(&root), ["model_mismatch"]);
    let public = forge(&agent, &dir.join("changed.bundle"));
    let out = verify_forged(dir, &public, &dir.join("changed.bundle"), Some(&root));
    out.expect_code(1);
    assert_eq!(out.json()["code"], "model_mismatch", "{}", out.stdout);
}

/// A trust policy signed by `reviewer` in which `release` alone may sign mail* agents, with
/// `root` imported as its pinned trusted root.
fn trust_policy(env: &Env, file: &str, root: &str) {
    let public = |name: &str| {
        let text = std::fs::read_to_string(env.path().join(format!("{name}.pub"))).unwrap();
        text.lines().nth(1).unwrap().to_owned()
    };
    let text = format!(
        "format = 1\nid = \"acme\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n\n[root]\nthreshold = 1\nsigners = [\"reviewer\"]\n\n\
         [[signer]]\nname = \"release\"\npublic_key = \"{}\"\n\n\
         [[signer]]\nname = \"reviewer\"\npublic_key = \"{}\"\n\n\
         [[rule]]\nagents = [\"mail*\"]\nthreshold = 1\n",
        public("release"),
        public("reviewer")
    );
    std::fs::write(env.path().join(file), text).unwrap();
    bundle(env.path(), &["trust", "import-root", file, root]).expect_code(0);
    bundle(env.path(), &["trust", "sign", file, "--key", "reviewer.key"]).expect_code(0);
}

#[test]
fn under_a_trust_policy_the_model_identity_is_judged_by_the_policys_root() {
    let env = Env::new();
    let dir = env.path();
    agent_with_model(&env, &format!("identity = \"{IDENTITY}\""));
    let root = production();
    bundle(dir, &["keygen", "release"]).expect_code(0);
    bundle(dir, &["keygen", "reviewer"]).expect_code(0);
    let pack = ["pack", "mailer", "--key", "release.key", "--trusted-root", &root, "-o", "m.agent.bundle"];
    bundle(dir, &pack).expect_code(0);
    trust_policy(&env, "production.toml", &root);
    let staging = testdata("sigstore/trusted_root.staging.json").display().to_string();
    trust_policy(&env, "staging.toml", &staging);
    let verify =
        |policy: &str| bundle(dir, &["verify", "m.agent.bundle", "--trust-policy", policy, "--format", "json"]);
    verify("production.toml").expect_code(0);
    let out = verify("staging.toml");
    out.expect_code(1);
    assert_eq!(out.json()["code"], "model_signature_invalid", "{}", out.stdout);
    // The policy names the root: --trusted-root beside it is refused, not silently ignored.
    let out = bundle(dir, &["verify", "m.agent.bundle", "--trust-policy", "production.toml", "--trusted-root", &root]);
    out.expect_code(2);

    // So for cosign and verify --agent-card: the policy's root judges; a second one is refused.
    let cosign = ["cosign", "m.agent.bundle", "--key", "reviewer.key", "--trust-policy", "staging.toml"];
    let out = bundle(dir, &[&cosign[..], &["--format", "json"]].concat());
    out.expect_code(1);
    assert_eq!(out.json()["code"], "model_signature_invalid", "{}", out.stdout);
    bundle(dir, &[&cosign[..4], &["--trust-policy", "production.toml", "--trusted-root", &root]].concat())
        .expect_code(2);
    bundle(dir, &[&cosign[..4], &["--trust-policy", "production.toml"]].concat()).expect_code(0);
    let card = ["agentcard", "m.agent.bundle", "--url", "https://a.example/m", "--key", "release.key", "-o", "c.json"];
    bundle(dir, &[&card[..], &["--trusted-root", &root]].concat()).expect_code(0);
    let verify_card = ["verify", "--agent-card", "c.json", "m.agent.bundle", "--trust-policy", "production.toml"];
    bundle(dir, &verify_card).expect_code(0);
    bundle(dir, &[&verify_card[..], &["--trusted-root", &root]].concat()).expect_code(2);
}

/// `bundle ARGS --format json`, refused (exit `status`) for want of a trusted root: a
/// rejection's `code`, or (where a side that is not a valid bundle is a usage error, exit 2:
/// `diff`, `baseline`) the reason in the error's message, or the first error diagnostic's code.
#[track_caller]
fn assert_refused(dir: &Path, args: &[&str], status: i32) {
    let out = bundle(dir, &[args, &["--format", "json"]].concat());
    out.expect_code(status);
    let json = out.json();
    let named = |v: &serde_json::Value| v.as_str().is_some_and(|c| c.contains("model_trusted_root_missing"));
    let diagnostics = json["diagnostics"].as_array().map(Vec::as_slice).unwrap_or_default();
    assert!(
        named(&json["code"]) || named(&json["message"]) || diagnostics.iter().any(|d| named(&d["code"])),
        "{args:?}: {}",
        out.stdout
    );
}

#[test]
fn inspect_diff_baseline_export_and_agentcard_judge_a_model_identity_under_trusted_root() {
    let env = Env::new();
    let dir = env.path();
    agent_with_model(&env, &format!("identity = \"{IDENTITY}\""));
    let root = production();
    let root = root.as_str();
    bundle(dir, &["keygen", "release"]).expect_code(0);
    let pack = ["pack", "mailer", "--key", "release.key", "--trusted-root", root, "-o", "m.agent.bundle"];
    bundle(dir, &pack).expect_code(0);
    let with_root = |args: &[&str]| bundle(dir, &[args, &["--trusted-root", root]].concat());

    // Each command, on the bundle and on the agent folder where it takes one: refused without
    // a root (never shown or used as checked), passes with it.
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["inspect", "m.agent.bundle"], 1),
        (vec!["inspect", "m.agent.bundle", "--key", "release.pub"], 1),
        (vec!["diff", "m.agent.bundle", "mailer"], 2),
        (vec!["baseline", "snapshot", "m.agent.bundle", "-o", "approved.toml", "--force"], 2),
        (vec!["baseline", "snapshot", "mailer", "-o", "approved.toml", "--force"], 2),
        (vec!["export", "--to", "mcp", "m.agent.bundle", "-o", "tools.json"], 1),
        (vec!["export", "--to", "mcp", "m.agent.bundle", "--key", "release.pub", "-o", "tools.json"], 1),
        (vec!["export", "--to", "openai", "mailer", "-o", "openai.json"], 1),
        (
            vec![
                "agentcard",
                "m.agent.bundle",
                "--url",
                "https://a.example/m",
                "--key",
                "release.key",
                "-o",
                "card.json",
                "--force",
            ],
            1,
        ),
        (
            vec![
                "agentcard",
                "mailer",
                "--url",
                "https://a.example/m",
                "--key",
                "release.key",
                "-o",
                "card2.json",
                "--force",
            ],
            1,
        ),
    ];
    for (args, status) in &cases {
        assert_refused(dir, args, *status);
        with_root(args).expect_code(0);
    }
    // attest signs a contract naming the models' root digests; cosign approves the bundle.
    let b64 = std::fs::read_to_string(dir.join("release.pub")).unwrap().lines().nth(1).unwrap().to_owned();
    std::fs::write(dir.join("trusted"), format!("{b64} mail*\n")).unwrap();
    bundle(dir, &["keygen", "reviewer"]).expect_code(0);
    for args in [
        &["attest", "m.agent.bundle", "--key", "release.key", "--from", "mailer"][..],
        &["cosign", "m.agent.bundle", "--key", "reviewer.key", "--trusted-keys", "trusted"],
    ] {
        assert_refused(dir, args, 1);
        with_root(args).expect_code(0);
    }
    let approve = ["baseline", "approve", "approved.toml", "--from", "m.agent.bundle", "contacts.lookup"];
    assert_refused(dir, &approve, 2);
    with_root(&approve).expect_code(0);

    // What inspect shows once judged: the bundle, its signature checked.
    let out = bundle(dir, &["inspect", "m.agent.bundle", "--key", "release.pub", "--trusted-root", root]);
    out.expect_code(0);
    assert!(out.stdout.contains("signature  checked"), "{}", out.stdout);

    // verify --agent-card judges the bundle the card names with the same root.
    let card = ["verify", "--agent-card", "card.json", "m.agent.bundle", "--key", "release.pub"];
    assert_refused(dir, &card, 1);
    with_root(&card).expect_code(0);
}
