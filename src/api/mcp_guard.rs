//! [`McpGuard`]: the judge of `bundle guard` for a runtime that talks to an MCP server
//! in-process (through an MCP SDK) instead of through the proxy. The same decisions, with the
//! same codes: filter a `tools/list` result to the tools the bundle signed for the server,
//! refuse a call of any other tool or with arguments outside the signed `inputSchema`, and
//! check a result against the signed `outputSchema`.

use serde_json::Value;

use super::bundle::VerifiedAgent;
use super::error::Error;
use crate::error::ErrorCode;
use crate::guard::judge::{Block, Judge, Judged, Listing};
use crate::guard::{Decision, OnDrift, Policy};

/// What the guard does with drift and results; [`GuardOptions::default`] blocks all drift and
/// does not check results.
#[derive(Debug, Clone, Copy, Default)]
pub struct GuardOptions {
    warn_read_only: bool,
    check_results: bool,
}

impl GuardOptions {
    /// Pass drift of a tool that is read-only as signed and as served (with a warning
    /// decision), as `--on-drift warn-read-only` does; drift of any other tool is still removed.
    pub fn warn_read_only(mut self, yes: bool) -> GuardOptions {
        self.warn_read_only = yes;
        self
    }

    /// Hold `structuredContent` to the signed `outputSchema` in [`McpGuard::check_result`], as
    /// `--check-results` does.
    pub fn check_results(mut self, yes: bool) -> GuardOptions {
        self.check_results = yes;
        self
    }
}

/// A refusal: its stable code (`mcp_tool_not_exposed`, ...), the JSON-RPC error code an MCP
/// client would get for it, the tool, and a message naming the tool and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardRefusal(Block);

impl GuardRefusal {
    /// The stable code (docs/book/src/reference/codes.md, "Guard codes").
    pub fn code(&self) -> &'static str {
        self.0.reason.as_str()
    }

    /// The JSON-RPC error code the proxy answers with (`None` for a result replaced by an
    /// error result).
    pub fn rpc_code(&self) -> Option<i64> {
        self.0.reason.rpc_code()
    }

    /// The tool concerned, when there is one.
    pub fn tool(&self) -> Option<&str> {
        self.0.tool.as_deref()
    }

    /// What is wrong, naming the tool.
    pub fn message(&self) -> &str {
        &self.0.message
    }
}

impl std::fmt::Display for GuardRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}]", self.0.message, self.code())
    }
}

impl std::error::Error for GuardRefusal {}

/// One tool of a judged list: what was decided and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardDecision(Judged);

impl GuardDecision {
    /// The tool's name as served.
    pub fn tool(&self) -> &str {
        &self.0.tool
    }

    /// `pass`, `warn` or `block`.
    pub fn decision(&self) -> &'static str {
        match self.0.decision {
            Decision::Pass => "pass",
            Decision::Warn => "warn",
            Decision::Block => "block",
        }
    }

    /// The stable code: `mcp_tool_identical`, `mcp_tool_not_pinned` or `mcp_tool_drift`.
    pub fn code(&self) -> &'static str {
        self.0.reason.as_str()
    }

    /// The fingerprint of the definition as served.
    pub fn served(&self) -> Option<&str> {
        self.0.served.as_deref()
    }

    /// The fingerprint of the signed definition, when the bundle signed one of that name.
    pub fn signed(&self) -> Option<&str> {
        self.0.signed.as_deref()
    }

    /// What differs from the signed definition (for drift): `bundle diff`'s change kind and
    /// where, e.g. `description_changed description`.
    pub fn changed(&self) -> &[String] {
        &self.0.changed
    }
}

/// The tools of a judged list that may be shown, and every decision.
#[derive(Debug, Clone)]
pub struct GuardedList {
    /// The Tool objects to show, unchanged, in the order served.
    pub tools: Vec<Value>,
    /// One decision per served tool.
    pub decisions: Vec<GuardDecision>,
}

/// The guard of one MCP server's session, holding it to the tools the bundle signed for it.
pub struct McpGuard {
    judge: Judge,
}

impl std::fmt::Debug for McpGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpGuard").field("server", &self.judge.server()).finish_non_exhaustive()
    }
}

impl McpGuard {
    /// A guard over `tools` (Tool objects as a pin file holds them) for `server`.
    pub fn new(server: &str, tools: &[Value], options: GuardOptions) -> Result<McpGuard, Error> {
        let policy = Policy {
            on_drift: if options.warn_read_only { OnDrift::WarnReadOnly } else { OnDrift::Block },
            check_results: options.check_results,
        };
        let judge =
            Judge::new(server, tools, policy).map_err(|e| Error::failed(ErrorCode::McpNotPinned, e.to_string()))?;
        Ok(McpGuard { judge })
    }

    /// Judges a complete `tools/list` (its `result` object, or the `tools` array of every page
    /// joined): the tools to show. What it passes is, from now on, exactly what may be called.
    pub fn filter_tools(&mut self, list: &Value) -> Result<GuardedList, GuardRefusal> {
        let wrapped;
        let result = match list {
            Value::Array(_) => {
                wrapped = serde_json::json!({ "tools": list });
                &wrapped
            }
            other => other,
        };
        let mut listing = Listing::default();
        match self.judge.judge_page(&mut listing, result) {
            Ok(filtered) => {
                self.judge.finish_listing(listing);
                let page = result.get("tools").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                Ok(GuardedList {
                    tools: filtered.tools(page),
                    decisions: filtered.judged.into_iter().map(GuardDecision).collect(),
                })
            }
            Err(block) => {
                self.judge.abandon_listing(listing);
                Err(GuardRefusal(block))
            }
        }
    }

    /// Whether a `tools/call` of `name` with `arguments` may be sent to the server: the tool
    /// was passed by the last [`McpGuard::filter_tools`] and the arguments match its signed
    /// `inputSchema`.
    pub fn check_call(&self, name: &str, arguments: Option<&Value>) -> Result<(), GuardRefusal> {
        self.judge.check_call(name, arguments).map_err(GuardRefusal)
    }

    /// With [`GuardOptions::check_results`], whether a `tools/call` result (the `result`
    /// object) of `name` holds to the signed `outputSchema`.
    pub fn check_result(&self, name: &str, result: &Value) -> Result<(), GuardRefusal> {
        self.judge.check_result(name, result).map_err(GuardRefusal)
    }

    /// The names of the tools the bundle signed for the server.
    pub fn pinned(&self) -> Vec<String> {
        self.judge.pinned().map(str::to_owned).collect()
    }
}

impl VerifiedAgent {
    /// A guard for MCP server `server`, over the tools this bundle signed for it
    /// (`pins/<server>.mcp.json`, from the verified bytes). Fails with `mcp_not_pinned` when
    /// the bundle has no usable pins for that server.
    pub fn mcp_guard(&self, server: &str, options: GuardOptions) -> Result<McpGuard, Error> {
        let file = crate::guard::pins::file_for(server);
        let bytes = self.file(&file).ok_or_else(|| {
            Error::failed(ErrorCode::McpNotPinned, format!("the bundle has no pins for server `{server}` ({file})"))
        })?;
        let tools = crate::guard::pins::tools(server, bytes)
            .map_err(|e| Error::failed(ErrorCode::McpNotPinned, format!("{file}: {e}")))?;
        McpGuard::new(server, &tools, options)
    }
}

#[cfg(test)]
#[path = "mcp_guard_tests.rs"]
mod tests;
