//! Signing keys that never touch the disk, against the real things: a real `ssh-agent` on a
//! socket in a temp folder (`ssh-keygen` makes the key, `ssh-add` loads it) and a real
//! SoftHSM2 token with a temporary SOFTHSM2_CONF (`softhsm2-util` initialises it and imports
//! the key, opensc's `pkcs11-tool` makes key pairs on it). One Ed25519 key, put into the agent,
//! the token and a minisign key file, must sign byte-identical bundles that `bundle verify`
//! and stock `minisign -V` accept. Also: the keys that explain themselves (a public key given
//! to sign, a secret key given to verify, a path in BUNDLE_SIGNING_KEY).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ssh_encoding::Decode;

use agent_bundle::keys::derived_key_id;
use agent_bundle::minisign::SecretKey;

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, Run, bin, require_tool, testdata};

pub(crate) const PIN: &str = "4711-secret-pin";
const SO_PIN: &str = "so-pin-1234";

// ---------------------------------------------------------------------------------------------
// ssh-agent

#[test]
fn ssh_agent_signs_bundles_byte_identical_to_the_file_key_and_minisign_verifies_them() {
    if !require_tool("ssh-agent") || !require_tool("ssh-keygen") || !require_tool("ssh-add") {
        return;
    }
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let agent = SshAgent::start();
    let id = agent.keygen("ed25519", "id");
    agent.add(&id);
    let file_key = write_file_key(env.path(), &openssh_ed25519_seed(&id));

    agent.run(&env, &["pack", "mailer", "--key", "ssh-agent:", "-o", "agent.bundle"]).expect_code(0);
    env.run(&["pack", "mailer", "--key", &file_key, "-o", "file.bundle"]).expect_code(0);
    assert_same_bytes(env.path(), "agent.bundle", "file.bundle");

    // `bundle pubkey` of the agent's key is the file key's public key: same derived key id.
    let from_agent = agent.run(&env, &["pubkey", "ssh-agent:"]);
    from_agent.expect_code(0);
    let from_file = env.run(&["pubkey", &file_key]);
    assert_eq!(from_agent.stdout, from_file.stdout);
    agent.run(&env, &["pubkey", "ssh-agent:", "-o", "release.pub"]).expect_code(0);
    env.run(&["verify", "agent.bundle", "--key", "release.pub"]).expect_code(0);
    env.run(&["verify", "agent.bundle", "--trusted-keys", "release.pub"]).expect_code(0);
    minisign_verifies(env.path(), "agent.bundle", "release.pub");

    // By fingerprint, and through BUNDLE_SIGNING_KEY.
    let fingerprint = agent.fingerprint(&id);
    agent
        .run(&env, &["pack", "mailer", "--key", &format!("ssh-agent:{fingerprint}"), "-o", "by-fp.bundle"])
        .expect_code(0);
    assert_same_bytes(env.path(), "by-fp.bundle", "file.bundle");
    let out: Run = agent
        .command(&env)
        .env("BUNDLE_SIGNING_KEY", "ssh-agent:")
        .args(["pack", "mailer", "-o", "env.bundle"])
        .output()
        .unwrap()
        .into();
    out.expect_code(0);
    assert_same_bytes(env.path(), "env.bundle", "file.bundle");
}

#[test]
fn ssh_agent_problems_exit_2_name_the_fix_and_write_nothing() {
    if !require_tool("ssh-agent") || !require_tool("ssh-keygen") || !require_tool("ssh-add") {
        return;
    }
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let pack = ["pack", "mailer", "--key", "ssh-agent:", "-o", "x.bundle"];

    // No agent at all.
    let out: Run = bin().current_dir(env.path()).env_remove("SSH_AUTH_SOCK").args(pack).output().unwrap().into();
    refused(&env, &out, &["SSH_AUTH_SOCK is not set", "ssh-agent", "ssh-add"]);
    let out: Run = bin()
        .current_dir(env.path())
        .env("SSH_AUTH_SOCK", env.path().join("gone.sock"))
        .args(pack)
        .output()
        .unwrap()
        .into();
    refused(&env, &out, &["cannot connect", "gone.sock"]);

    let agent = SshAgent::start();
    // An empty agent, then one with only a non-Ed25519 key.
    refused(&env, &agent.run(&env, &pack), &["no ssh-ed25519 key", "ssh-add"]);
    let ecdsa = agent.keygen("ecdsa", "ec");
    agent.add(&ecdsa);
    refused(&env, &agent.run(&env, &pack), &["no ssh-ed25519 key", "ecdsa-sha2-nistp256", "ssh-keygen -t ed25519"]);
    let by_fp = format!("ssh-agent:{}", agent.fingerprint(&ecdsa));
    refused(&env, &agent.run(&env, &["pack", "mailer", "--key", &by_fp]), &["not Ed25519"]);

    // Two Ed25519 keys: pick one by fingerprint; an unknown fingerprint is named.
    let one = agent.keygen("ed25519", "one");
    let two = agent.keygen("ed25519", "two");
    agent.add(&one);
    agent.add(&two);
    let out = agent.run(&env, &pack);
    refused(
        &env,
        &out,
        &[
            "several Ed25519 keys",
            &agent.fingerprint(&one),
            "(ssh-ed25519, one)",
            &agent.fingerprint(&two),
            "ssh-agent:SHA256:",
        ],
    );
    let unknown = "ssh-agent:SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    refused(&env, &agent.run(&env, &["pack", "mailer", "--key", unknown]), &["no key SHA256:AAAA", "ssh-add -l"]);
    refused(&env, &agent.run(&env, &["pack", "mailer", "--key", "ssh-agent:MD5:ab:cd"]), &["SHA-256 fingerprint"]);
    agent.run(&env, &["pack", "mailer", "--key", &format!("ssh-agent:{}", agent.fingerprint(&two))]).expect_code(0);

    // A key that needs confirmation, and the confirmation is declined (the askpass program
    // says no): the agent refuses to sign.
    let declining =
        SshAgent::start_with(&[("SSH_ASKPASS", "/bin/false"), ("SSH_ASKPASS_REQUIRE", "force"), ("DISPLAY", ":0")]);
    let confirm = declining.keygen("ed25519", "confirm");
    declining.add_confirmed(&confirm);
    refused(&env, &declining.run(&env, &pack), &["refused to sign", &declining.fingerprint(&confirm), "try again"]);
}

// ---------------------------------------------------------------------------------------------
// PKCS#11 (SoftHSM2)

#[test]
fn pkcs11_token_signs_bundles_byte_identical_to_the_file_and_agent_key() {
    let Some(hsm) = SoftHsm::start() else { return };
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    // One seed, three homes: the token (imported as PKCS#8), a minisign file, the agent.
    let seed: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
    hsm.import(&seed, "release", "a1");
    let file_key = write_file_key(env.path(), &seed);
    std::fs::write(env.path().join("pin"), format!("{PIN}\n")).unwrap();
    let uri = format!("pkcs11:token=bundle-test;object=release?pin-source={}", env.path().join("pin").display());

    hsm.run(&env, &["pack", "mailer", "--key", &uri, "-o", "token.bundle"]).expect_code(0);
    env.run(&["pack", "mailer", "--key", &file_key, "-o", "file.bundle"]).expect_code(0);
    assert_same_bytes(env.path(), "token.bundle", "file.bundle");
    // By id, with the module in the URI instead of BUNDLE_PKCS11_MODULE, PIN from --password-env.
    let by_id = format!("pkcs11:token=bundle-test;id=%a1?module-path={}", hsm.module.display());
    let out: Run = hsm
        .command(&env)
        .env_remove("BUNDLE_PKCS11_MODULE")
        .env("THE_PIN", PIN)
        .args(["pack", "mailer", "--key", &by_id, "--password-env", "THE_PIN", "-o", "by-id.bundle"])
        .output()
        .unwrap()
        .into();
    out.expect_code(0);
    assert_same_bytes(env.path(), "by-id.bundle", "file.bundle");

    let from_token = hsm.run(&env, &["pubkey", &uri]);
    from_token.expect_code(0);
    assert_eq!(from_token.stdout, env.run(&["pubkey", &file_key]).stdout);
    hsm.run(&env, &["pubkey", &uri, "-o", "token.pub"]).expect_code(0);
    env.run(&["verify", "token.bundle", "--key", "token.pub"]).expect_code(0);
    minisign_verifies(env.path(), "token.bundle", "token.pub");

    // The same key in an ssh-agent signs the same bytes too.
    if require_tool("ssh-agent") && require_tool("ssh-add") {
        let agent = SshAgent::start();
        let id = write_openssh_key(env.path(), &seed);
        agent.add(&id);
        agent.run(&env, &["pack", "mailer", "--key", "ssh-agent:", "-o", "agent.bundle"]).expect_code(0);
        assert_same_bytes(env.path(), "agent.bundle", "token.bundle");
    }
}

#[test]
fn a_key_pair_made_on_the_token_by_pkcs11_tool_signs_what_minisign_verifies() {
    let Some(hsm) = SoftHsm::start() else { return };
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    hsm.keypairgen("EC:edwards25519", "made-on-token", "b2");
    let uri = format!("pkcs11:token=bundle-test;object=made-on-token?pin-value={PIN}");
    hsm.run(&env, &["pack", "mailer", "--key", &uri, "-o", "m.bundle"]).expect_code(0);
    hsm.run(&env, &["pubkey", &uri, "-o", "m.pub"]).expect_code(0);
    env.run(&["verify", "m.bundle", "--key", "m.pub"]).expect_code(0);
    minisign_verifies(env.path(), "m.bundle", "m.pub");
    // The derived key id is stable: a second pubkey run gives the same file.
    assert_eq!(hsm.run(&env, &["pubkey", &uri]).stdout, std::fs::read_to_string(env.path().join("m.pub")).unwrap());
}

#[test]
fn pkcs11_problems_exit_2_name_the_fix_write_nothing_and_never_show_the_pin() {
    let Some(hsm) = SoftHsm::start() else { return };
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    hsm.import(&[7u8; 32], "release", "a1");
    // A decoy with the same id: the public key is the one that verifies the private key's
    // signature, not whichever object shares the id; `id=` alone is ambiguous.
    hsm.import_with(&[8u8; 32], "decoy", "a1", &["--force"]);
    hsm.keypairgen("EC:prime256v1", "p256", "c3");
    let pack = |uri: &str| hsm.run(&env, &["pack", "mailer", "--key", uri, "-o", "x.bundle"]);
    let with_pin = |path: &str| format!("pkcs11:token=bundle-test;{path}?pin-value={PIN}");

    let file_key = write_file_key(env.path(), &[7u8; 32]);
    let from_token = hsm.run(&env, &["pubkey", &with_pin("object=release")]);
    from_token.expect_code(0);
    assert_eq!(from_token.stdout, env.run(&["pubkey", &file_key]).stdout);
    refused(&env, &pack(&with_pin("id=%a1")), &["several private keys", "object=release", "object=decoy"]);

    let wrong = "pkcs11:token=bundle-test;object=release?pin-value=0000-wrong-0000";
    let out = pack(wrong);
    refused(&env, &out, &["wrong PIN", "bundle-test"]);
    assert_run_snapshot!(out);
    refused(
        &env,
        &pack("pkcs11:token=bundle-test;object=release"),
        &["needs its user PIN", "pin-source", "--password-env"],
    );
    refused(&env, &pack(&with_pin("object=nothing")), &["no private key", "object=nothing", "pkcs11-tool"]);
    refused(&env, &pack(&with_pin("object=p256")), &["not Ed25519", "EC"]);
    refused(&env, &pack(&format!("pkcs11:token=elsewhere?pin-value={PIN}")), &["no PKCS#11 token", "bundle-test"]);
    refused(&env, &pack("pkcs11:token=bundle-test;tokn=x"), &["tokn"]);
    let missing = hsm
        .command(&env)
        .env("BUNDLE_PKCS11_MODULE", env.path().join("libnothing.so"))
        .args(["pack", "mailer", "--key", &with_pin("object=release"), "-o", "x.bundle"])
        .output()
        .unwrap()
        .into();
    refused(&env, &missing, &["no PKCS#11 module at", "libnothing.so"]);
    let unnamed = hsm
        .command(&env)
        .env_remove("BUNDLE_PKCS11_MODULE")
        .args(["pack", "mailer", "--key", &with_pin("object=release"), "-o", "x.bundle"])
        .output()
        .unwrap()
        .into();
    refused(&env, &unnamed, &["module-path", "BUNDLE_PKCS11_MODULE"]);
    for run in [&out, &missing, &unnamed] {
        assert!(!run.stderr.contains(PIN), "{}", run.stderr);
    }
    // A locked token: what an HSM does after too many wrong PINs (SoftHSM2 never locks by
    // itself, so the test sets the token's CKF_USER_PIN_LOCKED flag in its store).
    hsm.lock_user_pin();
    refused(&env, &pack(&with_pin("object=release")), &["locked", "SO PIN"]);
}

// ---------------------------------------------------------------------------------------------
// Keys that explain themselves

#[test]
fn a_public_key_given_to_sign_and_a_secret_key_given_to_verify_are_named_as_such() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let key = |name: &str| testdata(&format!("keys/{name}")).display().to_string();
    let out = env.run(&["pack", "mailer", "--key", &key("test.pub"), "-o", "x.bundle"]);
    refused(&env, &out, &["is a public key", "secret key", "--key", "test.key"]);

    env.run(&["pack", "mailer", "--key", &key("test.key"), "-o", "m.bundle"]).expect_code(0);
    let secret_line = std::fs::read_to_string(key("test.key")).unwrap().lines().nth(1).unwrap().to_owned();
    for args in [
        vec!["verify", "m.bundle", "--key", &key("test.key")],
        vec!["verify", "m.bundle", "--trusted-keys", &key("test.key")],
    ] {
        let out = env.run(&args);
        out.expect_code(2);
        assert!(out.stderr.contains("is a secret key") && out.stderr.contains("test.pub"), "{}", out.stderr);
        assert!(!out.stderr.contains(&secret_line[10..40]), "the secret key is never shown: {}", out.stderr);
    }
    // A plain minisign public key file is a trusted-keys file with one key for every agent.
    env.run(&["verify", "m.bundle", "--trusted-keys", &key("test.pub")]).expect_code(0);
    // A secret key file without its .pub: pubkey recreates it.
    std::fs::copy(key("test.key"), env.path().join("lone.key")).unwrap();
    let out = env.run(&["verify", "m.bundle", "--key", "lone.key"]);
    out.expect_code(2);
    assert_run_snapshot!(out);
    env.run(&["pubkey", "lone.key", "-o", "lone.pub"]).expect_code(0);
    let key_line = |p: PathBuf| std::fs::read_to_string(p).unwrap().lines().nth(1).unwrap().to_owned();
    assert_eq!(key_line(env.path().join("lone.pub")), key_line(testdata("keys/test.pub")));
    env.run(&["verify", "m.bundle", "--key", "lone.pub"]).expect_code(0);
    refused(&env, &env.run(&["pubkey", "lone.key", "-o", "lone.pub"]), &["already exists", "--force"]);
    // A public key file is its own public key.
    let out = env.run(&["pubkey", &key("test.pub")]);
    out.expect_code(0);
    assert_eq!(out.stdout.lines().nth(1), Some(key_line(testdata("keys/test.pub")).as_str()));
}

#[test]
fn bundle_signing_key_holding_a_path_says_so_and_never_echoes_a_key_line() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let path = testdata("keys/test.key").display().to_string();
    let with_env = |value: &str| -> Run {
        bin()
            .current_dir(env.path())
            .env("BUNDLE_SIGNING_KEY", value)
            .args(["pack", "mailer", "-o", "x.bundle"])
            .output()
            .unwrap()
            .into()
    };
    refused(&env, &with_env(&path), &["holds a file path", &path, "--key", "$(cat"]);
    let secret_line = std::fs::read_to_string(&path).unwrap().lines().nth(1).unwrap().to_owned();
    let out = with_env(&secret_line);
    refused(&env, &out, &["one line", "$(cat release.key)"]);
    assert!(!out.stderr.contains(&secret_line[10..40]), "{}", out.stderr);
    // The key text itself still works.
    with_env(&std::fs::read_to_string(&path).unwrap()).expect_code(0);
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Exit 2, every `needle` in stderr, no bundle written.
#[track_caller]
fn refused(env: &Env, out: &Run, needles: &[&str]) {
    out.expect_code(2);
    for needle in needles {
        assert!(out.stderr.contains(needle), "stderr lacks {needle:?}:\n{}", out.stderr);
    }
    let written: Vec<_> = std::fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("x.bundle") || n.starts_with(".x.bundle"))
        .collect();
    assert!(written.is_empty(), "written: {written:?}");
}

#[track_caller]
fn assert_same_bytes(dir: &Path, a: &str, b: &str) {
    let (x, y) = (std::fs::read(dir.join(a)).unwrap(), std::fs::read(dir.join(b)).unwrap());
    assert!(x == y, "{a} and {b} differ");
}

/// A minisign secret key file for `seed`, with the key id an agent or token key gets.
pub(crate) fn write_file_key(dir: &Path, seed: &[u8; 32]) -> String {
    let probe = SecretKey::from_seed(seed, [0; 8]);
    let key = SecretKey::from_seed(seed, derived_key_id(&probe.public_key().ed25519_bytes()));
    let path = dir.join("same.key");
    std::fs::write(&path, key.to_text(None).unwrap().as_bytes()).unwrap();
    path.display().to_string()
}

/// `tar --zstd -x` the bundle, then stock `minisign -V` on its manifest.
fn minisign_verifies(dir: &Path, bundle: &str, public: &str) {
    if !require_tool("minisign") || !require_tool("tar") || !require_tool("zstd") {
        return;
    }
    let out_dir = dir.join(format!("{bundle}.x"));
    std::fs::create_dir(&out_dir).unwrap();
    let tar =
        Command::new("tar").current_dir(dir).args(["--zstd", "-xf", bundle, "-C"]).arg(&out_dir).output().unwrap();
    assert!(tar.status.success(), "{}", String::from_utf8_lossy(&tar.stderr));
    let out = Command::new("minisign")
        .current_dir(&out_dir)
        .args(["-V", "-p"])
        .arg(dir.join(public))
        .args(["-m", "manifest.toml"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("Signature and comment signature verified"), "{text}");
}

/// The 32-byte seed of an unencrypted OpenSSH ed25519 private key file (PROTOCOL.key).
fn openssh_ed25519_seed(path: &Path) -> [u8; 32] {
    let text = std::fs::read_to_string(path).unwrap();
    let b64: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    let bytes = BASE64.decode(b64).unwrap();
    let mut r = bytes.strip_prefix(b"openssh-key-v1\0").expect("openssh-key-v1");
    assert_eq!(String::decode(&mut r).unwrap(), "none", "cipher");
    assert_eq!(String::decode(&mut r).unwrap(), "none", "kdf");
    Vec::<u8>::decode(&mut r).unwrap();
    assert_eq!(u32::decode(&mut r).unwrap(), 1);
    Vec::<u8>::decode(&mut r).unwrap();
    let private = Vec::<u8>::decode(&mut r).unwrap();
    let mut p = private.as_slice();
    let (check1, check2) = (u32::decode(&mut p).unwrap(), u32::decode(&mut p).unwrap());
    assert_eq!(check1, check2);
    assert_eq!(String::decode(&mut p).unwrap(), "ssh-ed25519");
    Vec::<u8>::decode(&mut p).unwrap();
    let secret = Vec::<u8>::decode(&mut p).unwrap();
    secret[..32].try_into().unwrap()
}

/// Writes an unencrypted OpenSSH ed25519 private key for `seed` (for `ssh-add`); returns its path.
pub(crate) fn write_openssh_key(dir: &Path, seed: &[u8; 32]) -> PathBuf {
    use ssh_encoding::Encode;
    let public = SecretKey::from_seed(seed, [0; 8]).public_key().ed25519_bytes();
    let mut blob = Vec::new();
    "ssh-ed25519".encode(&mut blob).unwrap();
    public.as_slice().encode(&mut blob).unwrap();
    let mut private = Vec::new();
    0x0102_0304u32.encode(&mut private).unwrap();
    0x0102_0304u32.encode(&mut private).unwrap();
    "ssh-ed25519".encode(&mut private).unwrap();
    public.as_slice().encode(&mut private).unwrap();
    [&seed[..], &public[..]].concat().as_slice().encode(&mut private).unwrap();
    "test".encode(&mut private).unwrap();
    let mut pad = 1u8;
    while private.len() % 8 != 0 {
        private.push(pad);
        pad += 1;
    }
    let mut file = b"openssh-key-v1\0".to_vec();
    for s in ["none", "none", ""] {
        s.encode(&mut file).unwrap();
    }
    1u32.encode(&mut file).unwrap();
    blob.as_slice().encode(&mut file).unwrap();
    private.as_slice().encode(&mut file).unwrap();
    let b64 = BASE64.encode(file);
    let lines: Vec<&str> = b64.as_bytes().chunks(70).map(|c| std::str::from_utf8(c).unwrap()).collect();
    let text =
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n", lines.join("\n"));
    let path = dir.join("from-seed");
    std::fs::write(&path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn sh(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A real ssh-agent on a socket in a temp folder, killed by its pid when dropped.
pub(crate) struct SshAgent {
    child: Child,
    socket: PathBuf,
    dir: tempfile::TempDir,
}

impl SshAgent {
    pub(crate) fn start() -> Self {
        Self::start_with(&[])
    }

    /// An agent with these environment variables (e.g. an askpass program for `ssh-add -c`).
    fn start_with(vars: &[(&str, &str)]) -> Self {
        // A short path: Unix socket paths are limited to about 108 bytes.
        let dir = tempfile::Builder::new().prefix("bagent").tempdir_in("/tmp").unwrap();
        let socket = dir.path().join("agent.sock");
        let child = Command::new("ssh-agent")
            .envs(vars.iter().copied())
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ssh-agent");
        let agent = SshAgent { child, socket, dir };
        // The socket file appears at bind(), before listen(): wait until a client can connect
        // (a loaded machine once ran `ssh-add` in between and was refused).
        for _ in 0..500 {
            if std::os::unix::net::UnixStream::connect(&agent.socket).is_ok() {
                return agent;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("ssh-agent did not listen on {}", agent.socket.display());
    }

    pub(crate) fn keygen(&self, kind: &str, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        sh(Command::new("ssh-keygen").args(["-q", "-t", kind, "-N", "", "-C", name, "-f"]).arg(&path));
        path
    }

    pub(crate) fn add(&self, key: &Path) {
        sh(Command::new("ssh-add").env("SSH_AUTH_SOCK", &self.socket).arg("-q").arg(key));
    }

    /// Adds a key that needs confirmation for every use (`ssh-add -c`).
    fn add_confirmed(&self, key: &Path) {
        sh(Command::new("ssh-add").env("SSH_AUTH_SOCK", &self.socket).args(["-q", "-c"]).arg(key));
    }

    /// The SHA-256 fingerprint of a key, as ssh-keygen prints it.
    fn fingerprint(&self, key: &Path) -> String {
        let out = sh(Command::new("ssh-keygen").args(["-l", "-E", "sha256", "-f"]).arg(key));
        String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1).unwrap().to_owned()
    }

    pub(crate) fn command(&self, env: &Env) -> Command {
        let mut c = bin();
        c.current_dir(env.path()).env("SSH_AUTH_SOCK", &self.socket);
        c
    }

    pub(crate) fn run(&self, env: &Env, args: &[&str]) -> Run {
        self.command(env).args(args).output().unwrap().into()
    }
}

impl Drop for SshAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A SoftHSM2 token `bundle-test` in a temp folder of its own (SOFTHSM2_CONF points there).
pub(crate) struct SoftHsm {
    dir: tempfile::TempDir,
    conf: PathBuf,
    module: PathBuf,
}

impl SoftHsm {
    /// None (a skip) when the tools are missing, unless BUNDLE_REQUIRE_TOOLS is set.
    pub(crate) fn start() -> Option<Self> {
        if !require_tool("softhsm2-util") || !require_tool("pkcs11-tool") {
            return None;
        }
        let candidates = ["/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so"];
        let Some(module) = candidates.iter().map(PathBuf::from).find(|p| p.is_file()) else {
            crate::support::skip(
                "libsofthsm2.so",
                &crate::support::install_hint("softhsm2-util"),
                "BUNDLE_REQUIRE_TOOLS",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tokens")).unwrap();
        let conf = dir.path().join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                dir.path().join("tokens").display()
            ),
        )
        .unwrap();
        let hsm = SoftHsm { dir, conf, module };
        sh(hsm.tool("softhsm2-util").args([
            "--init-token",
            "--free",
            "--label",
            "bundle-test",
            "--pin",
            PIN,
            "--so-pin",
            SO_PIN,
        ]));
        Some(hsm)
    }

    pub(crate) fn tool(&self, name: &str) -> Command {
        let mut c = Command::new(name);
        c.env("SOFTHSM2_CONF", &self.conf);
        c
    }

    /// The SoftHSM2 module's path.
    pub(crate) fn module(&self) -> &Path {
        &self.module
    }

    /// Imports the Ed25519 key with this seed as a PKCS#8 PEM file (RFC 8410).
    pub(crate) fn import(&self, seed: &[u8; 32], label: &str, id: &str) {
        self.import_with(seed, label, id, &[]);
    }

    fn import_with(&self, seed: &[u8; 32], label: &str, id: &str, extra: &[&str]) {
        let mut der =
            vec![0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];
        der.extend_from_slice(seed);
        let pem = self.dir.path().join(format!("{label}.pem"));
        std::fs::write(
            &pem,
            format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", BASE64.encode(der)),
        )
        .unwrap();
        sh(self
            .tool("softhsm2-util")
            .args(["--import"])
            .arg(&pem)
            .args(["--token", "bundle-test", "--label", label, "--id", id, "--pin", PIN])
            .args(extra));
    }

    pub(crate) fn keypairgen(&self, key_type: &str, label: &str, id: &str) {
        sh(self.tool("pkcs11-tool").arg("--module").arg(&self.module).args([
            "--token-label",
            "bundle-test",
            "--login",
            "--pin",
            PIN,
            "--keypairgen",
            "--key-type",
            key_type,
            "--label",
            label,
            "--id",
            id,
        ]));
    }

    /// Sets CKF_USER_PIN_LOCKED in the token's stored flags (CKA_OS_TOKENFLAGS, a big-endian
    /// u64 after the attribute and its value type in SoftHSM2's object file).
    fn lock_user_pin(&self) {
        let tokens = self.dir.path().join("tokens");
        let token_dir = std::fs::read_dir(&tokens).unwrap().next().unwrap().unwrap().path();
        let file = token_dir.join("token.object");
        let mut bytes = std::fs::read(&file).unwrap();
        let marker = [0x80, 0x00, 0x53, 0x4b, 0, 0, 0, 0, 0, 0, 0, 2];
        let at =
            bytes.windows(marker.len()).position(|w| w == marker).expect("token flags in token.object") + marker.len();
        let flags = u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap()) | 0x0004_0000;
        bytes[at..at + 8].copy_from_slice(&flags.to_be_bytes());
        std::fs::write(&file, bytes).unwrap();
    }

    pub(crate) fn command(&self, env: &Env) -> Command {
        let mut c = bin();
        c.current_dir(env.path()).env("SOFTHSM2_CONF", &self.conf).env("BUNDLE_PKCS11_MODULE", &self.module);
        c
    }

    pub(crate) fn run(&self, env: &Env, args: &[&str]) -> Run {
        self.command(env).args(args).output().unwrap().into()
    }
}

#[test]
fn wrong_kind_of_key_messages_as_users_see_them() {
    use crate::snapshot::{bundle_snapshot, in_repo};
    let env = Env::new();
    let out = |name: &str| env.path().join(name).display().to_string();
    bundle_snapshot!(
        "keys_pack_given_a_public_key",
        in_repo(&["pack", "testdata/agents/mailer", "--key", "testdata/keys/test.pub", "-o", &out("x.bundle")]),
        [env.path()]
    );
    in_repo(&["pack", "testdata/agents/mailer", "--key", "testdata/keys/test.key", "-o", &out("m.bundle")])
        .output()
        .unwrap();
    bundle_snapshot!(
        "keys_verify_given_a_secret_key",
        in_repo(&["verify", &out("m.bundle"), "--key", "testdata/keys/test.key"]),
        [env.path()]
    );
}
