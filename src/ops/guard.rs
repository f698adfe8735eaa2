//! `bundle guard`: the deployment gate first (the same judgement as `bundle verify`), then an
//! MCP session held to the tool definitions that release signed for one server.
//!
//! A bundle the gate refuses ends here with its verdict and the server is never started. One
//! that passes gives the guard its pins (`pins/<server>.mcp.json`, read from the verified
//! bytes, never from disk again); the server is started as `import` starts one and the session
//! runs until the client or the server ends it.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::bundle::verify::Sink;
use crate::guard::frame::Caps;
use crate::guard::http;
use crate::guard::session::{Audit, Session};
use crate::guard::stdio::{self, End, Report, ServerLog};
use crate::guard::{Judge, Policy};
use crate::mcp_client::Server;
use crate::ops::gate::{Gate, GateError, Verdict};
use crate::ops::input::BundleSource;
use crate::progress::Progress;

/// What `bundle guard` was asked to do once the bundle passed.
#[derive(Debug, Clone)]
pub struct GuardOptions {
    /// `--server`: whose pins hold the session.
    pub server_name: String,
    /// How the server is reached.
    pub transport: Transport,
    pub policy: Policy,
    /// `--timeout`: how long a request may wait for its answer.
    pub timeout: Duration,
    /// `--audit FILE`: JSON lines appended, one per decision.
    pub audit: Option<PathBuf>,
}

/// How the guard reaches the server.
#[derive(Debug, Clone)]
pub enum Transport {
    /// The command after `--`, started by the guard; the client is on stdin/stdout.
    Stdio(Server),
    /// `--upstream URL --listen ADDR`: streamable HTTP.
    Http {
        upstream: String,
        listen: std::net::SocketAddr,
        /// `--upstream-plain-http`: an http:// upstream (never chosen automatically).
        plain_http: bool,
        /// `--upstream-ca-cert`: roots to trust beside the Mozilla ones.
        ca_certs: Vec<PathBuf>,
    },
}

/// How a guarded session went.
#[derive(Debug)]
pub enum Guarded {
    /// The gate refused the bundle; no server was started.
    Refused(Verdict),
    /// The session ran and ended (`End::ServerExited` and `End::Stopped` are an exit 2 for
    /// the command).
    Ended { verdict: Verdict, end: End },
}

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(
        "the bundle has no pins for server `{server}` ({file}): pin its tools with `bundle import --from mcp --stdio --pin --server {server} -- COMMAND`, then pack and sign again"
    )]
    NotPinned { server: String, file: String },
    #[error("{file}: not a usable MCP pin file: {message}")]
    BadPins { file: String, message: String },
    #[error("cannot start the MCP server `{program}`: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: std::net::SocketAddr, source: io::Error },
    #[error("--upstream {url}: {message}")]
    Upstream { url: String, message: String },
    #[error("{path}: cannot open the audit log: {source}")]
    Audit { path: PathBuf, source: io::Error },
}

impl crate::error::Coded for GuardError {
    fn code(&self) -> crate::error::ErrorCode {
        use crate::error::ErrorCode;
        match self {
            GuardError::Gate(e) => e.code(),
            GuardError::NotPinned { .. } | GuardError::BadPins { .. } => ErrorCode::McpNotPinned,
            GuardError::Spawn { .. } => ErrorCode::McpServerFailed,
            GuardError::Listen { .. } => ErrorCode::IoError,
            GuardError::Upstream { .. } => ErrorCode::Usage,
            GuardError::Audit { .. } => ErrorCode::IoError,
        }
    }
}

/// Keeps the bytes of one verified entry (up to the cap of pinned files), discards the rest.
struct Keep {
    path: String,
    bytes: Option<Vec<u8>>,
}

struct Capped<'a>(&'a mut Vec<u8>);

impl Write for Capped<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0.len() + buf.len() > crate::limits::MAX_IMPORT_BYTES as usize {
            return Err(io::Error::other("a pinned file is larger than the cap of pinned files"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Sink for Keep {
    fn open(&mut self, path: &str, _: bool) -> io::Result<Box<dyn Write + '_>> {
        if path == self.path { Ok(Box::new(Capped(self.bytes.insert(Vec::new())))) } else { Ok(Box::new(io::sink())) }
    }
}

/// Judges the bundle, and when it passes, runs the session. `report` hears of every decision
/// (and writes the audit log when one is asked for); `server_log` gets the server's stderr.
pub fn guard(
    source: &BundleSource,
    gate: Gate,
    opts: &GuardOptions,
    progress: &dyn Progress,
    mut report: Box<dyn Report + Send>,
    server_log: ServerLog,
) -> Result<Guarded, GuardError> {
    let file = crate::guard::pins::file_for(&opts.server_name);
    let mut keep = Keep { path: file.clone(), bytes: None };
    let verdict = match source.open(progress, &gate.wanted()).map_err(GateError::from)? {
        Ok(input) => gate.judge(input, &mut keep)?,
        Err(rejection) => Verdict::refused(rejection),
    };
    if !matches!(verdict, Verdict::Passed { .. }) {
        return Ok(Guarded::Refused(verdict));
    }
    let bytes =
        keep.bytes.ok_or_else(|| GuardError::NotPinned { server: opts.server_name.clone(), file: file.clone() })?;
    let bad = |message: String| GuardError::BadPins { file: file.clone(), message };
    if let Verdict::Passed { verified, .. } = &verdict
        && let Some(listed) = verified.manifest.pins.get(&file)
        && listed.mcp_server() != Some(opts.server_name.as_str())
    {
        return Err(bad(format!(
            "manifest.toml [pins] lists it as `{}`, not as MCP server `{}`",
            listed.origin(),
            opts.server_name
        )));
    }
    let tools = crate::guard::pins::tools(&opts.server_name, &bytes).map_err(bad)?;
    let judge = Judge::new(&opts.server_name, &tools, opts.policy)
        .map_err(|e| GuardError::BadPins { file: file.clone(), message: e.to_string() })?;
    let mut audit = match &opts.audit {
        Some(path) => Some(AuditLog::open(path, &opts.server_name)?),
        None => None,
    };
    let server = match &opts.transport {
        Transport::Stdio(server) => server,
        Transport::Http { upstream, listen, plain_http, ca_certs } => {
            let shared = Arc::new(Shared { report: Mutex::new(report), audit: Mutex::new(audit) });
            let end = serve_http(opts, tools, upstream, *listen, *plain_http, ca_certs, shared)?;
            return Ok(Guarded::Ended { verdict, end });
        }
    };
    let started = crate::mcp_process::spawn(server)
        .map_err(|source| GuardError::Spawn { program: server.program.clone(), source })?;
    let session = Session::new(judge, opts.timeout);
    let mut both = Both { report: &mut *report, audit: audit.as_mut() };
    // Without the handlers a signal still ends the guard, only without stopping the server.
    let signals = crate::guard::signals::StopSignals::install();
    if let Err(e) = &signals {
        both.warn(&format!("cannot handle SIGTERM, SIGINT and SIGHUP ({e}); a signal would leave the server running"));
    }
    let stop = signals.as_ref().ok().map(|s| s as &dyn stdio::StopSignal);
    let end = stdio::run(session, started, io::stdin(), io::stdout(), Caps::default(), &mut both, server_log, stop);
    Ok(Guarded::Ended { verdict, end })
}

/// Listens for the client and proxies streamable HTTP to `upstream` until the listener fails.
fn serve_http(
    opts: &GuardOptions,
    tools: Vec<Value>,
    upstream: &str,
    listen: std::net::SocketAddr,
    plain_http: bool,
    ca_certs: &[PathBuf],
    shared: Arc<Shared>,
) -> Result<End, GuardError> {
    let bad = |message: String| GuardError::Upstream { url: upstream.to_owned(), message };
    match upstream.split_once("://").map(|(s, _)| s) {
        Some("https") => {}
        Some("http") if plain_http => {}
        Some("http") => {
            return Err(bad("an http:// upstream needs --upstream-plain-http (never chosen automatically)".into()));
        }
        _ => return Err(bad("not an http(s):// URL".into())),
    }
    let tls = crate::fetch::tls_config(ca_certs).map_err(|e| bad(e.to_string()))?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .https_only(!plain_http)
        .tls_config(tls)
        .max_redirects(0)
        .timeout_global(Some(opts.timeout))
        .user_agent(concat!("agent-bundle-guard/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let listener = std::net::TcpListener::bind(listen).map_err(|source| GuardError::Listen { addr: listen, source })?;
    let bound = listener.local_addr().map_err(|source| GuardError::Listen { addr: listen, source })?;
    lock(&shared.report).listening(bound);
    let (server, policy, timeout) = (opts.server_name.clone(), opts.policy, opts.timeout);
    let proxy = http::Proxy {
        upstream: upstream.to_owned(),
        agent,
        caps: Caps::default(),
        // The pins were judged usable above; each MCP session gets a judge of its own.
        new_session: Box::new(move || {
            let judge = Judge::new(&server, &tools, policy).expect("pins that were usable a moment ago");
            Session::new(judge, timeout)
        }),
        report: shared,
    };
    http::serve(listener, proxy).map_err(|source| GuardError::Listen { addr: listen, source })?;
    Ok(End::ClientClosed)
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The report and audit log shared by the HTTP guard's connections.
struct Shared {
    report: Mutex<Box<dyn Report + Send>>,
    audit: Mutex<Option<AuditLog>>,
}

impl http::SharedReport for Shared {
    fn audit(&self, record: &Audit) {
        if let Some(log) = lock(&self.audit).as_mut() {
            log.write(record);
        }
        lock(&self.report).audit(record);
    }
    fn warn(&self, message: &str) {
        lock(&self.report).warn(message);
    }
}

/// The audit log: one JSON object per line, appended and flushed as each decision is made.
struct AuditLog {
    file: io::BufWriter<std::fs::File>,
    server: String,
}

impl AuditLog {
    fn open(path: &std::path::Path, server: &str) -> Result<AuditLog, GuardError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| GuardError::Audit { path: path.to_owned(), source })?;
        Ok(AuditLog { file: io::BufWriter::new(file), server: server.to_owned() })
    }

    fn write(&mut self, record: &Audit) {
        let mut line = serde_json::json!({
            "time": crate::timestamp::Timestamp::now().to_string(),
            "server": self.server,
        });
        if let (Value::Object(line), Ok(Value::Object(fields))) = (&mut line, serde_json::to_value(record)) {
            line.extend(fields);
        }
        // An audit log that cannot be written must not stop the session it records; the
        // file system's error shows up again at the next line.
        let _ = writeln!(self.file, "{line}").and_then(|()| self.file.flush());
    }
}

struct Both<'a> {
    report: &'a mut dyn Report,
    audit: Option<&'a mut AuditLog>,
}

impl Report for Both<'_> {
    fn audit(&mut self, record: &Audit) {
        if let Some(log) = self.audit.as_mut() {
            log.write(record);
        }
        self.report.audit(record);
    }
    fn warn(&mut self, message: &str) {
        self.report.warn(message);
    }
}
