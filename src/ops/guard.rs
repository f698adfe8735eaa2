//! `bundle guard`: the deployment gate first (the same judgement as `bundle verify`), then an
//! MCP session held to the tool definitions that release signed for one server.
//!
//! A bundle the gate refuses ends here with its verdict and the server is never started. One
//! that passes gives the guard its pins (`pins/<server>.mcp.json`, read from the verified
//! bytes, never from disk again); the server is started as `import` starts one and the session
//! runs until the client or the server ends it.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::bundle::verify::Sink;
use crate::guard::frame::Caps;
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
    /// The command after `--`.
    pub server: Server,
    pub policy: Policy,
    /// `--timeout`: how long a request may wait for its answer.
    pub timeout: Duration,
    /// `--audit FILE`: JSON lines appended, one per decision.
    pub audit: Option<PathBuf>,
}

/// How a guarded session went.
#[derive(Debug)]
pub enum Guarded {
    /// The gate refused the bundle; no server was started.
    Refused(Verdict),
    /// The session ran and ended (`End::ServerExited` is an exit 2 for the command).
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
    report: &mut dyn Report,
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
    let started = crate::mcp_process::spawn(&opts.server)
        .map_err(|source| GuardError::Spawn { program: opts.server.program.clone(), source })?;
    let session = Session::new(judge, opts.timeout);
    let mut both = Both { report, audit: audit.as_mut() };
    let end = stdio::run(session, started, io::stdin(), io::stdout(), Caps::default(), &mut both, server_log);
    Ok(Guarded::Ended { verdict, end })
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
