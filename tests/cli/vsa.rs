//! `verify --emit-vsa`: the gate's verdict as a SLSA Verification Summary Attestation v1 in a
//! Sigstore bundle, checked by securesystemslib (the envelope, with the verifier's key),
//! sigstore-models (the bundle) and in-toto-attestation (the statement, the VSA v1 protobuf) —
//! testdata/attest/verify_vsa.py; byte-identical for the same inputs and SOURCE_DATE_EPOCH; a
//! refusal gives a FAILED summary naming its code; `push --attach-vsa` puts it beside the bundle.

use std::path::Path;
use std::process::Command;

use agent_bundle::evidence::vsa::VSA_V1;
use serde_json::Value;

use crate::attest::python;
use crate::keys::write_file_key;
use crate::registry::{self, Setup};
use crate::support::{Env, Run, bin, testdata};

const EPOCH: &str = "1760000000";
const GATE: &str = "https://deploy.example.com/gates/production";

fn bundle(dir: &Path, epoch: &str, args: &[&str]) -> Run {
    let mut c = bin();
    c.current_dir(dir).env("SOURCE_DATE_EPOCH", epoch).env_remove("GITHUB_ACTIONS");
    c.env("DOCKER_CONFIG", dir.join("no-docker-config"));
    c.args(args).output().expect("run bundle").into()
}

/// The statement inside a Sigstore bundle file.
fn statement(path: &Path) -> Value {
    use base64::Engine as _;
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let payload =
        base64::engine::general_purpose::STANDARD.decode(doc["dsseEnvelope"]["payload"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&payload).unwrap()
}

fn sha256_hex(path: &Path) -> String {
    agent_bundle::oci::artifact::sha256_digest(&std::fs::read(path).unwrap()).trim_start_matches("sha256:").to_owned()
}

/// The independent verifiers accept each summary; returns their `ok` lines.
#[track_caller]
fn verifiers_accept(dir: &Path, sha256: &str, files: &[&str]) -> Vec<String> {
    let Some(python) = python() else { return Vec::new() };
    let out = Command::new(python)
        .current_dir(dir)
        .arg(testdata("attest/verify_vsa.py"))
        .args(["gate.pub", sha256])
        .args(files)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "verify_vsa.py refused:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    text.lines().map(str::to_owned).collect()
}

/// mailer packed with its attestations by the release key; the gate's own key beside it.
fn setup(env: &Env) {
    let dir = env.path();
    env.copy("agents/mailer", "mailer");
    let key = write_file_key(dir, &[42; 32]);
    bundle(dir, EPOCH, &["pubkey", &key, "-o", "release.pub"]).expect_code(0);
    bundle(dir, EPOCH, &["pack", "mailer", "--attest", "--key", &key, "-o", "agent.bundle"]).expect_code(0);
    bundle(dir, EPOCH, &["keygen", "gate"]).expect_code(0);
}

fn emit<'a>(extra: &[&'a str], out: &'a str) -> Vec<&'a str> {
    let mut args = vec!["--emit-vsa", out, "--vsa-key", "gate.key", "--verifier-id", GATE, "--format", "json"];
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_passed_verdict_is_a_signed_vsa_the_independent_verifiers_accept_and_the_same_inputs_give_the_same_bytes() {
    let env = Env::new();
    setup(&env);
    let dir = env.path();
    let gate = ["verify", "agent.bundle", "--key", "release.pub", "--require-provenance"];
    bundle(dir, EPOCH, &[&gate[..], &emit(&[], "one.vsa.json")].concat()).expect_code(0);
    bundle(dir, EPOCH, &[&gate[..], &emit(&[], "two.vsa.json")].concat()).expect_code(0);
    assert!(std::fs::read(dir.join("one.vsa.json")).unwrap() == std::fs::read(dir.join("two.vsa.json")).unwrap());
    // Another time is another summary.
    bundle(dir, "1760000001", &[&gate[..], &emit(&[], "later.vsa.json")].concat()).expect_code(0);
    assert!(std::fs::read(dir.join("one.vsa.json")).unwrap() != std::fs::read(dir.join("later.vsa.json")).unwrap());

    let sha256 = sha256_hex(&dir.join("agent.bundle"));
    let s = statement(&dir.join("one.vsa.json"));
    assert_eq!(s["predicateType"], VSA_V1);
    assert_eq!(s["subject"][0]["name"], "agent.bundle");
    assert_eq!(s["subject"][0]["digest"]["sha256"], sha256.as_str());
    let p = &s["predicate"];
    assert_eq!(p["verifier"]["id"], GATE);
    assert_eq!(p["verifier"]["version"]["agent-bundle"], env!("CARGO_PKG_VERSION"));
    assert_eq!(p["timeVerified"], agent_bundle::timestamp::Timestamp::from_unix(1_760_000_000, 0).to_string());
    assert_eq!(p["resourceUri"], "agent.bundle");
    assert_eq!(p["policy"]["uri"], "release.pub");
    assert_eq!(p["policy"]["digest"]["sha256"], sha256_hex(&dir.join("release.pub")));
    let inputs: Vec<(&str, &str)> = p["inputAttestations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["uri"].as_str().unwrap(), i["digest"]["sha256"].as_str().unwrap()))
        .collect();
    let provenance = sha256_hex(&dir.join("agent.bundle.provenance.sigstore.json"));
    let contract = sha256_hex(&dir.join("agent.bundle.contract.sigstore.json"));
    assert_eq!(
        inputs,
        [
            ("agent.bundle.provenance.sigstore.json", provenance.as_str()),
            ("agent.bundle.contract.sigstore.json", contract.as_str())
        ]
    );
    assert_eq!(p["verificationResult"], "PASSED");
    assert_eq!(
        p["verifiedLevels"],
        serde_json::json!(["SLSA_BUILD_LEVEL_1", "AGENT_BUNDLE_SIGNED", "AGENT_BUNDLE_CONTRACT_ATTESTED"])
    );
    assert_eq!(p["slsaVersion"], "1.0");
    let lines = verifiers_accept(dir, &sha256, &["one.vsa.json"]);
    if !lines.is_empty() {
        assert_eq!(
            lines,
            ["ok one.vsa.json PASSED SLSA_BUILD_LEVEL_1,AGENT_BUNDLE_SIGNED,AGENT_BUNDLE_CONTRACT_ATTESTED"]
        );
    }

    // With a baseline and a state file, their properties, and the baseline among the inputs.
    bundle(dir, EPOCH, &["baseline", "snapshot", "agent.bundle", "-o", "approved.toml"]).expect_code(0);
    let gated = ["--baseline", "approved.toml", "--state", "state.json"];
    bundle(dir, EPOCH, &[&gate[..], &emit(&gated, "gated.vsa.json")].concat()).expect_code(0);
    let p = statement(&dir.join("gated.vsa.json"))["predicate"].clone();
    let levels: Vec<&str> = p["verifiedLevels"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(levels.contains(&"AGENT_BUNDLE_CONTRACTS_APPROVED") && levels.contains(&"AGENT_BUNDLE_NOT_ROLLED_BACK"));
    assert_eq!(p["inputAttestations"][2]["uri"], "approved.toml");
    assert_eq!(p["inputAttestations"][2]["digest"]["sha256"], sha256_hex(&dir.join("approved.toml")));
}

#[test]
fn a_refused_bundle_gets_a_failed_vsa_that_names_the_code() {
    let env = Env::new();
    setup(&env);
    let dir = env.path();
    // Not the release key: untrusted_key.
    let out = bundle(
        dir,
        EPOCH,
        &[&["verify", "agent.bundle", "--key", "gate.pub"][..], &emit(&[], "untrusted.vsa.json")].concat(),
    );
    assert_eq!(out.expect_code(1).json()["code"], "untrusted_key");
    // Provenance required from another builder: provenance_mismatch, the attestations listed.
    let builder = ["--builder-id", "https://ci.example.com/other"];
    let out = bundle(
        dir,
        EPOCH,
        &[&["verify", "agent.bundle", "--key", "release.pub"][..], &builder, &emit(&[], "mismatch.vsa.json")].concat(),
    );
    assert_eq!(out.expect_code(1).json()["code"], "provenance_mismatch");
    for (file, code) in [("untrusted.vsa.json", "UNTRUSTED_KEY"), ("mismatch.vsa.json", "PROVENANCE_MISMATCH")] {
        let p = statement(&dir.join(file))["predicate"].clone();
        assert_eq!(p["verificationResult"], "FAILED", "{file}");
        assert_eq!(
            p["verifiedLevels"],
            serde_json::json!(["FAILED", format!("AGENT_BUNDLE_REFUSED_{code}")]),
            "{file}"
        );
    }
    let lines =
        verifiers_accept(dir, &sha256_hex(&dir.join("agent.bundle")), &["untrusted.vsa.json", "mismatch.vsa.json"]);
    if !lines.is_empty() {
        assert!(lines.iter().all(|l| l.contains(" FAILED FAILED,AGENT_BUNDLE_REFUSED_")), "{lines:?}");
    }
    // --emit-vsa needs its key and the verifier's id; a verifier id that is no URI is refused.
    let out = bundle(dir, EPOCH, &["verify", "agent.bundle", "--key", "release.pub", "--emit-vsa", "x.json"]);
    out.expect_code(2);
    let mut args = vec!["verify", "agent.bundle", "--key", "release.pub"];
    args.extend(["--emit-vsa", "x.json", "--vsa-key", "gate.key", "--verifier-id", "not a uri"]);
    bundle(dir, EPOCH, &args).expect_code(2);
    assert!(!dir.join("x.json").exists());
}

#[test]
fn push_attach_vsa_puts_it_beside_the_bundle_and_the_gate_leaves_it_alone() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    setup(&env);
    let dir = env.path();
    bundle(
        dir,
        EPOCH,
        &[&["verify", "agent.bundle", "--key", "release.pub", "--require-provenance"][..], &emit(&[], "file.vsa.json")]
            .concat(),
    )
    .expect_code(0);
    let reference = format!("oci://{}/team/mailer:1", reg.host());
    let push = |vsa: &str| {
        let args = ["push", "agent.bundle", &reference, "--plain-http", "--key", "release.pub", "--format", "json"];
        bundle(dir, EPOCH, &[&args[..], &["--attach-vsa", vsa]].concat())
    };
    // A summary of another bundle (or not a summary at all) is refused before anything moves.
    std::fs::copy(dir.join("agent.bundle.contract.sigstore.json"), dir.join("contract.json")).unwrap();
    push("contract.json").expect_code(2);
    let pushed = push("file.vsa.json").expect_code(0).json();
    assert_eq!(pushed["referrers"].as_array().map(Vec::len), Some(3), "{pushed}");
    let subject = pushed["digest"].as_str().unwrap();
    // Listed by the ORAS client (testdata/attest/referrers.py) as the third referrer.
    let Some(python) = python() else { return };
    std::fs::create_dir_all(dir.join("layers")).unwrap();
    let out = Command::new(python)
        .current_dir(dir)
        .arg(testdata("attest/referrers.py"))
        .args(["list", &reg.host(), "team/mailer", subject, "layers"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let index = &listed["index"];
    let vsa = &index["manifests"][2];
    assert_eq!(index["manifests"].as_array().map(Vec::len), Some(3), "{index}");
    assert_eq!(vsa["artifactType"], agent_bundle::attest::sigstore_bundle::MEDIA_TYPE_V03);
    assert_eq!(vsa["annotations"]["dev.sigstore.bundle.predicateType"], VSA_V1);

    // The gate judges the attestations and leaves the summary alone; its own summary of the
    // registry artifact names the reference, the layer and the referrers.
    let out = bundle(
        dir,
        EPOCH,
        &[
            &["verify", &reference, "--plain-http", "--key", "release.pub", "--require-provenance"][..],
            &emit(&[], "oci.vsa.json"),
        ]
        .concat(),
    );
    let json = out.expect_code(0).json();
    assert_eq!(json["attestations"].as_array().map(Vec::len), Some(2), "{json}");
    let s = statement(&dir.join("oci.vsa.json"));
    assert_eq!(
        s["subject"][0]["digest"]["sha256"],
        pushed["layer"]["digest"].as_str().unwrap().trim_start_matches("sha256:")
    );
    assert_eq!(s["predicate"]["resourceUri"], reference.as_str());
    let first = s["predicate"]["inputAttestations"][0]["uri"].as_str().unwrap();
    let referrer = index["manifests"][0]["digest"].as_str().unwrap();
    assert_eq!(first, format!("oci://{}/team/mailer@{referrer}", reg.host()));
    verifiers_accept(dir, &sha256_hex(&dir.join("agent.bundle")), &["oci.vsa.json"]);
}

#[test]
fn a_vsa_signed_by_a_p256_key_file_token_or_ssh_agent_verifies_with_securesystemslib() {
    use crate::keys::{PIN, SoftHsm, SshAgent};
    let env = Env::new();
    setup(&env);
    let dir = env.path();
    let sha256 = sha256_hex(&dir.join("agent.bundle"));
    let verify = |mut c: Command, key: &str, out: &str| {
        c.current_dir(dir).env("SOURCE_DATE_EPOCH", EPOCH).env_remove("GITHUB_ACTIONS");
        c.args(["verify", "agent.bundle", "--key", "release.pub", "--emit-vsa", out, "--vsa-key", key]);
        c.args(["--verifier-id", GATE]);
        Run::from(c.output().unwrap()).expect_code(0);
    };
    // A P-256 key file (PEM): deterministic signatures, so the same inputs give the same bytes.
    bundle(dir, EPOCH, &["keygen", "--kind", "p256", "gatep"]).expect_code(0);
    verify(bin(), "gatep.key", "file.vsa.json");
    verify(bin(), "gatep.key", "again.vsa.json");
    assert!(std::fs::read(dir.join("file.vsa.json")).unwrap() == std::fs::read(dir.join("again.vsa.json")).unwrap());
    let mut checked = vec![("gatep.pub", "file.vsa.json")];

    // A P-256 key made on a token, and one in a real ssh-agent beside an Ed25519 key.
    let hsm = SoftHsm::start();
    if let Some(hsm) = &hsm {
        hsm.keypairgen("EC:prime256v1", "gate", "0b");
        let der = dir.join("token.der");
        let mut read = hsm.tool("pkcs11-tool");
        read.arg("--module").arg(hsm.module());
        read.args(["--token-label", "bundle-test", "--read-object", "--type", "pubkey", "--label", "gate"]);
        let out = read.arg("-o").arg(&der).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let pem = crate::model_signing::pem_of_der(&std::fs::read(&der).unwrap());
        std::fs::write(dir.join("token.pub"), pem).unwrap();
        let uri = format!("pkcs11:token=bundle-test;object=gate?pin-value={PIN}");
        verify(hsm.command(&env), &uri, "token.vsa.json");
        checked.push(("token.pub", "token.vsa.json"));
    }
    let agent = crate::support::require_tool("ssh-agent").then(SshAgent::start);
    if let Some(agent) = &agent {
        let ed = agent.keygen("ed25519", "other");
        agent.add(&ed);
        let ec = agent.keygen("ecdsa", "gate");
        agent.add(&ec);
        let fingerprint = Command::new("ssh-keygen").args(["-l", "-E", "sha256", "-f"]).arg(&ec).output().unwrap();
        let fingerprint = String::from_utf8_lossy(&fingerprint.stdout).split_whitespace().nth(1).unwrap().to_owned();
        let out = Command::new("ssh-keygen").args(["-e", "-m", "PKCS8", "-f"]).arg(ec.with_extension("pub")).output();
        std::fs::write(dir.join("agent.pub"), out.unwrap().stdout).unwrap();
        verify(agent.command(&env), &format!("ssh-agent:{fingerprint}"), "agent.vsa.json");
        checked.push(("agent.pub", "agent.vsa.json"));
    }
    let Some(python) = python() else { return };
    for (public, file) in checked {
        let out = Command::new(&python)
            .current_dir(dir)
            .arg(testdata("attest/verify_vsa.py"))
            .args([public, &sha256, file])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && said.starts_with(&format!("ok {file} PASSED")), "{file}: {said}");
    }
}
