//! The guard's stable codes: one per decision it makes about a server's tools, each with the
//! JSON-RPC error code the client sees when the decision is a refusal. Scripts and hosts match
//! on both; neither changes once released (docs/book/src/reference/codes.md is generated from
//! these texts).

crate::codes::stable_codes! {
    /// Why the guard passed, warned about or blocked something.
    pub enum GuardReason;
    ToolIdentical => "mcp_tool_identical": "The served tool definition is the signed one, byte for byte in RFC 8785 canonical form: passed through unchanged.",
    ToolNotPinned => "mcp_tool_not_pinned": "The server offers a tool the bundle did not sign (added, or renamed): removed from the `tools/list` answer.",
    ToolDrift => "mcp_tool_drift": "The served definition differs from the signed one (description, title, schemas, annotations, any field): removed from the answer, or with `--on-drift warn-read-only` passed with a warning when the tool is read-only on both sides.",
    DuplicateTool => "mcp_duplicate_tool": "One `tools/list` answer names a tool twice: the whole answer is replaced by a JSON-RPC error.",
    ListInvalid => "mcp_list_invalid": "A `tools/list` answer the guard cannot judge (no `tools` array, a tool without a string name, a cursor that is not a string): replaced by a JSON-RPC error.",
    CallAllowed => "mcp_call_allowed": "A `tools/call` of a tool passed in the current list, with arguments that match its signed `inputSchema`: forwarded.",
    ToolNotExposed => "mcp_tool_not_exposed": "A `tools/call` of a tool the guard has not passed in the current list (never listed, not signed, drifted): answered with an error, never forwarded.",
    ArgumentsInvalid => "mcp_arguments_invalid": "The arguments of a `tools/call` do not match the signed `inputSchema`: answered with an error, never forwarded.",
    SchemaUnusable => "mcp_schema_unusable": "The signed `inputSchema` (or `outputSchema`) is not a schema the validator can compile: calls of the tool are refused (fail closed).",
    ResultInvalid => "mcp_result_invalid": "With `--check-results`, the `structuredContent` of a result does not match the signed `outputSchema` (or is missing): replaced by an error result.",
    MessageTooLarge => "mcp_message_too_large": "A message over the caps (bytes, JSON values, nesting depth) or that is not JSON-RPC: dropped; a request it answered gets an error.",
    ServerTimeout => "mcp_server_timeout": "The server did not answer a request within `--request-timeout`: the client gets an error, a late answer is dropped.",
    ServerNotReading => "mcp_server_not_reading": "The server stopped reading its stdin (its queue is full): the request is answered with an error instead of waiting.",
    ServerExited => "mcp_server_exited": "The server exited or closed its stdout: pending requests get an error and the guard ends with exit 2.",
}

impl GuardReason {
    /// The JSON-RPC error code a refusal carries (in the range JSON-RPC leaves to
    /// implementations, -32000 to -32099), or `None` for a decision that is not an error
    /// answer (a tool passed, or removed from a list).
    pub fn rpc_code(self) -> Option<i64> {
        Some(match self {
            GuardReason::ToolIdentical
            | GuardReason::ToolNotPinned
            | GuardReason::ToolDrift
            | GuardReason::CallAllowed => return None,
            GuardReason::ResultInvalid => return None,
            GuardReason::ToolNotExposed => -32090,
            GuardReason::ArgumentsInvalid => -32091,
            GuardReason::DuplicateTool => -32092,
            GuardReason::ListInvalid => -32093,
            GuardReason::MessageTooLarge => -32094,
            GuardReason::ServerTimeout => -32095,
            GuardReason::ServerNotReading => -32096,
            GuardReason::SchemaUnusable => -32097,
            GuardReason::ServerExited => -32098,
        })
    }
}
