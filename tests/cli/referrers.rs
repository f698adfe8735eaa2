//! Attestations as referrers in cosign's Sigstore-bundle layout (cosign `specs/BUNDLE_SPEC.md`),
//! read back by other clients and verifiers against the real registry: skopeo and the ORAS
//! Python client list them with their `artifactType` and annotations, sigstore-models parses the
//! layer, securesystemslib and sigstore-js (`@sigstore/verify`) verify its signature with the
//! public key; and referrers in the layout of earlier releases keep verifying.

use std::path::Path;
use std::process::Command;

use agent_bundle::attest::sigstore_bundle::MEDIA_TYPE_V03 as SIGSTORE;
use agent_bundle::evidence::files::{self, AGENT_CONTRACT_V1, Kind, SLSA_PROVENANCE_V1};
use agent_bundle::timestamp::Timestamp;
use serde_json::Value;

use crate::attest::{independent_verifiers_accept, python};
use crate::keys::write_file_key;
use crate::registry::{self, Setup};
use crate::support::{Env, Run, bin, require_node_module, require_tool, testdata};

const EPOCH: i64 = 1_760_000_000;

/// `bundle` in `dir`, reproducible, with no credentials of the machine's user.
fn bundle(dir: &Path, args: &[&str]) -> Run {
    let mut c = bin();
    c.current_dir(dir).env("SOURCE_DATE_EPOCH", EPOCH.to_string()).env_remove("GITHUB_ACTIONS");
    c.env("DOCKER_CONFIG", dir.join("no-docker-config"));
    c.args(args).output().expect("run bundle").into()
}

/// Runs testdata/attest/referrers.py (the ORAS Python client) with `args`.
fn oras(python: &str, dir: &Path, args: &[&str]) -> Value {
    let out = Command::new(python).current_dir(dir).arg(testdata("attest/referrers.py")).args(args).output().unwrap();
    assert!(out.status.success(), "referrers.py {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The packed mailer with its attestations, pushed; returns the push report.
fn pushed(env: &Env, reference: &str) -> Value {
    let dir = env.path();
    env.copy("agents/mailer", "mailer");
    let key = write_file_key(dir, &[42; 32]);
    bundle(dir, &["pubkey", &key, "-o", "release.pub"]).expect_code(0);
    bundle(dir, &["pack", "mailer", "--attest", "--key", &key, "-o", "agent.bundle"]).expect_code(0);
    bundle(dir, &["push", "agent.bundle", reference, "--plain-http", "--key", "release.pub", "--format", "json"])
        .expect_code(0)
        .json()
}

#[test]
fn pushed_attestations_take_cosigns_layout_which_skopeo_oras_sigstore_models_and_sigstore_js_read() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let dir = env.path();
    let reference = format!("oci://{}/team/mailer:1", reg.host());
    let report = pushed(&env, &reference);
    let subject = report["digest"].as_str().unwrap().to_owned();
    let created = Timestamp::from_unix(EPOCH, 0).to_string();
    let predicates = [SLSA_PROVENANCE_V1, AGENT_CONTRACT_V1];
    // What each index entry and each referrer manifest must say (BUNDLE_SPEC.md).
    let expect_entry = |entry: &Value, predicate: &str| {
        assert_eq!(entry["artifactType"], SIGSTORE, "{entry}");
        let annotations = &entry["annotations"];
        assert_eq!(annotations["dev.sigstore.bundle.content"], "dsse-envelope", "{entry}");
        assert_eq!(annotations["dev.sigstore.bundle.predicateType"], predicate, "{entry}");
        assert_eq!(annotations["org.opencontainers.image.created"], created.as_str(), "{entry}");
    };

    // skopeo reads the referrers index under the fallback tag (docker-registry 2.8 has no
    // referrers API).
    if require_tool("skopeo") {
        let tag = subject.replacen(':', "-", 1);
        let out = Command::new("skopeo")
            .args(["inspect", "--raw", "--tls-verify=false", &format!("docker://{}/team/mailer:{tag}", reg.host())])
            .output()
            .unwrap();
        assert!(out.status.success(), "skopeo: {}", String::from_utf8_lossy(&out.stderr));
        let index: Value = serde_json::from_slice(&out.stdout).unwrap();
        let entries = index["manifests"].as_array().unwrap();
        assert_eq!(entries.len(), 2, "{index}");
        for (entry, predicate) in entries.iter().zip(predicates) {
            expect_entry(entry, predicate);
        }
    }

    // The ORAS Python client: the index, each manifest (empty config, one titled layer,
    // subject), and the layers, which the verifiers then read.
    let Some(python) = python() else { return };
    std::fs::create_dir_all(dir.join("layers")).unwrap();
    let listed = oras(&python, dir, &["list", &reg.host(), "team/mailer", &subject, "layers"]);
    let entries = listed["index"]["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{listed}");
    let mut layers = Vec::new();
    for (entry, predicate) in entries.iter().zip(predicates) {
        expect_entry(entry, predicate);
        let manifest = &listed["manifests"][entry["digest"].as_str().unwrap()];
        expect_entry(manifest, predicate);
        assert_eq!(manifest["config"]["mediaType"], "application/vnd.oci.empty.v1+json");
        assert_eq!(manifest["config"]["size"], 2);
        assert_eq!(manifest["subject"]["digest"], subject.as_str());
        let [layer] = manifest["layers"].as_array().unwrap().as_slice() else { panic!("one layer: {manifest}") };
        assert_eq!(layer["mediaType"], SIGSTORE);
        let hex = layer["digest"].as_str().unwrap().strip_prefix("sha256:").unwrap().to_owned();
        assert_eq!(layer["annotations"]["org.opencontainers.image.title"], format!("sha256-{hex}.sigstore.json"));
        layers.push(format!("layers/{hex}"));
    }
    // The layers are the files beside the bundle, byte for byte.
    for (layer, kind) in layers.iter().zip(Kind::ALL) {
        let beside = files::beside(&dir.join("agent.bundle"), kind);
        assert!(std::fs::read(dir.join(layer)).unwrap() == std::fs::read(beside).unwrap(), "{layer}");
    }
    let layers: Vec<&str> = layers.iter().map(String::as_str).collect();
    // sigstore-models parses them, securesystemslib verifies their envelopes,
    // in-toto-attestation their statements.
    independent_verifiers_accept(dir, "release.pub", "agent.bundle", &layers);
    // sigstore-js verifies the key-signed bundle with the public key, and refuses it once a
    // byte of the payload changed.
    if let Some(modules) = require_node_module("@sigstore/verify") {
        let node = |files: &[&str]| {
            Command::new("node")
                .current_dir(dir)
                .env("NODE_PATH", &modules)
                .arg(testdata("attest/verify.js"))
                .arg("release.pub")
                .args(files)
                .output()
                .unwrap()
        };
        let out = node(&layers);
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "@sigstore/verify refused:\n{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("ok ")).count(), 2, "{text}");
        let mut doc: Value = serde_json::from_slice(&std::fs::read(dir.join(layers[1])).unwrap()).unwrap();
        let payload = doc["dsseEnvelope"]["payload"].as_str().unwrap();
        let flipped =
            if payload.starts_with('e') { payload.replacen('e', "f", 1) } else { format!("e{}", &payload[1..]) };
        doc["dsseEnvelope"]["payload"] = flipped.into();
        std::fs::write(dir.join("tampered.json"), serde_json::to_vec(&doc).unwrap()).unwrap();
        let out = node(&["tampered.json"]);
        assert!(!out.status.success(), "a tampered payload verified");
        assert!(String::from_utf8_lossy(&out.stderr).contains("SIGNATURE_ERROR"), "{out:?}");
    }

    // Pushing the same files again changes nothing: the same referrers, no new entry.
    let again =
        bundle(dir, &["push", "agent.bundle", &reference, "--plain-http", "--key", "release.pub", "--format", "json"]);
    assert_eq!(again.expect_code(0).json()["referrers"], report["referrers"]);
    let listed = oras(&python, dir, &["list", &reg.host(), "team/mailer", &subject, "layers"]);
    assert_eq!(listed["index"]["manifests"].as_array().unwrap().len(), 2);
    // And the gate finds them there.
    let out = bundle(
        dir,
        &["verify", &reference, "--plain-http", "--key", "release.pub", "--require-provenance", "--format", "json"],
    );
    let json = out.expect_code(0).json();
    let judged: Vec<(&str, &str)> = json["attestations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["predicate_type"].as_str().unwrap(), a["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(judged, [(SLSA_PROVENANCE_V1, "ok"), (AGENT_CONTRACT_V1, "ok")], "{json}");
}

/// Releases before cosign's layout pushed each attestation with an `artifactType` of its
/// own; a registry holding those keeps passing the gate (verify, pull, unpack, inspect).
#[test]
fn attestations_in_the_layout_of_earlier_releases_keep_verifying() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let Some(python) = python() else { return };
    let env = Env::new();
    let dir = env.path();
    // The bundle alone, then its attestations attached the old way by another client.
    let reference = format!("oci://{}/team/old:1", reg.host());
    std::fs::create_dir_all(dir.join("bare")).unwrap();
    env.copy("agents/mailer", "mailer");
    let key = write_file_key(dir, &[42; 32]);
    bundle(dir, &["pubkey", &key, "-o", "release.pub"]).expect_code(0);
    bundle(dir, &["pack", "mailer", "--attest", "--key", &key, "-o", "agent.bundle"]).expect_code(0);
    std::fs::copy(dir.join("agent.bundle"), dir.join("bare/agent.bundle")).unwrap();
    let report = bundle(
        dir,
        &["push", "bare/agent.bundle", &reference, "--plain-http", "--key", "release.pub", "--format", "json"],
    );
    let report = report.expect_code(0).json();
    assert_eq!(report["referrers"].as_array().map_or(0, Vec::len), 0, "{report}");
    let subject = report["digest"].as_str().unwrap();
    let size = registry::get(reg.port, &format!("/v2/team/old/manifests/{subject}")).len().to_string();
    let pairs: Vec<String> = Kind::ALL
        .into_iter()
        .map(|k| format!("{}={}", k.artifact_type(), files::beside(&dir.join("agent.bundle"), k).display()))
        .collect();
    let mut args = vec!["attach-legacy", &*Box::leak(reg.host().into_boxed_str()), "team/old", subject, &size];
    args.extend(pairs.iter().map(String::as_str));
    oras(&python, dir, &args);

    let gate = ["--plain-http", "--key", "release.pub", "--require-provenance", "--format", "json"];
    let verdicts = |json: &Value| -> Vec<String> {
        json["attestations"].as_array().unwrap().iter().map(|a| a["verdict"].as_str().unwrap().to_owned()).collect()
    };
    let verified = bundle(dir, &[&["verify", &reference][..], &gate].concat()).expect_code(0).json();
    assert_eq!(verdicts(&verified), ["ok", "ok"], "{verified}");
    let pulled = bundle(dir, &[&["pull", &reference, "-o", "pulled.bundle"][..], &gate].concat());
    assert_eq!(verdicts(&pulled.expect_code(0).json()), ["ok", "ok"]);
    bundle(dir, &[&["unpack", &reference, "out"][..], &gate].concat()).expect_code(0);
    let inspected = bundle(dir, &["inspect", &reference, "--plain-http", "--key", "release.pub", "--format", "json"]);
    let inspected = inspected.expect_code(0).json();
    assert_eq!(inspected["attestations"].as_array().map(Vec::len), Some(2), "{inspected}");
}

/// With the wrong key, an `oci://` artifact with attestations is refused for its pack
/// signature (`untrusted_key`, as the same file is), not for the attestations that key also
/// fails to verify: the signature is judged first, whatever carries the evidence.
#[test]
fn the_wrong_key_names_the_pack_signature_not_the_attestations() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let dir = env.path();
    let reference = format!("oci://{}/team/mailer:1", reg.host());
    pushed(&env, &reference);
    std::fs::create_dir(dir.join("other")).unwrap();
    let other = write_file_key(&dir.join("other"), &[7; 32]);
    bundle(dir, &["pubkey", &other, "-o", "other.pub"]).expect_code(0);
    let file = bundle(dir, &["verify", "agent.bundle", "--key", "other.pub", "--format", "json"]);
    assert_eq!(file.expect_code(1).json()["code"], "untrusted_key");
    for command in ["verify", "pull", "unpack"] {
        let mut args = vec![command, &reference];
        match command {
            "pull" => args.extend(["-o", "pulled.bundle"]),
            "unpack" => args.push("out"),
            _ => {}
        }
        for extra in [&[][..], &["--require-provenance"][..]] {
            let mut all = args.clone();
            all.extend(["--plain-http", "--key", "other.pub", "--format", "json"]);
            all.extend(extra);
            let json = bundle(dir, &all).expect_code(1).json();
            assert_eq!(json["code"], "untrusted_key", "{command} {extra:?}: {json}");
        }
    }
    assert!(!dir.join("pulled.bundle").exists() && !dir.join("out").exists());
}
