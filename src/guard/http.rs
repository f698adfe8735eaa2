//! The streamable HTTP transport of `bundle guard` (MCP 2025-03-26 and later): the guard
//! listens where the client connects (`--listen`) and forwards to the server's endpoint
//! (`--upstream`), holding every message to the same session rules as stdio
//! ([`super::session`]). A POST carries one message from the client; the server answers it
//! with JSON or with an SSE stream (whose messages are judged and passed on one event at a
//! time, so progress arrives live); a GET opens the server's own stream; a DELETE ends the
//! session. `Mcp-Session-Id` keeps one judge per MCP session.
//!
//! One request per connection (`Connection: close`): a small, strict server on `std::net`
//! with `httparse` reading the request head, every body held to the message caps. The
//! upstream is reached with the same TLS settings as the registry client (`--ca-cert`), and
//! plain http only when asked for (`--plain-http`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::frame::{self, Caps, Frame};
use super::session::{Action, Audit, OWN_ID_PREFIX, Session};

/// The headers passed between client and server unchanged (lowercase).
const PASSED: &[&str] = &["mcp-session-id", "mcp-protocol-version", "authorization", "last-event-id"];
use crate::limits::{MAX_GUARD_HTTP_HEAD_BYTES as MAX_HEAD, MAX_GUARD_UPSTREAM_SMALL_BODY_BYTES};

/// What the HTTP guard reports to (shared by the connections' threads).
pub trait SharedReport: Send + Sync {
    fn audit(&self, record: &Audit);
    fn warn(&self, message: &str);
}

/// The guard's side of one listening address.
pub struct Proxy {
    pub upstream: String,
    pub agent: ureq::Agent,
    pub caps: Caps,
    /// A new session's judge (a fresh copy of the pins for each MCP session).
    pub new_session: Box<dyn Fn() -> Session + Send + Sync>,
    pub report: Arc<dyn SharedReport>,
}

struct State {
    proxy: Proxy,
    /// The judge of each MCP session, by `Mcp-Session-Id` ("" for a server without sessions).
    sessions: Mutex<HashMap<String, Arc<Mutex<Session>>>>,
}

/// Serves `listener` until it fails (each connection on a thread of its own).
pub fn serve(listener: TcpListener, proxy: Proxy) -> std::io::Result<()> {
    let state = Arc::new(State { proxy, sessions: Mutex::new(HashMap::new()) });
    for stream in listener.incoming() {
        let stream = stream?;
        let state = Arc::clone(&state);
        std::thread::spawn(move || {
            let _ = handle(&state, stream);
        });
    }
    Ok(())
}

/// One request as read: method, path, the passed headers, body.
struct Request {
    method: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn read_request(stream: &mut TcpStream, caps: Caps) -> Result<Request, (u16, &'static str)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let (head_len, method, headers, length) = loop {
        let n = stream.read(&mut chunk).map_err(|_| (400, "cannot read the request"))?;
        if n == 0 {
            return Err((400, "the request ended early"));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut slots = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut slots);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let mut length = 0usize;
                let mut headers = Vec::new();
                for h in req.headers.iter() {
                    let name = h.name.to_ascii_lowercase();
                    let value = String::from_utf8_lossy(h.value).into_owned();
                    if name == "content-length" {
                        length = value.trim().parse().map_err(|_| (400, "bad Content-Length"))?;
                    } else if name == "transfer-encoding" {
                        return Err((411, "a body needs Content-Length"));
                    }
                    if PASSED.contains(&name.as_str()) {
                        headers.push((name, value));
                    }
                }
                if req.path != Some("/mcp") && req.path != Some("/") {
                    return Err((404, "the MCP endpoint is /mcp"));
                }
                break (len, req.method.unwrap_or_default().to_owned(), headers, length);
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
            _ => return Err((400, "not an HTTP/1 request")),
        }
    };
    if length > caps.bytes {
        return Err((413, "the message is larger than the guard's cap"));
    }
    let mut body = buf.split_off(head_len);
    if body.len() < length {
        let mut rest = vec![0u8; length - body.len()];
        stream.read_exact(&mut rest).map_err(|_| (400, "the body ended early"))?;
        body.extend_from_slice(&rest);
    }
    body.truncate(length);
    Ok(Request { method, headers, body })
}

fn respond(stream: &mut TcpStream, status: u16, headers: &[(String, String)], body: &[u8]) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\nConnection: close\r\n", reason(status));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Content Too Large",
        502 => "Bad Gateway",
        _ => "Status",
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn handle(state: &State, mut stream: TcpStream) -> std::io::Result<()> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let request = match read_request(&mut stream, state.proxy.caps) {
        Ok(r) => r,
        Err((status, why)) => return respond(&mut stream, status, &[], why.as_bytes()),
    };
    let session_id = header(&request.headers, "mcp-session-id").unwrap_or_default().to_owned();
    match request.method.as_str() {
        "POST" => post(state, &mut stream, &request, &session_id),
        "GET" => get(state, &mut stream, &request, &session_id),
        "DELETE" => {
            let upstream = forward(state, "DELETE", &request.headers, None);
            state.sessions.lock().unwrap_or_else(|e| e.into_inner()).remove(&session_id);
            match upstream {
                Ok(mut r) => {
                    let status = r.status().as_u16();
                    let body = r
                        .body_mut()
                        .with_config()
                        .limit(MAX_GUARD_UPSTREAM_SMALL_BODY_BYTES as u64)
                        .read_to_vec()
                        .unwrap_or_default();
                    respond(&mut stream, status, &[], &body)
                }
                Err(e) => respond(&mut stream, 502, &[], e.to_string().as_bytes()),
            }
        }
        _ => respond(&mut stream, 405, &[("Allow".into(), "GET, POST, DELETE".into())], b""),
    }
}

/// The session of `id`, a new one when there is none yet (an initialize).
fn session_of(state: &State, id: &str) -> Arc<Mutex<Session>> {
    let mut sessions = state.sessions.lock().unwrap_or_else(|e| e.into_inner());
    Arc::clone(sessions.entry(id.to_owned()).or_insert_with(|| Arc::new(Mutex::new((state.proxy.new_session)()))))
}

fn forward(
    state: &State,
    method: &str,
    headers: &[(String, String)],
    body: Option<&str>,
) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
    let mut builder = ureq::http::Request::builder()
        .method(method)
        .uri(&state.proxy.upstream)
        .header("Accept", "application/json, text/event-stream");
    for (k, v) in headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    match body {
        Some(body) => {
            let request = builder.header("Content-Type", "application/json").body(body.to_owned())?;
            state.proxy.agent.run(request)
        }
        None => state.proxy.agent.run(builder.body(())?),
    }
}

/// Where the messages for the client go: collected (a JSON answer) or written as SSE events.
enum Out<'a> {
    Collect(Vec<String>),
    Events(&'a mut TcpStream),
}

impl Out<'_> {
    fn emit(&mut self, line: String) -> std::io::Result<()> {
        match self {
            Out::Collect(lines) => {
                lines.push(line);
                Ok(())
            }
            Out::Events(stream) => {
                stream.write_all(format!("event: message\ndata: {line}\n\n").as_bytes())?;
                stream.flush()
            }
        }
    }
}

/// Carries out a session's actions: messages for the client to `out`, the guard's own requests
/// to the server (their answers judged in turn), decisions to the report.
fn drive(
    state: &State,
    session: &Mutex<Session>,
    headers: &[(String, String)],
    actions: Vec<Action>,
    out: &mut Out<'_>,
) -> std::io::Result<()> {
    for action in actions {
        match action {
            Action::ToClient(line) => out.emit(line)?,
            Action::Audit(record) => state.proxy.report.audit(&record),
            Action::Warn(message) => state.proxy.report.warn(&message),
            Action::ToServer { line, request } => {
                // Only the guard's own requests come here (a client's was sent by `post`).
                let Some(id) = request.filter(|r| r.starts_with(&format!("\"{OWN_ID_PREFIX}"))) else { continue };
                let answer = match forward(state, "POST", headers, Some(&line)) {
                    Ok(response) => response,
                    Err(_) => {
                        let actions = lock(session).undeliverable(&id);
                        drive(state, session, headers, actions, out)?;
                        continue;
                    }
                };
                relay(state, session, headers, answer, out)?;
            }
        }
    }
    Ok(())
}

fn lock(session: &Mutex<Session>) -> std::sync::MutexGuard<'_, Session> {
    session.lock().unwrap_or_else(|e| e.into_inner())
}

/// Feeds an upstream answer (JSON or an SSE stream) into the session, message by message.
fn relay(
    state: &State,
    session: &Mutex<Session>,
    headers: &[(String, String)],
    mut answer: ureq::http::Response<ureq::Body>,
    out: &mut Out<'_>,
) -> std::io::Result<()> {
    let sse = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let caps = state.proxy.caps;
    let reader = answer.body_mut().with_config().limit(u64::MAX).reader();
    let mut reader = BufReader::with_capacity(64 << 10, reader);
    if !sse {
        let frame = frame::read(&mut reader, caps);
        return feed(state, session, headers, frame, out);
    }
    let mut data = String::new();
    loop {
        let mut line = Vec::new();
        let n = (&mut reader).take(caps.bytes as u64 + 16).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        if !line.ends_with(b"\n") {
            // An event line over the cap: the stream is abandoned.
            let actions = lock(session).refused_from_server(None, "an SSE line over the message cap");
            return drive(state, session, headers, actions, out);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if let Some(rest) = text.strip_prefix("data:") {
            if data.len() + rest.len() > caps.bytes {
                data.clear();
                continue;
            }
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        } else if text.is_empty() && !data.is_empty() {
            let message = std::mem::take(&mut data);
            let frame = frame::read(&mut std::io::Cursor::new(message.into_bytes()), caps);
            feed(state, session, headers, frame, out)?;
        }
    }
}

fn feed(
    state: &State,
    session: &Mutex<Session>,
    headers: &[(String, String)],
    frame: Frame,
    out: &mut Out<'_>,
) -> std::io::Result<()> {
    let actions = match frame {
        Frame::Line(line) => lock(session).from_server(line, Instant::now()),
        Frame::Refused { id, why } => lock(session).refused_from_server(id, &why),
        Frame::Eof => return Ok(()),
    };
    drive(state, session, headers, actions, out)
}

fn post(state: &State, stream: &mut TcpStream, request: &Request, session_id: &str) -> std::io::Result<()> {
    let session = session_of(state, session_id);
    let frame = frame::read(&mut std::io::Cursor::new(&request.body[..]), state.proxy.caps);
    let actions = match frame {
        Frame::Line(line) => lock(&session).from_client(line, Instant::now()),
        Frame::Refused { id, why } => lock(&session).refused_from_client(id, &why),
        Frame::Eof => return respond(stream, 400, &[], b"an empty body"),
    };
    let mut out = Out::Collect(Vec::new());
    let mut sent = None;
    let mut rest = Vec::new();
    for action in actions {
        match action {
            Action::ToServer { line, request } if sent.is_none() && !is_own(&request) => sent = Some((line, request)),
            other => rest.push(other),
        }
    }
    drive(state, &session, &request.headers, rest, &mut out)?;
    let Some((line, id)) = sent else {
        // Answered by the guard itself (a refusal), or nothing to send.
        let Out::Collect(lines) = out else { unreachable!() };
        return match lines.as_slice() {
            [] => respond(stream, 202, &[], b""),
            [one] => respond(stream, 200, &[("Content-Type".into(), "application/json".into())], one.as_bytes()),
            _ => respond(stream, 502, &[], b"more than one answer"),
        };
    };
    let answer = match forward(state, "POST", &request.headers, Some(&line)) {
        Ok(answer) => answer,
        Err(e) => {
            let actions = id.map(|id| lock(&session).undeliverable(&id)).unwrap_or_default();
            let mut out = Out::Collect(Vec::new());
            drive(state, &session, &request.headers, actions, &mut out)?;
            let Out::Collect(lines) = out else { unreachable!() };
            return match lines.first() {
                Some(one) => {
                    respond(stream, 200, &[("Content-Type".into(), "application/json".into())], one.as_bytes())
                }
                None => respond(stream, 502, &[], e.to_string().as_bytes()),
            };
        }
    };
    let status = answer.status().as_u16();
    let mut passed: Vec<(String, String)> = Vec::new();
    for name in ["mcp-session-id", "mcp-protocol-version"] {
        if let Some(v) = answer.headers().get(name).and_then(|v| v.to_str().ok()) {
            passed.push((name.to_owned(), v.to_owned()));
        }
    }
    // A new MCP session: its judge is kept under the id the server gave it.
    if let Some(new_id) = header(&passed, "mcp-session-id")
        && new_id != session_id
    {
        let mut sessions = state.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.insert(new_id.to_owned(), Arc::clone(&session));
        if session_id.is_empty() {
            sessions.remove("");
        }
    }
    if !(200..300).contains(&status) || status == 202 {
        let mut answer = answer;
        let body = answer
            .body_mut()
            .with_config()
            .limit(MAX_GUARD_UPSTREAM_SMALL_BODY_BYTES as u64)
            .read_to_vec()
            .unwrap_or_default();
        return respond(stream, status, &passed, &body);
    }
    let sse = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let headers = upstream_headers(&request.headers, &passed);
    if sse {
        stream_head(stream, &passed)?;
        relay(state, &session, &headers, answer, &mut Out::Events(stream))
    } else {
        let mut out = Out::Collect(Vec::new());
        relay(state, &session, &headers, answer, &mut out)?;
        let Out::Collect(lines) = out else { unreachable!() };
        let mut json = passed;
        json.push(("Content-Type".into(), "application/json".into()));
        match lines.as_slice() {
            [] => respond(stream, 202, &json, b""),
            [one] => respond(stream, 200, &json, one.as_bytes()),
            _ => respond(stream, 502, &[], b"more than one answer"),
        }
    }
}

/// The headers of the guard's own requests in a session: the client's, with the session id
/// the server gave.
fn upstream_headers(client: &[(String, String)], passed: &[(String, String)]) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = client.iter().filter(|(k, _)| k != "mcp-session-id").cloned().collect();
    if let Some(id) = header(passed, "mcp-session-id").or_else(|| header(client, "mcp-session-id")) {
        headers.push(("mcp-session-id".into(), id.to_owned()));
    }
    headers
}

fn is_own(request: &Option<String>) -> bool {
    request.as_deref().is_some_and(|r| r.starts_with(&format!("\"{OWN_ID_PREFIX}")))
}

fn stream_head(stream: &mut TcpStream, passed: &[(String, String)]) -> std::io::Result<()> {
    let mut head = String::from(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n",
    );
    for (k, v) in passed {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.flush()
}

fn get(state: &State, stream: &mut TcpStream, request: &Request, session_id: &str) -> std::io::Result<()> {
    let session = session_of(state, session_id);
    let _ = stream.set_read_timeout(None);
    let answer = match forward(state, "GET", &request.headers, None) {
        Ok(a) => a,
        Err(e) => return respond(stream, 502, &[], e.to_string().as_bytes()),
    };
    let status = answer.status().as_u16();
    if status != 200 {
        let mut answer = answer;
        let body = answer
            .body_mut()
            .with_config()
            .limit(MAX_GUARD_UPSTREAM_SMALL_BODY_BYTES as u64)
            .read_to_vec()
            .unwrap_or_default();
        return respond(stream, status, &[], &body);
    }
    stream_head(stream, &[])?;
    relay(state, &session, &request.headers, answer, &mut Out::Events(stream))
}
