//! `[[models]]`: an agent that ships model weights signed by their vendor with the real
//! `model_signing sign key` (model-signing 1.1.1 from PyPI) gets that signature checked by
//! `check`, `pack` and `verify` against the key manifest.toml names; the root digest appears in
//! the agent-contract predicate. A one-byte change, another key and a missing `model.sig` are
//! refused by each, with stable codes. Bundles that `pack` would refuse are made here with the
//! library's archive writer and a minisign key (what another tool, or an older release, could
//! publish), so that `verify` is shown to judge them on its own.

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_bundle::archive::ArchiveWriter;
use agent_bundle::minisign::SecretKey;
use base64::Engine as _;

use crate::support::{Env, Run, bin, require_tool};

pub(crate) fn bundle(dir: &Path, args: &[&str]) -> Run {
    bin().current_dir(dir).args(args).output().expect("run bundle").into()
}

const MODEL: &str = "models/clf";
const MANIFEST_MODELS: &str = "\n[[models]]\npath = \"models/clf\"\nkey = \"keys/vendor.pub\"\n";

/// The mailer agent with a small model folder, signed in place (`models/clf/model.sig`) by
/// the vendor's key with the stock `model_signing sign key`, and `[[models]]` naming it; or
/// `None` when model_signing is not installed (the test is skipped).
fn vendor_signed_agent(env: &Env) -> Option<PathBuf> {
    let dir = env.path();
    let agent = env.copy("agents/mailer", "mailer");
    let model = agent.join(MODEL);
    std::fs::create_dir_all(model.join("tokenizer")).unwrap();
    std::fs::write(model.join("weights.bin"), crate::support::noise(4096)).unwrap();
    std::fs::write(model.join("config.json"), "{\"layers\": 2}\n").unwrap();
    std::fs::write(model.join("tokenizer/vocab.txt"), "a\nb\n").unwrap();
    bundle(dir, &["keygen", "--kind", "p256", "vendor"]).expect_code(0);
    bundle(dir, &["keygen", "--kind", "p256", "other"]).expect_code(0);
    std::fs::create_dir_all(agent.join("keys")).unwrap();
    std::fs::copy(dir.join("vendor.pub"), agent.join("keys/vendor.pub")).unwrap();
    if !require_tool("model_signing") {
        return None;
    }
    let out = Command::new("model_signing")
        .current_dir(dir)
        .args(["sign", "key", "--private_key", "vendor.key", "--signature"])
        .arg(model.join("model.sig"))
        .arg(&model)
        .output()
        .expect("run model_signing");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut manifest = std::fs::read_to_string(agent.join("manifest.toml")).unwrap();
    manifest.push_str(MANIFEST_MODELS);
    std::fs::write(agent.join("manifest.toml"), manifest).unwrap();
    bundle(dir, &["lock", "mailer"]).expect_code(0);
    Some(agent)
}

/// The root digest the vendor's signature names (its statement's subject), as model_signing
/// computed it.
fn signed_root(signature: &Path) -> String {
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(signature).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload = b64.decode(doc["dsseEnvelope"]["payload"].as_str().unwrap()).unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    statement["subject"][0]["digest"]["sha256"].as_str().unwrap().to_owned()
}

/// The codes of a `--format json` report's diagnostics.
pub(crate) fn codes(out: &Run) -> Vec<String> {
    let json = out.json();
    json["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect()
}

/// A bundle of the folder `from` (manifest.toml locked, every other file an entry), signed by
/// a minisign key whose public key is written to `<out>.pub`: what `pack` writes, without its
/// checks.
pub(crate) fn forge(from: &Path, out: &Path) -> PathBuf {
    let key = SecretKey::from_seed(&[5; 32], [5; 8]);
    let manifest = std::fs::read(from.join("manifest.toml")).unwrap();
    let doc: toml_edit::DocumentMut = std::str::from_utf8(&manifest).unwrap().parse().unwrap();
    let (name, version) = (doc["agent"]["name"].as_str().unwrap(), doc["agent"]["version"].as_str().unwrap());
    let comment = agent_bundle::trust::trusted_comment(name, version);
    let signature = key.sign(&manifest, &comment, agent_bundle::bundle::UNTRUSTED_COMMENT).unwrap().to_text();
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(from).min_depth(1) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(from).unwrap().to_string_lossy().replace('\\', "/");
            if rel != "manifest.toml" && rel != "manifest.toml.minisig" {
                files.push(rel);
            }
        }
    }
    files.sort();
    let mut writer = ArchiveWriter::new(std::fs::File::create(out).unwrap(), 3, 0).unwrap();
    writer.append_bytes("manifest.toml", &manifest).unwrap();
    writer.append_bytes("manifest.toml.minisig", signature.as_bytes()).unwrap();
    for rel in files {
        let bytes = std::fs::read(from.join(&rel)).unwrap();
        writer.append_bytes(&rel, &bytes).unwrap();
    }
    writer.finish().unwrap();
    let public = out.with_extension("pub");
    std::fs::write(&public, key.public_key().to_text()).unwrap();
    public
}

#[test]
fn a_vendor_signed_model_is_checked_by_check_pack_and_verify_and_its_root_digest_is_attested() {
    let env = Env::new();
    let Some(agent) = vendor_signed_agent(&env) else { return };
    let dir = env.path();
    bundle(dir, &["check", "mailer"]).expect_code(0);
    bundle(dir, &["keygen", "release"]).expect_code(0);
    bundle(dir, &["pack", "mailer", "--key", "release.key", "--attest", "-o", "mailer.agent.bundle"]).expect_code(0);
    // The gate recomputes the contract predicate from the verified bundle: it must agree.
    let out = bundle(dir, &["verify", "mailer.agent.bundle", "--key", "release.pub", "--require-provenance"]);
    out.expect_code(0);
    let contract = std::fs::read(dir.join("mailer.agent.bundle.contract.sigstore.json")).unwrap();
    let contract: serde_json::Value = serde_json::from_slice(&contract).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload = b64.decode(contract["dsseEnvelope"]["payload"].as_str().unwrap()).unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    let models = &statement["predicate"]["models"];
    assert_eq!(models[0]["path"], MODEL, "{statement}");
    assert_eq!(models[0]["root_digest"]["sha256"], signed_root(&agent.join(MODEL).join("model.sig")));
    let hint = std::fs::read(agent.join(MODEL).join("model.sig")).unwrap();
    let hint: serde_json::Value = serde_json::from_slice(&hint).unwrap();
    assert_eq!(models[0]["key_sha256"], hint["verificationMaterial"]["publicKey"]["hint"]);
    // The stock verifier agrees about the model folder of the unpacked bundle.
    bundle(dir, &["unpack", "mailer.agent.bundle", "unpacked", "--key", "release.pub"]).expect_code(0);
    let out = Command::new("model_signing")
        .current_dir(dir)
        .args(["verify", "key", "--signature", "unpacked/models/clf/model.sig", "--public_key", "vendor.pub"])
        .arg("unpacked/models/clf")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Locks the agent whatever its model says (`bundle lock` refuses a folder that `check`
/// refuses): without its `[[models]]` entry, which is then put back.
fn lock_anyway(env: &Env, agent: &Path) {
    let path = agent.join("manifest.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace(MANIFEST_MODELS, "")).unwrap();
    bundle(env.path(), &["lock", "mailer"]).expect_code(0);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(MANIFEST_MODELS);
    std::fs::write(&path, text).unwrap();
}

/// The agent folder at `agent`, broken one way (and locked), is refused by check, pack and verify (of a bundle
/// made without pack's checks), each with `code`.
fn refused_everywhere(env: &Env, agent: &Path, case: &str, code: &str) {
    let dir = env.path();
    lock_anyway(env, agent);
    let out = bundle(dir, &["check", "--format", "json", "mailer"]);
    out.expect_code(1);
    assert_eq!(codes(&out), [code], "check, {case}: {}", out.stdout);
    let out = bundle(dir, &["pack", "mailer", "--key", "release.key", "--format", "json", "-o", "refused.bundle"]);
    out.expect_code(1);
    assert!(codes(&out).contains(&code.to_owned()), "pack, {case}: {}", out.stdout);
    assert!(!dir.join("refused.bundle").exists(), "pack, {case}");
    let forged = dir.join(format!("{case}.bundle"));
    let public = forge(agent, &forged);
    let out = bin()
        .current_dir(dir)
        .args(["verify", "--format", "json", "--key"])
        .arg(&public)
        .arg(&forged)
        .output()
        .map(Run::from)
        .unwrap();
    out.expect_code(1);
    let json = out.json();
    assert_eq!(json["code"], code, "verify, {case}: {json}");
}

#[test]
fn a_changed_byte_another_key_and_a_missing_signature_are_refused_with_their_codes() {
    let env = Env::new();
    let Some(agent) = vendor_signed_agent(&env) else { return };
    let dir = env.path();
    bundle(dir, &["keygen", "release"]).expect_code(0);
    // The control: a forged bundle of the intact folder verifies.
    let public = forge(&agent, &dir.join("intact.bundle"));
    let out = bin().current_dir(dir).args(["verify", "--key"]).arg(&public).arg("intact.bundle").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let weights = agent.join(MODEL).join("weights.bin");
    let original = std::fs::read(&weights).unwrap();
    let mut changed = original.clone();
    changed[100] ^= 0x01;
    std::fs::write(&weights, &changed).unwrap();
    refused_everywhere(&env, &agent, "changed-byte", "model_mismatch");
    std::fs::write(&weights, &original).unwrap();

    std::fs::write(agent.join(MODEL).join("extra.bin"), "not signed").unwrap();
    refused_everywhere(&env, &agent, "extra-file", "model_mismatch");
    std::fs::remove_file(agent.join(MODEL).join("extra.bin")).unwrap();

    let vendor = std::fs::read(agent.join("keys/vendor.pub")).unwrap();
    std::fs::copy(dir.join("other.pub"), agent.join("keys/vendor.pub")).unwrap();
    refused_everywhere(&env, &agent, "wrong-key", "model_signature_wrong_key");
    std::fs::write(agent.join("keys/vendor.pub"), "-----BEGIN PUBLIC KEY-----\nnot a key\n").unwrap();
    refused_everywhere(&env, &agent, "not-a-key", "model_key_invalid");
    std::fs::write(agent.join("keys/vendor.pub"), &vendor).unwrap();

    let signature = agent.join(MODEL).join("model.sig");
    let sig = std::fs::read(&signature).unwrap();
    std::fs::remove_file(&signature).unwrap();
    refused_everywhere(&env, &agent, "missing-signature", "model_signature_missing");
    // A hostile signature: one byte of the signed payload changed (hint intact).
    let mut doc: serde_json::Value = serde_json::from_slice(&sig).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload = b64.decode(doc["dsseEnvelope"]["payload"].as_str().unwrap()).unwrap();
    let text = String::from_utf8(payload).unwrap().replacen("\"clf\"", "\"clg\"", 1);
    doc["dsseEnvelope"]["payload"] = b64.encode(text).into();
    std::fs::write(&signature, serde_json::to_vec(&doc).unwrap()).unwrap();
    refused_everywhere(&env, &agent, "tampered-signature", "model_signature_invalid");
    std::fs::write(&signature, b"{\"mediaType\": 1}").unwrap();
    refused_everywhere(&env, &agent, "malformed-signature", "model_signature_malformed");
    std::fs::write(&signature, &sig).unwrap();
    bundle(dir, &["lock", "mailer"]).expect_code(0);
    bundle(dir, &["check", "mailer"]).expect_code(0);
}

#[test]
fn models_entries_are_checked_as_manifest_keys() {
    let env = Env::new();
    let dir = env.path();
    let agent = env.copy("agents/mailer", "mailer");
    let manifest = std::fs::read_to_string(agent.join("manifest.toml")).unwrap();
    for (extra, code) in [
        ("\n[[models]]\npath = \"../outside\"\nkey = \"k.pub\"\n", "unsafe_path"),
        ("\n[[models]]\npath = \"models/a\"\n", "missing_field"),
        ("\n[[models]]\npath = \"models/a\"\nkey = \"k.pub\"\nfingerprint = \"x\"\n", "unknown_field"),
        ("\n[[models]]\npath = \"models/a\"\nkey = \"k.pub\"\nidentity = \"x\"\n", "invalid_model_signer"),
        ("\n[[models]]\npath = \"models/a\"\nidentity = \"x\"\n", "missing_field"),
        (
            "\n[[models]]\npath = \"models/a\"\nidentity = \"x\"\nidentity_regexp = \"x\"\nissuer = \"i\"\n",
            "invalid_model_signer",
        ),
        ("\n[[models]]\npath = \"models/a\"\nidentity_regexp = \"(\"\nissuer = \"i\"\n", "invalid_model_signer"),
        ("\n[[models]]\npath = \"models/a\"\nkey = \"k.pub\"\nshard_size = 1024\n", "limit_exceeded"),
        ("\n[[models]]\npath = \"models/a\"\nkey = \"k.pub\"\nshard_size = \"1 GB\"\n", "wrong_type"),
        ("models = 1\n", "wrong_type"),
    ] {
        let text = if extra.starts_with('\n') { format!("{manifest}{extra}") } else { format!("{extra}{manifest}") };
        std::fs::write(agent.join("manifest.toml"), text).unwrap();
        let out = bundle(dir, &["check", "--format", "json", "mailer"]);
        out.expect_code(1);
        assert!(codes(&out).contains(&code.to_owned()), "{extra}: {}", out.stdout);
    }
    // A key that is not there is reported against the key, before the signature is read.
    std::fs::write(
        agent.join("manifest.toml"),
        format!("{manifest}\n[[models]]\npath = \"prompts\"\nkey = \"k.pub\"\n"),
    )
    .unwrap();
    let out = bundle(dir, &["check", "--format", "json", "mailer"]);
    assert_eq!(codes(&out), ["model_key_invalid"], "{}", out.stdout);
}
