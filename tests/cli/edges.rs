//! Issue 23, the network edges and the one way in: a bundle that cannot be read is an error
//! (exit 2, the error JSON shape, its own code), never a rejection, whether it is a file or an
//! `oci://` reference; and every output follows one rule (parents created, a link written
//! through, never a FIFO or device replaced).

use std::net::TcpListener;
use std::path::Path;

use crate::registry::{self, Setup};
use crate::support::{Env, Run, bin, testdata};

fn key(name: &str) -> String {
    testdata("keys").join(name).display().to_string()
}

fn run(env: &Env, args: &[&str]) -> Run {
    let mut c = bin();
    c.current_dir(env.path()).args(args);
    c.env("DOCKER_CONFIG", env.path().join("no-docker-config"));
    c.env_remove("BUNDLE_REGISTRY_USERNAME").env_remove("BUNDLE_REGISTRY_PASSWORD");
    c.output().unwrap().into()
}

/// A loopback port nothing listens on (bound, then closed: a refused connection).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn keys_of(doc: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = doc.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

#[test]
fn a_registry_that_is_down_is_an_error_with_a_host_port_hint_not_a_rejection() {
    let env = Env::new();
    let port = closed_port();
    let r = format!("oci://127.0.0.1:{port}/team/mailer:1");
    let k = key("test.pub");
    for command in ["verify", "inspect"] {
        let out = run(&env, &[command, &r, "--key", &k, "--plain-http", "--format", "json"]);
        let doc = out.expect_code(2).json();
        assert_eq!(doc["code"], "io_error", "{command}: {}", out.stdout);
        let message = doc["message"].as_str().unwrap();
        assert!(message.contains(&format!("is a registry running at 127.0.0.1:{port}?")), "{command}: {message}");
        assert_eq!(keys_of(&doc), ["causes", "code", "message", "ok"], "{command}: the error shape");
        let human = run(&env, &[command, &r, "--key", &k, "--plain-http"]);
        human.expect_code(2);
        assert!(!human.stderr.contains("rejected"), "{command}: {}", human.stderr);
        assert!(human.stderr.starts_with("error: "), "{command}: {}", human.stderr);
    }
    let pulled = run(&env, &["pull", &r, "--key", &k, "--plain-http", "-o", "m.agent.bundle", "--format", "json"]);
    assert_eq!(pulled.expect_code(2).json()["code"], "io_error", "{}", pulled.stdout);
    let unpacked = run(&env, &["unpack", &r, "deploy", "--key", &k, "--plain-http", "--format", "json"]);
    assert_eq!(unpacked.expect_code(2).json()["code"], "io_error", "{}", unpacked.stdout);
    assert!(!env.path().join("deploy").exists());

    // The same failure of a file has the same shape.
    let missing = run(&env, &["verify", "missing.agent.bundle", "--key", &k, "--format", "json"]);
    let doc = missing.expect_code(2).json();
    assert_eq!(doc["code"], "io_error");
    assert_eq!(keys_of(&doc), ["causes", "code", "message", "ok"]);
}

#[test]
fn tls_against_a_plain_http_registry_suggests_plain_http() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    let r = format!("oci://{}/team/mailer:1", reg.host());
    let out = run(&env, &["verify", &r, "--key", &key("test.pub"), "--format", "json"]);
    let doc = out.expect_code(2).json();
    assert_eq!(doc["code"], "tls_error", "{}", out.stdout);
    assert!(doc["message"].as_str().unwrap().contains("--plain-http"), "{}", out.stdout);
}

#[test]
fn registry_options_for_a_file_are_a_usage_error() {
    let env = Env::new();
    let out = run(&env, &["verify", "x.agent.bundle", "--key", &key("test.pub"), "--plain-http", "--format", "json"]);
    assert_eq!(out.expect_code(2).json()["code"], "usage", "{}", out.stdout);
}

#[test]
fn pull_and_export_never_replace_a_fifo() {
    let env = Env::new();
    let fifo = env.path().join("out.fifo");
    mkfifo(&fifo);
    let r = format!("oci://127.0.0.1:{}/team/mailer:1", closed_port());
    let pulled =
        run(&env, &["pull", &r, "--key", &key("test.pub"), "--plain-http", "-o", "out.fifo", "--format", "json"]);
    let doc = pulled.expect_code(2).json();
    assert!(doc["message"].as_str().unwrap().contains("a FIFO, not a regular file"), "{}", pulled.stdout);
    env.copy("agents/mailer", "mailer");
    let exported = run(&env, &["export", "mailer", "--to", "openai", "-o", "out.fifo", "--format", "json"]);
    let doc = exported.expect_code(2).json();
    assert!(doc["message"].as_str().unwrap().contains("a FIFO, not a regular file"), "{}", exported.stdout);
    let meta = std::fs::symlink_metadata(&fifo).unwrap();
    use std::os::unix::fs::FileTypeExt;
    assert!(meta.file_type().is_fifo(), "the FIFO is still there");
}

#[test]
fn outputs_create_their_missing_parent_folders() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    run(&env, &["pack", "mailer", "--key", &key("test.key"), "-o", "dist/new/m.agent.bundle"]).expect_code(0);
    assert!(env.path().join("dist/new/m.agent.bundle").is_file());
    run(&env, &["export", "mailer", "--to", "openai", "-o", "out/deep/tools.json"]).expect_code(0);
    assert!(env.path().join("out/deep/tools.json").is_file());
    let state = "var/lib/agents/state.json";
    run(&env, &["verify", "dist/new/m.agent.bundle", "--key", &key("test.pub"), "--state", state]).expect_code(0);
    assert!(env.path().join(state).is_file());
}

#[test]
fn baseline_approve_writes_through_a_symlinked_baseline() {
    let env = Env::new();
    env.copy("agents/mailer", "v1");
    run(&env, &["pack", "v1", "--key", &key("test.key"), "-o", "v1.agent.bundle"]).expect_code(0);
    std::fs::create_dir(env.path().join("shared")).unwrap();
    run(&env, &["baseline", "snapshot", "v1.agent.bundle", "-o", "shared/approved.toml"]).expect_code(0);
    let target = env.path().join("shared/approved.toml");
    let mut text = std::fs::read_to_string(&target).unwrap();
    // Drop one approval so that approving it changes the file.
    let start = text.find("[tools.\"mail.smtp_send\"]").expect("the send tool's entry");
    let end = text[start + 1..].find("\n[").map_or(text.len(), |i| start + 1 + i + 1);
    text.replace_range(start..end, "");
    std::fs::write(&target, &text).unwrap();
    std::os::unix::fs::symlink("shared/approved.toml", env.path().join("approved.toml")).unwrap();
    run(&env, &["baseline", "approve", "approved.toml", "--from", "v1.agent.bundle", "mail.smtp_send"]).expect_code(0);
    let link = std::fs::symlink_metadata(env.path().join("approved.toml")).unwrap();
    assert!(link.file_type().is_symlink(), "the link stays a link");
    let after = std::fs::read_to_string(&target).unwrap();
    assert!(after.contains("mail.smtp_send"), "the shared target was updated:\n{after}");
}

/// Issue 23 item 7: with --plain-http, a Bearer realm on another origin is asked for a token
/// without the user's credentials (they would travel in cleartext to someone else).
#[test]
fn plain_http_never_sends_credentials_to_a_realm_on_another_origin() {
    use std::sync::{Arc, Mutex};

    use crate::registry::{Action, Proxy};
    let heads = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&heads);
    let realm = Proxy::start(closed_port(), move |r, _| {
        seen.lock().unwrap().push(r.head.to_ascii_lowercase());
        Action::Answer(401, vec![], b"{}".to_vec())
    });
    let realm_url = format!("http://{}/token", realm.host());
    let registry = Proxy::start(closed_port(), move |_, _| {
        let challenge = format!("Bearer realm=\"{realm_url}\",service=\"evil\"");
        Action::Answer(401, vec![("WWW-Authenticate".into(), challenge)], b"{}".to_vec())
    });
    let env = Env::new();
    let r = format!("oci://{}/team/mailer:1", registry.host());
    let out: Run = bin()
        .current_dir(env.path())
        .args(["verify", &r, "--plain-http", "--key", &key("test.pub"), "--format", "json"])
        .env("DOCKER_CONFIG", env.path().join("none"))
        .env("BUNDLE_REGISTRY_USERNAME", "alice")
        .env("BUNDLE_REGISTRY_PASSWORD", "cleartext-secret")
        .output()
        .unwrap()
        .into();
    assert_eq!(out.expect_code(2).json()["code"], "auth_failed", "{}", out.stdout);
    let heads = heads.lock().unwrap();
    assert!(!heads.is_empty(), "the realm was asked");
    for head in heads.iter() {
        assert!(!head.contains("authorization"), "credentials went to another origin:\n{head}");
    }
}

/// Issue 23 item 5: `--ca-cert` and `$DOCKER_CONFIG/config.json` are read as capped regular
/// files: a link to /dev/zero or a FIFO is refused at once.
#[test]
fn ca_cert_and_docker_config_must_be_regular_files() {
    let env = Env::new();
    std::os::unix::fs::symlink("/dev/zero", env.path().join("zero.pem")).unwrap();
    let r = "oci://127.0.0.1:1/team/mailer:1";
    let k = key("test.pub");
    let started = std::time::Instant::now();
    let out = run(&env, &["verify", r, "--ca-cert", "zero.pem", "--key", &k, "--format", "json"]);
    let doc = out.expect_code(2).json();
    assert!(doc["message"].as_str().unwrap().contains("a device, not a regular file"), "{}", out.stdout);
    std::fs::create_dir(env.path().join("docker")).unwrap();
    mkfifo(&env.path().join("docker/config.json"));
    let out: Run = bin()
        .current_dir(env.path())
        .args(["verify", r, "--key", &k, "--format", "json"])
        .env("DOCKER_CONFIG", env.path().join("docker"))
        .env_remove("BUNDLE_REGISTRY_USERNAME")
        .env_remove("BUNDLE_REGISTRY_PASSWORD")
        .output()
        .unwrap()
        .into();
    let doc = out.expect_code(2).json();
    assert!(doc["message"].as_str().unwrap().contains("a FIFO, not a regular file"), "{}", out.stdout);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "refused at once");
}

/// Issue 23 item 10: `unpack --replace --state` whose state cannot be written exits 2 with the
/// deployed folder untouched (the state is recorded before the swap).
#[test]
fn unpack_replace_with_a_state_that_cannot_be_written_leaves_the_deployed_folder() {
    let env = Env::new();
    env.copy("agents/mailer", "v1");
    run(&env, &["pack", "v1", "--key", &key("test.key"), "-o", "v1.agent.bundle"]).expect_code(0);
    let deployed = env.path().join("deploy");
    std::fs::create_dir(&deployed).unwrap();
    std::fs::write(deployed.join("old.txt"), "the old tree\n").unwrap();
    let Some(_small) = crate::crash::Mount::tmpfs(&env.path().join("small"), "64k") else { return };
    // The lock file (empty) fits; the state file's bytes do not.
    std::fs::write(env.path().join("small/.state.json.lock"), "").unwrap();
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(env.path().join("small/filler")).unwrap();
        let chunk = vec![0u8; 4096];
        while filler.write_all(&chunk).is_ok() {}
        while filler.write_all(&chunk[..1]).is_ok() {}
    }
    let k = key("test.pub");
    let out =
        run(&env, &["unpack", "v1.agent.bundle", "deploy", "--replace", "--key", &k, "--state", "small/state.json"]);
    out.expect_code(2);
    assert!(deployed.join("old.txt").is_file(), "the deployed folder was swapped: {}", out.stderr);
    assert!(!deployed.join("manifest.toml").exists());
}

/// Issue 23 item 3: a registry that accepts and then sends nothing is given up at `--timeout`
/// (exit 2, `timeout`), not after minutes.
#[test]
fn a_silent_registry_is_given_up_at_the_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn); // accepted, never answered
        }
    });
    let env = Env::new();
    let r = format!("oci://127.0.0.1:{port}/team/mailer:1");
    let started = std::time::Instant::now();
    let out =
        run(&env, &["verify", &r, "--plain-http", "--timeout", "2", "--key", &key("test.pub"), "--format", "json"]);
    let doc = out.expect_code(2).json();
    assert_eq!(doc["code"], "timeout", "{}", out.stdout);
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "took {:?}", started.elapsed());
}

/// Issue 23 item 12: packing the same agent and version again never replaces a released bundle
/// with other bytes: the same bytes are "unchanged", other bytes need a version bump or --force.
#[test]
fn pack_never_replaces_a_released_bundle_with_other_bytes() {
    let env = Env::new();
    let agent = env.copy("agents/mailer", "mailer");
    let k = key("test.key");
    run(&env, &["pack", "mailer", "--key", &k, "-o", "m.agent.bundle"]).expect_code(0);
    let released = std::fs::read(env.path().join("m.agent.bundle")).unwrap();
    let again = run(&env, &["pack", "mailer", "--key", &k, "-o", "m.agent.bundle"]);
    again.expect_code(0);
    assert!(again.stderr.contains("unchanged"), "{}", again.stderr);
    crate::support::edit_tools(&agent, |doc| {
        doc["tools"][0]["description"] = serde_json::json!("Changed, but the version was not bumped.");
    });
    let changed = run(&env, &["pack", "mailer", "--key", &k, "-o", "m.agent.bundle", "--format", "json"]);
    let doc = changed.expect_code(2).json();
    let message = doc["message"].as_str().unwrap();
    assert!(message.contains("bump [agent] version"), "{message}");
    assert_eq!(std::fs::read(env.path().join("m.agent.bundle")).unwrap(), released, "the release was replaced");
    run(&env, &["pack", "mailer", "--key", &k, "-o", "m.agent.bundle", "--force"]).expect_code(0);
    assert_ne!(std::fs::read(env.path().join("m.agent.bundle")).unwrap(), released);
}

/// Issue 39: a pack over its previous output holds the new bytes back while they are the same
/// as the old bundle's, and writes nothing when all are. A bundle that is the new bytes plus
/// more (the old one longer) is different: with --force it is replaced by exactly the bytes a
/// pack to a new path gives, the held-back start copied from it.
#[test]
fn pack_over_a_bundle_that_starts_with_the_same_bytes_writes_them_all() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let k = key("test.key");
    run(&env, &["pack", "mailer", "--key", &k, "-o", "fresh.agent.bundle"]).expect_code(0);
    let fresh = std::fs::read(env.path().join("fresh.agent.bundle")).unwrap();
    let mut longer = fresh.clone();
    longer.extend_from_slice(b"more bytes after the bundle");
    std::fs::write(env.path().join("m.agent.bundle"), &longer).unwrap();
    let refused = run(&env, &["pack", "mailer", "--key", &k, "-o", "m.agent.bundle"]);
    refused.expect_code(2);
    assert_eq!(std::fs::read(env.path().join("m.agent.bundle")).unwrap(), longer, "replaced without --force");
    run(&env, &["pack", "mailer", "--key", &k, "-o", "m.agent.bundle", "--force"]).expect_code(0);
    assert!(std::fs::read(env.path().join("m.agent.bundle")).unwrap() == fresh, "not the bytes of a fresh pack");
    let unchanged = run(&env, &["pack", "mailer", "--key", &k, "-o", "m.agent.bundle"]);
    unchanged.expect_code(0);
    assert!(unchanged.stderr.contains("unchanged"), "{}", unchanged.stderr);
}
