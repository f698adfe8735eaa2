//! The same listing over the streamable HTTP transport (MCP 2025-03-26 and later), for
//! `bundle import --from mcp --url URL` and `bundle check --refresh` of a server pinned by its
//! URL: each message is a POST to the endpoint, answered with JSON or with an SSE stream whose
//! events are read one at a time; the `Mcp-Session-Id` the server gives on `initialize` is sent
//! back on every later request, and the session is ended with a DELETE.
//!
//! The server is as hostile as a stdio one: one deadline for the whole listing, one byte
//! budget for everything it sends, the JSON caps shared by all its messages, no redirects. TLS
//! is the registry client's (`crate::fetch::tls_config`, `--ca-cert`); an `https://` endpoint
//! never falls back to plain http, an `http://` one is used only because it was written so.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use super::{Failure, Incoming, Limits, Link, Listed, McpError, incoming, list_over, parse_message};

/// Where a streamable HTTP server is reached.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The MCP endpoint, `http(s)://HOST[:PORT]/PATH`.
    pub url: String,
    /// `--ca-cert`: roots to trust beside the Mozilla ones.
    pub ca_certs: Vec<PathBuf>,
}

/// Lists the tools of the server at `endpoint` and ends its session.
pub fn list_tools(endpoint: &Endpoint, limits: Limits) -> Result<Listed, Failure> {
    let fail = |error| Failure { error, stderr: String::new() };
    let mut link = HttpLink::new(endpoint, limits).map_err(fail)?;
    let listed = list_over(&mut link, limits.max_pages);
    link.end();
    listed.map_err(fail)
}

struct HttpLink {
    agent: ureq::Agent,
    url: String,
    deadline: Instant,
    limits: Limits,
    /// Bytes the server has sent, all answers together.
    read: usize,
    budget: crate::json::Budget,
    session: Option<String>,
    version: Option<String>,
    next_id: i64,
}

fn http(method: &str, message: String) -> McpError {
    McpError::Http { method: method.to_owned(), message }
}

impl HttpLink {
    fn new(endpoint: &Endpoint, limits: Limits) -> Result<HttpLink, McpError> {
        let url = endpoint.url.as_str();
        let https = url.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://"));
        if !https && !url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://")) {
            return Err(http("initialize", format!("{url} is not an http:// or https:// URL")));
        }
        let tls = crate::fetch::tls_config(&endpoint.ca_certs).map_err(|e| http("initialize", e.to_string()))?;
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .https_only(https)
            .tls_config(tls)
            .max_redirects(0)
            .timeout_global(Some(limits.timeout))
            .user_agent(concat!("agent-bundle/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(HttpLink {
            agent,
            url: url.to_owned(),
            deadline: Instant::now() + limits.timeout,
            limits,
            read: 0,
            budget: crate::json::Budget::default(),
            session: None,
            version: None,
            next_id: 1,
        })
    }

    fn post(&mut self, method: &str, message: &Value) -> Result<ureq::http::Response<ureq::Body>, McpError> {
        if Instant::now() >= self.deadline {
            return Err(McpError::Timeout { method: method.to_owned(), secs: self.limits.timeout.as_secs() });
        }
        let mut request = self
            .agent
            .post(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json");
        if let Some(id) = &self.session {
            request = request.header("Mcp-Session-Id", id);
        }
        if let Some(v) = &self.version {
            request = request.header("MCP-Protocol-Version", v);
        }
        request.send(message.to_string()).map_err(|e| match e {
            ureq::Error::Timeout(_) => {
                McpError::Timeout { method: method.to_owned(), secs: self.limits.timeout.as_secs() }
            }
            e => http(method, crate::fetch::classify(&self.url, e).to_string()),
        })
    }

    /// Reads the answer to request `id` from a response: one JSON message, or SSE events until
    /// the answer comes (server requests on the way are answered, notifications skipped).
    fn answer(
        &mut self,
        method: &str,
        id: i64,
        mut response: ureq::http::Response<ureq::Body>,
    ) -> Result<Value, McpError> {
        let status = response.status().as_u16();
        if !(200..300).contains(&status) || status == 202 {
            return Err(http(method, format!("the server answered with HTTP status {status}")));
        }
        if method == "initialize" {
            let id = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok());
            self.session = id.map(|v| v.chars().take(256).collect());
        }
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let left = self.limits.max_bytes.saturating_sub(self.read) as u64;
        let mut reader = BufReader::new(response.body_mut().with_config().limit(left + 1).reader());
        if !sse {
            let mut text = String::new();
            let n = reader.read_to_string(&mut text).map_err(|e| self.body_error(method, e))?;
            self.count(method, n)?;
            return match self.incoming(&text, id, method)? {
                Incoming::Answer(result) => Ok(result),
                _ => Err(http(method, "the JSON answer is not the answer to the request".to_owned())),
            };
        }
        let mut data = String::new();
        loop {
            let mut line = String::new();
            let n = reader.read_line(&mut line).map_err(|e| self.body_error(method, e))?;
            self.count(method, n)?;
            if n == 0 {
                return Err(http(method, "the event stream ended before the answer".to_owned()));
            }
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            } else if line.is_empty() && !data.is_empty() {
                match self.incoming(&std::mem::take(&mut data), id, method)? {
                    Incoming::Answer(result) => return Ok(result),
                    Incoming::Request(answer) => self.notify(&answer),
                    Incoming::Notification => {}
                }
            }
        }
    }

    fn incoming(&self, text: &str, id: i64, method: &str) -> Result<Incoming, McpError> {
        let message = parse_message(text, &self.budget, method).map_err(|(_, e)| e)?;
        incoming(&message, id, method)
    }

    fn count(&mut self, method: &str, n: usize) -> Result<(), McpError> {
        self.read += n;
        if self.read > self.limits.max_bytes {
            return Err(self.too_large(method));
        }
        Ok(())
    }

    fn body_error(&self, method: &str, e: std::io::Error) -> McpError {
        let text = e.to_string();
        if text.contains("limit") {
            return self.too_large(method);
        }
        if e.kind() == std::io::ErrorKind::TimedOut || text.contains("timeout") {
            return McpError::Timeout { method: method.to_owned(), secs: self.limits.timeout.as_secs() };
        }
        http(method, format!("reading the answer failed: {text}"))
    }

    fn too_large(&self, method: &str) -> McpError {
        let limit = self.limits.max_bytes;
        http(method, format!("the server sent more than {limit} bytes; a tools/list answer is not that large"))
    }

    /// Ends the server's session (a DELETE; a server that keeps none may refuse it).
    fn end(&self) {
        if let Some(id) = &self.session {
            let _ = self.agent.delete(&self.url).header("Mcp-Session-Id", id).call();
        }
    }
}

impl Link for HttpLink {
    fn request(&mut self, method: &str, params: Value) -> Result<Value, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        let response = self.post(method, &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let result = self.answer(method, id, response)?;
        if method == "initialize" {
            self.version = result.get("protocolVersion").and_then(Value::as_str).map(str::to_owned);
        }
        Ok(result)
    }

    fn notify(&mut self, message: &Value) {
        // A notification's answer is 202 and no body; a server that refuses it says so at the
        // next request.
        let _ = self.post("notification", message);
    }
}
