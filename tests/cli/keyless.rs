//! Keyless signers (issue 27): Sigstore bundles judged offline against a trusted root.
//!
//! The real vectors in testdata/sigstore/ sign small text files, not agent bundles, so their
//! verdicts are taken from the library the gate calls (`agent_bundle::keyless`), over the
//! SHA-256 of the file beside each, and compared with sigstore-python's on the same inputs.
//! The gate itself (`bundle verify --sigstore`) is run on a real agent bundle signed by
//! `keyless_pki.py`, a test Sigstore instance of our own (CA, CT log and Rekor keys).

use std::path::PathBuf;
use std::process::Command;

use agent_bundle::keyless::{IdentityPolicy, Matcher, Requirement, SigstoreBundle, TrustedRoot};
use sha2::{Digest, Sha256};

use crate::support::{self, Env, testdata};

const STAGING: &str = "sigstore/trusted_root.staging.json";
const GITHUB: &str = "https://github.com/login/oauth";
const WILLIAM: &str = "william@yossarian.net";
const BEACON: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
pub(crate) const ACTIONS: &str = "https://token.actions.githubusercontent.com";
/// The subject of the DSSE vector's in-toto statement (`a.txt`, not shipped with it).
const DSSE_SUBJECT: &str = "a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf";

/// One vector judged: which Sigstore bundle, over what, under which root and policy.
struct Case {
    name: &'static str,
    bundle: &'static str,
    /// The artifact's SHA-256: of this file, or this hex digest.
    artifact: Artifact,
    root: PathBuf,
    identity: &'static str,
    issuer: &'static str,
    expect: Result<(), &'static str>,
}

enum Artifact {
    File(&'static str),
    Digest(&'static str),
}

impl Case {
    fn new(name: &'static str, bundle: &'static str, identity: &'static str, expect: Result<(), &'static str>) -> Case {
        let artifact = bundle.trim_end_matches(".json").trim_end_matches(".sigstore");
        Case {
            name,
            bundle,
            artifact: Artifact::File(artifact),
            root: testdata(STAGING),
            identity,
            issuer: GITHUB,
            expect,
        }
    }

    fn sha256(&self) -> [u8; 32] {
        match self.artifact {
            Artifact::File(f) => {
                Sha256::digest(std::fs::read(testdata(&format!("sigstore/{f}"))).expect("artifact")).into()
            }
            Artifact::Digest(hex) => {
                let bytes: Vec<u8> =
                    (0..32).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex")).collect();
                bytes.try_into().expect("32 bytes")
            }
        }
    }

    /// Our verdict: Ok, or the reason code.
    fn ours(&self, identity: Matcher) -> Result<(), String> {
        let root = TrustedRoot::read(&self.root).map_err(|e| format!("root: {e}"))?;
        let bundle = SigstoreBundle::read(&testdata(&format!("sigstore/{}", self.bundle))).expect("vector");
        let policy = IdentityPolicy { identity, issuer: Matcher::Exact(self.issuer.into()), claims: vec![] };
        let requirement = Requirement { root, bundle, policy };
        requirement.judge(self.sha256()).map(|_| ()).map_err(|r| r.reason.as_str().to_owned())
    }

    /// sigstore-python's verdict on the same inputs: Ok, or its error.
    fn sigstore_python(&self) -> Result<(), String> {
        let hex: String = self.sha256().iter().map(|b| format!("{b:02x}")).collect();
        let out = Command::new("python3")
            .args(["-c", SIGSTORE_PYTHON])
            .arg(&self.root)
            .arg(testdata(&format!("sigstore/{}", self.bundle)))
            .args([&hex, self.identity, self.issuer])
            .output()
            .expect("python3");
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            out.status.success(),
            "{}: sigstore-python: {text}\n{}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        if text == "ok" { Ok(()) } else { Err(text) }
    }
}

/// sigstore-python 4.5.1, offline: `Verifier(trusted_root=TrustedRoot.from_file(...))` with an
/// `Identity` policy. For a DSSE bundle it checks the envelope; the subject is compared here,
/// as the gate compares it.
pub(crate) const SIGSTORE_PYTHON: &str = r#"
import sys, json
from sigstore.hashes import Hashed
from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier
from sigstore.verify.policy import Identity
from sigstore._utils import HashAlgorithm
root, bundle_path, digest, identity, issuer = sys.argv[1:6]
try:
    bundle = Bundle.from_json(open(bundle_path, "rb").read())
    verifier = Verifier(trusted_root=TrustedRoot.from_file(root))
    policy = Identity(identity=identity, issuer=issuer)
    if bundle._dsse_envelope is not None:
        _, payload = verifier.verify_dsse(bundle, policy)
        subjects = [s["digest"].get("sha256") for s in json.loads(payload)["subject"]]
        if digest not in subjects:
            raise Exception("no subject has the artifact's digest")
    else:
        verifier.verify_artifact(Hashed(algorithm=HashAlgorithm.SHA2_256, digest=bytes.fromhex(digest)), bundle, policy)
    print("ok")
except Exception as e:
    print("refused: %s: %s" % (type(e).__name__, " ".join(str(e).split())))
"#;

/// A copy of the staging root without `field` (its CAs, CT logs or Rekor logs).
fn root_without(dir: &Env, field: &str) -> PathBuf {
    let mut root: serde_json::Value =
        serde_json::from_slice(&std::fs::read(testdata(STAGING)).expect("root")).expect("json");
    root[field] = serde_json::json!([]);
    let path = dir.path().join(format!("root-without-{field}.json"));
    std::fs::write(&path, serde_json::to_vec(&root).expect("json")).expect("write");
    path
}

fn vectors(dir: &Env) -> Vec<Case> {
    let mut cases = vec![
        Case::new("v0.1", "bundle.txt.sigstore", "a@tny.town", Ok(())),
        Case::new("v0.3", "bundle_v3.txt.sigstore", WILLIAM, Ok(())),
        Case::new("v0.3 alternate media type", "bundle_v3_alt.txt.sigstore", WILLIAM, Ok(())),
        Case::new("Rekor v2 entry", "staging-rekor-v2.txt.sigstore.json", "jku@goto.fi", Ok(())),
        Case {
            artifact: Artifact::Digest(DSSE_SUBJECT),
            issuer: ACTIONS,
            ..Case::new("DSSE statement over its subject", "a.dsse.staging-rekor-v2.txt.sigstore.json", BEACON, Ok(()))
        },
        Case {
            issuer: ACTIONS,
            ..Case::new(
                "DSSE statement over another file",
                "a.dsse.staging-rekor-v2.txt.sigstore.json",
                BEACON,
                Err("keyless_subject_mismatch"),
            )
        },
        Case::new("wrong identity", "bundle_v3.txt.sigstore", "a@tny.town", Err("keyless_identity_mismatch")),
        Case {
            issuer: "https://accounts.google.com",
            ..Case::new("wrong issuer", "bundle_v3.txt.sigstore", WILLIAM, Err("keyless_identity_mismatch"))
        },
        Case {
            artifact: Artifact::File("bundle_v3_alt.txt"),
            ..Case::new("tampered artifact", "bundle_v3.txt.sigstore", WILLIAM, Err("keyless_subject_mismatch"))
        },
        Case {
            root: testdata("sigstore/trusted_root.production.json"),
            // The log entry is judged first: the production root does not know the staging log.
            ..Case::new("another instance's root", "bundle_v3.txt.sigstore", WILLIAM, Err("keyless_log_entry_invalid"))
        },
        Case {
            root: root_without(dir, "certificateAuthorities"),
            ..Case::new("root without the CA", "bundle_v3.txt.sigstore", WILLIAM, Err("keyless_untrusted_chain"))
        },
        Case {
            root: root_without(dir, "ctlogs"),
            ..Case::new("root without the CT logs", "bundle_v3.txt.sigstore", WILLIAM, Err("keyless_sct_invalid"))
        },
        Case {
            root: root_without(dir, "tlogs"),
            ..Case::new(
                "root without the Rekor logs",
                "bundle_v3.txt.sigstore",
                WILLIAM,
                Err("keyless_log_entry_invalid"),
            )
        },
        Case::new("CVE-2022-36056", "bundle_cve_2022_36056.txt.sigstore", WILLIAM, Err("keyless_log_entry_invalid")),
        Case::new(
            "invalid version",
            "bundle_invalid_version.txt.sigstore",
            WILLIAM,
            Err("keyless_unsupported_version"),
        ),
        Case::new("no checkpoint", "bundle_no_checkpoint.txt.sigstore", "a@tny.town", Err("keyless_log_entry_invalid")),
        Case::new("no log entry", "bundle_no_log_entry.txt.sigstore", "a@tny.town", Err("keyless_log_entry_missing")),
        Case::new(
            "no signed time",
            "bundle_v3_no_signed_time.txt.sigstore.json",
            WILLIAM,
            Err("keyless_timestamp_invalid"),
        ),
    ];
    cases.retain(|c| !c.name.is_empty());
    cases
}

#[test]
fn every_vector_gets_its_verdict_and_code_offline() {
    let dir = Env::new();
    let mut wrong = Vec::new();
    for case in vectors(&dir) {
        let ours = case.ours(Matcher::Exact(case.identity.into()));
        if ours.as_ref().map(|_| ()).map_err(String::as_str) != case.expect {
            wrong.push(format!("{}: expected {:?}, got {ours:?}", case.name, case.expect));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn sigstore_python_agrees_on_every_vector() {
    if !support::require_python_module("sigstore") {
        return;
    }
    let dir = Env::new();
    let mut disagree = Vec::new();
    for case in vectors(&dir) {
        let theirs = case.sigstore_python();
        if theirs.is_ok() != case.expect.is_ok() {
            disagree.push(format!("{}: we say {:?}, sigstore-python says {theirs:?}", case.name, case.expect));
        }
    }
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
}

#[test]
fn an_identity_pattern_must_match_the_whole_identity() {
    let dir = Env::new();
    let v3 = vectors(&dir).into_iter().find(|c| c.name == "v0.3").expect("the v0.3 case");
    let whole = Matcher::pattern("william@yossarian\\.(net|org)").expect("pattern");
    assert_eq!(v3.ours(whole), Ok(()));
    let part = Matcher::pattern("william@yossarian").expect("pattern");
    assert_eq!(v3.ours(part), Err("keyless_identity_mismatch".to_owned()));
}

pub(crate) const WORKFLOW: &str = "https://github.com/acme/agents/.github/workflows/release.yml@refs/tags/v1.0.0";

/// A packed agent bundle with a keyless signature over it from our own test instance, with
/// GitHub workflow claims (repository, ref, trigger, runner environment).
pub(crate) fn keyless_signed_mailer() -> Option<Env> {
    keyless_signed_mailer_with(&[])
}

fn keyless_signed_mailer_with(extra: &[&str]) -> Option<Env> {
    if !support::require_python_module("cryptography") {
        return None;
    }
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let key = testdata("keys/test.key").display().to_string();
    env.run(&["pack", "mailer", "--key", &key, "-o", "m.agent.bundle"]).expect_code(0);
    let out = Command::new("python3")
        .arg(testdata("sigstore/test_instance.py"))
        .arg(env.path().join("m.agent.bundle"))
        .arg(env.path())
        .args([WORKFLOW, ACTIONS, "12=https://github.com/acme/agents", "14=refs/tags/v1.0.0", "20=push"])
        .arg("11=github-hosted")
        .args(extra)
        .output()
        .expect("python3");
    assert!(out.status.success(), "test_instance.py: {}", String::from_utf8_lossy(&out.stderr));
    Some(env)
}

/// `bundle verify m.agent.bundle --key … --sigstore … --trusted-root …` plus `extra`, with no
/// network at all (a new network namespace with no interfaces up) where the kernel allows one.
fn verify_keyless(env: &Env, extra: &[&str]) -> support::Run {
    let key = testdata("keys/test.pub").display().to_string();
    let mut args = vec!["verify", "m.agent.bundle", "--key", &key, "--format", "json"];
    args.extend(["--sigstore", "artifact.sigstore.json", "--trusted-root", "trusted_root.json"]);
    args.extend(extra);
    run_offline(env, &args)
}

/// `bundle ARGS` in `env` with no network at all (a new network namespace with no interfaces
/// up) where the kernel allows one; required under BUNDLE_REQUIRE_TOOLS.
pub(crate) fn run_offline(env: &Env, args: &[&str]) -> support::Run {
    let offline = Command::new("unshare").args(["-rn", "true"]).output().is_ok_and(|o| o.status.success());
    if !offline {
        // Not a skip of the test: only of running it with no network.
        support::skip(
            "`unshare -rn` (the keyless gate offline)",
            &format!("{} and user namespaces", support::install_hint("unshare")),
            "BUNDLE_REQUIRE_TOOLS",
        );
        return env.run(args);
    }
    Command::new("unshare")
        .args(["-rn", env!("CARGO_BIN_EXE_bundle")])
        .args(args)
        .current_dir(env.path())
        .output()
        .expect("unshare")
        .into()
}

#[test]
fn the_gate_accepts_a_keyless_signed_agent_bundle_offline_and_names_the_signer() {
    let Some(env) = keyless_signed_mailer() else { return };
    let out = verify_keyless(
        &env,
        &[
            "--certificate-identity",
            WORKFLOW,
            "--certificate-oidc-issuer",
            ACTIONS,
            "--certificate-github-workflow-repository",
            "acme/agents",
            "--certificate-github-workflow-ref",
            "refs/tags/v1.0.0",
            "--certificate-github-workflow-trigger",
            "push",
            "--certificate-runner-environment",
            "github-hosted",
        ],
    );
    out.expect_code(0);
    let j = out.json();
    assert_eq!(j["keyless"]["identity"], WORKFLOW);
    assert_eq!(j["keyless"]["issuer"], ACTIONS);
    assert_eq!(j["keyless"]["kind"], "message_signature");
    let pattern = [
        "--certificate-identity-regexp",
        "https://github\\.com/acme/agents/\\.github/workflows/release\\.yml@refs/tags/v.*",
    ];
    verify_keyless(&env, &[pattern[0], pattern[1], "--certificate-oidc-issuer", ACTIONS]).expect_code(0);
}

#[test]
fn the_gate_refuses_another_signer_claim_or_file_with_its_code() {
    let Some(env) = keyless_signed_mailer() else { return };
    let code = |extra: &[&str]| {
        let out = verify_keyless(&env, extra);
        out.expect_code(1);
        out.json()["code"].as_str().expect("a code").to_owned()
    };
    let issuer = ["--certificate-oidc-issuer", ACTIONS];
    let identity = ["--certificate-identity", WORKFLOW];
    let other = "https://github.com/acme/agents/.github/workflows/other.yml@refs/tags/v1.0.0";
    assert_eq!(code(&["--certificate-identity", other, issuer[0], issuer[1]]), "keyless_identity_mismatch");
    assert_eq!(code(&[identity[0], identity[1], "--certificate-oidc-issuer", GITHUB]), "keyless_identity_mismatch");
    let partial = ["--certificate-identity-regexp", "https://github\\.com/acme/"];
    assert_eq!(code(&[partial[0], partial[1], issuer[0], issuer[1]]), "keyless_identity_mismatch");
    for claim in [
        ["--certificate-github-workflow-repository", "acme/other"],
        ["--certificate-github-workflow-ref", "refs/heads/main"],
        ["--certificate-github-workflow-trigger", "pull_request"],
        ["--certificate-runner-environment", "self-hosted"],
        ["--certificate-github-workflow-sha", "0000000000000000000000000000000000000000"],
    ] {
        let args = [identity[0], identity[1], issuer[0], issuer[1], claim[0], claim[1]];
        assert_eq!(code(&args), "keyless_identity_mismatch", "{claim:?}");
    }

    // The same Sigstore bundle beside another agent bundle: it signs another file.
    let key = testdata("keys/test.key").display().to_string();
    support::set_version(&env.path().join("mailer"), "1.0.1");
    env.run(&["pack", "mailer", "--key", &key, "-o", "m2.agent.bundle"]).expect_code(0);
    std::fs::rename(env.path().join("m2.agent.bundle"), env.path().join("m.agent.bundle")).expect("rename");
    assert_eq!(code(&[identity[0], identity[1], issuer[0], issuer[1]]), "keyless_subject_mismatch");
}

#[test]
fn a_bad_signature_or_a_malformed_sigstore_bundle_is_refused_with_its_code() {
    let Some(env) = keyless_signed_mailer_with(&["bad-signature"]) else { return };
    let policy = ["--certificate-identity", WORKFLOW, "--certificate-oidc-issuer", ACTIONS];
    let out = verify_keyless(&env, &policy);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "keyless_signature_invalid");
    std::fs::write(env.path().join("artifact.sigstore.json"), "not json").expect("write");
    let out = verify_keyless(&env, &policy);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "keyless_malformed");
}

#[test]
fn a_trusted_root_that_is_missing_or_not_one_stops_the_gate_without_a_download() {
    let Some(env) = keyless_signed_mailer() else { return };
    let policy = ["--certificate-identity", WORKFLOW, "--certificate-oidc-issuer", ACTIONS];
    std::fs::write(env.path().join("trusted_root.json"), "{}").expect("write");
    let out = verify_keyless(&env, &policy);
    out.expect_code(2);
    assert!(out.stdout.contains("not a usable Sigstore trusted root"), "{}", out.stdout);
    std::fs::remove_file(env.path().join("trusted_root.json")).expect("remove");
    verify_keyless(&env, &policy).expect_code(2);
    // No identity policy is a usage error, never "any identity".
    verify_keyless(&env, &policy[2..]).expect_code(2);
}

#[test]
fn sigstore_python_accepts_our_test_instance_signature_over_the_agent_bundle() {
    if !support::require_python_module("sigstore") {
        return;
    }
    let Some(env) = keyless_signed_mailer() else { return };
    let bundle = std::fs::read(env.path().join("m.agent.bundle")).expect("bundle");
    let hex: String = Sha256::digest(&bundle).iter().map(|b| format!("{b:02x}")).collect();
    let judge = |identity: &str| {
        let out = Command::new("python3")
            .args(["-c", SIGSTORE_PYTHON])
            .arg(env.path().join("trusted_root.json"))
            .arg(env.path().join("artifact.sigstore.json"))
            .args([&hex, identity, ACTIONS])
            .output()
            .expect("python3");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(judge(WORKFLOW), "ok");
    assert!(judge("https://github.com/acme/agents/x").starts_with("refused"), "{}", judge("x"));
}

#[test]
fn unpack_takes_sigstore_and_a_refused_keyless_signature_leaves_nothing() {
    let Some(env) = keyless_signed_mailer() else { return };
    let key = testdata("keys/test.pub").display().to_string();
    let unpack = |dir: &str, identity: &str| {
        let mut args = vec!["unpack", "m.agent.bundle", dir, "--key", &key, "--format", "json"];
        args.extend(["--sigstore", "artifact.sigstore.json", "--trusted-root", "trusted_root.json"]);
        args.extend(["--certificate-identity", identity, "--certificate-oidc-issuer", ACTIONS]);
        run_offline(&env, &args)
    };
    let other = "https://github.com/acme/agents/.github/workflows/other.yml@refs/tags/v1.0.0";
    let refused = unpack("refused", other);
    refused.expect_code(1);
    assert_eq!(refused.json()["code"], "keyless_identity_mismatch");
    assert!(!env.path().join("refused").exists(), "a refused bundle is not unpacked");
    let out = unpack("deployed", WORKFLOW);
    out.expect_code(0);
    assert_eq!(out.json()["keyless"]["identity"], WORKFLOW);
    assert!(env.path().join("deployed/tools.json").is_file());
}

#[test]
fn a_registry_artifact_is_judged_with_sigstore_by_verify_and_pull() {
    let Some(env) = keyless_signed_mailer() else { return };
    let Some(reg) = crate::registry::start(crate::registry::Setup::Plain) else { return };
    let key = testdata("keys/test.pub").display().to_string();
    let r = format!("oci://{}/team/mailer:1.0.0", reg.host());
    env.run(&["push", "m.agent.bundle", &r, "--key", &key, "--plain-http"]).expect_code(0);
    let keyless = |identity: &'static str| {
        vec![
            "--sigstore",
            "artifact.sigstore.json",
            "--trusted-root",
            "trusted_root.json",
            "--certificate-identity",
            identity,
            "--certificate-oidc-issuer",
            ACTIONS,
        ]
    };
    let other = "https://github.com/acme/agents/.github/workflows/other.yml@refs/tags/v1.0.0";
    let mut verify = vec!["verify", &r, "--plain-http", "--key", &key, "--format", "json"];
    verify.extend(keyless(WORKFLOW));
    let out = env.run(&verify);
    out.expect_code(0);
    assert_eq!(out.json()["keyless"]["identity"], WORKFLOW);

    let mut pull = vec!["pull", &r, "--plain-http", "--key", &key, "-o", "refused.agent.bundle", "--format", "json"];
    pull.extend(keyless(other));
    let out = env.run(&pull);
    out.expect_code(1);
    assert_eq!(out.json()["code"], "keyless_identity_mismatch");
    assert!(!env.path().join("refused.agent.bundle").exists(), "a refused pull writes nothing");
    let mut pull = vec!["pull", &r, "--plain-http", "--key", &key, "-o", "pulled.agent.bundle", "--format", "json"];
    pull.extend(keyless(WORKFLOW));
    env.run(&pull).expect_code(0);
    let pulled = std::fs::read(env.path().join("pulled.agent.bundle")).expect("pulled");
    assert_eq!(pulled, std::fs::read(env.path().join("m.agent.bundle")).expect("bundle"));
}
