//! `[[models]]` signed by file shards: `model_signing` 1.1.1 signs a folder by shards through
//! its Python API (its CLI signs whole files only), and `check`, `pack` and `verify` check such
//! a signature when the entry declares the same `shard_size` (a verifier streaming a bundle
//! hashes the shards before it reaches the signature). model_signing's own verifier, given the
//! shard size (1.1.1 cannot guess it from the float it writes), agrees about the unpacked folder.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Env, Run, bin, require_python_module};
use crate::vendor_models::{bundle, codes, forge};

const MODEL: &str = "models/clf";
const SHARD: u64 = 64 << 10;

/// Signs (or verifies, `verify`) `model` with `key` by shards of [`SHARD`] bytes, with
/// model_signing's Python API; the signature is `model/model.sig`.
fn model_signing(dir: &Path, verify: bool, key: &str, model: &Path) -> std::process::Output {
    let script = r#"
import sys, pathlib
from model_signing import hashing, signing, verifying
verify, key, model, shard = sys.argv[1] == "verify", sys.argv[2], pathlib.Path(sys.argv[3]), int(sys.argv[4])
sig = model / "model.sig"
# As its CLI does: the signature left out by its path inside the model folder.
hashes = hashing.Config().use_shard_serialization(shard_size=shard).set_ignored_paths(paths=["model.sig"])
if verify:
    verifying.Config().use_elliptic_key_verifier(public_key=key).set_hashing_config(hashes).verify(model, sig)
else:
    signing.Config().use_elliptic_key_signer(private_key=key).set_hashing_config(hashes).sign(model, sig)
"#;
    let mode = if verify { "verify" } else { "sign" };
    Command::new("python3")
        .current_dir(dir)
        .args(["-c", script, mode, key])
        .arg(model)
        .arg(SHARD.to_string())
        .output()
        .expect("run python3")
}

/// The mailer agent with a model folder signed by shards (a file of four shards, one of one,
/// an empty one), and `[[models]]` naming the key and `shard_line`; `None` when model_signing
/// is not installed (a counted skip; a failure under BUNDLE_REQUIRE_TOOLS).
fn shard_signed_agent(env: &Env, shard_line: &str) -> Option<PathBuf> {
    let dir = env.path();
    let agent = env.copy("agents/mailer", "mailer");
    let model = agent.join(MODEL);
    std::fs::create_dir_all(model.join("tokenizer")).unwrap();
    std::fs::write(model.join("weights.bin"), crate::support::noise(3 * SHARD as usize + 1000)).unwrap();
    std::fs::write(model.join("config.json"), "{\"layers\": 2}\n").unwrap();
    std::fs::write(model.join("tokenizer/empty.txt"), "").unwrap();
    bundle(dir, &["keygen", "--kind", "p256", "vendor"]).expect_code(0);
    std::fs::create_dir_all(agent.join("keys")).unwrap();
    std::fs::copy(dir.join("vendor.pub"), agent.join("keys/vendor.pub")).unwrap();
    if !require_python_module("model_signing") {
        return None;
    }
    let out = model_signing(dir, false, "vendor.key", &model);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    set_entry(env, &agent, shard_line);
    Some(agent)
}

fn set_entry(env: &Env, agent: &Path, shard_line: &str) {
    // Lock refuses a folder check refuses: lock without the entry, then put it back.
    let manifest = std::fs::read_to_string(agent.join("manifest.toml")).unwrap();
    std::fs::write(agent.join("manifest.toml"), manifest.split("\n[[models]]").next().unwrap()).unwrap();
    bundle(env.path(), &["lock", "mailer"]).expect_code(0);
    let locked = std::fs::read_to_string(agent.join("manifest.toml")).unwrap();
    let entry = format!("\n[[models]]\npath = \"{MODEL}\"\nkey = \"keys/vendor.pub\"\n{shard_line}\n");
    std::fs::write(agent.join("manifest.toml"), locked + &entry).unwrap();
}

fn verify_forged(dir: &Path, agent: &Path, name: &str) -> Run {
    let forged = dir.join(name);
    let public = forge(agent, &forged);
    bin()
        .current_dir(dir)
        .args(["verify", "--format", "json", "--key"])
        .arg(&public)
        .arg(&forged)
        .output()
        .unwrap()
        .into()
}

#[test]
fn a_model_signed_by_shards_is_checked_by_check_pack_and_verify() {
    let env = Env::new();
    let shard_line = format!("shard_size = {SHARD}");
    let Some(agent) = shard_signed_agent(&env, &shard_line) else { return };
    let dir = env.path();
    let signature: serde_json::Value =
        serde_json::from_slice(&std::fs::read(agent.join(MODEL).join("model.sig")).unwrap()).unwrap();
    let payload = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        signature["dsseEnvelope"]["payload"].as_str().unwrap(),
    )
    .unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    let names: Vec<&str> =
        statement["predicate"]["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(statement["predicate"]["serialization"]["method"], "shards");
    assert_eq!(names.len(), 5, "four shards of weights.bin, one of config.json: {names:?}");

    bundle(dir, &["check", "mailer"]).expect_code(0);
    bundle(dir, &["keygen", "release"]).expect_code(0);
    bundle(dir, &["pack", "mailer", "--key", "release.key", "--attest", "-o", "m.agent.bundle"]).expect_code(0);
    bundle(dir, &["verify", "m.agent.bundle", "--key", "release.pub"]).expect_code(0);
    verify_forged(dir, &agent, "intact.bundle").expect_code(0);
    let contract = std::fs::read(dir.join("m.agent.bundle.contract.sigstore.json")).unwrap();
    let contract: serde_json::Value = serde_json::from_slice(&contract).unwrap();
    let payload = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        contract["dsseEnvelope"]["payload"].as_str().unwrap(),
    )
    .unwrap();
    let predicate: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    let model = &predicate["predicate"]["models"][0];
    assert_eq!(model["shard_size"], SHARD, "{model}");
    assert_eq!(model["root_digest"]["sha256"], statement["subject"][0]["digest"]["sha256"]);

    // model_signing's verifier agrees about the unpacked folder, and refuses a changed byte.
    bundle(dir, &["unpack", "m.agent.bundle", "unpacked", "--key", "release.pub"]).expect_code(0);
    let unpacked = dir.join("unpacked").join(MODEL);
    let out = model_signing(dir, true, "vendor.pub", &unpacked);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // One byte in the third shard: refused by check and by verify of a bundle of it.
    let weights = agent.join(MODEL).join("weights.bin");
    let mut bytes = std::fs::read(&weights).unwrap();
    bytes[2 * SHARD as usize + 5] ^= 1;
    std::fs::write(&weights, &bytes).unwrap();
    std::fs::write(unpacked.join("weights.bin"), &bytes).unwrap();
    assert!(!model_signing(dir, true, "vendor.pub", &unpacked).status.success());
    set_entry(&env, &agent, &shard_line);
    let out = bundle(dir, &["check", "--format", "json", "mailer"]);
    assert_eq!(codes(&out), ["model_mismatch"], "{}", out.stdout);
    assert!(out.stdout.contains(&format!("weights.bin:{}:{}", 2 * SHARD, 3 * SHARD)), "{}", out.stdout);
    let out = verify_forged(dir, &agent, "changed.bundle");
    out.expect_code(1);
    assert_eq!(out.json()["code"], "model_mismatch", "{}", out.stdout);
}

#[test]
fn a_shard_size_other_than_the_signed_one_is_refused_as_malformed_everywhere() {
    let env = Env::new();
    let Some(agent) = shard_signed_agent(&env, "") else { return };
    let dir = env.path();
    for line in [String::new(), format!("shard_size = {}", 2 * SHARD)] {
        set_entry(&env, &agent, &line);
        let out = bundle(dir, &["check", "--format", "json", "mailer"]);
        out.expect_code(1);
        assert_eq!(codes(&out), ["model_signature_malformed"], "{line}: {}", out.stdout);
        assert!(out.stdout.contains(&format!("shard_size = {SHARD}")), "{}", out.stdout);
        let out = verify_forged(dir, &agent, "declared.bundle");
        out.expect_code(1);
        assert_eq!(out.json()["code"], "model_signature_malformed", "{line}: {}", out.stdout);
    }
}
