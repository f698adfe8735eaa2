//! The guard's side of one MCP session, whatever the transport: each message from the client
//! or the server goes in, the messages to pass on (unchanged, filtered, or an error answer in
//! its place) and the decisions to record come out. No I/O and no clock of its own (the
//! transport passes the time in), so stdio and streamable HTTP hold a session to the same
//! rules, and the rules can be tested message by message.
//!
//! What is judged: `tools/list` answers (every page), `tools/call` requests (and with
//! `--check-results` their results), and `notifications/tools/list_changed`, which the guard
//! answers itself by listing and judging the new tools before the client hears of the change.
//! Everything else passes through as it came, byte for byte.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::judge::{Block, Decision, Judge, Judged, Listing};
use super::reason::GuardReason;
use crate::diagnostic::sanitize;

/// The ids of the guard's own requests start with this; a client id that does too is refused.
pub const OWN_ID_PREFIX: &str = "bundle-guard-";

/// What to do with the outcome of one message.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A line for the client (without its line break).
    ToClient(String),
    /// A line for the server; `request` is the id (JSON text) of the request it carries, so
    /// that a transport which cannot deliver it can call [`Session::undeliverable`].
    ToServer { line: String, request: Option<String> },
    /// A decision for the audit log.
    Audit(Audit),
    /// A warning for the guard's stderr (already sanitised).
    Warn(String),
}

/// One audit record: what was decided about which tool; never argument values, results or
/// environment values.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Audit {
    /// `tools/list`, `tools/call`, `result`, or `message` (a message dropped or a request
    /// answered by the guard).
    pub event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub decision: Decision,
    pub reason: GuardReason,
    /// The fingerprint of the tool as served and as signed, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

impl Audit {
    fn of(event: &'static str, j: Judged) -> Audit {
        Audit {
            event,
            tool: Some(j.tool),
            decision: j.decision,
            reason: j.reason,
            served: j.served,
            signed: j.signed,
            changed: j.changed,
        }
    }

    fn block(event: &'static str, b: &Block) -> Audit {
        Audit {
            event,
            tool: b.tool.clone(),
            decision: Decision::Block,
            reason: b.reason,
            served: None,
            signed: None,
            changed: Vec::new(),
        }
    }
}

/// What a forwarded client request was, for judging its answer.
#[derive(Debug)]
enum Asked {
    List,
    Call(String),
    Other,
}

#[derive(Debug)]
struct Pending {
    asked: Asked,
    /// The id as the client sent it.
    id: Value,
    deadline: Instant,
}

/// The guard's own walk through `tools/list` after `list_changed`.
#[derive(Debug)]
struct OwnListing {
    id: String,
    listing: Listing,
    deadline: Instant,
    pages: usize,
}

/// One session's state.
pub struct Session {
    judge: Judge,
    timeout: Duration,
    /// Client requests forwarded and not yet answered, by id (JSON text).
    pending: BTreeMap<String, Pending>,
    /// The client's walk through the pages of `tools/list`.
    listing: Option<Listing>,
    own: Option<OwnListing>,
    /// `list_changed` notifications held until the guard's own listing is judged.
    held: VecDeque<String>,
    next_own: u64,
}

/// The pages the guard follows in its own listing.
const MAX_OWN_PAGES: usize = crate::limits::MAX_MCP_PAGES;

fn id_key(id: &Value) -> String {
    id.to_string()
}

/// A JSON-RPC error answer to `id` for a refusal.
pub fn error_answer(id: &Value, block: &Block) -> String {
    let code = block.reason.rpc_code().unwrap_or(-32603);
    let mut data = Map::new();
    data.insert("reason".to_owned(), block.reason.as_str().into());
    if let Some(tool) = &block.tool {
        data.insert("tool".to_owned(), tool.clone().into());
    }
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": block.message, "data": data}}).to_string()
}

impl Session {
    pub fn new(judge: Judge, timeout: Duration) -> Session {
        Session {
            judge,
            timeout,
            pending: BTreeMap::new(),
            listing: None,
            own: None,
            held: VecDeque::new(),
            next_own: 1,
        }
    }

    pub fn judge(&self) -> &Judge {
        &self.judge
    }

    /// When [`Session::tick`] has something to do next.
    pub fn next_deadline(&self) -> Option<Instant> {
        let own = self.own.as_ref().map(|o| o.deadline);
        self.pending.values().map(|p| p.deadline).chain(own).min()
    }

    /// A message from the client.
    pub fn from_client(&mut self, line: String, now: Instant) -> Vec<Action> {
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(&line) else {
            // A batch (MCP 2025-03-26 only) could carry calls past the judge: refused whole.
            let block = Block {
                reason: GuardReason::MessageTooLarge,
                tool: None,
                message: "bundle guard: only single JSON-RPC messages pass (not batches, not other JSON)".to_owned(),
            };
            return vec![
                Action::ToClient(error_answer(&Value::Null, &block)),
                Action::Audit(Audit::block("message", &block)),
            ];
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").cloned();
        let (Some(method), Some(id)) = (method, id) else {
            // A notification, or an answer to a server's request.
            if method == Some("notifications/cancelled")
                && let Some(req) = message.get("params").and_then(|p| p.get("requestId"))
            {
                self.pending.remove(&id_key(req));
            }
            return vec![Action::ToServer { line, request: None }];
        };
        let key = id_key(&id);
        if id.as_str().is_some_and(|s| s.starts_with(OWN_ID_PREFIX)) || self.pending.contains_key(&key) {
            let block = Block {
                reason: GuardReason::MessageTooLarge,
                tool: None,
                message: format!("bundle guard: request id {} is in use or reserved", sanitize(&key)),
            };
            return vec![Action::ToClient(error_answer(&id, &block)), Action::Audit(Audit::block("message", &block))];
        }
        let params = message.get("params");
        let asked = match method {
            "tools/list" => {
                if params.and_then(|p| p.get("cursor")).is_none() || self.listing.is_none() {
                    if let Some(old) = self.listing.take() {
                        self.judge.abandon_listing(old);
                    }
                    self.listing = Some(Listing::default());
                }
                Asked::List
            }
            "tools/call" => {
                let name = params.and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default();
                let arguments = params.and_then(|p| p.get("arguments"));
                if let Err(block) = self.judge.check_call(name, arguments) {
                    return vec![
                        Action::ToClient(error_answer(&id, &block)),
                        Action::Audit(Audit::block("tools/call", &block)),
                    ];
                }
                let audit = Audit {
                    event: "tools/call",
                    tool: Some(name.to_owned()),
                    decision: Decision::Pass,
                    reason: GuardReason::CallAllowed,
                    served: None,
                    signed: None,
                    changed: Vec::new(),
                };
                self.pending.insert(
                    key.clone(),
                    Pending { asked: Asked::Call(name.to_owned()), id, deadline: now + self.timeout },
                );
                return vec![Action::Audit(audit), Action::ToServer { line, request: Some(key) }];
            }
            _ => Asked::Other,
        };
        self.pending.insert(key.clone(), Pending { asked, id, deadline: now + self.timeout });
        vec![Action::ToServer { line, request: Some(key) }]
    }

    /// A message from the server.
    pub fn from_server(&mut self, line: String, now: Instant) -> Vec<Action> {
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(&line) else {
            return vec![
                Action::Warn("the server sent something that is not a JSON-RPC message; dropped".to_owned()),
                Action::Audit(Audit::block("message", &dropped())),
            ];
        };
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (Some("notifications/tools/list_changed"), None) => self.list_changed(line, now),
            // A request of the server's (sampling, elicitation, roots, ping) or another
            // notification: the client's business.
            (Some(_), _) => vec![Action::ToClient(line)],
            (None, Some(id)) => self.answer(id.clone(), message, line, now),
            (None, None) => vec![
                Action::Warn("the server sent a message without method or id; dropped".to_owned()),
                Action::Audit(Audit::block("message", &dropped())),
            ],
        }
    }

    /// A message of the server's that was over the caps; `id` is its id, when seen.
    pub fn refused_from_server(&mut self, id: Option<String>, why: &str) -> Vec<Action> {
        let block = Block {
            reason: GuardReason::MessageTooLarge,
            tool: None,
            message: format!("bundle guard: the server's answer was dropped: {why}"),
        };
        let mut out = vec![
            Action::Warn(format!("a message from the server was dropped: {why}")),
            Action::Audit(Audit::block("message", &block)),
        ];
        if let Some(key) = id {
            if self.own.as_ref().is_some_and(|o| id_key(&Value::String(o.id.clone())) == key) {
                out.extend(self.own_failed());
            } else if let Some(p) = self.pending.remove(&key) {
                out.extend(self.fail_pending(p, &block));
            }
        }
        out
    }

    /// A message of the client's that was over the caps.
    pub fn refused_from_client(&mut self, id: Option<String>, why: &str) -> Vec<Action> {
        let block = Block {
            reason: GuardReason::MessageTooLarge,
            tool: None,
            message: format!("bundle guard: the request was dropped: {why}"),
        };
        let id = id.and_then(|k| serde_json::from_str(&k).ok()).unwrap_or(Value::Null);
        vec![Action::ToClient(error_answer(&id, &block)), Action::Audit(Audit::block("message", &block))]
    }

    /// A request the transport could not hand to the server (it stopped reading).
    pub fn undeliverable(&mut self, request: &str) -> Vec<Action> {
        let block = Block {
            reason: GuardReason::ServerNotReading,
            tool: None,
            message: "bundle guard: the server is not reading its input; the request was not sent".to_owned(),
        };
        if self.own.as_ref().is_some_and(|o| id_key(&Value::String(o.id.clone())) == request) {
            return self.own_failed();
        }
        match self.pending.remove(request) {
            Some(p) => self.fail_pending(p, &block),
            None => Vec::new(),
        }
    }

    /// Answers every request whose deadline passed.
    pub fn tick(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        let late: Vec<String> =
            self.pending.iter().filter(|(_, p)| p.deadline <= now).map(|(k, _)| k.clone()).collect();
        let block = Block {
            reason: GuardReason::ServerTimeout,
            tool: None,
            message: format!("bundle guard: the server did not answer within {} s", self.timeout.as_secs_f64()),
        };
        for key in late {
            if let Some(p) = self.pending.remove(&key) {
                out.extend(self.fail_pending(p, &block));
            }
        }
        if self.own.as_ref().is_some_and(|o| o.deadline <= now) {
            out.push(Action::Warn("the server did not answer the guard's tools/list in time".to_owned()));
            out.extend(self.own_failed());
        }
        out
    }

    /// The server is gone: every pending request gets an error.
    pub fn server_exited(&mut self, why: &str) -> Vec<Action> {
        let block =
            Block { reason: GuardReason::ServerExited, tool: None, message: format!("bundle guard: the server {why}") };
        let pending = std::mem::take(&mut self.pending);
        let mut out: Vec<Action> = pending.into_values().flat_map(|p| self.fail_pending(p, &block)).collect();
        out.push(Action::Audit(Audit::block("message", &block)));
        out
    }

    fn fail_pending(&mut self, p: Pending, block: &Block) -> Vec<Action> {
        let tool = match &p.asked {
            Asked::Call(name) => Some(name.clone()),
            _ => None,
        };
        if let Asked::List = p.asked
            && let Some(listing) = self.listing.take()
        {
            self.judge.abandon_listing(listing);
        }
        let block = Block { tool, ..block.clone() };
        vec![Action::ToClient(error_answer(&p.id, &block)), Action::Audit(Audit::block("message", &block))]
    }

    fn answer(&mut self, id: Value, message: Map<String, Value>, line: String, now: Instant) -> Vec<Action> {
        if let (Some(own), Some(text)) = (&self.own, id.as_str())
            && own.id == text
        {
            return self.own_answer(message, now);
        }
        let Some(pending) = self.pending.remove(&id_key(&id)) else {
            // A late answer to a request the guard already answered, or one nobody asked.
            return vec![Action::Warn(format!(
                "dropped an answer to id {} that is not pending",
                sanitize(&id_key(&id))
            ))];
        };
        match (&pending.asked, message.get("result")) {
            (Asked::List, Some(result)) => self.list_answer(&pending, result, line),
            (Asked::List, None) => {
                if let Some(listing) = self.listing.take() {
                    self.judge.abandon_listing(listing);
                }
                vec![Action::ToClient(line)]
            }
            (Asked::Call(name), Some(result)) => match self.judge.check_result(name, result) {
                Ok(()) => vec![Action::ToClient(line)],
                Err(block) => {
                    let replaced = json!({
                        "content": [{"type": "text", "text": format!("{} [{}]", block.message, block.reason.as_str())}],
                        "isError": true,
                    });
                    vec![
                        Action::ToClient(json!({"jsonrpc": "2.0", "id": pending.id, "result": replaced}).to_string()),
                        Action::Audit(Audit::block("result", &block)),
                    ]
                }
            },
            _ => vec![Action::ToClient(line)],
        }
    }

    fn list_answer(&mut self, pending: &Pending, result: &Value, line: String) -> Vec<Action> {
        let mut listing = self.listing.take().unwrap_or_default();
        match self.judge.judge_page(&mut listing, result) {
            Err(block) => {
                self.judge.abandon_listing(listing);
                vec![
                    Action::ToClient(error_answer(&pending.id, &block)),
                    Action::Audit(Audit::block("tools/list", &block)),
                ]
            }
            Ok(filtered) => {
                let mut out = Vec::with_capacity(filtered.judged.len() + 1);
                // Shown whole (passed, or read-only drift let through with a warning): the
                // answer goes on as it came, without being written again.
                let shows_all = filtered.shows_all();
                let shown = match (shows_all, result.get("tools").and_then(Value::as_array)) {
                    (false, Some(page)) => filtered.tools(page),
                    _ => Vec::new(),
                };
                for j in filtered.judged {
                    if j.decision == Decision::Warn {
                        out.push(Action::Warn(format!(
                            "tool `{}` differs from its signed definition ({}) and is read-only: passed (--on-drift warn-read-only)",
                            sanitize(&j.tool),
                            j.changed.join(", ")
                        )));
                    }
                    out.push(Action::Audit(Audit::of("tools/list", j)));
                }
                let more = matches!(result.get("nextCursor"), Some(Value::String(_)));
                if more {
                    self.listing = Some(listing);
                } else {
                    self.judge.finish_listing(listing);
                }
                if shows_all {
                    out.push(Action::ToClient(line));
                } else {
                    let mut result = result.clone();
                    result["tools"] = Value::Array(shown);
                    out.push(Action::ToClient(
                        json!({"jsonrpc": "2.0", "id": pending.id, "result": result}).to_string(),
                    ));
                }
                out
            }
        }
    }

    fn list_changed(&mut self, line: String, now: Instant) -> Vec<Action> {
        self.held.push_back(line);
        if self.held.len() > 1 {
            // One notification says it all; the client lists once.
            self.held.truncate(1);
        }
        if self.own.is_some() {
            return Vec::new();
        }
        self.own_request(Listing::default(), None, now, 1)
    }

    fn own_request(&mut self, listing: Listing, cursor: Option<&str>, now: Instant, pages: usize) -> Vec<Action> {
        let id = format!("{OWN_ID_PREFIX}{}", self.next_own);
        self.next_own += 1;
        let params = match cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}).to_string();
        let request = Some(Value::String(id.clone()).to_string());
        self.own = Some(OwnListing { id, listing, deadline: now + self.timeout, pages });
        vec![Action::ToServer { line, request }]
    }

    fn own_answer(&mut self, message: Map<String, Value>, now: Instant) -> Vec<Action> {
        let Some(mut own) = self.own.take() else { return Vec::new() };
        let Some(result) = message.get("result") else {
            self.own = Some(own);
            let mut out = vec![Action::Warn("the server answered the guard's tools/list with an error".to_owned())];
            out.extend(self.own_failed());
            return out;
        };
        let mut out = Vec::new();
        match self.judge.judge_page(&mut own.listing, result) {
            Err(block) => {
                self.judge.abandon_listing(std::mem::take(&mut own.listing));
                self.own = Some(own);
                out.push(Action::Warn(block.message.clone()));
                out.push(Action::Audit(Audit::block("tools/list", &block)));
                out.extend(self.own_failed());
                return out;
            }
            Ok(filtered) => out.extend(filtered.judged.into_iter().map(|j| Action::Audit(Audit::of("tools/list", j)))),
        }
        match result.get("nextCursor") {
            Some(Value::String(c)) if own.pages < MAX_OWN_PAGES => {
                let cursor = c.clone();
                out.extend(self.own_request(own.listing, Some(&cursor), now, own.pages + 1));
            }
            _ => {
                self.judge.finish_listing(own.listing);
                out.extend(self.held.drain(..).map(Action::ToClient));
            }
        }
        out
    }

    /// The guard's own listing failed: nothing may be called until a list is judged again
    /// (fail closed); the client still hears of the change and lists for itself.
    fn own_failed(&mut self) -> Vec<Action> {
        self.own = None;
        self.judge.finish_listing(Listing::default());
        self.held.drain(..).map(Action::ToClient).collect()
    }
}

fn dropped() -> Block {
    Block {
        reason: GuardReason::MessageTooLarge,
        tool: None,
        message: "bundle guard: a message that is not JSON-RPC was dropped".to_owned(),
    }
}
