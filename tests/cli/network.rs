//! Issue 23, the network edges that need time: a token that expires during a long upload, a
//! registry that asks to be left alone for a while (`Retry-After`), and one that trickles its
//! answers byte by byte. Each runs against the real `docker-registry` behind a quirky proxy
//! (`registry::Proxy`), and what was pushed is pulled back from the registry itself.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::registry::{self, Action, PASSWORD, Proxy, Setup, USER};
use crate::support::{Env, Run, bin, key, set_version, testdata};

fn packed(env: &Env) -> PathBuf {
    let agent = env.path().join("mailer");
    crate::support::copy_dir(&testdata("agents/mailer"), &agent);
    set_version(&agent, "1.0.0");
    let out = env.path().join("mailer.agent.bundle");
    env.run(&["pack", "mailer", "--key", &key("test.key"), "-o", out.to_str().unwrap()]).expect_code(0);
    out
}

fn run(env: &Env, args: &[&str]) -> Run {
    let mut c = bin();
    c.current_dir(env.path()).args(args);
    c.env("DOCKER_CONFIG", env.path().join("no-docker-config"));
    c.env("BUNDLE_REGISTRY_USERNAME", USER).env("BUNDLE_REGISTRY_PASSWORD", PASSWORD);
    c.output().unwrap().into()
}

fn push(env: &Env, bundle: &Path, reference: &str, extra: &[&str]) -> Run {
    let mut args = vec!["push", bundle.to_str().unwrap(), reference, "--plain-http", "--format", "json"];
    args.extend_from_slice(extra);
    run(env, &args)
}

/// Pulls `reference` from the registry itself and checks the bytes are the bundle's.
fn pulled_back(env: &Env, reference: &str, bundle: &Path) {
    let k = key("test.pub");
    run(env, &["pull", reference, "--plain-http", "--key", &k, "-o", "back.agent.bundle"]).expect_code(0);
    assert_eq!(std::fs::read(env.path().join("back.agent.bundle")).unwrap(), std::fs::read(bundle).unwrap());
}

fn is_upload(r: &registry::Request) -> bool {
    r.path.contains("/blobs/uploads/") && (r.method == "PATCH" || r.method == "PUT")
}

/// A token server and a registry front whose tokens (`tok-1`, `tok-2`, …) each expire after
/// `uses` upload requests that carry a body; only the newest token is good. Records each
/// token issued and each request answered 401 because its token expired.
struct Expiring {
    issued: usize,
    uses_of_newest: usize,
    expired: Vec<String>,
}

fn expiring_tokens(upstream: u16, uses: usize, state: Arc<Mutex<Expiring>>) -> Proxy {
    let port = Arc::new(Mutex::new(0));
    let realm_port = Arc::clone(&port);
    let proxy = Proxy::start(upstream, move |r, _| {
        let mut s = state.lock().unwrap();
        if r.path.starts_with("/token") {
            s.issued += 1;
            s.uses_of_newest = 0;
            let body = format!(r#"{{"token":"tok-{}","expires_in":60}}"#, s.issued);
            return Action::Answer(200, vec![("Content-Type".into(), "application/json".into())], body.into_bytes());
        }
        let newest = format!("Bearer tok-{}", s.issued);
        let good = s.issued > 0 && registry::header(&r.head, "authorization") == Some(newest.as_str());
        let carries_body = is_upload(r) && !r.head.to_ascii_lowercase().contains("content-length: 0\r\n");
        if good && carries_body && s.uses_of_newest >= uses {
            s.expired.push(format!("{} {}", r.method, r.path));
        } else if good {
            s.uses_of_newest += usize::from(carries_body);
            return Action::Forward;
        }
        let realm = format!("http://127.0.0.1:{}/token", realm_port.lock().unwrap());
        Action::Answer(
            401,
            vec![("WWW-Authenticate".into(), format!(r#"Bearer realm="{realm}",service="test-registry""#))],
            br#"{"errors":[{"code":"UNAUTHORIZED","message":"token expired"}]}"#.to_vec(),
        )
    });
    *port.lock().unwrap() = proxy.port;
    proxy
}

/// Issue 23 item 8: a token that expires during a streamed upload (PATCH chunks, or one PUT
/// with the blob's bytes) is refreshed: the client authenticates anew, asks the registry how
/// much of the upload it holds, and goes on from there.
#[test]
fn a_token_that_expires_during_a_streamed_push_is_refreshed() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let bundle = packed(&env);
    for (uses, chunk, repository) in [(2, "1024", "team/chunked"), (1, "33554432", "team/whole")] {
        let state = Arc::new(Mutex::new(Expiring { issued: 0, uses_of_newest: 0, expired: Vec::new() }));
        let proxy = expiring_tokens(reg.port, uses, Arc::clone(&state));
        let r = format!("oci://{}/{repository}:1", proxy.host());
        let out = push(&env, &bundle, &r, &["--chunk-size", chunk]);
        let doc = out.expect_code(0).json();
        let want = if chunk == "1024" { "chunked" } else { "uploaded" };
        assert_eq!(doc["layer"]["upload"], want, "{}", out.stdout);
        let s = state.lock().unwrap();
        assert!(!s.expired.is_empty(), "{repository}: no token expired during the upload");
        assert!(s.issued >= 2, "{repository}: the token was not refreshed");
        pulled_back(&env, &format!("oci://{}/{repository}:1", reg.host()), &bundle);
    }
}

/// Issue 23 item 8: `Retry-After` on a 429 or 503 is waited out (in seconds or as an HTTP
/// date), on push and on pull, instead of the client's own short backoff.
#[test]
fn retry_after_is_honoured_on_push_and_pull() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let bundle = packed(&env);
    let times = Arc::new(Mutex::new(Vec::<(String, Instant)>::new()));
    let pulling = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (t, p) = (Arc::clone(&times), Arc::clone(&pulling));
    let served = std::sync::atomic::AtomicBool::new(false);
    let busy = Proxy::start(reg.port, move |r, _| {
        let mut t = t.lock().unwrap();
        if is_upload(r) || r.path.contains("/manifests/") {
            t.push((format!("{} {}", r.method, r.path), Instant::now()));
        }
        let first_upload = is_upload(r) && !t.iter().rev().skip(1).any(|(l, _)| l.contains("/blobs/uploads/"));
        if first_upload {
            return Action::Answer(429, vec![("Retry-After".into(), "2".into())], b"{}".to_vec());
        }
        // The pull's first manifest GET, once.
        let first_get = r.method == "GET"
            && r.path.contains("/manifests/")
            && p.load(std::sync::atomic::Ordering::SeqCst)
            && !served.swap(true, std::sync::atomic::Ordering::SeqCst);
        if first_get {
            let at = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(2));
            return Action::Answer(503, vec![("Retry-After".into(), at)], b"{}".to_vec());
        }
        Action::Forward
    });
    let r = format!("oci://{}/team/busy:1", busy.host());
    push(&env, &bundle, &r, &["--chunk-size", "1024"]).expect_code(0);
    times.lock().unwrap().push(("PULL".to_owned(), Instant::now()));
    pulling.store(true, std::sync::atomic::Ordering::SeqCst);
    let k = key("test.pub");
    run(&env, &["pull", &r, "--plain-http", "--key", &k, "-o", "p.agent.bundle"]).expect_code(0);
    let times = times.lock().unwrap();
    let pause_after = |what: &str| {
        let i = times.iter().position(|(l, _)| l.contains(what)).unwrap();
        times[i + 1].1 - times[i].1
    };
    assert!(pause_after("/blobs/uploads/") >= Duration::from_millis(1900), "push waited {:?}", pause_after("/blobs/"));
    let pulled = times.iter().position(|(l, _)| l == "PULL").unwrap();
    let get = pulled + 1 + times[pulled + 1..].iter().position(|(l, _)| l.starts_with("GET ")).unwrap();
    let waited = times[get + 1].1 - times[get].1;
    assert!(waited >= Duration::from_millis(900), "pull waited {waited:?}");
    pulled_back(&env, &format!("oci://{}/team/busy:1", reg.host()), &bundle);
}

/// Issue 23 items 3 and 8: a `Retry-After` longer than what is left of `--timeout` is a
/// timeout at once (exit 2, `timeout`), not a wait past the deadline nor an `io_error`.
#[test]
fn a_retry_after_past_the_deadline_is_a_timeout_at_once() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let bundle = packed(&env);
    let busy = Proxy::start(reg.port, |r, _| {
        if is_upload(r) {
            Action::Answer(503, vec![("Retry-After".into(), "3600".into())], b"{}".to_vec())
        } else {
            Action::Forward
        }
    });
    let started = Instant::now();
    let out = push(&env, &bundle, &format!("oci://{}/team/mailer:1", busy.host()), &["--timeout", "20"]);
    let doc = out.expect_code(2).json();
    assert_eq!(doc["code"], "timeout", "{}", out.stdout);
    assert!(doc["message"].as_str().unwrap().contains("Retry-After"), "{}", out.stdout);
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
}

/// Issue 23 item 3: a manifest or a layer fed one byte at a time (each read returns before the
/// idle timeout) fails at the `--timeout` deadline with `timeout`, for verify as for pull.
#[test]
fn a_body_trickled_byte_by_byte_fails_at_the_deadline() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let bundle = packed(&env);
    push(&env, &bundle, &format!("oci://{}/team/mailer:1", reg.host()), &[]).expect_code(0);
    let k = key("test.pub");
    for what in ["/manifests/", "/blobs/sha256:"] {
        let trickle = Proxy::start(reg.port, move |r, _| {
            let layer = r.method == "GET" && r.path.contains(what);
            if layer { Action::Trickle(Duration::from_millis(500)) } else { Action::Forward }
        });
        let r = format!("oci://{}/team/mailer:1", trickle.host());
        for command in [&["verify", &r][..], &["pull", &r, "-o", "t.agent.bundle"][..]] {
            let started = Instant::now();
            let mut args = command.to_vec();
            args.extend(["--plain-http", "--timeout", "3", "--key", &k, "--format", "json"]);
            let out = run(&env, &args);
            let doc = out.expect_code(2).json();
            assert_eq!(doc["code"], "timeout", "{what} {command:?}: {}", out.stdout);
            let took = started.elapsed();
            assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(12), "{what}: took {took:?}");
            assert!(!env.path().join("t.agent.bundle").exists());
        }
    }
}
