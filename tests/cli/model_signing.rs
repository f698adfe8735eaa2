//! `keygen --kind p256` and `attest --model-signing`: an OpenSSF model signature of an agent
//! folder that the stock `model_signing verify key` (model-signing 1.1.1 from PyPI) accepts, for
//! the folder and for the folder `unpack` makes of its bundle, and refuses after any one-byte
//! change of a file, an added file, or another key.

use std::path::Path;
use std::process::Command;

use crate::support::{Env, Run, bin, require_tool};

fn bundle(dir: &Path, args: &[&str]) -> Run {
    bin().current_dir(dir).args(args).output().expect("run bundle").into()
}

/// `model_signing verify key` of `folder` against `signature` and `public`: its exit status
/// and what it said.
fn stock_verify(dir: &Path, signature: &str, public: &str, folder: &str) -> (bool, String) {
    let out = Command::new("model_signing")
        .current_dir(dir)
        .args(["verify", "key", "--signature", signature, "--public_key", public, folder])
        .output()
        .expect("run model_signing");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

#[test]
fn the_stock_model_signing_verifier_accepts_the_agent_folder_and_its_unpacked_bundle_and_refuses_any_change() {
    let env = Env::new();
    let dir = env.path();
    let agent = env.copy("agents/mailer", "mailer");
    // A file the bundle leaves out (.bundleignore) is in the folder but not in the signature.
    std::fs::write(agent.join(".bundleignore"), "notes/\n").unwrap();
    std::fs::create_dir_all(agent.join("notes")).unwrap();
    std::fs::write(agent.join("notes/todo.txt"), "not shipped\n").unwrap();
    bundle(dir, &["lock", "mailer"]).expect_code(0);
    bundle(dir, &["keygen", "--kind", "p256", "model"]).expect_code(0);
    let public = std::fs::read_to_string(dir.join("model.pub")).unwrap();
    assert!(public.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{public}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(dir.join("model.key")).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let json = bundle(dir, &["attest", "--model-signing", "--key", "model.key", "mailer", "--format", "json"]);
    let json = json.expect_code(0).json();
    assert_eq!(json["resources"], 6, "{json}");
    let sig = dir.join("mailer.model.sig");
    assert_eq!(json["signature"], sig.display().to_string());
    // The same folder and key give the same bytes (RFC 6979 signatures).
    let first = std::fs::read(&sig).unwrap();
    bundle(dir, &["attest", "--model-signing", "--key", "model.key", "mailer", "-o", "again.sig"]).expect_code(0);
    assert!(first == std::fs::read(dir.join("again.sig")).unwrap());

    // The unpacked bundle holds the same files (and manifest.toml.minisig, which is ignored).
    bundle(dir, &["keygen", "release"]).expect_code(0);
    bundle(dir, &["pack", "mailer", "--key", "release.key", "-o", "mailer.agent.bundle"]).expect_code(0);
    bundle(dir, &["unpack", "mailer.agent.bundle", "unpacked", "--key", "release.pub"]).expect_code(0);
    if !require_tool("model_signing") {
        return;
    }
    for folder in ["mailer", "unpacked"] {
        let (ok, said) = stock_verify(dir, "mailer.model.sig", "model.pub", folder);
        assert!(ok, "{folder}: {said}");
    }
    // Any one-byte change of any signed file is refused; so is a file added, and another key.
    let files =
        ["manifest.toml", "tools.json", "policy.caps", "prompts/system.md", "schemas/mail.send.request.v1.json"];
    for file in files {
        let path = dir.join("unpacked").join(file);
        let original = std::fs::read(&path).unwrap();
        let mut changed = original.clone();
        let at = changed.len() / 2;
        changed[at] ^= 0x01;
        std::fs::write(&path, &changed).unwrap();
        let (ok, said) = stock_verify(dir, "mailer.model.sig", "model.pub", "unpacked");
        assert!(!ok && said.contains("Hash mismatch"), "{file}: {said}");
        std::fs::write(&path, &original).unwrap();
    }
    std::fs::write(dir.join("unpacked/extra.txt"), "x").unwrap();
    let (ok, said) = stock_verify(dir, "mailer.model.sig", "model.pub", "unpacked");
    assert!(!ok && said.contains("Extra files"), "{said}");
    std::fs::remove_file(dir.join("unpacked/extra.txt")).unwrap();
    bundle(dir, &["keygen", "--kind", "p256", "other"]).expect_code(0);
    let (ok, said) = stock_verify(dir, "mailer.model.sig", "other.pub", "unpacked");
    assert!(!ok && said.contains("Key mismatch"), "{said}");
    // A signature whose payload changed by one byte (the model's name) does not verify.
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut doc: serde_json::Value = serde_json::from_slice(&first).unwrap();
    let payload = b64.decode(doc["dsseEnvelope"]["payload"].as_str().unwrap()).unwrap();
    let text = String::from_utf8(payload).unwrap();
    assert!(text.contains(r#""name":"mailer""#), "{text}");
    doc["dsseEnvelope"]["payload"] = b64.encode(text.replacen(r#""name":"mailer""#, r#""name":"mailes""#, 1)).into();
    std::fs::write(dir.join("tampered.sig"), serde_json::to_vec(&doc).unwrap()).unwrap();
    let (ok, said) = stock_verify(dir, "tampered.sig", "model.pub", "unpacked");
    assert!(!ok, "{said}");
    // Still accepted once every change is undone.
    let (ok, said) = stock_verify(dir, "mailer.model.sig", "model.pub", "unpacked");
    assert!(ok, "{said}");
}

#[test]
fn model_signing_needs_a_p256_key_and_an_agent_folder() {
    let env = Env::new();
    let dir = env.path();
    env.copy("agents/mailer", "mailer");
    bundle(dir, &["keygen", "release"]).expect_code(0);
    // A minisign key is not a P-256 key.
    let out = bundle(dir, &["attest", "--model-signing", "--key", "release.key", "mailer"]);
    assert!(out.expect_code(2).stderr.contains("not a P-256 secret key"), "{}", out.stderr);
    bundle(dir, &["keygen", "--kind", "p256", "model"]).expect_code(0);
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    bundle(dir, &["attest", "--model-signing", "--key", "model.key", "empty"]).expect_code(2);
    assert!(!dir.join("empty.model.sig").exists() && !dir.join("mailer.model.sig").exists());
    // An existing key is not replaced without --force.
    bundle(dir, &["keygen", "--kind", "p256", "model"]).expect_code(2);
}

/// The PEM (SubjectPublicKeyInfo) of a P-256 public key given as DER.
pub(crate) fn pem_of_der(der: &[u8]) -> String {
    use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _, LineEnding};
    p256::PublicKey::from_public_key_der(der).unwrap().to_public_key_pem(LineEnding::LF).unwrap()
}

#[test]
fn p256_keys_on_a_pkcs11_token_and_in_an_ssh_agent_sign_what_model_signing_verifies() {
    use crate::keys::{PIN, SoftHsm, SshAgent};
    if !require_tool("model_signing") || !require_tool("ssh-agent") || !require_tool("ssh-keygen") {
        return;
    }
    let Some(hsm) = SoftHsm::start() else { return };
    let env = Env::new();
    let dir = env.path();
    env.copy("agents/mailer", "mailer");
    bundle(dir, &["lock", "mailer"]).expect_code(0);

    // A key made on the token (it never leaves it); its public key read back as DER.
    hsm.keypairgen("EC:prime256v1", "model", "0a");
    let der = dir.join("token.der");
    let out = hsm
        .tool("pkcs11-tool")
        .arg("--module")
        .arg(hsm.module())
        .args(["--token-label", "bundle-test", "--read-object", "--type", "pubkey", "--label", "model", "-o"])
        .arg(&der)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.join("token.pub"), pem_of_der(&std::fs::read(&der).unwrap())).unwrap();
    let uri = format!("pkcs11:token=bundle-test;object=model?pin-value={PIN}");
    let signed = hsm.run(&env, &["attest", "--model-signing", "--key", &uri, "mailer", "-o", "token.sig"]);
    signed.expect_code(0);
    let (ok, said) = stock_verify(dir, "token.sig", "token.pub", "mailer");
    assert!(ok, "token: {said}");

    // An ecdsa-sha2-nistp256 key in a real ssh-agent (beside an Ed25519 key it must not pick).
    let agent = SshAgent::start();
    let ed = agent.keygen("ed25519", "release");
    agent.add(&ed);
    let ec = agent.keygen("ecdsa", "model");
    agent.add(&ec);
    let out = Command::new("ssh-keygen").args(["-e", "-m", "PKCS8", "-f"]).arg(ec.with_extension("pub")).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.join("agent.pub"), &out.stdout).unwrap();
    agent.run(&env, &["attest", "--model-signing", "--key", "ssh-agent:", "mailer", "-o", "agent.sig"]).expect_code(0);
    let (ok, said) = stock_verify(dir, "agent.sig", "agent.pub", "mailer");
    assert!(ok, "ssh-agent: {said}");
    // Each refuses the other's key, and a changed byte.
    let (ok, said) = stock_verify(dir, "agent.sig", "token.pub", "mailer");
    assert!(!ok && said.contains("Key mismatch"), "{said}");
    let prompt = dir.join("mailer/prompts/system.md");
    let mut bytes = std::fs::read(&prompt).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&prompt, bytes).unwrap();
    let (ok, said) = stock_verify(dir, "token.sig", "token.pub", "mailer");
    assert!(!ok && said.contains("Hash mismatch"), "{said}");
    // An agent with no P-256 key says so, with a code.
    let plain = SshAgent::start();
    plain.add(&ed);
    let out = plain.run(&env, &["attest", "--model-signing", "--key", "ssh-agent:", "mailer", "--format", "json"]);
    out.expect_code(2);
    assert!(out.stderr.contains("no ecdsa-sha2-nistp256 key"), "{}", out.stderr);
}
