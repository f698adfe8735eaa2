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
