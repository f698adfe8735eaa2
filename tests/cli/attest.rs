//! In-toto attestations in Sigstore bundles (`pack --attest`, `verify --attestation`, the
//! provenance policy flags), checked by the independent verifiers the supply chain uses:
//! securesystemslib (DSSE), sigstore-models (Sigstore bundle v0.3), in-toto-attestation
//! (Statement v1, SLSA Provenance v1 parsed strictly) — testdata/attest/verify.py — and every
//! hostile attestation refused with its own code.

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_bundle::attest::{SigstoreBundle, Statement, Subject};
use agent_bundle::evidence::files::{AGENT_CONTRACT_V1, SLSA_PROVENANCE_V1};
use agent_bundle::minisign::SecretKey;

use crate::keys::{PIN, SoftHsm, SshAgent, write_file_key, write_openssh_key};
use crate::support::{Env, Run, bin, require_tool, testdata};

const SEED: [u8; 32] = [42; 32];
const EPOCH: &str = "1760000000";
const PROVENANCE: &str = "agent.bundle.provenance.sigstore.json";
const CONTRACT: &str = "agent.bundle.contract.sigstore.json";

/// `bundle` in `dir` with a fixed build time and no CI identity of the machine running the tests.
fn cmd(dir: &Path) -> Command {
    let mut c = bin();
    c.current_dir(dir).env("SOURCE_DATE_EPOCH", EPOCH).env_remove("GITHUB_ACTIONS");
    c
}

fn run(c: &mut Command, args: &[&str]) -> Run {
    c.args(args).output().expect("run bundle").into()
}

/// The `python3` of the independent verifiers (the tools venv's, first on PATH under
/// `scripts/test`), or None (a visible skip) when one of them is missing.
fn python() -> Option<String> {
    ["securesystemslib.dsse", "sigstore_models", "in_toto_attestation"]
        .iter()
        .all(|m| crate::support::require_python_module(m))
        .then(|| "python3".to_owned())
}

/// The independent verifiers accept `files` for `bundle` signed by `public`.
#[track_caller]
fn independent_verifiers_accept(dir: &Path, public: &str, bundle: &str, files: &[&str]) {
    let Some(python) = python() else { return };
    let out = Command::new(python)
        .current_dir(dir)
        .arg(testdata("attest/verify.py"))
        .args([public, bundle])
        .args(files)
        .output()
        .expect("run verify.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the independent verifiers refused:\n{text}");
    assert_eq!(text.matches("\nok ").count() + text.starts_with("ok ") as usize, files.len(), "{text}");
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A git work tree holding the mailer agent at agents/mailer, committed, with an origin remote.
fn git_repo(env: &Env) -> Option<PathBuf> {
    if !require_tool("git") {
        return None;
    }
    let root = env.path().join("repo");
    crate::support::copy_dir(&testdata("agents/mailer"), &root.join("agents/mailer"));
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(&root)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q"]);
    git(&["remote", "add", "origin", "https://git.example.com/acme/agents"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "agents"]);
    Some(root)
}

#[test]
fn pack_attest_with_every_key_kind_writes_byte_identical_attestations_the_independent_verifiers_accept() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let dir = env.path();
    let key = write_file_key(dir, &SEED);
    run(&mut cmd(dir), &["pubkey", &key, "-o", "release.pub"]).expect_code(0);
    let pack = |c: &mut Command, out: &str, key: Option<&str>| {
        let mut args = vec!["pack", "mailer", "--attest", "-o", out];
        if let Some(key) = key {
            args.extend(["--key", key]);
        }
        run(c, &args).expect_code(0);
    };
    std::fs::create_dir_all(dir.join("file")).unwrap();
    pack(&mut cmd(dir), "file/agent.bundle", Some(&key));
    let file = dir.join("file");
    independent_verifiers_accept(
        dir,
        "release.pub",
        "file/agent.bundle",
        &[&format!("file/{PROVENANCE}"), &format!("file/{CONTRACT}")],
    );
    // The same inputs give the same bytes: again, and through BUNDLE_SIGNING_KEY.
    let key_text = std::fs::read_to_string(&key).unwrap();
    let mut homes = vec![("again", None), ("env", Some(key_text))];
    for (name, signing_env) in homes.drain(..) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        let mut c = cmd(dir);
        match signing_env {
            Some(text) => {
                c.env("BUNDLE_SIGNING_KEY", text);
                pack(&mut c, &format!("{name}/agent.bundle"), None);
            }
            None => pack(&mut c, &format!("{name}/agent.bundle"), Some(&key)),
        }
        for f in [PROVENANCE, CONTRACT, "agent.bundle"] {
            assert!(read(&file, f) == read(&dir.join(name), f), "{name}/{f} differs from file/{f}");
        }
    }
    // An ssh-agent and a PKCS#11 token holding the same key sign the same attestations.
    if require_tool("ssh-agent") && require_tool("ssh-add") {
        let agent = SshAgent::start();
        agent.add(&write_openssh_key(dir, &SEED));
        std::fs::create_dir_all(dir.join("agent")).unwrap();
        let mut c = agent.command(&env);
        c.env("SOURCE_DATE_EPOCH", EPOCH).env_remove("GITHUB_ACTIONS");
        run(&mut c, &["pack", "mailer", "--attest", "--key", "ssh-agent:", "-o", "agent/agent.bundle"]).expect_code(0);
        for f in [PROVENANCE, CONTRACT, "agent.bundle"] {
            assert!(read(&file, f) == read(&dir.join("agent"), f), "agent/{f} differs from file/{f}");
        }
        independent_verifiers_accept(
            dir,
            "release.pub",
            "agent/agent.bundle",
            &[&format!("agent/{PROVENANCE}"), &format!("agent/{CONTRACT}")],
        );
    }
    if let Some(hsm) = SoftHsm::start() {
        hsm.import(&SEED, "release", "a1");
        std::fs::write(dir.join("pin"), format!("{PIN}\n")).unwrap();
        let uri = format!("pkcs11:token=bundle-test;object=release?pin-source={}", dir.join("pin").display());
        std::fs::create_dir_all(dir.join("token")).unwrap();
        let mut c = hsm.command(&env);
        c.env("SOURCE_DATE_EPOCH", EPOCH).env_remove("GITHUB_ACTIONS");
        run(&mut c, &["pack", "mailer", "--attest", "--key", &uri, "-o", "token/agent.bundle"]).expect_code(0);
        for f in [PROVENANCE, CONTRACT, "agent.bundle"] {
            assert!(read(&file, f) == read(&dir.join("token"), f), "token/{f} differs from file/{f}");
        }
        independent_verifiers_accept(
            dir,
            "release.pub",
            "token/agent.bundle",
            &[&format!("token/{PROVENANCE}"), &format!("token/{CONTRACT}")],
        );
    }
}

#[test]
fn the_gate_requires_provenance_from_the_right_source_and_builder() {
    let env = Env::new();
    let Some(repo) = git_repo(&env) else { return };
    let dir = env.path();
    let key = write_file_key(dir, &SEED);
    run(&mut cmd(dir), &["pubkey", &key, "-o", "release.pub"]).expect_code(0);
    run(&mut cmd(&repo), &["pack", "agents/mailer", "--locked", "--attest", "--key", &key, "-o", "../agent.bundle"])
        .expect_code(0);
    let statement = SigstoreBundle::from_json(&read(dir, PROVENANCE)).unwrap().statement().unwrap();
    let dep = &statement.predicate["buildDefinition"]["resolvedDependencies"][0];
    assert_eq!(dep["uri"], "git+https://git.example.com/acme/agents@refs/heads/main");
    assert_eq!(dep["annotations"]["dirty"], false);
    assert_eq!(statement.predicate["buildDefinition"]["externalParameters"]["agent"], "agents/mailer");
    assert_eq!(statement.predicate["runDetails"]["metadata"]["startedOn"], "2025-10-09T08:53:20Z");

    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", "agent.bundle", "--key", "release.pub", "--format", "json"];
        args.extend(extra);
        run(&mut cmd(dir), &args)
    };
    let ok = verify(&[
        "--require-provenance",
        "--source-repo",
        "https://git.example.com/acme/agents",
        "--source-ref",
        "refs/heads/main",
        "--builder-id",
        "https://agent-bundle.dev/builders/local/v1",
    ]);
    ok.expect_code(0);
    let json = ok.json();
    let listed: Vec<&str> =
        json["attestations"].as_array().unwrap().iter().map(|a| a["verdict"].as_str().unwrap()).collect();
    assert_eq!(listed, ["ok", "ok"]);
    assert_eq!(json["attestations"][0]["predicate_type"], SLSA_PROVENANCE_V1);
    assert_eq!(json["attestations"][1]["predicate_type"], AGENT_CONTRACT_V1);
    for (flag, value) in [
        ("--source-repo", "https://git.example.com/acme/other"),
        ("--source-ref", "refs/heads/dev"),
        ("--builder-id", "https://github.com/acme/agents/.github/workflows/release.yml@refs/heads/main"),
    ] {
        let out = verify(&[flag, value]);
        out.expect_code(1);
        assert_eq!(out.json()["code"], "provenance_mismatch", "{flag}");
        assert_eq!(out.json()["attestations"][0]["verdict"], "provenance_mismatch");
    }
    // Without the provenance file: required, so refused; not required, the contract alone passes.
    std::fs::rename(dir.join(PROVENANCE), dir.join("elsewhere.json")).unwrap();
    assert_eq!(verify(&["--require-provenance"]).json()["code"], "attestation_missing");
    verify(&[]).expect_code(0);
    // Named explicitly, it is found again (discovery is off then).
    verify(&["--attestation", "elsewhere.json", "--require-provenance"]).expect_code(0);
    // unpack shares the gate: refused, and nothing unpacked.
    let out = run(
        &mut cmd(dir),
        &["unpack", "agent.bundle", "out", "--key", "release.pub", "--require-provenance", "--format", "json"],
    );
    out.expect_code(1);
    assert_eq!(out.json()["code"], "attestation_missing");
    assert!(!dir.join("out").exists());
    run(
        &mut cmd(dir),
        &[
            "unpack",
            "agent.bundle",
            "out",
            "--key",
            "release.pub",
            "--attestation",
            "elsewhere.json",
            "--require-provenance",
        ],
    )
    .expect_code(0);
}

/// A Sigstore bundle signed by `key` over `statement`, with the DSSE payload type `payload_type`.
fn signed(key: &SecretKey, statement: &Statement, payload_type: Option<&str>) -> Vec<u8> {
    let mut bundle =
        SigstoreBundle::sign_statement(statement, &key.key_id_hex(), |m| Ok::<_, ()>(key.sign_ed25519(m))).unwrap();
    if let Some(t) = payload_type {
        bundle.dsse_envelope.payload_type = t.to_owned();
        bundle.dsse_envelope.signatures.clear();
        bundle.dsse_envelope.sign(&key.key_id_hex(), |m| Ok::<_, ()>(key.sign_ed25519(m))).unwrap();
    }
    bundle.to_json()
}

#[test]
fn hostile_attestations_are_refused_each_with_its_code() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let dir = env.path();
    let key_path = write_file_key(dir, &SEED);
    let probe = SecretKey::from_seed(&SEED, [0; 8]);
    let key = SecretKey::from_seed(&SEED, agent_bundle::keys::derived_key_id(&probe.public_key().ed25519_bytes()));
    run(&mut cmd(dir), &["pubkey", &key_path, "-o", "release.pub"]).expect_code(0);
    run(&mut cmd(dir), &["pack", "mailer", "--attest", "--key", &key_path, "-o", "agent.bundle"]).expect_code(0);
    // Another release of the agent, attested by the same key.
    crate::support::set_version(&dir.join("mailer"), "9.9.9");
    run(&mut cmd(dir), &["pack", "mailer", "--attest", "--key", &key_path, "-o", "other.bundle"]).expect_code(0);
    // The same agent attested by a key nobody trusts.
    let stranger = dir.join("stranger");
    std::fs::create_dir_all(&stranger).unwrap();
    let stranger_key = {
        let k = SecretKey::from_seed(&[7; 32], [7; 8]);
        let p = stranger.join("s.key");
        std::fs::write(&p, k.to_text(None).unwrap().as_bytes()).unwrap();
        p
    };
    run(
        &mut cmd(dir),
        &["pack", "mailer", "--attest", "--key", stranger_key.to_str().unwrap(), "-o", "stranger/agent.bundle"],
    )
    .expect_code(0);

    let good = SigstoreBundle::from_json(&read(dir, CONTRACT)).unwrap();
    let statement = good.statement().unwrap();
    let sha = statement.subject[0].digest["sha256"].clone();
    let subject = vec![Subject { name: "agent.bundle".into(), digest: [("sha256".to_owned(), sha.clone())].into() }];
    let mut changed = statement.predicate.clone();
    changed["tools"][0]["requires_confirmation"] =
        (!changed["tools"][0]["requires_confirmation"].as_bool().unwrap()).into();
    let mut tampered = good.clone();
    tampered.dsse_envelope.payload = String::from_utf8(tampered.dsse_envelope.payload.clone())
        .unwrap()
        .replace("\"requires_confirmation\":false", "\"requires_confirmation\":true")
        .into_bytes();
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("another bundle's digest", read(dir, "other.bundle.contract.sigstore.json"), "attestation_subject_mismatch"),
        ("an untrusted key", read(&stranger, CONTRACT), "attestation_untrusted"),
        ("a tampered payload", tampered.to_json(), "attestation_unsigned"),
        (
            "another payload type",
            signed(&key, &statement, Some("application/vnd.in-toto+json; charset=latin1")),
            "attestation_payload_type",
        ),
        (
            "another predicate type",
            signed(&key, &Statement::new(subject.clone(), "https://example.com/vuln/v1", serde_json::json!({})), None),
            "attestation_predicate_type",
        ),
        (
            "a contract that differs from the bundle",
            signed(&key, &Statement::new(subject.clone(), AGENT_CONTRACT_V1, changed), None),
            "attestation_contract_mismatch",
        ),
        (
            "a deeply nested statement",
            signed(
                &key,
                &Statement::new(subject.clone(), AGENT_CONTRACT_V1, serde_json::from_str(&deep).unwrap()),
                None,
            ),
            "attestation_malformed",
        ),
        ("an oversized file", vec![b' '; 2 << 20], "attestation_malformed"),
        ("not JSON", b"{\"mediaType\":".to_vec(), "attestation_malformed"),
    ];
    for (what, bytes, code) in cases {
        std::fs::write(dir.join("case.json"), &bytes).unwrap();
        let out = run(
            &mut cmd(dir),
            &["verify", "agent.bundle", "--key", "release.pub", "--attestation", "case.json", "--format", "json"],
        );
        out.expect_code(1);
        assert_eq!(out.json()["code"], code, "{what}: {}", out.stdout);
        assert_eq!(out.json()["attestations"][0]["verdict"], code, "{what}");
    }
    // The genuine ones still pass, found beside the bundle.
    run(&mut cmd(dir), &["verify", "agent.bundle", "--key", "release.pub", "--require-provenance"]).expect_code(0);
}

/// Issue 35, defect 1: a key repeated inside a signed predicate (`"tools"` twice, the first
/// every tool with `requires_confirmation: true`; or `builder.id` twice) is refused as
/// malformed: a reader that keeps the first value (gjson, some policy engines) would see
/// another statement than the gate, which keeps the last.
#[test]
fn a_key_repeated_inside_a_signed_predicate_is_refused_as_malformed() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let dir = env.path();
    let key_path = write_file_key(dir, &SEED);
    let probe = SecretKey::from_seed(&SEED, [0; 8]);
    let key = SecretKey::from_seed(&SEED, agent_bundle::keys::derived_key_id(&probe.public_key().ed25519_bytes()));
    run(&mut cmd(dir), &["pubkey", &key_path, "-o", "release.pub"]).expect_code(0);
    run(&mut cmd(dir), &["pack", "mailer", "--attest", "--key", &key_path, "-o", "agent.bundle"]).expect_code(0);
    let contract = SigstoreBundle::from_json(&read(dir, CONTRACT)).unwrap();
    let every_tool_confirmed: Vec<serde_json::Value> = contract.statement().unwrap().predicate["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let mut t = t.clone();
            t["requires_confirmation"] = true.into();
            t
        })
        .collect();
    let cases = [
        (
            CONTRACT,
            "\"tools\":",
            format!("\"tools\":{},\"tools\":", serde_json::to_string(&every_tool_confirmed).unwrap()),
        ),
        (PROVENANCE, "\"builder\":{", "\"builder\":{\"id\":\"https://evil.example/builder\",".to_owned()),
    ];
    for (file, at, repeated) in cases {
        let mut bundle = SigstoreBundle::from_json(&read(dir, file)).unwrap();
        let payload = String::from_utf8(bundle.dsse_envelope.payload.clone()).unwrap();
        assert!(payload.contains(at), "{file}: {payload}");
        bundle.dsse_envelope.payload = payload.replacen(at, &repeated, 1).into_bytes();
        bundle.dsse_envelope.signatures.clear();
        bundle.dsse_envelope.sign(&key.key_id_hex(), |m| Ok::<_, ()>(key.sign_ed25519(m))).unwrap();
        std::fs::write(dir.join("case.json"), bundle.to_json()).unwrap();
        let out = run(
            &mut cmd(dir),
            &["verify", "agent.bundle", "--key", "release.pub", "--attestation", "case.json", "--format", "json"],
        );
        out.expect_code(1);
        assert_eq!(out.json()["code"], "attestation_malformed", "{file}: {}", out.stdout);
        assert!(out.json()["message"].as_str().unwrap().contains("appears twice"), "{}", out.stdout);
    }
}

#[test]
fn pack_without_attest_removes_the_attestations_of_an_earlier_pack() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let dir = env.path();
    let key = write_file_key(dir, &SEED);
    run(&mut cmd(dir), &["pack", "mailer", "--attest", "--key", &key, "-o", "agent.bundle"]).expect_code(0);
    assert!(dir.join(PROVENANCE).is_file() && dir.join(CONTRACT).is_file());
    run(&mut cmd(dir), &["pack", "mailer", "--key", &key, "-o", "agent.bundle"]).expect_code(0);
    assert!(!dir.join(PROVENANCE).exists() && !dir.join(CONTRACT).exists());
}

// ---------------------------------------------------------------------------------------------
// In a registry: referrers through the fallback tag of Debian's docker-registry 2.8

fn oci(env: &Env, args: &[&str]) -> Run {
    let mut c = cmd(env.path());
    c.env("DOCKER_CONFIG", env.path().join("no-docker-config"));
    c.env_remove("BUNDLE_REGISTRY_USERNAME").env_remove("BUNDLE_REGISTRY_PASSWORD");
    run(&mut c, args)
}

#[test]
fn push_carries_attestations_as_referrers_and_pull_refuses_a_release_without_provenance_before_its_layer_moves() {
    use crate::registry::{self, Action, Proxy, Setup};
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let dir = env.path();
    let key = write_file_key(dir, &SEED);
    run(&mut cmd(dir), &["pubkey", &key, "-o", "release.pub"]).expect_code(0);
    run(&mut cmd(dir), &["pack", "mailer", "--attest", "--key", &key, "-o", "agent.bundle"]).expect_code(0);
    let attested = format!("oci://{}/team/mailer:1", reg.host());
    let pushed =
        oci(&env, &["push", "agent.bundle", &attested, "--plain-http", "--key", "release.pub", "--format", "json"]);
    let pushed = pushed.expect_code(0).json();
    let digest = pushed["digest"].as_str().unwrap().to_owned();
    assert_eq!(pushed["referrers"].as_array().map(Vec::len), Some(2), "{pushed}");
    // A release of the same agent pushed without its attestations.
    std::fs::create_dir_all(dir.join("bare")).unwrap();
    run(&mut cmd(dir), &["pack", "mailer", "--key", &key, "-o", "bare/agent.bundle"]).expect_code(0);
    let bare = format!("oci://{}/team/bare:1", reg.host());
    oci(&env, &["push", "bare/agent.bundle", &bare, "--plain-http", "--key", "release.pub"]).expect_code(0);

    // docker-registry 2.8 has no referrers API: the index is under the fallback tag, and a stock
    // client reads it there (skopeo, else plain HTTP as the distribution spec describes).
    let tag = digest.replacen(':', "-", 1);
    let index: serde_json::Value = if require_tool("skopeo") {
        let out = Command::new("skopeo")
            .args(["inspect", "--raw", "--tls-verify=false", &format!("docker://{}/team/mailer:{tag}", reg.host())])
            .output()
            .unwrap();
        assert!(out.status.success(), "skopeo: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    } else {
        serde_json::from_slice(&registry::get(reg.port, &format!("/v2/team/mailer/manifests/{tag}"))).unwrap()
    };
    let types: Vec<&str> =
        index["manifests"].as_array().unwrap().iter().map(|m| m["artifactType"].as_str().unwrap()).collect();
    assert_eq!(types, agent_bundle::evidence::files::ARTIFACT_TYPES);
    let referrer = index["manifests"][0]["digest"].as_str().unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&registry::get(reg.port, &format!("/v2/team/mailer/manifests/{referrer}"))).unwrap();
    assert_eq!(manifest["subject"]["digest"], digest.as_str());

    // Pull through a proxy that counts the layer requests.
    let proxy = Proxy::start(reg.port, |_, _| Action::Forward);
    let layer_gets = |log: &Vec<String>, repo: &str| {
        log.iter().filter(|l| l.starts_with("GET ") && l.contains(&format!("/v2/team/{repo}/blobs/"))).count()
    };
    let via = |r: &str| r.replace(&reg.host(), &proxy.host());
    let out = oci(
        &env,
        &[
            "pull",
            &via(&bare),
            "-o",
            "pulled.bundle",
            "--plain-http",
            "--key",
            "release.pub",
            "--require-provenance",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.expect_code(1).json()["code"], "attestation_missing", "{}", out.stdout);
    assert!(!dir.join("pulled.bundle").exists());
    assert_eq!(
        layer_gets(&proxy.log.lock().unwrap(), "bare"),
        0,
        "the layer was requested: {:?}",
        proxy.log.lock().unwrap()
    );
    // The wrong builder: refused from the referrers alone, no blob of the bundle requested
    // (the referrers' own manifests and small blobs are fetched).
    let before = proxy.log.lock().unwrap().len();
    let out = oci(
        &env,
        &[
            "verify",
            &via(&attested),
            "--plain-http",
            "--key",
            "release.pub",
            "--builder-id",
            "https://ci.example.com/other",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.expect_code(1).json()["code"], "provenance_mismatch", "{}", out.stdout);
    let layer = pushed["layer"]["digest"].as_str().unwrap();
    assert!(!proxy.log.lock().unwrap()[before..].iter().any(|l| l.contains(layer)), "the layer was requested");
    // The right one: pulled, judged (the contract against the bundle's tools too) and listed.
    let out = oci(
        &env,
        &[
            "pull",
            &via(&attested),
            "-o",
            "pulled.bundle",
            "--plain-http",
            "--key",
            "release.pub",
            "--require-provenance",
            "--builder-id",
            "https://agent-bundle.dev/builders/local/v1",
            "--format",
            "json",
        ],
    );
    let json = out.expect_code(0).json();
    let verdicts: Vec<&str> =
        json["attestations"].as_array().unwrap().iter().map(|a| a["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["ok", "ok"], "{json}");
    assert_eq!(std::fs::read(dir.join("pulled.bundle")).unwrap(), std::fs::read(dir.join("agent.bundle")).unwrap());
    // A referrers index listing thousands of entries is refused with its code, before the layer.
    let entries: Vec<serde_json::Value> = (0..5000)
        .map(|i| serde_json::json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": format!("sha256:{i:064x}"), "size": 1, "artifactType": agent_bundle::evidence::files::ARTIFACT_TYPES[0]}))
        .collect();
    let huge = serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries})).unwrap();
    let flooding = Proxy::start(reg.port, move |r, _| {
        if r.path.contains("/manifests/sha256-") {
            Action::Answer(
                200,
                vec![("Content-Type".into(), "application/vnd.oci.image.index.v1+json".into())],
                huge.clone(),
            )
        } else {
            Action::Forward
        }
    });
    let out = oci(
        &env,
        &[
            "verify",
            &attested.replace(&reg.host(), &flooding.host()),
            "--plain-http",
            "--key",
            "release.pub",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.expect_code(1).json()["code"], "attestation_malformed", "{}", out.stdout);
    assert!(!flooding.log.lock().unwrap().iter().any(|l| l.contains(layer)), "the layer was requested");
    // unpack of the registry reference shares it.
    let out = oci(
        &env,
        &["unpack", &bare, "out", "--plain-http", "--key", "release.pub", "--require-provenance", "--format", "json"],
    );
    assert_eq!(out.expect_code(1).json()["code"], "attestation_missing");
    assert!(!dir.join("out").exists());
}

#[test]
fn bundle_attest_of_an_existing_bundle_says_what_pack_attest_says_and_the_contract_follows_its_schema() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let dir = env.path();
    let key = write_file_key(dir, &SEED);
    run(&mut cmd(dir), &["pubkey", &key, "-o", "release.pub"]).expect_code(0);
    std::fs::create_dir_all(dir.join("later")).unwrap();
    run(&mut cmd(dir), &["pack", "mailer", "--attest", "--key", &key, "-o", "agent.bundle"]).expect_code(0);
    run(&mut cmd(dir), &["pack", "mailer", "--key", &key, "-o", "later/agent.bundle"]).expect_code(0);
    run(&mut cmd(dir), &["attest", "later/agent.bundle", "--key", &key, "--from", "mailer"]).expect_code(0);
    // The contract computed from the bundle is the one computed from the folder at pack time.
    assert!(read(dir, CONTRACT) == read(&dir.join("later"), CONTRACT), "attest and pack --attest disagree");
    run(&mut cmd(dir), &["verify", "later/agent.bundle", "--key", "release.pub", "--require-provenance"])
        .expect_code(0);
    independent_verifiers_accept(
        dir,
        "release.pub",
        "later/agent.bundle",
        &[&format!("later/{PROVENANCE}"), &format!("later/{CONTRACT}")],
    );
    // inspect lists them: predicate, signer, subject match, builder.
    let shown = run(&mut cmd(dir), &["inspect", "later/agent.bundle", "--key", "release.pub", "--format", "json"]);
    let shown = shown.expect_code(0).json();
    let list = shown["attestations"].as_array().expect("inspect lists the attestations");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["predicate_type"], SLSA_PROVENANCE_V1);
    assert_eq!(list[0]["builder"], "https://agent-bundle.dev/builders/local/v1");
    assert!(list.iter().all(|a| a["subject_matches"] == true && a["verdict"] == "ok"), "{shown}");
    let human = run(&mut cmd(dir), &["inspect", "later/agent.bundle"]);
    assert!(human.expect_code(0).stdout.contains("attestation contract ("), "{}", human.stdout);
    // A file that is not a bundle is refused with the verifier's code, and nothing is written.
    std::fs::write(dir.join("junk.bundle"), b"not a bundle").unwrap();
    let out = run(&mut cmd(dir), &["attest", "junk.bundle", "--key", &key, "--format", "json"]);
    assert_eq!(out.expect_code(1).json()["code"], "malformed_archive");
    assert!(!dir.join("junk.bundle.contract.sigstore.json").exists());

    // The published schema is what `bundle schema contract-predicate` prints, and the predicate
    // we write is valid against it (and a changed one is not).
    let printed = run(&mut cmd(dir), &["schema", "contract-predicate"]);
    printed.expect_code(0);
    let schema: serde_json::Value = serde_json::from_str(&printed.stdout).unwrap();
    assert_eq!(
        printed.stdout,
        std::fs::read_to_string(crate::support::repo().join("schemas/agent-contract.v1.schema.json")).unwrap()
    );
    let validator = jsonschema::validator_for(&schema).unwrap();
    let predicate = SigstoreBundle::from_json(&read(dir, CONTRACT)).unwrap().statement().unwrap().predicate;
    assert!(
        validator.is_valid(&predicate),
        "{:?}",
        validator.iter_errors(&predicate).map(|e| e.to_string()).collect::<Vec<_>>()
    );
    assert!(predicate["tools"].as_array().is_some_and(|t| !t.is_empty()));
    let mut wrong = predicate.clone();
    wrong["tools"][0]["transport"] = "carrier-pigeon".into();
    assert!(!validator.is_valid(&wrong));
}
