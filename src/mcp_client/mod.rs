//! Just enough of an MCP client (specification 2025-11-25) to list a server's tools: start the
//! server, `initialize`, `notifications/initialized`, `tools/list` page by page (`nextCursor`),
//! then shut it down as the lifecycle says (close its stdin, wait, SIGTERM, SIGKILL). The walk
//! is one function over a transport (`list_over`): stdio here, streamable HTTP in `http.rs`.
//!
//! The server is someone else's program and is treated as hostile: everything is bounded by one
//! deadline and a byte budget for what it writes to stdout, a line that is not a JSON-RPC
//! message is an error (the transport says the server MUST NOT write anything else there),
//! and on every outcome the server's whole process group is gone before this returns, so
//! that a wrapper script's children are not left behind either. What it writes to stderr is
//! kept (the last part of it) and handed back only with a failure.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::diagnostic::{Code, Diagnostic};

/// The protocol version asked for; the server may answer with any of [`KNOWN_VERSIONS`].
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// The revisions whose `tools/list` this client understands (the Tool object only grew).
pub const KNOWN_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// At most this many bytes of the server's stderr are kept (the end of it).
const STDERR_KEEP: usize = crate::limits::MAX_MCP_STDERR_BYTES;

mod http;

pub use crate::mcp_process::{EnvVar, INHERITED_ENV, Server};
pub use http::{Endpoint, list_tools as list_tools_http};

/// Replaces, in `text` (what a server wrote), every value of our environment of 4 characters
/// or more by `$NAME`: a server's stderr is echoed in messages, and it must not carry a secret
/// of ours out (one passed with `--env`, or one it guessed).
pub fn redact_env(text: &str) -> String {
    let mut vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(_, v)| v.chars().count() >= 4)
        .collect();
    // The longest first, so that a value holding another is replaced whole.
    vars.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    let mut out = text.to_owned();
    for (name, value) in vars {
        if out.contains(&value) {
            out = out.replace(&value, &format!("${name}"));
        }
    }
    out
}

/// The bounds one listing runs under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From start to the last page (the shutdown that follows has its own short grace).
    pub timeout: Duration,
    /// Everything the server writes to stdout, all messages together.
    pub max_bytes: usize,
    /// `tools/list` pages.
    pub max_pages: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(crate::limits::MCP_TIMEOUT_SECS),
            max_bytes: crate::limits::MAX_MCP_STDOUT_BYTES,
            max_pages: crate::limits::MAX_MCP_PAGES,
        }
    }
}

/// What the server listed.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The Tool objects of every page, in order, as sent.
    pub tools: Vec<Value>,
    /// `serverInfo.name` and `.version`, when given.
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    /// The protocol version the server chose.
    pub protocol_version: String,
    pub pages: usize,
}

/// Why a listing failed. Every variant means the server did not behave as the protocol says
/// (or could not be started); the process is gone either way.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    #[error("cannot start `{program}`: {message}")]
    Spawn { program: String, message: String },
    #[error("no answer to `{method}` within {secs} s (--timeout)")]
    Timeout { method: String, secs: u64 },
    #[error("the server exited before answering `{method}` ({status})")]
    Exited { method: String, status: String },
    #[error(
        "the server wrote more than {limit} bytes to stdout (while waiting for `{method}`); a tools/list answer is not that large"
    )]
    TooLarge { method: String, limit: usize },
    #[error(
        "the server wrote something that is not a JSON-RPC message to stdout (while waiting for `{method}`): {line}"
    )]
    Garbage { method: String, line: String },
    #[error("the server answered `{method}` with error {code}: {message}")]
    ServerError { method: String, code: i64, message: String },
    #[error("the server's answer to `{method}` breaks the protocol: {message}")]
    Protocol { method: String, message: String },
    /// Streamable HTTP: the endpoint could not be reached, or answered with an error status.
    #[error("`{method}` over HTTP failed: {message}")]
    Http { method: String, message: String },
}

/// A failed listing with the end of what the server wrote to stderr.
#[derive(Debug, Clone)]
pub struct Failure {
    pub error: McpError,
    pub stderr: String,
}

impl Failure {
    /// An `mcp_server_failed` error naming the server, with the end of its stderr and what to do.
    pub fn diagnostic(&self, server: &Server) -> Diagnostic {
        let help = match &self.error {
            McpError::Spawn { .. } => {
                "check the command after `--`: it must be a program on PATH or a path to one".to_owned()
            }
            McpError::Timeout { .. } => {
                "check that the command starts an MCP server on stdio (not the HTTP transport); a slow server needs a longer --timeout".to_owned()
            }
            _ => format!(
                "check that `{}` is an MCP server speaking the stdio transport (JSON-RPC, one message per line, nothing else on stdout)",
                server.display()
            ),
        };
        self.diagnostic_at(&server.display(), help)
    }

    /// The same for a streamable HTTP server at `url`.
    pub fn diagnostic_http(&self, url: &str) -> Diagnostic {
        let help = match &self.error {
            McpError::Timeout { .. } => "a slow server needs a longer --timeout".to_owned(),
            McpError::Http { .. } => format!(
                "check that {url} is the server's MCP endpoint (streamable HTTP, e.g. https://HOST/mcp) and that it is running; a private CA's root is trusted with --ca-cert"
            ),
            _ => format!("check that {url} is an MCP server speaking the streamable HTTP transport"),
        };
        self.diagnostic_at(url, help)
    }

    fn diagnostic_at(&self, shown: &str, help: String) -> Diagnostic {
        let mut message = self.error.to_string();
        let tail: Vec<&str> = self.stderr.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
        if !tail.is_empty() {
            let last = &tail[tail.len().saturating_sub(12)..];
            let mut said = last.join(" ⏎ ");
            if said.chars().count() > 1500 {
                said = said.chars().rev().take(1500).collect::<Vec<_>>().into_iter().rev().collect();
                said.insert(0, '…');
            }
            message.push_str(&format!("; its stderr ended with: {said}"));
        }
        Diagnostic::error(Code::McpServerFailed, shown, message).with_help(help)
    }
}

/// Starts `server`, lists its tools and shuts it down.
pub fn list_tools(server: &Server, limits: Limits) -> Result<Listed, Failure> {
    let mut session = match Session::start(server, limits) {
        Ok(s) => s,
        Err(error) => return Err(Failure { error, stderr: String::new() }),
    };
    let listed = list_over(&mut session, limits.max_pages);
    let stderr = redact_env(&session.shutdown());
    listed.map_err(|error| Failure { error, stderr })
}

/// What the stdout reader thread hands over.
enum Line {
    Message(String),
    /// The server closed stdout.
    Eof,
    TooLarge,
    NotUtf8,
}

struct Session {
    child: Child,
    /// Messages for the server's stdin, written by a thread of their own: a server that does
    /// not read its stdin must not block this side past the deadline.
    stdin: Option<mpsc::Sender<Vec<u8>>>,
    lines: Receiver<Line>,
    stderr: Receiver<String>,
    deadline: Instant,
    limits: Limits,
    /// JSON values the server's messages may still hold, all together.
    budget: crate::json::Budget,
    next_id: i64,
    /// Set once the reader saw the end of stdout or gave up.
    closed: bool,
}

impl Session {
    fn start(server: &Server, limits: Limits) -> Result<Session, McpError> {
        let started = crate::mcp_process::spawn(server)
            .map_err(|e| McpError::Spawn { program: server.program.clone(), message: e.to_string() })?;
        let crate::mcp_process::Started { child, stdin: pipe, stdout: out, stderr: err } = started;
        let stdin = {
            let (tx, rx) = mpsc::channel::<Vec<u8>>();
            thread::spawn(move || write_all(pipe, &rx));
            Some(tx)
        };
        let (line_tx, lines) = mpsc::channel();
        let max = limits.max_bytes;
        thread::spawn(move || read_lines(out, max, &line_tx));
        let (err_tx, stderr) = mpsc::channel();
        thread::spawn(move || {
            let _ = err_tx.send(crate::mcp_process::read_tail(err, STDERR_KEEP, |_| {}));
        });
        Ok(Session {
            child,
            stdin,
            lines,
            stderr,
            deadline: Instant::now() + limits.timeout,
            limits,
            budget: crate::json::Budget::default(),
            next_id: 1,
            closed: false,
        })
    }

    /// Sends a request and waits for its answer: the `result`, or the error the server sent.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.receive(method)?;
            match incoming(&message, id, method)? {
                Incoming::Answer(result) => return Ok(result),
                Incoming::Request(answer) => self.send(&answer),
                Incoming::Notification => {}
            }
        }
    }

    fn send(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        // When the writer has stopped (a broken pipe), the server is gone or not reading; the
        // next read says which, in the order the server wrote things.
        if let Some(tx) = &self.stdin {
            let _ = tx.send(line.into_bytes());
        }
    }

    /// The next JSON-RPC message from stdout.
    fn receive(&mut self, method: &str) -> Result<Value, McpError> {
        let timeout = || McpError::Timeout { method: method.to_owned(), secs: self.limits.timeout.as_secs() };
        let left = self.deadline.saturating_duration_since(Instant::now());
        let line = if self.closed {
            Line::Eof
        } else {
            match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => return Err(timeout()),
                Err(RecvTimeoutError::Disconnected) => Line::Eof,
            }
        };
        match line {
            // The caps of every JSON file (values, depth), shared by all the server's
            // messages: a 15 MiB answer must not become a gigabyte of values.
            Line::Message(text) => parse_message(&text, &self.budget, method).map_err(|(over, e)| {
                self.closed |= over;
                e
            }),
            Line::Eof => {
                self.closed = true;
                Err(McpError::Exited { method: method.to_owned(), status: self.exit_status() })
            }
            Line::TooLarge => {
                self.closed = true;
                Err(McpError::TooLarge { method: method.to_owned(), limit: self.limits.max_bytes })
            }
            Line::NotUtf8 => {
                self.closed = true;
                Err(garbage(method, "(bytes that are not UTF-8)"))
            }
        }
    }

    /// How the server ended, waiting a moment for it (stdout closes just before the exit).
    fn exit_status(&mut self) -> String {
        crate::mcp_process::exit_status(&mut self.child)
    }

    /// Stops the server as the lifecycle says (close stdin; wait; SIGTERM; wait; SIGKILL) and
    /// then its whole process group; returns the end of its stderr.
    fn shutdown(mut self) -> String {
        drop(self.stdin.take());
        crate::mcp_process::stop(&mut self.child);
        self.stderr.recv_timeout(Duration::from_millis(500)).unwrap_or_default()
    }
}

/// What the listing needs of a transport: a request answered (its `result`), a notification
/// sent.
trait Link {
    fn request(&mut self, method: &str, params: Value) -> Result<Value, McpError>;
    fn notify(&mut self, message: &Value);
}

/// The listing itself, whatever the transport: `initialize`, `notifications/initialized`, then
/// `tools/list` page by page (at most `max_pages`, a cursor never given twice).
fn list_over(link: &mut dyn Link, max_pages: usize) -> Result<Listed, McpError> {
    let init = link.request(
        "initialize",
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bundle", "version": env!("CARGO_PKG_VERSION")},
        }),
    )?;
    let protocol_version = init.get("protocolVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
    if !KNOWN_VERSIONS.contains(&protocol_version.as_str()) {
        return Err(McpError::Protocol {
            method: "initialize".to_owned(),
            message: format!(
                "protocol version {protocol_version:?} is not one this client knows ({})",
                KNOWN_VERSIONS.join(", ")
            ),
        });
    }
    if init.get("capabilities").and_then(|c| c.get("tools")).is_none() {
        return Err(McpError::Protocol {
            method: "initialize".to_owned(),
            message: "the server does not declare the `tools` capability, so it has no tools to list".to_owned(),
        });
    }
    let info = init.get("serverInfo");
    // Names for messages: a server could send megabytes here.
    let text = |k: &str| info.and_then(|i| i.get(k)).and_then(Value::as_str).map(|s| s.chars().take(80).collect());
    let (server_name, server_version) = (text("name"), text("version"));
    link.notify(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::BTreeSet::new();
    let mut pages = 0;
    loop {
        pages += 1;
        if pages > max_pages {
            return Err(protocol("tools/list", format!("more than {} pages", max_pages)));
        }
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let result = link.request("tools/list", params)?;
        match result.get("tools") {
            Some(Value::Array(page)) => tools.extend(page.iter().cloned()),
            _ => return Err(protocol("tools/list", "the result has no `tools` array".to_owned())),
        }
        match result.get("nextCursor") {
            None | Some(Value::Null) => break,
            Some(Value::String(c)) => {
                if !seen.insert(c.clone()) {
                    return Err(protocol("tools/list", format!("nextCursor {c:?} was already given (a loop)")));
                }
                cursor = Some(c.clone());
            }
            Some(_) => return Err(protocol("tools/list", "nextCursor is not a string".to_owned())),
        }
    }
    Ok(Listed { tools, server_name, server_version, protocol_version, pages })
}

/// What one message from the server is, while a request `id` of `method` waits.
enum Incoming {
    /// The answer to it: its `result`.
    Answer(Value),
    /// A request of the server's, with the answer to send back (`ping` is answered, anything
    /// else is not offered this early).
    Request(Value),
    /// A notification (logging, progress): ignored.
    Notification,
}

fn incoming(message: &Value, id: i64, method: &str) -> Result<Incoming, McpError> {
    let Some(obj) = message.as_object() else {
        return Err(garbage(method, &message.to_string()));
    };
    if let Some(request) = obj.get("method").and_then(Value::as_str) {
        return Ok(match obj.get("id") {
            Some(rid) if request == "ping" => Incoming::Request(json!({"jsonrpc": "2.0", "id": rid, "result": {}})),
            Some(rid) => Incoming::Request(
                json!({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}),
            ),
            None => Incoming::Notification,
        });
    }
    if obj.get("id").and_then(Value::as_i64) != Some(id) {
        return Err(protocol(
            method,
            format!("an answer with id {} came instead of {id}", obj.get("id").unwrap_or(&Value::Null)),
        ));
    }
    if let Some(error) = obj.get("error") {
        return Err(McpError::ServerError {
            method: method.to_owned(),
            code: error.get("code").and_then(Value::as_i64).unwrap_or_default(),
            message: error.get("message").and_then(Value::as_str).unwrap_or_default().chars().take(500).collect(),
        });
    }
    match obj.get("result") {
        Some(r @ Value::Object(_)) => Ok(Incoming::Answer(r.clone())),
        _ => Err(protocol(method, "the answer has no `result` object".to_owned())),
    }
}

/// One message's text as JSON, within the caps of every JSON file (values, depth) shared by all
/// the server's messages (`budget`): a 15 MiB answer must not become a gigabyte of values.
/// `Err(true)`: over the caps (nothing more is read); `Err(false)`: not a JSON-RPC message.
fn parse_message(text: &str, budget: &crate::json::Budget, method: &str) -> Result<Value, (bool, McpError)> {
    let source = crate::diagnostic::Source::new("tools/list", text);
    match crate::json::parse_within(&source, budget, &mut Vec::new()) {
        Ok(doc) if doc.value.get("jsonrpc").and_then(Value::as_str) == Some("2.0") => Ok(doc.value),
        Err(d) if d.code == crate::diagnostic::Code::LimitExceeded => {
            Err((true, McpError::Protocol { method: method.to_owned(), message: d.message }))
        }
        _ => Err((false, garbage(method, text))),
    }
}

impl Link for Session {
    fn request(&mut self, method: &str, params: Value) -> Result<Value, McpError> {
        Session::request(self, method, params)
    }
    fn notify(&mut self, message: &Value) {
        self.send(message);
    }
}

fn protocol(method: &str, message: String) -> McpError {
    McpError::Protocol { method: method.to_owned(), message }
}

fn garbage(method: &str, text: &str) -> McpError {
    let mut line: String = text.chars().take(120).collect();
    if line.len() < text.len() {
        line.push('…');
    }
    McpError::Garbage { method: method.to_owned(), line: format!("{line:?}") }
}

/// Reads newline-delimited messages, at most `max` bytes in all; stops at the first problem.
fn read_lines(out: impl Read, max: usize, tx: &mpsc::Sender<Line>) {
    let mut reader = BufReader::with_capacity(64 * 1024, out);
    let mut total = 0usize;
    let mut line = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            Ok([]) | Err(_) => {
                let _ = tx.send(Line::Eof);
                return;
            }
            Ok(buf) => buf,
        };
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let n = chunk.len();
        total += n;
        if total > max {
            let _ = tx.send(Line::TooLarge);
            return;
        }
        line.extend_from_slice(chunk);
        reader.consume(n);
        if done {
            let bytes = std::mem::take(&mut line);
            let Ok(text) = String::from_utf8(bytes) else {
                let _ = tx.send(Line::NotUtf8);
                return;
            };
            let text = text.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            if tx.send(Line::Message(text.to_owned())).is_err() {
                return;
            }
        }
    }
}

/// Writes each message to the server's stdin until the sender is dropped (then stdin is closed)
/// or the server stops reading for good (a broken pipe).
fn write_all(mut pipe: ChildStdin, rx: &Receiver<Vec<u8>>) {
    for message in rx {
        if pipe.write_all(&message).and_then(|()| pipe.flush()).is_err() {
            return;
        }
    }
}

impl crate::error::Coded for McpError {
    fn code(&self) -> crate::error::ErrorCode {
        crate::error::ErrorCode::IoError
    }
}
