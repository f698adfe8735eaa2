//! A certificate identity as a signer of the trust policy (issue 27): a keyless signature made
//! by our own Sigstore test instance (`testdata/sigstore/test_instance.py`) over a real agent
//! bundle counts towards a rule's threshold beside a reviewer's key, offline; a wrong, revoked
//! or out-of-scope identity does not, each with its code. `bundle trust import-root` brings
//! the instance's trusted root into the signed policy.

use std::process::Command;

use sha2::{Digest, Sha256};

use crate::keyless::{ACTIONS, SIGSTORE_PYTHON, WORKFLOW, run_offline};
use crate::signers::refused;
use crate::support::{self, Env, Run, testdata};

const BUNDLE: &str = "mailer.agent.bundle";
const BESIDE: &str = "mailer.agent.bundle.sigstore.json";

/// The mailer packed by a CI key the policy does not know, signed keyless as the release
/// workflow would sign it (beside the bundle, where `sigstore sign` puts it), and the keys of a
/// security reviewer and a second release engineer. `None` without python's `cryptography`.
fn release() -> Option<Env> {
    release_packed_by("ci")
}

/// As [`release`], but packed by `packer`'s key.
fn release_packed_by(packer: &str) -> Option<Env> {
    if !support::require_python_module("cryptography") {
        return None;
    }
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    for name in ["ci", "reviewer", "carol"] {
        env.run(&["keygen", name]).expect_code(0);
    }
    env.run(&["pack", "mailer", "--key", &format!("{packer}.key"), "-o", BUNDLE]).expect_code(0);
    sign_keyless(&env, BUNDLE);
    std::fs::rename(env.path().join("artifact.sigstore.json"), env.path().join(BESIDE)).expect("rename");
    Some(env)
}

/// A keyless signature over `file` by the release workflow, with its GitHub claims; writes
/// artifact.sigstore.json and the instance's trusted_root.json.
fn sign_keyless(env: &Env, file: &str) {
    let out = Command::new("python3")
        .arg(testdata("sigstore/test_instance.py"))
        .arg(env.path().join(file))
        .arg(env.path())
        .args([WORKFLOW, ACTIONS, "12=https://github.com/acme/agents", "14=refs/tags/v1.0.0", "20=push"])
        .arg("11=github-hosted")
        .output()
        .expect("python3");
    assert!(out.status.success(), "test_instance.py: {}", String::from_utf8_lossy(&out.stderr));
}

fn public(env: &Env, name: &str) -> String {
    let text = std::fs::read_to_string(env.path().join(format!("{name}.pub"))).expect("pub");
    text.lines().nth(1).expect("key line").to_owned()
}

/// The release workflow's identity as the policy names it, exactly, with workflow claims.
const IDENTITY: &str = "certificate_identity_regexp = \"https://github\\\\.com/acme/agents/\\\\.github/workflows/release\\\\.yml@refs/tags/v.*\"\ncertificate_oidc_issuer = \"https://token.actions.githubusercontent.com\"\ncertificate_github_workflow_repository = \"acme/agents\"\ncertificate_runner_environment = \"github-hosted\"\n";

/// Writes `file`: mail* agents need 2 distinct signers; the release workflow's identity (with
/// `identity_extra` lines), reviewer (security) and carol as signers; the root imported from the
/// test instance and the policy signed by the reviewer.
fn policy(env: &Env, file: &str, identity: &str, identity_extra: &str) {
    let text = format!(
        "format = 1\nid = \"acme\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n\n[root]\nthreshold = 1\nsigners = [\"reviewer\"]\n\n\
         [[signer]]\nname = \"release-workflow\"\nroles = [\"release\"]\n{identity}{identity_extra}\n\
         [[signer]]\nname = \"reviewer\"\npublic_key = \"{}\"\nroles = [\"security\"]\n\n\
         [[signer]]\nname = \"carol\"\npublic_key = \"{}\"\n\n\
         [[rule]]\nagents = [\"mail*\"]\nthreshold = 2\n",
        public(env, "reviewer"),
        public(env, "carol")
    );
    std::fs::write(env.path().join(file), text).expect("write policy");
    env.run(&["trust", "import-root", file, "trusted_root.json"]).expect_code(0);
    env.run(&["trust", "sign", file, "--key", "reviewer.key"]).expect_code(0);
}

fn verify(env: &Env, policy: &str, extra: &[&str]) -> Run {
    let mut args = vec!["verify", BUNDLE, "--trust-policy", policy, "--format", "json"];
    args.extend_from_slice(extra);
    run_offline(env, &args)
}

/// Each signature's source and status, in the verdict's order.
fn statuses(doc: &serde_json::Value) -> Vec<(String, String)> {
    let sigs = doc["signers"]["signatures"].as_array().expect("signatures");
    sigs.iter()
        .map(|s| {
            (s["source"].as_str().unwrap_or_default().to_owned(), s["status"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

/// The verdict on the keyless signature beside the bundle.
fn keyless_of(doc: &serde_json::Value) -> serde_json::Value {
    let sigs = doc["signers"]["signatures"].as_array().expect("signatures");
    sigs.iter().find(|s| s["source"] == BESIDE).cloned().unwrap_or_else(|| panic!("no keyless verdict: {doc:#}"))
}

#[test]
fn two_of_a_release_workflow_identity_and_a_reviewer_key_needs_both() {
    let Some(env) = release() else { return };
    policy(&env, "policy.toml", IDENTITY, "");

    // The keyless signature alone: it authenticates the manifest and counts, but is 1 of 2.
    let alone = refused(&verify(&env, "policy.toml", &[]), "threshold_not_met");
    assert_eq!(
        statuses(&alone),
        [("manifest.toml.minisig".to_owned(), "unknown_key".to_owned()), (BESIDE.to_owned(), "counted".to_owned())]
    );
    let keyless = keyless_of(&alone);
    assert_eq!(keyless["identity"], WORKFLOW);
    assert_eq!(keyless["issuer"], ACTIONS);
    assert_eq!(keyless["signer"], "release-workflow");
    assert_eq!(alone["signers"]["rules"][0]["counted"], 1);

    // The reviewer co-signs (cosign's gate believes the manifest on the keyless signature).
    env.run(&["cosign", BUNDLE, "--key", "reviewer.key", "--trust-policy", "policy.toml"]).expect_code(0);
    let both = verify(&env, "policy.toml", &[]);
    both.expect_code(0);
    let doc = both.json();
    assert_eq!(doc["signers"]["rules"][0]["counted"], 2, "{doc:#}");
    assert_eq!(doc["signers"]["accepted"], true);
    let counted: Vec<_> = statuses(&doc).into_iter().filter(|(_, s)| s == "counted").map(|(src, _)| src).collect();
    assert_eq!(counted, ["cosig:1", BESIDE]);

    // The human verdict lists the identity beside the keys.
    let human = run_offline(&env, &["verify", BUNDLE, "--trust-policy", "policy.toml"]);
    human.expect_code(0);
    assert!(
        human
            .stderr
            .contains(&format!("{BESIDE} identity {WORKFLOW} ({ACTIONS}) `release-workflow` [release]: counted")),
        "{}",
        human.stderr
    );

    // The key alone: the Sigstore bundle moved away from the bundle.
    std::fs::rename(env.path().join(BESIDE), env.path().join("elsewhere.sigstore.json")).expect("rename");
    refused(&verify(&env, "policy.toml", &[]), "threshold_not_met");
    // ... and named with --sigstore, it counts again.
    verify(&env, "policy.toml", &["--sigstore", "elsewhere.sigstore.json"]).expect_code(0);
    // Under a policy the identity and the root are the policy's, not flags'.
    let flags = ["--sigstore", "elsewhere.sigstore.json", "--trusted-root", "trusted_root.json"];
    verify(&env, "policy.toml", &flags).expect_code(2);
}

#[test]
fn a_wrong_out_of_scope_or_revoked_identity_does_not_count_each_with_its_code() {
    let Some(env) = release() else { return };
    // The reviewer's co-signature is made under a policy that trusts the identity.
    policy(&env, "policy.toml", IDENTITY, "");
    env.run(&["cosign", BUNDLE, "--key", "reviewer.key", "--trust-policy", "policy.toml"]).expect_code(0);

    let other = IDENTITY.replace("release\\\\.yml", "deploy\\\\.yml");
    policy(&env, "wrong.toml", &other, "");
    let doc = refused(&verify(&env, "wrong.toml", &[]), "keyless_identity_mismatch");
    assert_eq!(keyless_of(&doc)["status"], "unknown_identity", "{doc:#}");
    let claim = IDENTITY.replace("acme/agents", "acme/other");
    policy(&env, "claim.toml", &claim, "");
    refused(&verify(&env, "claim.toml", &[]), "keyless_identity_mismatch");

    policy(&env, "scoped.toml", IDENTITY, "agents = [\"payments-*\"]\n");
    let doc = refused(&verify(&env, "scoped.toml", &[]), "untrusted_key");
    assert_eq!(keyless_of(&doc)["status"], "not_for_agent", "{doc:#}");

    policy(&env, "revoked.toml", IDENTITY, "revoked = true\n");
    let doc = refused(&verify(&env, "revoked.toml", &[]), "revoked_key");
    assert_eq!(keyless_of(&doc)["status"], "revoked", "{doc:#}");

    policy(&env, "window.toml", IDENTITY, "not_after = 2020-01-01T00:00:00Z\n");
    refused(&verify(&env, "window.toml", &[]), "key_outside_window");

    // The same Sigstore bundle beside a different bundle file: it signs another file.
    support::set_version(&env.path().join("mailer"), "1.0.1");
    env.run(&["pack", "mailer", "--key", "ci.key", "-o", "m2.agent.bundle"]).expect_code(0);
    std::fs::rename(env.path().join("m2.agent.bundle"), env.path().join(BUNDLE)).expect("rename");
    // cosign believed the manifest on the keyless signature alone: it refuses, signing nothing.
    let cosign = env.run(&["cosign", BUNDLE, "--key", "carol.key", "--trust-policy", "policy.toml"]);
    cosign.expect_code(1);
    assert!(cosign.stderr.contains("[keyless_subject_mismatch]"), "{}", cosign.stderr);
    // The gate: 1 of 2 even counting the keyless signature, refused before the file is read.
    refused(&verify(&env, "policy.toml", &[]), "threshold_not_met");
    // Packed by carol, the keyless signature would make the second signer: once the file is
    // read it is withdrawn, and named as the cause.
    env.run(&["pack", "mailer", "--key", "carol.key", "-o", "m3.agent.bundle"]).expect_code(0);
    std::fs::rename(env.path().join("m3.agent.bundle"), env.path().join(BUNDLE)).expect("rename");
    std::fs::remove_file(env.path().join(format!("{BUNDLE}.cosig"))).expect("remove the stale cosig");
    let doc = refused(&verify(&env, "policy.toml", &[]), "keyless_subject_mismatch");
    assert_eq!(keyless_of(&doc)["status"], "subject_mismatch", "{doc:#}");
    assert_eq!(doc["signers"]["rules"][0]["counted"], 1, "{doc:#}");
}

#[test]
fn a_sigstore_bundle_that_does_not_verify_is_named_with_its_keyless_code() {
    let Some(env) = release() else { return };
    policy(&env, "policy.toml", IDENTITY, "");
    env.run(&["cosign", BUNDLE, "--key", "reviewer.key", "--trust-policy", "policy.toml"]).expect_code(0);
    // Another instance's root in the policy: the chain, SCT and log are all unknown to it.
    let other = Env::new();
    other.copy("agents/mailer", "mailer");
    std::fs::write(other.path().join("x"), b"x").expect("write");
    sign_keyless(&other, "x");
    let text = std::fs::read_to_string(env.path().join("policy.toml")).expect("policy");
    std::fs::write(env.path().join("other.toml"), &text).expect("write");
    env.run(&["trust", "import-root", "other.toml", &other.path().join("trusted_root.json").display().to_string()])
        .expect_code(0);
    env.run(&["trust", "sign", "other.toml", "--key", "reviewer.key"]).expect_code(0);
    let doc = refused(&verify(&env, "other.toml", &[]), "keyless_log_entry_invalid");
    let keyless = keyless_of(&doc);
    assert_eq!(keyless["status"], "keyless_invalid", "{doc:#}");
    assert_eq!(keyless["code"], "keyless_log_entry_invalid", "{doc:#}");

    std::fs::write(env.path().join(BESIDE), "not json").expect("write");
    refused(&verify(&env, "policy.toml", &[]), "keyless_malformed");
}

#[test]
fn sigstore_python_accepts_the_keyless_signature_the_policy_counts() {
    let Some(env) = release() else { return };
    if !support::require_python_module("sigstore") {
        return;
    }
    let bundle = std::fs::read(env.path().join(BUNDLE)).expect("bundle");
    let hex: String = Sha256::digest(&bundle).iter().map(|b| format!("{b:02x}")).collect();
    let out = Command::new("python3")
        .args(["-c", SIGSTORE_PYTHON])
        .arg(env.path().join("trusted_root.json"))
        .arg(env.path().join(BESIDE))
        .args([&hex, WORKFLOW, ACTIONS])
        .output()
        .expect("python3");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok", "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn trust_import_root_pins_the_root_in_the_signed_policy_and_says_how_old_it_is() {
    let Some(env) = release() else { return };
    policy(&env, "policy.toml", IDENTITY, "");
    let root = std::fs::read(env.path().join("trusted_root.json")).expect("root");
    let sha: String = Sha256::digest(&root).iter().map(|b| format!("{b:02x}")).collect();
    let text = std::fs::read_to_string(env.path().join("policy.toml")).expect("policy");
    assert!(
        text.contains(&format!("[sigstore]\ntrusted_root = \"trusted_root-{}.json\"\nsha256 = \"{sha}\"", &sha[..12])),
        "{text}"
    );

    // JSON: the copy, its digest, its authorities and its age (the test root's keys start a day ago).
    let out = env.run(&["trust", "import-root", "policy.toml", "trusted_root.json", "--format", "json"]);
    out.expect_code(0);
    let doc = out.json();
    assert_eq!(doc["sha256"], sha.as_str());
    assert_eq!(
        (doc["certificate_authorities"].clone(), doc["tlogs"].clone(), doc["ctlogs"].clone()),
        (1.into(), 1.into(), 1.into())
    );
    assert_eq!(doc["age_days"], 1, "{doc:#}");
    assert_eq!(doc["stale"], false);
    assert_eq!(doc["signatures_invalidated"], 0, "re-importing the same root leaves the bytes as signed");

    // Sigstore's staging root: its newest key is older than the staleness bound, and says so.
    std::fs::copy(testdata("sigstore/trusted_root.staging.json"), env.path().join("staging.json")).expect("copy");
    let out = env.run(&["trust", "import-root", "policy.toml", "staging.json"]);
    out.expect_code(0);
    assert!(out.stderr.contains("1 signature(s) of this version no longer match it"), "{}", out.stderr);
    let stale = env.run(&["trust", "import-root", "policy.toml", "staging.json", "--format", "json"]).json();
    let age = stale["age_days"].as_i64().expect("an age");
    assert_eq!(stale["stale"], age > 180, "{stale:#}");
    if age > 180 {
        assert!(out.stderr.contains("warning: the root's newest key is more than 180 days old"), "{}", out.stderr);
    }

    // Not a trusted root: refused with its code, the policy untouched.
    let before = std::fs::read(env.path().join("policy.toml")).expect("policy");
    std::fs::write(env.path().join("bad.json"), "{}").expect("write");
    let out = env.run(&["trust", "import-root", "policy.toml", "bad.json", "--format", "json"]);
    out.expect_code(2);
    assert_eq!(out.json()["code"], "trusted_root_error");
    assert_eq!(std::fs::read(env.path().join("policy.toml")).expect("policy"), before);

    // A root file changed after the policy was signed is not the policy's root.
    policy(&env, "pinned.toml", IDENTITY, "");
    let pinned = env.path().join(format!("trusted_root-{}.json", &sha[..12]));
    let mut changed = root.clone();
    changed.extend_from_slice(b"\n");
    std::fs::write(&pinned, changed).expect("write");
    let out = verify(&env, "pinned.toml", &[]);
    out.expect_code(2);
    assert_eq!(out.json()["code"], "trusted_root_error");
    // A policy with an identity signer and no root is not usable.
    let text = std::fs::read_to_string(env.path().join("pinned.toml")).expect("policy");
    let unrooted = text.split("\n[sigstore]").next().expect("text").to_owned();
    std::fs::write(env.path().join("unrooted.toml"), unrooted).expect("write");
    let out = verify(&env, "unrooted.toml", &[]);
    out.expect_code(2);
    assert_eq!(out.json()["code"], "policy_error");
}

/// Through a registry the keyless signature is a local file (`--sigstore`); the bound the gate
/// puts on a release before its layer is fetched counts the identity signers it may be by, so
/// the reviewer's pack signature and the release workflow's keyless one meet 2-of together.
#[test]
fn through_a_registry_a_keyless_signature_counts_beside_the_pack_key() {
    let Some(env) = release_packed_by("reviewer") else { return };
    let Some(reg) = crate::registry::start(crate::registry::Setup::Plain) else { return };
    policy(&env, "policy.toml", IDENTITY, "");
    let reference = format!("oci://{}/acme/mailer:1.0.0", reg.host());
    env.run(&["push", BUNDLE, &reference, "--key", "reviewer.pub", "--plain-http"]).expect_code(0);
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", &reference, "--plain-http", "--trust-policy", "policy.toml", "--format", "json"];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    // The pack signature alone is 1 of 2, known before the layer is fetched.
    let alone = refused(&verify(&[]), "threshold_not_met");
    assert!(alone["message"].as_str().unwrap_or_default().contains("before its layer was fetched"), "{alone:#}");
    // With the release workflow's keyless signature: both count.
    let both = verify(&["--sigstore", BESIDE]);
    both.expect_code(0);
    let doc = both.json();
    assert_eq!(doc["signers"]["rules"][0]["counted"], 2, "{doc:#}");
}
