//! Many signers: trust policies with thresholds and roles, co-signatures (`bundle cosign`),
//! and rotation of the policy (`bundle trust`). Each refusal is checked by its reason code;
//! the signatures `bundle` makes are checked by `minisign -V` and securesystemslib.

use std::path::Path;
use std::process::Command;

use crate::keys::{PIN, SoftHsm, SshAgent};
use crate::support::{Env, Run, require_tool};

/// A release team in a temp folder: file keys alice, bob, carol, dave, erin, frank (alice and
/// carol release engineers, bob security), the mailer agent packed by alice.
struct Team {
    env: Env,
}

const NAMES: [&str; 6] = ["alice", "bob", "carol", "dave", "erin", "frank"];

impl Team {
    fn new() -> Team {
        let env = Env::new();
        env.copy("agents/mailer", "mailer");
        for name in NAMES {
            env.run(&["keygen", name]).expect_code(0);
        }
        env.run(&["pack", "mailer", "--key", "alice.key", "-o", "mailer.agent.bundle"]).expect_code(0);
        Team { env }
    }

    fn public(&self, name: &str) -> String {
        public_line(&self.env.path().join(format!("{name}.pub")))
    }

    /// A signer table for `name` with its key and `extra` TOML lines.
    fn signer(&self, name: &str, extra: &str) -> String {
        format!("[[signer]]\nname = \"{name}\"\npublic_key = \"{}\"\n{extra}\n", self.public(name))
    }

    /// Writes a policy version and has it signed by `sign_with` (file keys).
    fn policy(&self, file: &str, version: u64, roots: &[&str], signers: &[String], rules: &str, sign_with: &[&str]) {
        write_policy(self.env.path(), file, version, "2099-01-01T00:00:00Z", roots, signers, rules);
        for k in sign_with {
            self.env.run(&["trust", "sign", file, "--key", &format!("{k}.key")]).expect_code(0);
        }
    }

    /// The usual team policy: release engineers alice and carol, security reviewer bob.
    fn standard(&self, file: &str, carol_extra: &str, rules: &str) {
        let signers = [
            self.signer("alice", "roles = [\"release\"]"),
            self.signer("bob", "roles = [\"security\"]"),
            self.signer("carol", &format!("roles = [\"release\"]\n{carol_extra}")),
        ];
        self.policy(file, 1, &["alice", "bob", "carol"], &signers, rules, &["alice", "bob"]);
    }

    fn cosign(&self, key: &str, policy: &str) -> Run {
        self.env.run(&["cosign", "mailer.agent.bundle", "--key", &format!("{key}.key"), "--trust-policy", policy])
    }

    fn verify(&self, args: &[&str]) -> Run {
        let mut all = vec!["verify", "mailer.agent.bundle", "--format", "json"];
        all.extend_from_slice(args);
        self.env.run(&all)
    }
}

fn public_line(pub_file: &Path) -> String {
    std::fs::read_to_string(pub_file).unwrap().lines().nth(1).unwrap().to_owned()
}

fn write_policy(dir: &Path, file: &str, version: u64, expires: &str, roots: &[&str], signers: &[String], rules: &str) {
    let roots: Vec<String> = roots.iter().map(|r| format!("\"{r}\"")).collect();
    let text = format!(
        "format = 1\nid = \"acme\"\nversion = {version}\nexpires = {expires}\n\n[root]\nthreshold = 2\nsigners = [{}]\n\n{}\n{rules}\n",
        roots.join(", "),
        signers.concat()
    );
    std::fs::write(dir.join(file), text).unwrap();
}

const TWO_KEYS: &str = "[[rule]]\nagents = [\"mail*\"]\nthreshold = 2\n";
const TWO_WITH_SECURITY: &str = "[[rule]]\nagents = [\"mail*\"]\nthreshold = 2\nroles = { security = 1 }\n";

/// The refusal's code, after checking the exit status (1) and the one JSON document.
#[track_caller]
pub(crate) fn refused(run: &Run, code: &str) -> serde_json::Value {
    run.expect_code(1);
    let doc = run.json();
    assert_eq!(doc["code"], code, "{doc:#}");
    doc
}

fn statuses(doc: &serde_json::Value) -> Vec<String> {
    doc["signers"]["signatures"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn two_of_three_is_refused_with_one_key_or_the_same_key_twice_and_accepted_after_a_cosign() {
    let team = Team::new();
    team.standard("policy.toml", "", TWO_KEYS);

    let doc = refused(&team.verify(&["--trust-policy", "policy.toml"]), "threshold_not_met");
    let rule = &doc["signers"]["rules"][0];
    assert_eq!(
        (rule["needed"].as_u64(), rule["counted"].as_u64(), rule["met"].as_bool()),
        (Some(2), Some(1), Some(false))
    );
    assert_eq!(statuses(&doc), ["counted"]);

    // The packer co-signing their own release is one key, counted once.
    team.cosign("alice", "policy.toml").expect_code(0);
    let doc = refused(&team.verify(&["--trust-policy", "policy.toml"]), "threshold_not_met");
    assert_eq!(statuses(&doc), ["counted", "duplicate_key"]);

    let bundle = team.env.path().join("mailer.agent.bundle");
    let before = std::fs::read(&bundle).unwrap();
    let out = team.cosign("carol", "policy.toml");
    out.expect_code(0);
    assert!(
        out.stderr.contains("tool mail.smtp_send: write-capable, network, secret-using, destructive"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read(&bundle).unwrap(), before, "cosign changed the bundle's bytes");

    let ok = team.verify(&["--trust-policy", "policy.toml"]);
    ok.expect_code(0);
    let doc = ok.json();
    assert_eq!(statuses(&doc), ["counted", "duplicate_key", "counted"]);
    assert_eq!(doc["signers"]["rules"][0]["counted"], 2);

    // The human verdict names each signature and the rule.
    let human = team.env.run(&["verify", "mailer.agent.bundle", "--trust-policy", "policy.toml"]);
    human.expect_code(0);
    assert!(
        human.stderr.contains("cosig:2 key") && human.stderr.contains("`carol` [release]: counted"),
        "{}",
        human.stderr
    );
    assert!(human.stderr.contains("2 counted, 2 needed: met"), "{}", human.stderr);
}

#[test]
fn cosign_refuses_a_bundle_that_fails_the_gate_and_signs_nothing() {
    let team = Team::new();
    // Trusting only dave: alice's pack signature is untrusted.
    let out = team.env.run(&[
        "cosign",
        "mailer.agent.bundle",
        "--key",
        "carol.key",
        "--trusted-keys",
        "dave.pub",
        "--format",
        "json",
    ]);
    refused(&out, "untrusted_key");
    assert!(!team.env.path().join("mailer.agent.bundle.cosig").exists());
    assert!(!team.env.path().join("mailer.agent.bundle.approval.dsse.json").exists());
}

/// Issue 35, defect 9: `cosign --trust-policy` signed with a key the policy does not know (or
/// revokes), writing a co-signature that could never count. It refuses (exit 2), signs
/// nothing, and says how to fix it.
#[test]
fn cosign_under_a_trust_policy_refuses_a_key_the_policy_does_not_know_or_revokes() {
    let team = Team::new();
    team.standard("policy.toml", "revoked = true", TWO_KEYS);
    for (key, why) in [("dave", "is not a signer of trust policy `acme` version 1"), ("carol", "which revokes it")] {
        let out = team.cosign(key, "policy.toml");
        out.expect_code(2);
        assert!(out.stderr.contains(why), "{key}: {}", out.stderr);
        assert!(!team.env.path().join("mailer.agent.bundle.cosig").exists(), "{key}");
        assert!(!team.env.path().join("mailer.agent.bundle.approval.dsse.json").exists(), "{key}");
    }
    assert!(team.cosign("dave", "policy.toml").stderr.contains("--policy-update"));
    // A key the policy knows co-signs, even one that counted already (the packer's).
    team.cosign("alice", "policy.toml").expect_code(0);
    team.cosign("bob", "policy.toml").expect_code(0);
}

#[test]
fn a_role_rule_needs_a_key_of_that_role_and_an_agent_without_a_rule_is_refused() {
    let team = Team::new();
    team.standard("policy.toml", "", TWO_WITH_SECURITY);
    team.cosign("carol", "policy.toml").expect_code(0);
    let doc = refused(&team.verify(&["--trust-policy", "policy.toml"]), "threshold_not_met");
    let role = &doc["signers"]["rules"][0]["roles"][0];
    assert_eq!(
        (role["role"].as_str(), role["needed"].as_u64(), role["counted"].as_u64()),
        (Some("security"), Some(1), Some(0))
    );

    team.cosign("bob", "policy.toml").expect_code(0);
    team.verify(&["--trust-policy", "policy.toml"]).expect_code(0);

    // A policy whose only rule is for payments agents says nothing about mailer: refused.
    team.standard("payments.toml", "", "[[rule]]\nagents = [\"payments-*\"]\nthreshold = 1\n");
    refused(&team.verify(&["--trust-policy", "payments.toml"]), "no_policy_rule");
}

#[test]
fn revoked_expired_and_out_of_scope_keys_do_not_count_each_with_its_code() {
    let team = Team::new();
    team.standard("policy.toml", "", TWO_KEYS);
    team.cosign("carol", "policy.toml").expect_code(0);
    team.verify(&["--trust-policy", "policy.toml"]).expect_code(0);

    let cases = [
        ("revoked.toml", "revoked = true", "revoked_key", "revoked"),
        ("window.toml", "not_after = 2020-01-01T00:00:00Z", "key_outside_window", "outside_window"),
        ("future.toml", "not_before = 2098-01-01T00:00:00Z", "key_outside_window", "outside_window"),
        ("scope.toml", "agents = [\"kb-*\"]", "untrusted_key", "not_for_agent"),
    ];
    for (file, carol, code, status) in cases {
        team.standard(file, carol, TWO_KEYS);
        let doc = refused(&team.verify(&["--trust-policy", file]), code);
        assert_eq!(statuses(&doc), ["counted", status], "{file}");
    }
}

#[test]
fn minisign_and_securesystemslib_check_every_signature_independently() {
    let team = Team::new();
    team.standard("policy.toml", "", TWO_WITH_SECURITY);
    team.cosign("carol", "policy.toml").expect_code(0);
    team.cosign("bob", "policy.toml").expect_code(0);
    let dir = team.env.path();

    if require_tool("minisign") && require_tool("bsdtar") {
        let manifest = Command::new("bsdtar")
            .current_dir(dir)
            .args(["-xOf", "mailer.agent.bundle", "manifest.toml"])
            .output()
            .unwrap();
        assert!(manifest.status.success());
        std::fs::write(dir.join("manifest.toml"), &manifest.stdout).unwrap();
        let sig = Command::new("bsdtar")
            .current_dir(dir)
            .args(["-xOf", "mailer.agent.bundle", "manifest.toml.minisig"])
            .output()
            .unwrap();
        std::fs::write(dir.join("pack.minisig"), &sig.stdout).unwrap();
        let cosigs = std::fs::read_to_string(dir.join("mailer.agent.bundle.cosig")).unwrap();
        let lines: Vec<&str> = cosigs.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 8, "two co-signatures of four lines");
        std::fs::write(dir.join("carol.minisig"), lines[..4].join("\n") + "\n").unwrap();
        std::fs::write(dir.join("bob.minisig"), lines[4..].join("\n") + "\n").unwrap();
        for (sig, key, ok) in [
            ("pack.minisig", "alice", true),
            ("carol.minisig", "carol", true),
            ("bob.minisig", "bob", true),
            ("bob.minisig", "carol", false),
        ] {
            let out = Command::new("minisign")
                .current_dir(dir)
                .args(["-V", "-m", "manifest.toml", "-x", sig, "-p", &format!("{key}.pub")])
                .output()
                .unwrap();
            assert_eq!(
                out.status.success(),
                ok,
                "minisign -V {sig} with {key}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The policy's own signatures too.
        let policy_sigs = std::fs::read_to_string(dir.join("policy.toml.minisigs")).unwrap();
        let first: Vec<&str> = policy_sigs.lines().filter(|l| !l.is_empty()).take(4).collect();
        std::fs::write(dir.join("policy-alice.minisig"), first.join("\n") + "\n").unwrap();
        let out = Command::new("minisign")
            .current_dir(dir)
            .args(["-V", "-m", "policy.toml", "-x", "policy-alice.minisig", "-p", "alice.pub"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    if securesystemslib() {
        // The approval envelope carries carol's and bob's signatures: threshold 2 accepts, 3
        // rejects (alice packed; she did not co-sign).
        for (threshold, accepted) in [(2, true), (3, false)] {
            let out = Command::new("python3")
                .current_dir(dir)
                .args(["-c", SSLIB_VERIFY, "mailer.agent.bundle.approval.dsse.json", &threshold.to_string()])
                .args(["alice.pub", "bob.pub", "carol.pub"])
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.success(),
                accepted,
                "threshold {threshold}: {said}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // A tampered payload verifies with nobody.
        let path = dir.join("mailer.agent.bundle.approval.dsse.json");
        let mut env: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let payload = env["payload"].as_str().unwrap().to_owned();
        env["payload"] = format!("{}{}", if payload.starts_with('e') { "f" } else { "e" }, &payload[1..]).into();
        std::fs::write(dir.join("tampered.json"), env.to_string()).unwrap();
        let out = Command::new("python3")
            .current_dir(dir)
            .args(["-c", SSLIB_VERIFY, "tampered.json", "1", "alice.pub", "bob.pub", "carol.pub"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "a tampered envelope was accepted");
    }
}

/// securesystemslib's `Envelope.verify(keys, threshold)` over a DSSE file, the keys given as
/// minisign public key files (key id = the minisign key id as minisign prints it).
const SSLIB_VERIFY: &str = r#"
import base64, json, sys
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey
env = Envelope.from_dict(json.load(open(sys.argv[1])))
keys = []
for pub in sys.argv[3:]:
    raw = base64.b64decode(open(pub).read().split("\n")[1])
    keys.append(SSlibKey(raw[2:10][::-1].hex().upper(), "ed25519", "ed25519", {"public": raw[10:].hex()}))
env.verify(keys, int(sys.argv[2]))
print("accepted")
"#;

fn securesystemslib() -> bool {
    crate::support::require_python_module("securesystemslib.dsse")
}

#[test]
fn rotation_follows_v1_to_v3_and_refuses_new_keys_only_a_gap_a_replay_and_an_expired_policy() {
    let team = Team::new();
    let one = "[[rule]]\nagents = [\"*\"]\nthreshold = 1\n";
    let s = |name: &str| team.signer(name, "");
    // v1: alice, bob, carol. v2: carol's key retired for dave (signed by v1's alice and bob,
    // and its own alice and dave). v3: alice retired for erin (signed by v2's bob and dave).
    team.policy("v1.toml", 1, &["alice", "bob", "carol"], &[s("alice"), s("bob"), s("carol")], one, &["alice", "bob"]);
    team.policy(
        "v2.toml",
        2,
        &["alice", "bob", "dave"],
        &[s("alice"), s("bob"), s("dave")],
        one,
        &["alice", "bob", "dave"],
    );
    team.policy("v3.toml", 3, &["bob", "dave", "erin"], &[s("bob"), s("dave"), s("erin")], one, &["bob", "dave"]);
    // The bundle: packed by alice (unknown to v3), co-signed by dave.
    team.cosign("dave", "v2.toml").expect_code(0);

    let v1_alone = ["--trust-policy", "v1.toml"];
    team.verify(&v1_alone).expect_code(0);
    let chain = [
        "--trust-policy",
        "v1.toml",
        "--policy-update",
        "v3.toml",
        "--policy-update",
        "v2.toml",
        "--state",
        "state.json",
    ];
    let ok = team.verify(&chain);
    ok.expect_code(0);
    let doc = ok.json();
    assert_eq!(doc["signers"]["policy_version"], 3);
    assert_eq!(statuses(&doc), ["unknown_key", "counted"]);
    let trust_verify = team.env.run(&["trust", "verify", "v1.toml", "--update", "v2.toml", "--update", "v3.toml"]);
    trust_verify.expect_code(0);
    assert!(
        trust_verify.stderr.contains("v3 v3.toml: v2 roots 2 of 2 (bob, dave); own roots 2 of 2 (bob, dave)"),
        "{}",
        trust_verify.stderr
    );

    // A replay of v2 after v3 was followed.
    refused(
        &team.verify(&["--trust-policy", "v1.toml", "--policy-update", "v2.toml", "--state", "state.json"]),
        "policy_rollback",
    );
    refused(&team.verify(&["--trust-policy", "v1.toml", "--state", "state.json"]), "policy_rollback");
    // A gap.
    refused(&team.verify(&["--trust-policy", "v1.toml", "--policy-update", "v3.toml"]), "policy_chain_broken");
    // A v3 signed only by its new keys: v2's roots did not agree.
    team.policy(
        "v3-new.toml",
        3,
        &["erin", "frank", "dave"],
        &[s("dave"), s("erin"), s("frank")],
        one,
        &["erin", "frank"],
    );
    let doc = refused(
        &team.verify(&["--trust-policy", "v1.toml", "--policy-update", "v2.toml", "--policy-update", "v3-new.toml"]),
        "policy_untrusted",
    );
    assert!(
        doc["message"].as_str().unwrap().contains("signed by 0 of version 2's root signers; it needs 2"),
        "{doc:#}"
    );
    // The same with `bundle trust verify`.
    let out = team.env.run(&[
        "trust",
        "verify",
        "v1.toml",
        "--update",
        "v2.toml",
        "--update",
        "v3-new.toml",
        "--format",
        "json",
    ]);
    refused(&out, "policy_untrusted");
    // A pinned version signed by too few of its own roots.
    team.policy("v1-weak.toml", 1, &["alice", "bob", "carol"], &[s("alice"), s("bob"), s("carol")], one, &["alice"]);
    refused(&team.verify(&["--trust-policy", "v1-weak.toml"]), "policy_untrusted");
    // The newest version has expired.
    let expired = team.env.run(&[
        "--now",
        "2099-06-01T00:00:00Z",
        "verify",
        "mailer.agent.bundle",
        "--trust-policy",
        "v1.toml",
        "--format",
        "json",
    ]);
    refused(&expired, "policy_expired");
    // A policy edited after signing is not signed any more.
    let text = std::fs::read_to_string(team.env.path().join("v1.toml")).unwrap();
    std::fs::write(team.env.path().join("v1.toml"), text.replace("threshold = 1", "threshold = 2")).unwrap();
    refused(&team.verify(&v1_alone), "policy_untrusted");
}

/// Issue 35, defect 3: a followed policy version is recorded in `--state` as soon as its chain
/// verifies, whatever becomes of the bundle (python-tuf persists every root it accepts). A host
/// that followed v1 -> v2 (v2 revokes a stolen key) and refused a release signed with that key
/// must not accept it when offered v1 alone next time.
#[test]
fn a_followed_policy_version_is_recorded_even_when_the_bundle_is_refused() {
    let team = Team::new();
    let one = "[[rule]]\nagents = [\"*\"]\nthreshold = 1\n";
    let s = |name: &str| team.signer(name, "");
    team.policy("v1.toml", 1, &["alice", "bob", "carol"], &[s("alice"), s("bob"), s("carol")], one, &["alice", "bob"]);
    // alice's key was stolen: v2 revokes it (signed by v1's and its own roots bob and carol).
    let revoked = team.signer("alice", "revoked = true");
    team.policy(
        "v2.toml",
        2,
        &["bob", "carol", "dave"],
        &[revoked, s("bob"), s("carol"), s("dave")],
        one,
        &["bob", "carol"],
    );
    let both = ["--trust-policy", "v1.toml", "--policy-update", "v2.toml", "--state", "state.json"];
    refused(&team.verify(&both), "revoked_key");
    // Offered v1 alone, the host knows v2 was followed.
    refused(&team.verify(&["--trust-policy", "v1.toml", "--state", "state.json"]), "policy_rollback");
    // Without --state nothing can be remembered: the command says so.
    let unremembered = team.verify(&["--trust-policy", "v1.toml"]);
    unremembered.expect_code(0);
    assert!(unremembered.stderr.contains("without --state"), "{}", unremembered.stderr);
}

#[test]
fn trust_rotate_writes_the_next_version_unsigned_and_a_malformed_policy_is_an_error() {
    let team = Team::new();
    team.standard("policy.toml", "", TWO_KEYS);
    team.env
        .run(&["trust", "rotate", "policy.toml", "-o", "next.toml", "--expires", "2098-01-01T00:00:00Z"])
        .expect_code(0);
    let next = std::fs::read_to_string(team.env.path().join("next.toml")).unwrap();
    assert!(next.contains("version = 2\n") && next.contains("expires = 2098-01-01T00:00:00Z"), "{next}");
    team.env.run(&["trust", "rotate", "policy.toml", "-o", "next.toml"]).expect_code(2);
    refused(
        &team.env.run(&["trust", "verify", "policy.toml", "--update", "next.toml", "--format", "json"]),
        "policy_untrusted",
    );

    std::fs::write(
        team.env.path().join("bad.toml"),
        "format = 1\nid = \"acme\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n[root]\nthreshold = 3\nsigners = [\"zed\"]\n[[rule]]\nagents = [\"*\"]\nthreshold = 2\nroles = { security = 1 }\n",
    )
    .unwrap();
    let out = team.verify(&["--trust-policy", "bad.toml"]);
    out.expect_code(2);
    let doc = out.json();
    assert_eq!(doc["code"], "policy_error", "{doc:#}");
    let message = doc["message"].as_str().unwrap();
    for problem in [
        "no signer is named `zed`",
        "threshold 3 must be between 1 and the 1 root signers",
        "threshold 2 can never be met",
        "fewer than 1 unrevoked signer(s) have role `security`",
    ] {
        assert!(message.contains(problem), "{problem}: {message}");
    }
}

#[test]
fn a_two_of_two_rule_met_by_an_ssh_agent_key_and_a_softhsm_token_key() {
    if !require_tool("ssh-agent") || !require_tool("ssh-keygen") || !require_tool("ssh-add") {
        return;
    }
    let Some(hsm) = SoftHsm::start() else { return };
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let agent = SshAgent::start();
    let key = agent.keygen("ed25519", "release");
    agent.add(&key);
    agent.run(&env, &["pubkey", "ssh-agent:", "-o", "agent.pub"]).expect_code(0);
    hsm.import(&[7u8; 32], "security", "b2");
    let uri = format!("pkcs11:token=bundle-test;object=security?pin-value={PIN}");
    hsm.run(&env, &["pubkey", &uri, "-o", "token.pub"]).expect_code(0);

    let signers = [
        format!(
            "[[signer]]\nname = \"release\"\npublic_key = \"{}\"\nroles = [\"release\"]\n",
            public_line(&env.path().join("agent.pub"))
        ),
        format!(
            "[[signer]]\nname = \"security\"\npublic_key = \"{}\"\nroles = [\"security\"]\n",
            public_line(&env.path().join("token.pub"))
        ),
    ];
    write_policy(
        env.path(),
        "policy.toml",
        1,
        "2099-01-01T00:00:00Z",
        &["release", "security"],
        &signers,
        TWO_WITH_SECURITY,
    );
    agent.run(&env, &["trust", "sign", "policy.toml", "--key", "ssh-agent:"]).expect_code(0);
    hsm.run(&env, &["trust", "sign", "policy.toml", "--key", &uri]).expect_code(0);

    agent.run(&env, &["pack", "mailer", "--key", "ssh-agent:", "-o", "mailer.agent.bundle"]).expect_code(0);
    let verify = ["verify", "mailer.agent.bundle", "--trust-policy", "policy.toml", "--format", "json"];
    refused(&env.run(&verify), "threshold_not_met");
    hsm.run(&env, &["cosign", "mailer.agent.bundle", "--key", &uri, "--trust-policy", "policy.toml"]).expect_code(0);
    let ok = env.run(&verify);
    ok.expect_code(0);
    assert_eq!(statuses(&ok.json()), ["counted", "counted"]);
}

// ---------------------------------------------------------------------------------------------
// Co-signatures in a registry: referrers through the fallback tag of Debian's docker-registry

impl Team {
    /// `bundle ARGS` with no registry credentials from the environment.
    fn oci(&self, args: &[&str]) -> Run {
        let mut c = crate::support::bin();
        c.current_dir(self.env.path()).args(args);
        c.env("DOCKER_CONFIG", self.env.path().join("no-docker-config"));
        c.env_remove("BUNDLE_REGISTRY_USERNAME").env_remove("BUNDLE_REGISTRY_PASSWORD");
        c.env_remove("BUNDLE_SIGNING_KEY");
        Run::from(c.output().unwrap())
    }
}

#[test]
fn a_two_of_two_release_in_a_registry_is_refused_before_its_layer_moves_and_accepted_after_cosign_oci() {
    use crate::registry::{self, Action, Proxy, Setup};
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let team = Team::new();
    team.standard("policy.toml", "", TWO_WITH_SECURITY);
    let dir = team.env.path();
    let reference = format!("oci://{}/team/mailer:2", reg.host());
    let pushed = team.oci(&[
        "push",
        "mailer.agent.bundle",
        &reference,
        "--plain-http",
        "--key",
        "alice.pub",
        "--format",
        "json",
    ]);
    let pushed = pushed.expect_code(0).json();
    let (digest, layer) = (pushed["digest"].as_str().unwrap(), pushed["layer"]["digest"].as_str().unwrap());

    // Through a proxy that logs every request: with alice's pack signature alone, the 2-of-2
    // rule cannot be met, and neither verify nor pull asks for the layer.
    let proxy = Proxy::start(reg.port, |_, _| Action::Forward);
    let via = reference.replace(&reg.host(), &proxy.host());
    let layer_asked = || proxy.log.lock().unwrap().iter().any(|l| l.contains(layer));
    let doc = refused(
        &team.oci(&["verify", &via, "--plain-http", "--trust-policy", "policy.toml", "--format", "json"]),
        "threshold_not_met",
    );
    assert!(doc["message"].as_str().unwrap().contains("before its layer was fetched"), "{doc:#}");
    let out = team.oci(&[
        "pull",
        &via,
        "-o",
        "pulled.bundle",
        "--plain-http",
        "--trust-policy",
        "policy.toml",
        "--format",
        "json",
    ]);
    refused(&out, "threshold_not_met");
    assert!(!dir.join("pulled.bundle").exists());
    assert!(!layer_asked(), "the layer was requested: {:?}", proxy.log.lock().unwrap());

    // carol (release) co-signs: two keys, but no security reviewer; still refused unread.
    let out = team.oci(&[
        "cosign",
        &reference,
        "--key",
        "carol.key",
        "--trust-policy",
        "policy.toml",
        "--plain-http",
        "--format",
        "json",
    ]);
    let carol = out.expect_code(0).json();
    assert_eq!(carol["cosignatures"], 1, "{carol:#}");
    let log_len = proxy.log.lock().unwrap().len();
    let doc = refused(
        &team.oci(&["verify", &via, "--plain-http", "--trust-policy", "policy.toml", "--format", "json"]),
        "threshold_not_met",
    );
    assert!(doc["message"].as_str().unwrap().contains("at most 0 of 1 of role security"), "{doc:#}");
    assert!(!proxy.log.lock().unwrap()[log_len..].iter().any(|l| l.contains(layer)), "the layer was requested");

    // A cosign that fails the gate signs nothing: the name is not the one required.
    let out = team.oci(&[
        "cosign",
        &reference,
        "--key",
        "bob.key",
        "--trust-policy",
        "policy.toml",
        "--plain-http",
        "--name",
        "payments",
        "--format",
        "json",
    ]);
    refused(&out, "name_mismatch");

    // bob (security) co-signs in the registry: the bundle is not pushed again, and it passes.
    let out = team.oci(&["cosign", &reference, "--key", "bob.key", "--trust-policy", "policy.toml", "--plain-http"]);
    out.expect_code(0);
    assert!(out.stderr.contains("tool mail.smtp_send: write-capable"), "{}", out.stderr);
    assert!(out.stderr.contains("the registry holds 2 co-signature(s)"), "{}", out.stderr);
    let ok = team.oci(&["verify", &via, "--plain-http", "--trust-policy", "policy.toml", "--format", "json"]);
    let doc = ok.expect_code(0).json();
    assert_eq!(statuses(&doc), ["counted", "counted", "counted"], "{doc:#}");
    let out = team.oci(&[
        "pull",
        &via,
        "-o",
        "pulled.bundle",
        "--plain-http",
        "--trust-policy",
        "policy.toml",
        "--format",
        "json",
    ]);
    out.expect_code(0);
    assert_eq!(
        std::fs::read(dir.join("pulled.bundle")).unwrap(),
        std::fs::read(dir.join("mailer.agent.bundle")).unwrap()
    );
    let again = team.oci(&[
        "cosign",
        &reference,
        "--key",
        "bob.key",
        "--trust-policy",
        "policy.toml",
        "--plain-http",
        "--format",
        "json",
    ]);
    assert_eq!(again.expect_code(0).json()["cosignatures"], 2, "the same key again is the same referrer");

    // A stock client sees the co-signatures as ordinary OCI artifacts under the fallback tag.
    let tag = digest.replacen(':', "-", 1);
    let raw = |what: &str| -> serde_json::Value {
        if require_tool("skopeo") {
            let out = Command::new("skopeo")
                .args(["inspect", "--raw", "--tls-verify=false", &format!("docker://{}/team/mailer{what}", reg.host())])
                .output()
                .unwrap();
            assert!(out.status.success(), "skopeo: {}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_slice(&out.stdout).unwrap()
        } else {
            let path = format!("/v2/team/mailer/manifests/{}", what.trim_start_matches([':', '@']));
            serde_json::from_slice(&registry::get(reg.port, &path)).unwrap()
        }
    };
    let index = raw(&format!(":{tag}"));
    let cosigs: Vec<&serde_json::Value> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["artifactType"] == agent_bundle::trust_policy::signatures::COSIGNATURE_ARTIFACT_TYPE)
        .collect();
    assert_eq!(cosigs.len(), 2, "{index:#}");
    let bob_referrer = cosigs[1]["digest"].as_str().unwrap();
    let manifest = raw(&format!("@{bob_referrer}"));
    assert_eq!(manifest["subject"]["digest"], digest);
    assert_eq!(manifest["layers"][0]["mediaType"], agent_bundle::trust_policy::signatures::COSIGNATURE_MEDIA_TYPE);

    // Its approval layer is a Sigstore bundle whose envelope securesystemslib checks: bob's key.
    let approval = manifest["layers"][1]["digest"].as_str().unwrap();
    let sigstore: serde_json::Value =
        serde_json::from_slice(&registry::get(reg.port, &format!("/v2/team/mailer/blobs/{approval}"))).unwrap();
    std::fs::write(dir.join("bob-approval.json"), sigstore["dsseEnvelope"].to_string()).unwrap();
    if securesystemslib() {
        for (key, accepted) in [("bob.pub", true), ("carol.pub", false)] {
            let out = Command::new("python3")
                .current_dir(dir)
                .args(["-c", SSLIB_VERIFY, "bob-approval.json", "1", key])
                .output()
                .unwrap();
            assert_eq!(out.status.success(), accepted, "{key}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

/// The gate counts the minisign co-signatures; the approval envelope beside the bundle is the
/// same approval for DSSE tools and counts toward no threshold (format reference §12.2).
/// Issue 35, defect 8: `pull` under a trust policy keeps what the registry holds about the
/// release (its co-signatures and attestations) beside the file it writes, by the documented
/// names, so that the file it just wrote passes `verify --trust-policy` and the OCI guide's
/// "pull, then unpack" recipe works under a policy.
#[test]
fn a_release_pulled_under_a_trust_policy_keeps_its_registry_evidence_beside_the_file() {
    use crate::registry::{self, Setup};
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let team = Team::new();
    team.standard("policy.toml", "", TWO_KEYS);
    let dir = team.env.path();
    team.env.run(&["pack", "mailer", "--attest", "--key", "alice.key", "-o", "mailer.agent.bundle"]).expect_code(0);
    let reference = format!("oci://{}/team/mailer:3", reg.host());
    team.oci(&["push", "mailer.agent.bundle", &reference, "--plain-http", "--key", "alice.pub"]).expect_code(0);
    let policy = ["--trust-policy", "policy.toml"];
    team.oci(&["cosign", &reference, "--key", "carol.key", "--plain-http", policy[0], policy[1]]).expect_code(0);
    let pulled = team.oci(&["pull", &reference, "-o", "pulled.bundle", "--plain-http", policy[0], policy[1]]);
    pulled.expect_code(0);
    for beside in
        ["pulled.bundle.cosig", "pulled.bundle.provenance.sigstore.json", "pulled.bundle.contract.sigstore.json"]
    {
        assert!(dir.join(beside).is_file(), "{beside}: {}", pulled.stderr);
    }
    let out =
        team.env.run(&["verify", "pulled.bundle", policy[0], policy[1], "--require-provenance", "--format", "json"]);
    let doc = out.expect_code(0).json();
    assert_eq!(statuses(&doc), ["counted", "counted"], "{doc:#}");
    team.env.run(&["unpack", "pulled.bundle", "deployed", policy[0], policy[1]]).expect_code(0);
}

#[test]
fn the_approval_envelope_alone_meets_no_threshold() {
    let team = Team::new();
    team.standard("policy.toml", "", TWO_KEYS);
    team.cosign("carol", "policy.toml").expect_code(0);
    team.verify(&["--trust-policy", "policy.toml"]).expect_code(0);
    let dir = team.env.path();
    std::fs::remove_file(dir.join("mailer.agent.bundle.cosig")).unwrap();
    let envelope = std::fs::read_to_string(dir.join("mailer.agent.bundle.approval.dsse.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&envelope).unwrap()["signatures"].as_array().unwrap().len(),
        1
    );
    let doc = refused(&team.verify(&["--trust-policy", "policy.toml"]), "threshold_not_met");
    assert_eq!(statuses(&doc), ["counted"]);
}

/// Known gap of 2026-11-25: under --trust-policy, attestations were judged against
/// --key/--trusted-keys only, so every attestation was untrusted. Now the policy's signers
/// that are valid now, each for its agents, sign them.
#[test]
fn attestations_under_a_trust_policy_are_judged_against_its_signers() {
    let team = Team::new();
    let signers = [
        team.signer("alice", "roles = [\"release\"]"),
        team.signer("bob", "roles = [\"security\"]"),
        team.signer("carol", "roles = [\"release\"]"),
        team.signer("erin", "agents = [\"kb-*\"]"),
        team.signer("frank", "revoked = true"),
    ];
    team.policy("policy.toml", 1, &["alice", "bob", "carol"], &signers, TWO_KEYS, &["alice", "bob"]);
    team.env.run(&["pack", "mailer", "--attest", "--key", "alice.key", "-o", "mailer.agent.bundle"]).expect_code(0);
    team.cosign("carol", "policy.toml").expect_code(0);
    let ok = team.verify(&["--trust-policy", "policy.toml", "--require-provenance"]);
    let doc = ok.expect_code(0).json();
    let verdicts: Vec<&str> =
        doc["attestations"].as_array().unwrap().iter().map(|a| a["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["ok", "ok"], "{doc:#}");

    // Signed by a key the policy does not know, by one it trusts only for other agents, by a
    // revoked one: each refused.
    for key in ["dave", "erin", "frank"] {
        // Alone: a key attesting beside alice's statement would add its signature to it.
        for kind in ["provenance", "contract"] {
            std::fs::remove_file(team.env.path().join(format!("mailer.agent.bundle.{kind}.sigstore.json"))).unwrap();
        }
        team.env.run(&["attest", "mailer.agent.bundle", "--key", &format!("{key}.key")]).expect_code(0);
        let doc = refused(&team.verify(&["--trust-policy", "policy.toml"]), "attestation_untrusted");
        assert!(doc["message"].as_str().unwrap().contains("provenance"), "{key}: {doc:#}");
    }
}

/// Known gap of 2026-11-25: `bundle attest` with a second key replaced the envelope's
/// signatures. Over the same statement it now adds its own.
#[test]
fn a_second_key_attesting_the_same_statement_adds_its_signature_to_the_envelope() {
    let team = Team::new();
    let dir = team.env.path();
    let attest = |key: &str| -> Run {
        let mut c = crate::support::bin();
        c.current_dir(dir).env("SOURCE_DATE_EPOCH", "1767225600").env_remove("GITHUB_ACTIONS");
        c.args(["attest", "mailer.agent.bundle", "--key", &format!("{key}.key"), "--format", "json"]);
        Run::from(c.output().unwrap())
    };
    assert_eq!(attest("alice").expect_code(0).json()["signatures"], serde_json::json!([1, 1]));
    assert_eq!(attest("bob").expect_code(0).json()["signatures"], serde_json::json!([2, 2]));
    // The same key again replaces its own signature.
    assert_eq!(attest("bob").expect_code(0).json()["signatures"], serde_json::json!([2, 2]));
    let ok = team.env.run(&["verify", "mailer.agent.bundle", "--key", "alice.pub", "--format", "json"]);
    let doc = ok.expect_code(0).json();
    for a in doc["attestations"].as_array().unwrap() {
        assert_eq!((a["verdict"].as_str(), a["signers"].as_array().map(Vec::len)), (Some("ok"), Some(1)), "{a:#}");
    }
    if securesystemslib() {
        let sigstore: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("mailer.agent.bundle.contract.sigstore.json")).unwrap())
                .unwrap();
        std::fs::write(dir.join("contract-envelope.json"), sigstore["dsseEnvelope"].to_string()).unwrap();
        for (threshold, accepted) in [(2, true), (3, false)] {
            let out = Command::new("python3")
                .current_dir(dir)
                .args(["-c", SSLIB_VERIFY, "contract-envelope.json", &threshold.to_string()])
                .args(["alice.pub", "bob.pub", "carol.pub"])
                .output()
                .unwrap();
            assert_eq!(
                out.status.success(),
                accepted,
                "threshold {threshold}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Issue 35, defect 2: `bundle attest BUNDLE --key SECOND` after `pack --attest` must not drop
/// the release key's provenance signature (pack records how it compressed, attest cannot know,
/// so the statements differed and the envelope was replaced): the second key signs the
/// statement already there, and says so.
#[test]
fn attest_after_pack_attest_adds_a_signer_and_never_removes_the_release_keys() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    for name in ["release", "ci"] {
        env.run(&["keygen", name]).expect_code(0);
    }
    env.run(&["pack", "mailer", "--attest", "--key", "release.key", "-o", "mailer.agent.bundle"]).expect_code(0);
    let attested = env.run(&["attest", "mailer.agent.bundle", "--key", "ci.key", "--format", "json"]);
    assert_eq!(attested.expect_code(0).json()["signatures"], serde_json::json!([2, 2]), "{}", attested.stdout);
    let human = env.run(&["attest", "mailer.agent.bundle", "--key", "ci.key"]);
    assert!(human.expect_code(0).stderr.contains("signed the statement already there"), "{}", human.stderr);
    env.run(&["verify", "mailer.agent.bundle", "--key", "release.pub", "--require-provenance"]).expect_code(0);
    let both = ["verify", "mailer.agent.bundle", "--key", "release.pub", "--key", "ci.pub", "--format", "json"];
    let doc = env.run(&both).expect_code(0).json();
    for a in doc["attestations"].as_array().unwrap() {
        assert_eq!((a["verdict"].as_str(), a["signers"].as_array().map(Vec::len)), (Some("ok"), Some(2)), "{a:#}");
    }
}

/// Issue 35, defect 9: the same hostile evidence gets the same code whichever way it comes.
/// An attestation over the cap is `attestation_malformed` as a file and as a registry
/// referrer (a referrer's descriptor size is enforced before its layer moves); co-signatures
/// over the cap are `limit_exceeded` as a file and as a referrer (a referrer said
/// `attestation_malformed`).
#[test]
fn evidence_over_its_cap_gets_the_same_code_from_a_file_and_from_a_registry() {
    use crate::registry::{self, Setup};
    use agent_bundle::oci::{self, Reference, referrers};
    use agent_bundle::trust_policy::signatures::{COSIGNATURE_ARTIFACT_TYPE, COSIGNATURE_MEDIA_TYPE};
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let team = Team::new();
    team.standard("policy.toml", "", TWO_KEYS);
    let dir = team.env.path();
    let big = vec![b' '; agent_bundle::attest::MAX_ATTESTATION_BYTES as usize + 1];
    std::fs::write(dir.join("big.json"), &big).unwrap();
    std::fs::write(dir.join("big.cosig"), &big).unwrap();

    // As files.
    let by_file = team.verify(&["--key", "alice.pub", "--attestation", "big.json"]);
    refused(&by_file, "attestation_malformed");
    let by_file = team.verify(&["--trust-policy", "policy.toml", "--cosignatures", "big.cosig"]);
    refused(&by_file, "limit_exceeded");

    // As referrers, each in its own repository.
    for (repo, artifact_type, media_type, flags, code) in [
        (
            "att",
            referrers::SIGSTORE_BUNDLE_MEDIA_TYPE,
            referrers::SIGSTORE_BUNDLE_MEDIA_TYPE,
            ["--key", "alice.pub"],
            "attestation_malformed",
        ),
        ("cos", COSIGNATURE_ARTIFACT_TYPE, COSIGNATURE_MEDIA_TYPE, ["--trust-policy", "policy.toml"], "limit_exceeded"),
    ] {
        let reference = format!("oci://{}/big/{repo}:1", reg.host());
        team.oci(&["push", "mailer.agent.bundle", &reference, "--plain-http", "--key", "alice.pub"]).expect_code(0);
        let parsed = Reference::parse(&reference).unwrap();
        let options = oci::Options { plain_http: true, ..Default::default() };
        let mut client = oci::Client::connect(&parsed, &options, true, None).unwrap();
        let (digest, artifact) = oci::fetch_manifest(&mut client, &parsed).unwrap();
        let mut annotations = Vec::new();
        if repo == "att" {
            let predicate = agent_bundle::evidence::files::Kind::Provenance.predicate_type();
            annotations.push((referrers::PREDICATE_TYPE_ANNOTATION, predicate.to_owned()));
            annotations.push((referrers::CONTENT_ANNOTATION, "dsse-envelope".to_owned()));
        }
        let referrer = referrers::Referrer { artifact_type, layers: vec![(media_type, big.clone())], annotations };
        let subject = referrers::Subject { digest: &digest, size: artifact.manifest_size };
        referrers::push_referrers(&mut client, &subject, &[referrer]).unwrap();
        let mut args = vec!["verify", &reference, "--plain-http", "--format", "json"];
        args.extend_from_slice(&flags);
        let doc = refused(&team.oci(&args), code);
        assert!(doc["message"].as_str().unwrap().contains("over the cap"), "{repo}: {doc:#}");
    }
}

#[test]
fn a_vsa_of_a_registry_release_names_the_co_signature_referrers_that_counted() {
    use crate::registry::{self, Setup};
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let team = Team::new();
    team.standard("policy.toml", "", TWO_WITH_SECURITY);
    let dir = team.env.path();
    let reference = format!("oci://{}/team/mailer:3", reg.host());
    let pushed = team.oci(&["push", "mailer.agent.bundle", &reference, "--plain-http", "--key", "alice.pub"]);
    pushed.expect_code(0);
    let cosign = ["cosign", &reference, "--trust-policy", "policy.toml", "--plain-http", "--key", "bob.key"];
    team.oci(&cosign).expect_code(0);
    team.oci(&["keygen", "gate"]).expect_code(0);
    let gate = "https://deploy.example.com/gates/production";
    let verify = [
        "verify",
        &reference,
        "--plain-http",
        "--trust-policy",
        "policy.toml",
        "--emit-vsa",
        "oci.vsa.json",
        "--vsa-key",
        "gate.key",
        "--verifier-id",
        gate,
        "--format",
        "json",
    ];
    let doc = team.oci(&verify).expect_code(0).json();
    assert_eq!(statuses(&doc), ["counted", "counted"], "{doc:#}");
    let vsa = std::fs::read(dir.join("oci.vsa.json")).unwrap();
    let vsa: serde_json::Value = serde_json::from_slice(&vsa).unwrap();
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::STANDARD.decode(vsa["dsseEnvelope"]["payload"].as_str().unwrap());
    let statement: serde_json::Value = serde_json::from_slice(&payload.unwrap()).unwrap();
    let inputs = statement["predicate"]["inputAttestations"].as_array().unwrap().clone();
    // The co-signature referrer, as the ORAS client lists it: its manifest's digest in the URI,
    // its layer's (the signatures' bytes) as the digest.
    if !crate::support::require_python_module("oras.client") {
        return;
    }
    std::fs::create_dir_all(dir.join("layers")).unwrap();
    let subject = team.oci(&[
        "push",
        "mailer.agent.bundle",
        &reference,
        "--plain-http",
        "--key",
        "alice.pub",
        "--format",
        "json",
    ]);
    let subject = subject.expect_code(0).json()["digest"].as_str().unwrap().to_owned();
    let out = std::process::Command::new("python3")
        .current_dir(dir)
        .arg(crate::support::testdata("attest/referrers.py"))
        .args(["list", &reg.host(), "team/mailer", &subject, "layers"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cosig = agent_bundle::trust_policy::signatures::COSIGNATURE_ARTIFACT_TYPE;
    let referrers: Vec<&serde_json::Value> =
        listed["index"]["manifests"].as_array().unwrap().iter().filter(|m| m["artifactType"] == cosig).collect();
    assert_eq!(referrers.len(), 1, "{listed:#}");
    let digest = referrers[0]["digest"].as_str().unwrap();
    let layer = listed["manifests"][digest]["layers"][0]["digest"].as_str().unwrap();
    let want = serde_json::json!({
        "uri": format!("oci://{}/team/mailer@{digest}", reg.host()),
        "digest": {"sha256": layer.trim_start_matches("sha256:")},
    });
    assert!(inputs.contains(&want), "{want} is not among {inputs:#?}");
}
