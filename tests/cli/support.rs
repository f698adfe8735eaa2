//! A small test environment: a temp dir, fixture copies, and a runner for the real binary.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn testdata(rel: &str) -> PathBuf {
    repo().join("testdata").join(rel)
}

/// The path of a test key in testdata/keys, as an argument.
pub fn key(name: &str) -> String {
    testdata(&format!("keys/{name}")).display().to_string()
}

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bundle"));
    c.env_remove("NO_COLOR").env_remove("BUNDLE_SIGNING_KEY").env_remove("SOURCE_DATE_EPOCH");
    // A developer's own agent or token never takes part in a test.
    c.env_remove("SSH_AUTH_SOCK").env_remove("BUNDLE_PKCS11_MODULE");
    // Nor a registry login: no credentials from the environment, and a docker config folder
    // that does not exist (a test that wants one sets DOCKER_CONFIG itself).
    c.env_remove("BUNDLE_REGISTRY_USERNAME").env_remove("BUNDLE_REGISTRY_PASSWORD");
    c.env("DOCKER_CONFIG", std::env::temp_dir().join("agent-bundle-tests-no-docker-config"));
    // Nor the developer's stat cache: every run shares one of the test build's own.
    c.env("BUNDLE_CACHE_DIR", test_cache_dir()).env_remove("BUNDLE_STAT_CACHE");
    c
}

/// The stat cache folder of the test runs (`bundle check` and `lock` write it).
pub fn test_cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bundle-cache")
}

/// The result of one run, with helpers for assertions.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }

    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "exit code\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

pub fn run_in(dir: &Path, args: &[&str]) -> Run {
    bin().current_dir(dir).args(args).output().expect("run bundle").into()
}

pub fn run(args: &[&str]) -> Run {
    run_in(&repo(), args)
}

/// A temp dir that is removed at the end of the test.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Env { dir: tempfile::tempdir().expect("tempdir") }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copies a fixture folder (relative to testdata/) into the temp dir; returns its path.
    pub fn copy(&self, fixture: &str, to: &str) -> PathBuf {
        let dest = self.path().join(to);
        copy_dir(&testdata(fixture), &dest);
        dest
    }

    pub fn run(&self, args: &[&str]) -> Run {
        run_in(self.path(), args)
    }

    /// Packs the agent folder `agent` (relative to the temp dir) with testdata/keys/test.key
    /// into `out`.
    pub fn pack(&self, agent: &str, out: &str) -> Run {
        self.run(&["pack", agent, "--key", &key("test.key"), "-o", out])
    }

    /// Copies testdata/agents/mailer to `to` and packs it into `out` (which must succeed);
    /// returns the bundle's path.
    pub fn packed_mailer(&self, to: &str, out: &str) -> PathBuf {
        self.copy("agents/mailer", to);
        self.pack(to, out).expect_code(0);
        self.path().join(out)
    }
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Makes a file or folder look untouched for an hour (what a leftover of a killed writer looks
/// like once it is stale), instead of sleeping until it is.
pub fn make_old(path: &Path) {
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::open(path).unwrap().set_modified(hour_ago).unwrap();
}

/// Whether the outside tool `name` (a command) is installed. A missing one fails the test under
/// `BUNDLE_REQUIRE_TOOLS` (CI, `scripts/test` in CI) and is a visible, counted skip elsewhere
/// ([`skip`]), naming the package that provides it (scripts/tools.txt).
pub fn require_tool(name: &str) -> bool {
    let present = Command::new(name).arg("--version").output().is_ok() || Command::new(name).arg("-v").output().is_ok();
    present || skip(&format!("tool {name}"), &install_hint(name), "BUNDLE_REQUIRE_TOOLS")
}

/// How to install the tool or Python module `what` (`minisign`, `py:sigstore`): its line in
/// scripts/tools.txt, the table `scripts/test` installs from.
pub fn install_hint(what: &str) -> String {
    tools_table().into_iter().find(|(_, _, provides)| provides.iter().any(|p| p == what)).map_or_else(
        || format!("not in scripts/tools.txt: add {what}"),
        |(from, package, _)| format!("{from} install {package}"),
    )
}

/// scripts/tools.txt: (apt|pip|npm, package, what it provides) per line.
pub fn tools_table() -> Vec<(String, String, Vec<String>)> {
    include_str!("../../scripts/tools.txt")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut words = l.split_whitespace().map(str::to_owned);
            let (from, package) = (words.next().unwrap(), words.next().unwrap());
            (from, package, words.collect())
        })
        .collect()
}

/// Skips the running test because `what` is missing (`fix` says how to get it), or fails it when
/// the environment variable `required_by` is set (CI's promise that nothing is missing). A skip
/// is never silent: one line on the terminal (past the test harness's capture, so a passing
/// `cargo test` shows it) and one in the file `BUNDLE_SKIP_LOG` names, which `scripts/test` sums
/// up at the end. Returns false, for `if !require_…() { return }`.
pub fn skip(what: &str, fix: &str, required_by: &str) -> bool {
    if std::env::var_os(required_by).is_some() {
        panic!("{what} is required ({required_by} is set) but missing: {fix}");
    }
    skipped(std::thread::current().name().unwrap_or("a test"), what, fix);
    false
}

/// Writes the skip of `test` (a test's name, or what skipped, such as a page of the book).
pub fn skipped(test: &str, what: &str, fix: &str) {
    // Straight to the terminal: eprintln! would be captured and hidden for a test that passes.
    let _ = std::io::stderr().write_all(format!("SKIPPED {test}: {what} missing ({fix})\n").as_bytes());
    if let Some(log) = std::env::var_os("BUNDLE_SKIP_LOG") {
        let line = format!("{what}\t{fix}\t{test}\n");
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Rewrites an agent's tools.json through `edit` (pretty-printed again).
pub fn edit_tools(agent: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = agent.join("tools.json");
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

/// The tool `id` inside a tools.json document.
pub fn tool<'a>(doc: &'a mut serde_json::Value, id: &str) -> &'a mut serde_json::Value {
    doc["tools"].as_array_mut().unwrap().iter_mut().find(|t| t["id"] == id).unwrap_or_else(|| panic!("no tool {id}"))
}

/// Sets `[agent] version` in an agent's manifest.toml.
pub fn set_version(agent: &Path, version: &str) {
    let path = agent.join("manifest.toml");
    let mut doc: toml_edit::DocumentMut = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    doc["agent"]["version"] = toml_edit::value(version);
    std::fs::write(&path, doc.to_string()).unwrap();
}

/// A RAP server on 127.0.0.1 that serves whatever `body` holds at the well-known path, to any
/// number of requests, until the test ends; over plain http, or over https with the test
/// certificate in testdata/tls (issued by `testdata/tls/ca.pem` for `localhost` and 127.0.0.1).
/// A [`RapServer`] body that starts with this answers `302 Found` to the URL after it.
pub const REDIRECT: &str = "redirect:";

pub struct RapServer {
    pub port: u16,
    body: Arc<Mutex<String>>,
    tls: bool,
    host: String,
}

impl RapServer {
    pub fn start(body: &str) -> Self {
        Self::spawn(body, None, "127.0.0.1")
    }

    pub fn start_tls(body: &str) -> Self {
        Self::start_tls_on(body, "127.0.0.1")
    }

    /// An https server on another loopback address (Linux answers on all of 127/8).
    pub fn start_tls_on(body: &str, host: &str) -> Self {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(testdata("tls/server.pem")).unwrap().collect::<Result<_, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_file(testdata("tls/server.key")).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        Self::spawn(body, Some(Arc::new(config)), host)
    }

    fn spawn(body: &str, tls: Option<Arc<rustls::ServerConfig>>, host: &str) -> Self {
        let listener = TcpListener::bind((host, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let body = Arc::new(Mutex::new(body.to_owned()));
        let shared = Arc::clone(&body);
        let is_tls = tls.is_some();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                match &tls {
                    None => Self::answer(stream, &shared),
                    Some(config) => {
                        let Ok(conn) = rustls::ServerConnection::new(Arc::clone(config)) else { continue };
                        // A client that rejects the certificate aborts the handshake; the read
                        // fails and the connection is dropped.
                        Self::answer(rustls::StreamOwned::new(conn, stream), &shared);
                    }
                }
            }
        });
        RapServer { port, body, tls: is_tls, host: host.to_owned() }
    }

    fn answer<S: Read + Write>(mut stream: S, body: &Mutex<String>) {
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let ok = request.starts_with(b"GET /.well-known/rap-toolset ");
        let body = if ok { body.lock().unwrap().clone() } else { "not found".to_owned() };
        if let Some(to) = body.strip_prefix(REDIRECT) {
            let response =
                format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(response.as_bytes());
            let _ = stream.flush();
            return;
        }
        let status = if ok { "200 OK" } else { "404 Not Found" };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes());
        let _ = stream.flush();
    }

    pub fn url(&self) -> String {
        format!("{}://{}:{}", if self.tls { "https" } else { "http" }, self.host, self.port)
    }

    pub fn serve(&self, body: &str) {
        *self.body.lock().unwrap() = body.to_owned();
    }
}

/// Whether `python3` (the tools venv's, first on PATH under `scripts/test`) can import
/// `module`; like [`require_tool`], a missing one fails under BUNDLE_REQUIRE_TOOLS and is a
/// visible skip elsewhere.
pub fn require_python_module(module: &str) -> bool {
    let present =
        Command::new("python3").args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success());
    present || skip(&format!("python module {module}"), &install_hint(&format!("py:{module}")), "BUNDLE_REQUIRE_TOOLS")
}

/// Bytes zstd cannot shrink (xorshift), so that a bundle is as large as the file.
pub fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The `node_modules` folder of the npm folder `scripts/test` installs into
/// (`$BUNDLE_NPM_PREFIX`, else `~/.cache/agent-bundle/npm`) when `node` runs and `package` is
/// there; else a counted skip ([`skip`]; under `BUNDLE_REQUIRE_TOOLS`, a failure).
pub fn require_node_module(package: &str) -> Option<PathBuf> {
    let prefix = std::env::var_os("BUNDLE_NPM_PREFIX")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/agent-bundle/npm")));
    let modules = prefix.map(|p| p.join("node_modules"));
    if let Some(modules) = modules
        && modules.join(package).join("package.json").is_file()
        && require_tool("node")
    {
        return Some(modules);
    }
    skip(&format!("npm package {package}"), &install_hint(&format!("node:{package}")), "BUNDLE_REQUIRE_TOOLS");
    None
}

/// A child process stopped (by its own pid) when the test ends, however it ends.
pub struct Stopped(pub std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port nothing listens on (at the moment of asking).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until something accepts connections on `port` (a server that has started).
pub fn wait_for_port(port: u16) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < until, "nothing listens on {port}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `mcp-server-everything` in its streamable HTTP mode on a free loopback port (stopped when
/// dropped); its MCP endpoint.
pub fn everything_over_http() -> (Stopped, String) {
    let port = free_port();
    let server = Stopped(
        Command::new("mcp-server-everything")
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port);
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// testdata/mcp/hostile_server.py over streamable HTTP on a free loopback port (stopped when
/// dropped), in `mode` with its `arg`; its MCP endpoint.
pub fn hostile_over_http(mode: &str, arg: Option<&Path>) -> (Stopped, String) {
    let port = free_port();
    let mut command = Command::new("python3");
    command.arg(testdata("mcp/hostile_server.py")).args(["--http", &port.to_string(), mode]);
    if let Some(arg) = arg {
        command.arg(arg);
    }
    let server = Stopped(command.stdout(std::process::Stdio::null()).spawn().unwrap());
    wait_for_port(port);
    (server, format!("http://127.0.0.1:{port}/mcp"))
}
