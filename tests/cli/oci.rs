//! `bundle push`, `bundle pull` and `oci://` inputs against a real registry (Debian's
//! `docker-registry`), with ORAS (Python) as the independent second client, and an in-test
//! proxy for the Bearer token flow and for registries that misbehave.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::registry::{self, Action, PASSWORD, Proxy, Setup, USER};
use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, Run, bin, key, set_version, testdata};

/// Packs testdata's mailer at `version` into `<version>.agent.bundle` in the env.
fn packed(env: &Env, version: &str) -> PathBuf {
    let agent = env.path().join(format!("mailer-{version}"));
    if !agent.exists() {
        crate::support::copy_dir(&testdata("agents/mailer"), &agent);
        set_version(&agent, version);
    }
    let out = env.path().join(format!("mailer-{version}.agent.bundle"));
    env.run(&["pack", agent.to_str().unwrap(), "--key", &key("test.key"), "-o", out.to_str().unwrap()]).expect_code(0);
    out
}

fn run_with(env: &Env, vars: &[(&str, &str)], args: &[&str]) -> Run {
    let mut c = bin();
    // No login of the machine's user leaks in (support::bin scrubs it); each test says where
    // credentials come from.
    c.current_dir(env.path()).args(args);
    for (k, v) in vars {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

fn push(env: &Env, bundle: &Path, reference: &str, extra: &[&str]) -> Run {
    let mut args =
        vec!["push", bundle.to_str().unwrap(), reference, "--key", &*Box::leak(key("test.pub").into_boxed_str())];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--format", "json"]);
    run_with(env, &[], &args)
}

fn pull(env: &Env, reference: &str, out: &str, extra: &[&str]) -> Run {
    let k = key("test.pub");
    let mut args = vec!["pull", reference, "--key", &k, "-o", out, "--format", "json"];
    args.extend_from_slice(extra);
    run_with(env, &[], &args)
}

/// The files in `dir` (names), to show that a failed pull left nothing behind.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn push_pull_verify_inspect_unpack_round_trip_with_reproducible_digest() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let bundle = packed(&env, "1.4.0");
    let r = format!("oci://{}/team/mailer:1.4.0", reg.host());
    let first = push(&env, &bundle, &r, &["--plain-http", "--tag", "latest"]);
    let doc = first.expect_code(0).json();
    let digest = doc["digest"].as_str().unwrap().to_owned();
    assert_eq!(doc["ref"], r.as_str());
    assert_eq!(doc["layer"]["upload"], "uploaded");
    // Same bundle again, and into another repository: the same manifest digest.
    let again = push(&env, &bundle, &r, &["--plain-http"]).expect_code(0).json();
    assert_eq!(again["digest"], digest.as_str());
    assert_eq!(again["layer"]["upload"], "exists");
    let other = format!("oci://{}/elsewhere/mailer:x", reg.host());
    let mounted = push(&env, &bundle, &other, &["--plain-http", "--mount-from", "team/mailer"]).expect_code(0).json();
    assert_eq!(mounted["digest"], digest.as_str());
    assert_eq!(mounted["layer"]["upload"], "mounted");

    let by_digest = format!("oci://{}/team/mailer@{digest}", reg.host());
    let doc = pull(&env, &by_digest, "pulled.agent.bundle", &["--plain-http"]).expect_code(0).json();
    assert_eq!(doc["agent"]["version"], "1.4.0");
    assert_eq!(std::fs::read(env.path().join("pulled.agent.bundle")).unwrap(), std::fs::read(&bundle).unwrap());

    let latest = format!("oci://{}/team/mailer:latest", reg.host());
    let k = key("test.pub");
    let v = run_with(&env, &[], &["verify", &latest, "--plain-http", "--key", &k, "--format", "json"]);
    assert_eq!(v.expect_code(0).json()["agent"]["name"], "mailer");
    let i = run_with(&env, &[], &["inspect", &latest, "--plain-http", "--format", "json"]).expect_code(0).json();
    assert_eq!((i["digest"].as_str(), i["from_config"].as_bool()), (Some(digest.as_str()), Some(true)));
    assert_eq!(i["agent"]["version"], "1.4.0");
    assert!(i["tools"].as_array().unwrap().iter().any(|t| t == "mail.smtp_send"), "{i}");
    let full = run_with(&env, &[], &["inspect", &latest, "--plain-http", "--key", &k, "--format", "json"]);
    assert_eq!(full.expect_code(0).json()["signature_checked"], true);
    run_with(&env, &[], &["unpack", &latest, "--plain-http", "--key", &k, "out/mailer"]).expect_code(0);
    assert!(env.path().join("out/mailer/tools.json").is_file());

    // A file input takes no registry flags; a registry input needs --plain-http for http.
    let f = run_with(&env, &[], &["verify", bundle.to_str().unwrap(), "--key", &k, "--plain-http"]);
    assert!(f.expect_code(2).stderr.contains("registry references"), "{}", f.stderr);
    run_with(&env, &[], &["verify", &latest, "--key", &k]).expect_code(2);
}

#[test]
fn pull_runs_the_same_gate_as_verify_and_writes_nothing_when_it_rejects() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    for v in ["1.0.0", "2.0.0"] {
        let r = format!("oci://{}/team/mailer:{v}", reg.host());
        push(&env, &packed(&env, v), &r, &["--plain-http"]).expect_code(0);
    }
    let state = env.path().join("state.json");
    let s = state.to_str().unwrap();
    let two = format!("oci://{}/team/mailer:2.0.0", reg.host());
    pull(&env, &two, "a.agent.bundle", &["--plain-http", "--state", s, "--name", "mailer"]).expect_code(0);
    let before = listing(env.path());
    let one = format!("oci://{}/team/mailer:1.0.0", reg.host());
    let r = pull(&env, &one, "b.agent.bundle", &["--plain-http", "--state", s]);
    assert_eq!(r.expect_code(1).json()["code"], "rollback");
    let r = pull(&env, &two, "c.agent.bundle", &["--plain-http", "--name", "other"]);
    assert_eq!(r.expect_code(1).json()["code"], "name_mismatch");
    let r = pull(&env, &two, "d.agent.bundle", &["--plain-http", "--min-version", "3.0.0"]);
    assert_eq!(r.expect_code(1).json()["code"], "rollback");
    // An untrusted key: rejected before anything is kept.
    let r = run_with(
        &env,
        &[],
        &["pull", &two, "--plain-http", "--key", &key("minisign-nopw.pub"), "-o", "e.agent.bundle"],
    );
    r.expect_code(1);
    assert_eq!(listing(env.path()), before, "a rejected pull left files behind");
}

#[test]
fn push_refuses_a_bundle_that_does_not_verify() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let bundle = packed(&env, "1.0.0");
    let r = format!("oci://{}/team/mailer:1", reg.host());
    let k = key("minisign-nopw.pub");
    let out =
        run_with(&env, &[], &["push", bundle.to_str().unwrap(), &r, "--plain-http", "--key", &k, "--format", "json"]);
    assert_eq!(out.expect_code(1).json()["code"], "untrusted_key");
    let mut bytes = std::fs::read(&bundle).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x55;
    std::fs::write(env.path().join("broken.agent.bundle"), bytes).unwrap();
    let out = run_with(&env, &[], &["push", "broken.agent.bundle", &r, "--plain-http", "--format", "json"]);
    assert_eq!(out.expect_code(1).json()["ok"], false);
    // Nothing reached the registry.
    pull(&env, &r, "x.agent.bundle", &["--plain-http"]).expect_code(2);
}

#[test]
fn oras_pulls_what_bundle_pushes_and_bundle_pulls_what_oras_pushes() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    if !oras_available() {
        return;
    }
    let env = Env::new();
    let bundle = packed(&env, "1.4.0");
    let r = format!("oci://{}/team/mailer:1.4.0", reg.host());
    push(&env, &bundle, &r, &["--plain-http"]).expect_code(0);
    let script = format!(
        r#"
import oras.client
c = oras.client.OrasClient(hostname="{host}", insecure=True)
c.pull(target="{host}/team/mailer:1.4.0", outdir="oras-out")
c.push(target="{host}/team/by-oras:1", files=["{name}:application/vnd.agent-bundle.v1.tar+zstd"],
       manifest_config="/dev/null:application/vnd.agent-bundle.config.v1+json", disable_path_validation=True)
"#,
        host = reg.host(),
        name = bundle.file_name().unwrap().to_str().unwrap()
    );
    let out = std::process::Command::new("python3").arg("-c").arg(&script).current_dir(env.path()).output().unwrap();
    assert!(out.status.success(), "oras: {}", String::from_utf8_lossy(&out.stderr));
    let pulled = env.path().join("oras-out").join(bundle.file_name().unwrap());
    assert_eq!(std::fs::read(pulled).unwrap(), std::fs::read(&bundle).unwrap(), "ORAS pulled other bytes");
    let theirs = format!("oci://{}/team/by-oras:1", reg.host());
    let doc = pull(&env, &theirs, "from-oras.agent.bundle", &["--plain-http"]).expect_code(0).json();
    assert_eq!(doc["agent"]["version"], "1.4.0");
    // Their config has none of our fields: inspect still answers, with unknowns.
    run_with(&env, &[], &["inspect", &theirs, "--plain-http"]).expect_code(0);
}

fn oras_available() -> bool {
    crate::support::require_python_module("oras.client")
}

#[test]
fn basic_auth_from_the_environment_or_docker_config_and_never_printed() {
    let Some(reg) = registry::start(Setup::Basic) else { return };
    let env = Env::new();
    let bundle = packed(&env, "1.0.0");
    let b = bundle.to_str().unwrap();
    let r = format!("oci://{}/team/mailer:1", reg.host());
    let k = key("test.pub");
    let args = ["push", b, &r, "--plain-http", "--key", &k, "--format", "json"];
    let none = run_with(&env, &[], &args);
    assert_eq!(none.expect_code(2).json()["code"], "auth_failed");
    assert_run_snapshot!(none);
    let wrong = run_with(&env, &[("BUNDLE_REGISTRY_USERNAME", USER), ("BUNDLE_REGISTRY_PASSWORD", "not-it")], &args);
    assert_eq!(wrong.expect_code(2).json()["code"], "auth_failed");
    assert_run_snapshot!(wrong);
    let env_vars = [("BUNDLE_REGISTRY_USERNAME", USER), ("BUNDLE_REGISTRY_PASSWORD", PASSWORD)];
    let ok = run_with(&env, &env_vars, &args);
    assert!(!ok.expect_code(0).stdout.contains(PASSWORD));
    // docker login's file: `auth` is base64 of user:password.
    use base64::Engine;
    let dir = env.path().join("docker");
    std::fs::create_dir_all(&dir).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    std::fs::write(dir.join("config.json"), format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, reg.host()))
        .unwrap();
    let docker = [("DOCKER_CONFIG", dir.to_str().unwrap())];
    let pulled = run_with(&env, &docker, &["pull", &r, "--plain-http", "--key", &k, "-o", "p.agent.bundle"]);
    assert!(!pulled.expect_code(0).stderr.contains(PASSWORD));
    std::fs::write(
        dir.join("config.json"),
        format!(r#"{{"auths":{{"{}":{{"username":"{USER}","password":"{PASSWORD}"}}}}}}"#, reg.host()),
    )
    .unwrap();
    run_with(&env, &docker, &["verify", &r, "--plain-http", "--key", &k]).expect_code(0);
}

#[test]
fn tls_registry_needs_its_ca_and_plain_http_is_never_chosen_for_it() {
    let Some(reg) = registry::start(Setup::Tls) else { return };
    let env = Env::new();
    let bundle = packed(&env, "1.0.0");
    let b = bundle.to_str().unwrap();
    let r = format!("oci://{}/team/mailer:1", reg.host());
    let ca = testdata("tls/ca.pem").display().to_string();
    let untrusted = run_with(&env, &[], &["push", b, &r, "--format", "json"]);
    let doc = untrusted.expect_code(2).json();
    assert!(doc["message"].as_str().unwrap().contains("TLS"), "{}", untrusted.stdout);
    assert_eq!(doc["code"], "tls_error", "{}", untrusted.stdout);
    let k = key("test.pub");
    let untrusted_pull = run_with(&env, &[], &["pull", &r, "--key", &k, "-o", "u.agent.bundle", "--format", "json"]);
    assert_eq!(untrusted_pull.expect_code(2).json()["code"], "tls_error", "{}", untrusted_pull.stdout);
    assert!(!env.path().join("u.agent.bundle").exists());
    run_with(&env, &[], &["push", b, &r, "--ca-cert", &ca]).expect_code(0);
    pull(&env, &r, "p.agent.bundle", &["--ca-cert", &ca]).expect_code(0);
    pull(&env, &r, "q.agent.bundle", &["--plain-http"]).expect_code(2);
    assert!(!env.path().join("q.agent.bundle").exists());
}

#[test]
fn bearer_token_flow_through_an_in_test_token_server() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let port = Arc::new(Mutex::new(0));
    let scopes = Arc::new(Mutex::new(Vec::new()));
    let proxy = Proxy::start(reg.port, registry::bearer_rule(Arc::clone(&port), Arc::clone(&scopes)));
    *port.lock().unwrap() = proxy.port;
    let bundle = packed(&env, "1.0.0");
    let b = bundle.to_str().unwrap();
    let r = format!("oci://{}/team/mailer:1", proxy.host());
    let k = key("test.pub");
    let anonymous = run_with(&env, &[], &["push", b, &r, "--plain-http", "--key", &k, "--format", "json"]);
    assert_eq!(anonymous.expect_code(2).json()["code"], "auth_failed");
    let creds = [("BUNDLE_REGISTRY_USERNAME", USER), ("BUNDLE_REGISTRY_PASSWORD", PASSWORD)];
    run_with(&env, &creds, &["push", b, &r, "--plain-http", "--key", &k]).expect_code(0);
    run_with(&env, &creds, &["pull", &r, "--plain-http", "--key", &k, "-o", "p.agent.bundle"]).expect_code(0);
    let asked = scopes.lock().unwrap().join("\n");
    assert!(asked.contains("scope=repository%3Ateam%2Fmailer%3Apull%2Cpush"), "{asked}");
    assert!(asked.contains("service=test-registry"), "{asked}");
}

/// Pushes 1.0.0 (and 2.0.0, same key) straight to the registry; returns the env, 1.0.0's
/// bundle, and its layer digest.
fn pushed_pair(reg: &registry::Registry) -> (Env, PathBuf, PathBuf, String) {
    let env = Env::new();
    let one = packed(&env, "1.0.0");
    let two = packed(&env, "2.0.0");
    let doc = push(&env, &one, &format!("oci://{}/team/mailer:1", reg.host()), &["--plain-http"]).expect_code(0).json();
    let layer = doc["layer"]["digest"].as_str().unwrap().to_owned();
    (env, one, two, layer)
}

fn faulty_pull(
    reg: &registry::Registry,
    env: &Env,
    rule: impl Fn(&registry::Request, usize) -> Action + Send + Sync + 'static,
) -> Run {
    let proxy = Proxy::start(reg.port, rule);
    let before = listing(env.path());
    let r = format!("oci://{}/team/mailer:1", proxy.host());
    let out = pull(env, &r, "pulled.agent.bundle", &["--plain-http"]);
    assert_eq!(listing(env.path()), before, "a failed pull left files behind");
    out
}

#[test]
fn a_registry_serving_another_signed_bundle_for_the_digest_is_refused() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let (env, one, two, layer) = pushed_pair(&reg);
    // A validly signed bundle of the same agent and key, but not the bytes the manifest names;
    // the manifest is altered to declare its size, so that only the sha256 can tell.
    let other = std::fs::read(&two).unwrap();
    let size = std::fs::metadata(&one).unwrap().len();
    let manifest = String::from_utf8(registry::get(reg.port, "/v2/team/mailer/manifests/1")).unwrap();
    let declared = format!(r#""digest":"{layer}","size":{size}"#);
    assert!(manifest.contains(&declared), "{manifest}");
    let manifest = manifest.replace(&declared, &format!(r#""digest":"{layer}","size":{}"#, other.len())).into_bytes();
    let l = layer.clone();
    let out = faulty_pull(&reg, &env, move |r, _| {
        if r.path.contains("/manifests/") {
            Action::ReplaceBody(manifest.clone())
        } else if r.method == "GET" && r.path.ends_with(&l) {
            Action::ReplaceBody(other.clone())
        } else {
            Action::Forward
        }
    });
    assert_eq!(out.expect_code(1).json()["code"], "blob_mismatch", "{}", out.stdout);
}

#[test]
fn a_layer_larger_than_declared_or_truncated_is_refused_and_a_dropped_connection_is_an_io_error() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let (env, one, _, layer) = pushed_pair(&reg);
    let bytes = std::fs::read(&one).unwrap();
    let (l, b) = (layer.clone(), bytes.clone());
    let larger = faulty_pull(&reg, &env, move |r, _| {
        if r.method == "GET" && r.path.ends_with(&l) {
            Action::ReplaceBody([&b[..], b"extra"].concat())
        } else {
            Action::Forward
        }
    });
    assert_eq!(larger.expect_code(1).json()["code"], "blob_mismatch");
    assert_run_snapshot!(larger);
    let (l, b) = (layer.clone(), bytes.clone());
    let truncated = faulty_pull(&reg, &env, move |r, _| {
        if r.method == "GET" && r.path.ends_with(&l) {
            Action::ReplaceBody(b[..b.len() - 100].to_vec())
        } else {
            Action::Forward
        }
    });
    assert_eq!(truncated.expect_code(1).json()["code"], "blob_mismatch");
    let l = layer.clone();
    let n = bytes.len() / 2;
    let dropped = faulty_pull(&reg, &env, move |r, _| {
        if r.method == "GET" && r.path.ends_with(&l) { Action::Drop(n) } else { Action::Forward }
    });
    assert_eq!(dropped.expect_code(2).json()["code"], "io_error");
    // verify and unpack read the same stream without a file in between: the same verdicts.
    let l = layer.clone();
    let proxy = Proxy::start(reg.port, move |r, _| {
        if r.method == "GET" && r.path.ends_with(&l) { Action::Drop(n) } else { Action::Forward }
    });
    let r = format!("oci://{}/team/mailer:1", proxy.host());
    let k = key("test.pub");
    let v = run_with(&env, &[], &["verify", &r, "--plain-http", "--key", &k, "--format", "json"]);
    assert_eq!(v.expect_code(2).json()["code"], "io_error");
    let u = run_with(&env, &[], &["unpack", &r, "dir", "--plain-http", "--key", &k, "--format", "json"]);
    assert_eq!(u.expect_code(2).json()["code"], "io_error");
    assert!(!env.path().join("dir").exists());
}

#[test]
fn manifests_that_are_not_one_bundle_layer_are_refused() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let (env, _, _, layer) = pushed_pair(&reg);
    let d = format!("sha256:{}", "0".repeat(64));
    let two_layers = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.empty.v1+json","digest":"{d}","size":2}},"layers":[{{"mediaType":"application/vnd.agent-bundle.v1.tar+zstd","digest":"{layer}","size":1}},{{"mediaType":"application/vnd.agent-bundle.v1.tar+zstd","digest":"{layer}","size":1}}]}}"#
    );
    let unknown =
        two_layers.replacen("application/vnd.agent-bundle.v1.tar+zstd", "application/vnd.oci.image.layer.v1.tar", 2);
    let unknown = unknown.replacen(
        &format!(r#",{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{layer}","size":1}}"#),
        "",
        1,
    );
    for (manifest, says) in [(two_layers, "2 layers"), (unknown, "mediaType")] {
        let m = manifest.into_bytes();
        let out = faulty_pull(&reg, &env, move |r, _| {
            if r.path.contains("/manifests/") { Action::ReplaceBody(m.clone()) } else { Action::Forward }
        });
        assert_eq!(out.expect_code(1).json()["code"], "unsupported_artifact");
        assert!(out.stdout.contains(says), "{}", out.stdout);
    }
    // A digest reference whose manifest is not that digest.
    let r = format!("oci://{}/team/mailer@sha256:{}", reg.host(), "1".repeat(64));
    let out = pull(&env, &r, "x.agent.bundle", &["--plain-http"]);
    assert_eq!(out.expect_code(2).json()["code"], "io_error", "an unknown digest is not found");
}

#[test]
fn push_retries_5xx_mid_upload_and_gives_up_after_a_bounded_number_of_tries() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let bundle = packed(&env, "1.0.0");
    let uploads =
        |r: &registry::Request| r.path.contains("/blobs/uploads/") && (r.method == "PATCH" || r.method == "PUT");
    let failures = Arc::new(Mutex::new(0));
    let f = Arc::clone(&failures);
    let flaky = Proxy::start(reg.port, move |r, _| {
        let mut f = f.lock().unwrap();
        if uploads(r) && *f < 2 {
            *f += 1;
            return Action::Answer(
                503,
                vec![],
                br#"{"errors":[{"code":"UNAVAILABLE","message":"try later"}]}"#.to_vec(),
            );
        }
        Action::Forward
    });
    let r = format!("oci://{}/team/mailer:1", flaky.host());
    // Small chunks: the layer goes up in several PATCHes, the second of which fails once.
    let out = push(&env, &bundle, &r, &["--plain-http", "--chunk-size", "1024"]);
    assert_eq!(out.expect_code(0).json()["layer"]["upload"], "chunked");
    assert_eq!(*failures.lock().unwrap(), 2);
    pull(&env, &format!("oci://{}/team/mailer:1", reg.host()), "p.agent.bundle", &["--plain-http"]).expect_code(0);

    let broken =
        Proxy::start(
            reg.port,
            move |r, _| {
                if uploads(r) { Action::Answer(500, vec![], Vec::new()) } else { Action::Forward }
            },
        );
    let r = format!("oci://{}/other/mailer:1", broken.host());
    let out = push(&env, &bundle, &r, &["--plain-http"]);
    assert_eq!(out.expect_code(2).json()["code"], "io_error");
    let tries =
        broken.log.lock().unwrap().iter().filter(|l| l.starts_with("PUT ") && l.contains("/blobs/uploads/")).count();
    assert_eq!(tries, 4, "{:?}", broken.log.lock().unwrap());
}

/// A layer over 4 MiB is received on a reading thread beside the verifier (`verify oci://` and
/// `pull`). When the verifier rejects the bundle before the end, that rejection is the result,
/// whether or not the reading thread had already got to the end and found that the bytes are
/// not the descriptor's: the code does not depend on how far another thread had read.
#[test]
fn a_large_layer_damaged_near_its_end_gives_the_same_code_every_time() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let agent = env.path().join("big");
    crate::support::copy_dir(&testdata("agents/mailer"), &agent);
    // 6 MiB that zstd cannot compress, so the layer is over 4 MiB and read ahead.
    std::fs::create_dir_all(agent.join("data")).unwrap();
    std::fs::write(agent.join("data/noise.bin"), crate::support::noise(6 << 20)).unwrap();
    let bundle = env.path().join("big.agent.bundle");
    env.run(&["pack", agent.to_str().unwrap(), "--key", &key("test.key"), "-o", bundle.to_str().unwrap()])
        .expect_code(0);
    let doc = push(&env, &bundle, &format!("oci://{}/team/big:1", reg.host()), &["--plain-http"]).expect_code(0).json();
    let layer = doc["layer"]["digest"].as_str().unwrap().to_owned();
    let mut damaged = std::fs::read(&bundle).unwrap();
    assert!(damaged.len() > 5 << 20, "the layer is {} bytes", damaged.len());
    // Inside data/noise.bin's stored (incompressible) bytes, 100 KB before the layer's end:
    // only the entry's digest can tell.
    let at = damaged.len() - 100_000;
    damaged[at] ^= 0x55;
    let proxy = Proxy::start(reg.port, move |r, _| {
        if r.method == "GET" && r.path.ends_with(&layer) {
            Action::ReplaceBody(damaged.clone())
        } else {
            Action::Forward
        }
    });
    let r = format!("oci://{}/team/big:1", proxy.host());
    let k = key("test.pub");
    for run in 0..5 {
        let v = run_with(&env, &[], &["verify", &r, "--plain-http", "--key", &k, "--format", "json"]);
        assert_eq!(v.expect_code(1).json()["code"], "digest_mismatch", "verify, run {run}: {}", v.stdout);
        let p = pull(&env, &r, "pulled.agent.bundle", &["--plain-http"]);
        assert_eq!(p.expect_code(1).json()["code"], "digest_mismatch", "pull, run {run}: {}", p.stdout);
        assert!(!env.path().join("pulled.agent.bundle").exists(), "a refused pull left its file");
    }
}
