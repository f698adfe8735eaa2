//! What users see of the evidence commands and gate modes: `trust` (each subcommand), `cosign`,
//! `attest`, `verify --trust-policy`, `verify --sigstore` and the attestation verdicts, human
//! and JSON, for each success and each refusal, pinned by insta snapshots (one snapshot per
//! case holds both formats). The behaviour behind each code is tested in signers.rs,
//! attest.rs and keyless.rs; these pin the words.
//!
//! The team's keys are made per run (`bundle keygen`), so the output shows each key id and
//! public key by its owner's name (`[alice]`); times, and the SHA-256 digests that follow
//! from fresh signatures, are filtered (`[TIME]`, `[SHA256]`).

use regex::Regex;

use crate::support::{Env, Run, testdata};

/// A release team in a temp folder: file keys alice, bob, carol and dave (alice and carol
/// release engineers, bob security, dave unknown to the policy), the mailer agent packed by
/// alice, and a policy that needs two keys, one of them security, for `mail*` agents.
struct Team {
    env: Env,
    /// (name, key id as printed, public key line).
    keys: Vec<(String, String, String)>,
}

const NAMES: [&str; 4] = ["alice", "bob", "carol", "dave"];
const RULES: &str = "[[rule]]\nagents = [\"*\"]\nthreshold = 1\n\n[[rule]]\nagents = [\"mail*\"]\nthreshold = 2\nroles = { security = 1 }\n";

impl Team {
    fn new() -> Team {
        let env = Env::new();
        env.copy("agents/mailer", "mailer");
        let mut keys = Vec::new();
        for name in NAMES {
            env.run(&["keygen", name]).expect_code(0);
            let public = std::fs::read_to_string(env.path().join(format!("{name}.pub"))).unwrap();
            let line = public.lines().nth(1).unwrap().to_owned();
            let raw = base64_decode(&line);
            let id: String = raw[2..10].iter().rev().map(|b| format!("{b:02X}")).collect();
            keys.push((name.to_owned(), id, line));
        }
        env.run(&["pack", "mailer", "--key", "alice.key", "-o", "mailer.agent.bundle"]).expect_code(0);
        Team { env, keys }
    }

    fn signer(&self, name: &str, extra: &str) -> String {
        let line = &self.keys.iter().find(|k| k.0 == name).unwrap().2;
        format!("[[signer]]\nname = \"{name}\"\npublic_key = \"{line}\"\n{extra}\n")
    }

    /// Writes `file`: version `version` of policy `acme`, roots alice, bob and carol (two of
    /// them needed), the usual signers plus `extra_signers`, and `rules`.
    fn write_policy(&self, file: &str, version: u64, extra_signers: &str, rules: &str) {
        let text = format!(
            "format = 1\nid = \"acme\"\nversion = {version}\nexpires = 2099-01-01T00:00:00Z\n\n[root]\nthreshold = 2\nsigners = [\"alice\", \"bob\", \"carol\"]\n\n{}{}{}{extra_signers}\n{rules}",
            self.signer("alice", "roles = [\"release\"]"),
            self.signer("bob", "roles = [\"security\"]"),
            self.signer("carol", "roles = [\"release\"]"),
        );
        std::fs::write(self.env.path().join(file), text).unwrap();
    }

    /// The usual policy, signed by alice and bob.
    fn policy(&self) {
        self.write_policy("policy.toml", 1, "", RULES);
        for k in ["alice", "bob"] {
            self.run(&["trust", "sign", "policy.toml", "--key", &format!("{k}.key")]).expect_code(0);
        }
    }

    /// `bundle ARGS` in the team's folder, outside any CI (the provenance would name it).
    fn run(&self, args: &[&str]) -> Run {
        let mut cmd = crate::support::bin();
        cmd.current_dir(self.env.path()).args(args).env_remove("GITHUB_ACTIONS");
        cmd.output().unwrap().into()
    }

    /// One run, as the snapshot shows it: the command line, then exit code, stdout, stderr.
    fn shown(&self, args: &[&str]) -> String {
        let run = self.run(args);
        format!("$ bundle {}\n{}", args.join(" "), self.filter(&crate::snapshot::run_text(&run)))
    }

    /// `args` in human output, then with `--format json`.
    fn both(&self, args: &[&str]) -> String {
        let mut json = args.to_vec();
        json.extend(["--format", "json"]);
        format!("{}\n{}", self.shown(args), self.shown(&json))
    }

    fn filter(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (name, id, line) in &self.keys {
            text = text.replace(id, &format!("[{name}]")).replace(&id.to_lowercase(), &format!("[{name}]"));
            text = text.replace(line, &format!("[{name}.pub]"));
        }
        filter_volatile(&text)
    }
}

/// Times and SHA-256 digests (which follow from fresh keys and signatures) as `[TIME]` and
/// `[SHA256]`.
fn filter_volatile(text: &str) -> String {
    let time = Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)").unwrap();
    let sha = Regex::new(r"\b[0-9a-f]{64}\b").unwrap();
    let age = Regex::new(r"\b\d+ (days? old|day\(s\) ago)").unwrap();
    let text = time.replace_all(text, "[TIME]");
    let text = sha.replace_all(&text, "[SHA256]");
    let text = age.replace_all(&text, "[AGE]");
    let age_days = Regex::new(r#""age_days": \d+"#).unwrap();
    age_days.replace_all(&text, r#""age_days": "[AGE]""#).into_owned()
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}

#[test]
fn trust_sign_and_verify() {
    let team = Team::new();
    team.write_policy("policy.toml", 1, "", RULES);
    let mut out = team.both(&["trust", "verify", "policy.toml"]);
    out.push_str(&team.shown(&["trust", "sign", "policy.toml", "--key", "alice.key"]));
    out.push_str(&team.shown(&["trust", "sign", "policy.toml", "--key", "bob.key", "--format", "json"]));
    out.push_str(&team.shown(&["trust", "sign", "policy.toml", "--key", "dave.key"]));
    out.push_str(&team.both(&["trust", "verify", "policy.toml"]));
    insta::assert_snapshot!(out);
}

#[test]
fn trust_rotate_and_follow_a_chain() {
    let team = Team::new();
    team.policy();
    let mut out = team.both(&["trust", "rotate", "policy.toml", "-o", "v2.toml", "--expires", "2099-06-01T00:00:00Z"]);
    team.write_policy("v2.toml", 2, "", RULES);
    team.run(&["trust", "sign", "v2.toml", "--key", "alice.key"]).expect_code(0);
    out.push_str(&team.both(&["trust", "verify", "policy.toml", "--update", "v2.toml"]));
    team.run(&["trust", "sign", "v2.toml", "--key", "carol.key"]).expect_code(0);
    out.push_str(&team.both(&["trust", "verify", "policy.toml", "--update", "v2.toml", "--state", "state.json"]));
    out.push_str(&team.both(&["trust", "verify", "policy.toml", "--state", "state.json"]));
    insta::assert_snapshot!(out);
}

#[test]
fn trust_refuses_a_malformed_policy_and_import_root_pins_a_root() {
    let team = Team::new();
    std::fs::write(team.env.path().join("bad.toml"), "format = 1\nid = \"acme\"\nversion = 0\n").unwrap();
    let mut out = team.both(&["trust", "verify", "bad.toml"]);
    team.policy();
    std::fs::write(team.env.path().join("not-a-root.json"), "{}").unwrap();
    out.push_str(&team.both(&["trust", "import-root", "policy.toml", "not-a-root.json"]));
    let root = testdata("sigstore/trusted_root.staging.json");
    std::fs::copy(&root, team.env.path().join("trusted_root.json")).unwrap();
    out.push_str(&team.shown(&["trust", "import-root", "policy.toml", "trusted_root.json"]));
    team.policy();
    out.push_str(&team.shown(&["trust", "import-root", "policy.toml", "trusted_root.json", "--format", "json"]));
    insta::assert_snapshot!(out);
}

#[test]
fn cosign_and_verify_under_a_trust_policy() {
    let team = Team::new();
    team.policy();
    let policy = ["--trust-policy", "policy.toml", "--state", "state.json"];
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", "mailer.agent.bundle"];
        args.extend_from_slice(&policy);
        args.extend_from_slice(extra);
        team.both(&args)
    };
    let mut out = verify(&[]);
    // Refused by the gate: nothing is signed.
    out.push_str(&team.both(&[
        "cosign",
        "mailer.agent.bundle",
        "--key",
        "bob.key",
        "--trust-policy",
        "policy.toml",
        "--name",
        "other",
    ]));
    out.push_str(&team.shown(&["cosign", "mailer.agent.bundle", "--key", "bob.key", "--trust-policy", "policy.toml"]));
    out.push_str(&team.shown(&[
        "cosign",
        "mailer.agent.bundle",
        "--key",
        "bob.key",
        "--trust-policy",
        "policy.toml",
        "--format",
        "json",
    ]));
    out.push_str(&verify(&[]));
    // --key beside --trust-policy is refused: the policy is the only source of trust.
    out.push_str(&team.shown(&[
        "verify",
        "mailer.agent.bundle",
        "--trust-policy",
        "policy.toml",
        "--key",
        "alice.pub",
    ]));
    // Without --state: a warning that nothing is remembered.
    out.push_str(&team.shown(&["verify", "mailer.agent.bundle", "--trust-policy", "policy.toml"]));
    insta::assert_snapshot!(out);
}

#[test]
fn verify_under_a_trust_policy_refuses_each_signer_with_its_code() {
    let team = Team::new();
    // No rule for this agent.
    team.write_policy("norule.toml", 1, "", "[[rule]]\nagents = [\"kb-*\"]\nthreshold = 1\n");
    // alice, who packed the bundle, revoked.
    team.write_policy("revoked.toml", 1, "", RULES);
    let text = std::fs::read_to_string(team.env.path().join("revoked.toml")).unwrap();
    let text = text.replacen("roles = [\"release\"]\n", "roles = [\"release\"]\nrevoked = true\n", 1);
    std::fs::write(team.env.path().join("revoked.toml"), text).unwrap();
    for file in ["norule.toml", "revoked.toml"] {
        for k in ["bob", "carol"] {
            team.run(&["trust", "sign", file, "--key", &format!("{k}.key")]).expect_code(0);
        }
    }
    let mut out = String::new();
    for file in ["norule.toml", "revoked.toml"] {
        out.push_str(&team.both(&["verify", "mailer.agent.bundle", "--trust-policy", file, "--state", "state.json"]));
    }
    // Signed by one root only: the policy is not trusted.
    team.write_policy("half.toml", 1, "", RULES);
    team.run(&["trust", "sign", "half.toml", "--key", "alice.key"]).expect_code(0);
    out.push_str(&team.both(&[
        "verify",
        "mailer.agent.bundle",
        "--trust-policy",
        "half.toml",
        "--state",
        "state.json",
    ]));
    insta::assert_snapshot!(out);
}

#[test]
fn attest_and_the_attestation_verdicts() {
    let team = Team::new();
    let keys = ["--key", "alice.pub"];
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", "mailer.agent.bundle", keys[0], keys[1]];
        args.extend_from_slice(extra);
        team.both(&args)
    };
    // None yet: required, it is missing.
    let mut out = verify(&["--require-provenance"]);
    // Signed by a key that is not trusted.
    out.push_str(&team.shown(&["attest", "mailer.agent.bundle", "--key", "dave.key"]));
    out.push_str(&verify(&["--require-provenance"]));
    for kind in ["provenance", "contract"] {
        std::fs::remove_file(team.env.path().join(format!("mailer.agent.bundle.{kind}.sigstore.json"))).unwrap();
    }
    out.push_str(&team.shown(&["attest", "mailer.agent.bundle", "--key", "alice.key", "--format", "json"]));
    out.push_str(&verify(&["--require-provenance", "--builder-id", "https://ci.example/other"]));
    out.push_str(&verify(&["--require-provenance"]));
    // The attestations of another bundle beside this one: about another file.
    set_version(&team, "1.0.1");
    team.run(&["pack", "mailer", "--key", "alice.key", "-o", "other.agent.bundle"]).expect_code(0);
    for kind in ["provenance", "contract"] {
        std::fs::copy(
            team.env.path().join(format!("mailer.agent.bundle.{kind}.sigstore.json")),
            team.env.path().join(format!("other.agent.bundle.{kind}.sigstore.json")),
        )
        .unwrap();
    }
    out.push_str(&team.both(&["verify", "other.agent.bundle", keys[0], keys[1]]));
    // attest refuses what is not a bundle.
    std::fs::write(team.env.path().join("not.agent.bundle"), "not a bundle").unwrap();
    out.push_str(&team.both(&["attest", "not.agent.bundle", "--key", "alice.key"]));
    insta::assert_snapshot!(out);
}

fn set_version(team: &Team, version: &str) {
    crate::support::set_version(&team.env.path().join("mailer"), version);
}

/// `verify --sigstore`: a keyless signer over the bundle file, judged offline against the
/// trusted root of the test Sigstore instance (keyless.rs makes it).
#[test]
fn verify_with_a_keyless_signer() {
    use crate::keyless::{ACTIONS, WORKFLOW};
    let Some(env) = crate::keyless::keyless_signed_mailer() else { return };
    let team = Team { env, keys: Vec::new() };
    let test_pub = testdata("keys/test.pub").display().to_string();
    let verify = |identity: &str, extra: &[&str]| {
        let mut args = vec!["verify", "m.agent.bundle", "--key", &test_pub];
        args.extend(["--sigstore", "artifact.sigstore.json", "--trusted-root", "trusted_root.json"]);
        args.extend(["--certificate-identity", identity, "--certificate-oidc-issuer", ACTIONS]);
        args.extend_from_slice(extra);
        team.both(&args).replace(&test_pub, "[REPO]/testdata/keys/test.pub")
    };
    let mut out = verify(WORKFLOW, &["--certificate-github-workflow-repository", "acme/agents"]);
    out.push_str(&verify(&WORKFLOW.replace("release.yml", "other.yml"), &[]));
    out.push_str(&verify(WORKFLOW, &["--certificate-github-workflow-ref", "refs/heads/main"]));
    // The same Sigstore bundle beside another agent bundle: it signs another file.
    crate::support::set_version(&team.env.path().join("mailer"), "1.0.1");
    team.run(&["pack", "mailer", "--key", &testdata("keys/test.key").display().to_string(), "-o", "m2.agent.bundle"])
        .expect_code(0);
    std::fs::rename(team.env.path().join("m2.agent.bundle"), team.env.path().join("m.agent.bundle")).unwrap();
    out.push_str(&verify(WORKFLOW, &[]));
    std::fs::write(team.env.path().join("trusted_root.json"), "{}").unwrap();
    out.push_str(&verify(WORKFLOW, &[]));
    insta::assert_snapshot!(out);
}
