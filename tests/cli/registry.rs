//! A real registry for the oci tests: Debian's `docker-registry` (CNCF distribution 2.8) on a
//! free 127.0.0.1 port with a temporary config and storage, plain, behind htpasswd Basic auth,
//! or behind TLS (testdata/tls); and an in-test HTTP proxy in front of it that can demand a
//! Bearer token (a tiny token server on the same port) or misbehave on purpose.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{require_tool, testdata};

pub const USER: &str = "ci";
/// The password of testdata/registry/htpasswd's one entry.
pub const PASSWORD: &str = "test-password";

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    Plain,
    Basic,
    Tls,
}

/// A running `docker-registry`, stopped (by its pid) on drop.
pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `None` (the test skips) when `docker-registry` is missing and BUNDLE_REQUIRE_TOOLS is unset.
pub fn start(setup: Setup) -> Option<Registry> {
    if !require_tool("docker-registry") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    // Port 0: the registry binds a free port itself and logs it (no port handed over that
    // another test could take in between). The log level is `info` for that line.
    let mut config = format!(
        "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:0\n",
        dir.path().join("storage").display()
    );
    if setup == Setup::Tls {
        config.push_str(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            testdata("tls/server.pem").display(),
            testdata("tls/server.key").display()
        ));
    }
    if setup == Setup::Basic {
        config.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
            testdata("registry/htpasswd").display()
        ));
    }
    let path = dir.path().join("config.yml");
    std::fs::write(&path, config).unwrap();
    let mut child = Command::new("docker-registry")
        .arg("serve")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start docker-registry");
    let port = listening_port(child.stderr.take().unwrap());
    let registry = Registry { child, port: port.unwrap_or(0), _dir: dir };
    let port = port.expect("docker-registry did not say which port it listens on");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "docker-registry did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(registry)
}

/// The port in the registry's `listening on 127.0.0.1:PORT` log line (within 20 s); the rest of
/// its log is read and dropped so that the registry never blocks on a full pipe.
fn listening_port(log: std::process::ChildStderr) -> Option<u16> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(log).lines() {
            let Ok(line) = line else { return };
            if let Some(port) = line.split("listening on 127.0.0.1:").nth(1) {
                let digits: String = port.chars().take_while(char::is_ascii_digit).collect();
                let _ = tx.send(digits.parse::<u16>().ok());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20)).ok().flatten()
}

impl Registry {
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// One request as the proxy saw it.
pub struct Request {
    pub method: String,
    pub path: String,
    pub head: String,
}

/// What the proxy does to one exchange. `None` forwards unchanged.
pub enum Action {
    Forward,
    /// Answer with this status and body instead of forwarding.
    Answer(u16, Vec<(String, String)>, Vec<u8>),
    /// Forward, then replace the response body (Content-Length follows it).
    ReplaceBody(Vec<u8>),
    /// Forward, then send the headers (with the true length) and only this many body bytes,
    /// and close: a connection dropped mid-body.
    Drop(usize),
    /// Forward, then send the headers and the body one byte per this pause: a registry that
    /// trickles.
    Trickle(std::time::Duration),
}

/// A status line, headers and body.
type Answer = (String, Vec<(String, String)>, Vec<u8>);

type Rule = Box<dyn Fn(&Request, usize) -> Action + Send + Sync>;

/// An HTTP/1.1 proxy on 127.0.0.1 in front of a registry; `rule` decides each exchange (given
/// the request and how many requests came before it).
pub struct Proxy {
    pub port: u16,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    pub fn start(upstream: u16, rule: impl Fn(&Request, usize) -> Action + Send + Sync + 'static) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let rule: Arc<Rule> = Arc::new(Box::new(rule));
        let count = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (c, l) = (Arc::clone(&count), Arc::clone(&log));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (rule, c, l) = (Arc::clone(&rule), Arc::clone(&c), Arc::clone(&l));
                std::thread::spawn(move || {
                    let _ = serve(stream, upstream, &rule, &c, &l);
                });
            }
        });
        Proxy { port, log }
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..i + 4]).into_owned();
            return Ok(Some((head, data[i + 4..].to_vec())));
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        data.extend_from_slice(&buf[..n]);
    }
}

pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn serve(
    mut client: TcpStream,
    upstream: u16,
    rule: &Rule,
    count: &AtomicUsize,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    loop {
        let Some((head, mut body)) = read_head(&mut client)? else { return Ok(()) };
        let length: usize = header(&head, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while body.len() < length {
            let mut buf = vec![0u8; 1 << 16];
            let n = client.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            body.extend_from_slice(&buf[..n]);
        }
        let mut parts = head.split_whitespace();
        let request = Request {
            method: parts.next().unwrap_or_default().to_owned(),
            path: parts.next().unwrap_or_default().to_owned(),
            head: head.clone(),
        };
        log.lock().unwrap().push(format!("{} {}", request.method, request.path));
        let n = count.fetch_add(1, Ordering::SeqCst);
        let action = rule(&request, n);
        let (status_line, headers, mut response_body) = match &action {
            Action::Answer(status, headers, body) => (format!("HTTP/1.1 {status} X"), headers.clone(), body.clone()),
            _ => forward(&request, &head, &body, upstream)?,
        };
        if let Action::ReplaceBody(b) = &action {
            response_body = b.clone();
        }
        let mut out = format!("{status_line}\r\n");
        let head_only = request.method == "HEAD";
        for (k, v) in &headers {
            if k.eq_ignore_ascii_case("content-length") && !head_only {
                continue;
            }
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        if !head_only {
            out.push_str(&format!("Content-Length: {}\r\n", response_body.len()));
        }
        out.push_str("\r\n");
        client.write_all(out.as_bytes())?;
        if head_only {
            client.flush()?;
            continue;
        }
        if let Action::Drop(n) = action {
            client.write_all(&response_body[..n.min(response_body.len())])?;
            client.flush()?;
            return client.shutdown(std::net::Shutdown::Both);
        }
        if let Action::Trickle(pause) = action {
            for byte in &response_body {
                client.write_all(std::slice::from_ref(byte))?;
                client.flush()?;
                std::thread::sleep(pause);
            }
            continue;
        }
        client.write_all(&response_body)?;
        client.flush()?;
    }
}

/// The body of `GET path` on the registry at `port` (with an OCI manifest Accept header).
pub fn get(port: u16, path: &str) -> Vec<u8> {
    let request = Request { method: "GET".into(), path: path.into(), head: String::new() };
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/vnd.oci.image.manifest.v1+json\r\n\r\n"
    );
    forward(&request, &head, &[], port).unwrap().2
}

/// Sends the request upstream over HTTP/1.0 (no chunked answers) and reads the whole answer.
fn forward(request: &Request, head: &str, body: &[u8], upstream: u16) -> std::io::Result<Answer> {
    let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
    let mut out = format!("{} {} HTTP/1.0\r\n", request.method, request.path);
    for line in head.lines().skip(1).filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
        if name == "connection" || name == "authorization" {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    up.write_all(out.as_bytes())?;
    up.write_all(body)?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer)?;
    let i = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(answer.len());
    let head = String::from_utf8_lossy(&answer[..i]).into_owned();
    let body = answer.get(i + 4..).unwrap_or_default().to_vec();
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().replacen("HTTP/1.0", "HTTP/1.1", 1);
    let headers = lines
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())))
        .filter(|(k, _)| !k.eq_ignore_ascii_case("connection"))
        .collect();
    Ok((status, headers, body))
}

/// The Bearer token flow in front of a plain registry: `/token` answers a token for Basic
/// `USER:PASSWORD` (and records the scopes asked for); `/v2/…` wants `Bearer good-token`.
pub fn bearer_rule(port: Arc<Mutex<u16>>, scopes: Arc<Mutex<Vec<String>>>) -> impl Fn(&Request, usize) -> Action {
    move |r, _| {
        use base64::Engine;
        if r.path.starts_with("/token") {
            scopes.lock().unwrap().push(r.path.clone());
            let basic =
                format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}")));
            return if header(&r.head, "authorization") == Some(basic.as_str()) {
                Action::Answer(
                    200,
                    vec![("Content-Type".into(), "application/json".into())],
                    br#"{"token":"good-token"}"#.to_vec(),
                )
            } else {
                Action::Answer(401, vec![], b"{}".to_vec())
            };
        }
        if header(&r.head, "authorization") == Some("Bearer good-token") {
            return Action::Forward;
        }
        let realm = format!("http://127.0.0.1:{}/token", port.lock().unwrap());
        Action::Answer(
            401,
            vec![(
                "WWW-Authenticate".into(),
                format!(r#"Bearer realm="{realm}",service="test-registry",scope="repository:team/mailer:pull""#),
            )],
            br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#.to_vec(),
        )
    }
}
