//! The guard's judge: what a live MCP session may show and call, decided against the tool
//! definitions a release signed (`pins/<server>.mcp.json`). Pure: no I/O, no clock, so the
//! proxy ([`super::session`]), the library ([`crate::api::McpGuard`]) and the Python package
//! make the same decisions from the same code.
//!
//! A served tool passes when its RFC 8785 canonical form is the signed one's (the fingerprint
//! the contracts use); anything else (new, renamed, drifted in any field) is removed from the
//! answer, and a tool that was not passed in the current list cannot be called. Trust is never
//! reset: a tool removed and served again is judged against its pin again, not against what
//! was served before.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::reason::GuardReason;
use crate::diagnostic::sanitize;

/// What to do with a tool whose served definition differs from the signed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDrift {
    /// Remove it from the answer (the default).
    #[default]
    Block,
    /// Pass it with a warning when it is read-only (`annotations.readOnlyHint: true`) both as
    /// signed and as served; block it otherwise (the rule of the release gate for read-only
    /// tools).
    WarnReadOnly,
}

/// How strict the judge is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Policy {
    pub on_drift: OnDrift,
    /// Hold `structuredContent` of results to the signed `outputSchema`.
    pub check_results: bool,
}

/// What the judge decided about one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Pass,
    Warn,
    Block,
}

/// One decision, as the audit log records it: never argument values or results.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Judged {
    pub tool: String,
    pub decision: Decision,
    pub reason: GuardReason,
    /// The fingerprint of the definition as served, when one was.
    pub served: Option<String>,
    /// The fingerprint of the signed definition, when there is one.
    pub signed: Option<String>,
    /// What differs, for drift: change kinds and where (never values).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// A refusal: the stable reason and a message for the client naming the tool and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub reason: GuardReason,
    pub tool: Option<String>,
    pub message: String,
}

impl Block {
    fn new(reason: GuardReason, tool: Option<&str>, message: String) -> Block {
        Block { reason, tool: tool.map(str::to_owned), message }
    }
}

/// A page of `tools/list` after judging: which of its tools to show and every decision.
#[derive(Debug, Clone)]
pub struct Filtered {
    /// The positions in the page's `tools` of the tools to show, in order.
    pub shown: Vec<usize>,
    pub judged: Vec<Judged>,
}

impl Filtered {
    /// Whether every tool of the page is shown (the answer may pass as it came).
    pub fn shows_all(&self) -> bool {
        self.shown.len() == self.judged.len()
    }

    /// The tools to show, copied out of the page's `tools`.
    pub fn tools(&self, page: &[Value]) -> Vec<Value> {
        self.shown.iter().filter_map(|&i| page.get(i).cloned()).collect()
    }
}

/// One `tools/list` walk through the pages (`nextCursor`): names already seen in it, and
/// what passed.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    seen: BTreeSet<String>,
    passed: BTreeSet<String>,
    blocked: BTreeSet<String>,
}

/// Why a set of pins cannot be judged with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PinsError {
    #[error("the pins name tool `{0}` twice")]
    Duplicate(String),
    #[error("pinned tool {0} has no string `name`")]
    Unnamed(usize),
}

/// A signed tool definition, ready to compare and validate against.
struct Pinned {
    tool: Value,
    fingerprint: String,
    input: Result<jsonschema::Validator, String>,
    /// `None` when the tool declares no `outputSchema`.
    output: Option<Result<jsonschema::Validator, String>>,
}

/// The judge of one server's session.
pub struct Judge {
    server: String,
    pins: BTreeMap<String, Pinned>,
    policy: Policy,
    /// The tools passed in the latest list, by name: the only ones that may be called.
    exposed: BTreeSet<String>,
}

/// The fingerprint of a Tool object: BLAKE3 of its RFC 8785 canonical JSON, the function of
/// the pins and the tool contracts.
pub fn fingerprint(tool: &Value) -> String {
    crate::formats::mcp_pin::fingerprint(tool)
}

fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| e.to_string())
}

/// What changed from the signed definition to the served one, in `bundle diff`'s words: the
/// change kind and where (never the values, which the audit log must not hold).
fn changed_fields(signed: &Value, served: &Value) -> Vec<String> {
    crate::contract::tool_drift(signed, served).iter().map(|c| format!("{} {}", c.kind, sanitize(&c.at))).collect()
}

impl Judge {
    /// A judge for `server` holding its session to `tools` (the pinned Tool objects).
    pub fn new(server: &str, tools: &[Value], policy: Policy) -> Result<Judge, PinsError> {
        let mut pins = BTreeMap::new();
        for (i, tool) in tools.iter().enumerate() {
            let name = tool.get("name").and_then(Value::as_str).ok_or(PinsError::Unnamed(i))?;
            let input = match tool.get("inputSchema") {
                Some(schema) => compile(schema),
                None => Err("the tool has no inputSchema".to_owned()),
            };
            let output = tool.get("outputSchema").map(compile);
            let pinned = Pinned { tool: tool.clone(), fingerprint: fingerprint(tool), input, output };
            if pins.insert(name.to_owned(), pinned).is_some() {
                return Err(PinsError::Duplicate(sanitize(name)));
            }
        }
        Ok(Judge { server: server.to_owned(), pins, policy, exposed: BTreeSet::new() })
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The names of the signed tools.
    pub fn pinned(&self) -> impl Iterator<Item = &str> {
        self.pins.keys().map(String::as_str)
    }

    /// The tools that may be called now.
    pub fn exposed(&self) -> impl Iterator<Item = &str> {
        self.exposed.iter().map(String::as_str)
    }

    /// Judges one page of a `tools/list` result (the `result` object) within `listing`:
    /// the tools to show, or a refusal of the whole answer.
    pub fn judge_page(&mut self, listing: &mut Listing, result: &Value) -> Result<Filtered, Block> {
        let invalid = |why: &str| Block::new(GuardReason::ListInvalid, None, format!("bundle guard: {why}"));
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return Err(invalid("the server's tools/list answer has no `tools` array"));
        };
        let mut names = Vec::with_capacity(tools.len());
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                return Err(invalid("the server listed a tool without a string `name`"));
            };
            names.push(name);
        }
        // Two definitions of one name (in this page or an earlier one of the same walk):
        // which one would the client use? Neither; the whole answer is refused.
        let mut in_page = BTreeSet::new();
        for name in &names {
            if !in_page.insert(*name) || listing.seen.contains(*name) {
                self.exposed.remove(*name);
                listing.passed.remove(*name);
                listing.blocked.insert((*name).to_owned());
                return Err(Block::new(
                    GuardReason::DuplicateTool,
                    Some(name),
                    format!(
                        "bundle guard: the server `{}` listed tool `{}` twice; its tools/list answer is refused",
                        sanitize(&self.server),
                        sanitize(name)
                    ),
                ));
            }
        }
        let mut shown = Vec::with_capacity(tools.len());
        let mut judged = Vec::with_capacity(tools.len());
        for (i, (tool, name)) in tools.iter().zip(names).enumerate() {
            listing.seen.insert(name.to_owned());
            let verdict = self.judge_tool(name, tool);
            if verdict.decision == Decision::Block {
                listing.blocked.insert(name.to_owned());
                self.exposed.remove(name);
            } else {
                listing.passed.insert(name.to_owned());
                self.exposed.insert(name.to_owned());
                shown.push(i);
            }
            judged.push(verdict);
        }
        Ok(Filtered { shown, judged })
    }

    /// Ends a walk through every page: what the walk passed is now exactly what may be called
    /// (a tool the server no longer lists cannot be called any more).
    pub fn finish_listing(&mut self, listing: Listing) {
        self.exposed = listing.passed;
    }

    /// Ends a walk that failed (an error answer, a refused page): nothing of what it blocked
    /// may be called, what it passed stays callable.
    pub fn abandon_listing(&mut self, listing: Listing) {
        for name in &listing.blocked {
            self.exposed.remove(name);
        }
    }

    /// Judges one served Tool object against its pin.
    pub fn judge_tool(&self, name: &str, tool: &Value) -> Judged {
        // The common case without canonicalising: a served tool equal to its pin as a JSON value
        // (objects compared as maps, whatever their key order) has the pin's canonical form, so
        // its fingerprint.
        if let Some(pin) = self.pins.get(name).filter(|pin| pin.tool == *tool) {
            return Judged {
                tool: name.to_owned(),
                decision: Decision::Pass,
                reason: GuardReason::ToolIdentical,
                served: Some(pin.fingerprint.clone()),
                signed: Some(pin.fingerprint.clone()),
                changed: Vec::new(),
            };
        }
        let served = fingerprint(tool);
        let Some(pin) = self.pins.get(name) else {
            return Judged {
                tool: name.to_owned(),
                decision: Decision::Block,
                reason: GuardReason::ToolNotPinned,
                served: Some(served),
                signed: None,
                changed: Vec::new(),
            };
        };
        let signed = Some(pin.fingerprint.clone());
        if served == pin.fingerprint {
            return Judged {
                tool: name.to_owned(),
                decision: Decision::Pass,
                reason: GuardReason::ToolIdentical,
                served: Some(served),
                signed,
                changed: Vec::new(),
            };
        }
        let read_only = crate::contract::mcp_read_only;
        let warn = self.policy.on_drift == OnDrift::WarnReadOnly && read_only(&pin.tool) && read_only(tool);
        Judged {
            tool: name.to_owned(),
            decision: if warn { Decision::Warn } else { Decision::Block },
            reason: GuardReason::ToolDrift,
            served: Some(served),
            signed,
            changed: changed_fields(&pin.tool, tool),
        }
    }

    /// Whether a `tools/call` of `name` with `arguments` may reach the server.
    pub fn check_call(&self, name: &str, arguments: Option<&Value>) -> Result<(), Block> {
        let server = sanitize(&self.server);
        let shown = sanitize(name);
        let Some(pin) = self.pins.get(name).filter(|_| self.exposed.contains(name)) else {
            let why = if self.pins.contains_key(name) {
                "its served definition was not the signed one, or it is not in the server's current list"
            } else {
                "the bundle did not sign a tool of that name for this server"
            };
            return Err(Block::new(
                GuardReason::ToolNotExposed,
                Some(name),
                format!("bundle guard: tool `{shown}` of server `{server}` is not available: {why}"),
            ));
        };
        let validator = pin.input.as_ref().map_err(|e| {
            Block::new(
                GuardReason::SchemaUnusable,
                Some(name),
                format!(
                    "bundle guard: the signed inputSchema of `{shown}` cannot be used ({}); calls are refused",
                    sanitize(e)
                ),
            )
        })?;
        let empty = Value::Object(serde_json::Map::new());
        let arguments = arguments.unwrap_or(&empty);
        if let Err(e) = validator.validate(arguments) {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { String::new() } else { format!(" at {}", sanitize(&at)) };
            return Err(Block::new(
                GuardReason::ArgumentsInvalid,
                Some(name),
                format!(
                    "bundle guard: the arguments of `{shown}` do not match its signed inputSchema{at}: {}",
                    sanitize(&e.to_string())
                ),
            ));
        }
        Ok(())
    }

    /// With [`Policy::check_results`], whether a `tools/call` result (the `result` object) of
    /// `name` holds to the signed `outputSchema`. An error result (`isError: true`) and a tool
    /// without an outputSchema are not checked.
    pub fn check_result(&self, name: &str, result: &Value) -> Result<(), Block> {
        if !self.policy.check_results || result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        let Some(output) = self.pins.get(name).and_then(|p| p.output.as_ref()) else { return Ok(()) };
        let shown = sanitize(name);
        let block = |why: String| {
            Block::new(
                GuardReason::ResultInvalid,
                Some(name),
                format!("bundle guard: the result of `{shown}` does not match its signed outputSchema: {why}"),
            )
        };
        let validator = output.as_ref().map_err(|e| block(format!("the schema cannot be used ({})", sanitize(e))))?;
        let Some(structured) = result.get("structuredContent") else {
            return Err(block("it has no structuredContent".to_owned()));
        };
        validator.validate(structured).map_err(|e| {
            let at = e.instance_path().to_string();
            block(if at.is_empty() {
                sanitize(&e.to_string())
            } else {
                format!("at {}: {}", sanitize(&at), sanitize(&e.to_string()))
            })
        })
    }
}
