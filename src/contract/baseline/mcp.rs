//! The pinned MCP servers of a baseline (`[mcp.<server>]`): how they are read, written,
//! approved and judged. A pinned tool is held by the rule `bundle guard --on-drift
//! warn-read-only` applies at run time: drift rejects unless the tool is read-only
//! (`readOnlyHint: true`) on both sides.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use toml_edit::{Array, DocumentMut, Item, Table, value};

use super::{
    Approval, ApprovalAction, Baseline, BaselineError, Drift, DriftStatus, Findings, MCP_KEYS, MCP_PREFIX, action,
    invalid, neither, replace,
};
use crate::contract::Risk;
use crate::contract::mcp_changes::{list_drift, mcp_read_only, tool_drift};
use crate::contract::release::{AgentContracts, PinnedServer};

/// The `[mcp.<server>]` tables: a server name as pins have them, and `tools`, a list of Tool
/// objects each written as its RFC 8785 canonical JSON (so that an entry edited by hand is
/// noticed), with a name, no name twice.
pub(super) fn parse_mcp(doc: &DocumentMut) -> Result<BTreeMap<String, Vec<Value>>, String> {
    let mut servers = BTreeMap::new();
    let Some(item) = doc.get("mcp") else { return Ok(servers) };
    let table = item.as_table_like().ok_or("`mcp` must be a table of pinned MCP servers")?;
    for (server, entry) in table.iter() {
        crate::manifest::check_server_name(server).map_err(|why| format!("mcp.{server}: {why}"))?;
        let entry = entry.as_table_like().ok_or_else(|| format!("`mcp.{server}` must be a table"))?;
        for (key, _) in entry.iter() {
            if !MCP_KEYS.contains(&key) {
                return Err(format!("mcp.{server}: unknown key `{key}` (expected {})", MCP_KEYS.join(", ")));
            }
        }
        let list = entry
            .get("tools")
            .and_then(Item::as_array)
            .ok_or_else(|| format!("mcp.{server}: `tools` (a list of Tool objects as canonical JSON) is missing"))?;
        let mut tools: Vec<Value> = Vec::new();
        for (i, text) in list.iter().enumerate() {
            let at = format!("mcp.{server}.tools[{i}]");
            let text = text.as_str().ok_or_else(|| format!("{at}: not a string"))?;
            let tool: Value = serde_json::from_str(text).map_err(|e| format!("{at}: not JSON: {e}"))?;
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                return Err(format!("{at}: not a Tool object with a `name`"));
            };
            if crate::canonical::fingerprint_json(&tool).0 != text {
                return Err(format!(
                    "{at}: `{name}` is not written in canonical JSON; the entry was edited by hand: approve mcp:{server} again"
                ));
            }
            if tools.iter().any(|t| t.get("name").and_then(Value::as_str) == Some(name)) {
                return Err(format!("{at}: a second tool named `{name}`"));
            }
            tools.push(tool);
        }
        servers.insert(server.to_owned(), tools);
    }
    Ok(servers)
}

/// One pinned server's table in the file.
pub(super) fn mcp_entry(p: &PinnedServer, from: &str) -> Table {
    let mut t = Table::new();
    t["file"] = value(&p.file);
    t["approved_from"] = value(from);
    let mut tools: Array = p.tools.iter().map(|tool| crate::canonical::fingerprint_json(tool).0).collect();
    // One tool a line.
    for v in tools.iter_mut() {
        v.decor_mut().set_prefix("\n  ");
    }
    tools.set_trailing_comma(true);
    tools.set_trailing("\n");
    t["tools"] = Item::Value(tools.into());
    t
}

/// Approves (or removes) one pinned server's entry in `doc` (`[mcp.<server>]`, made when
/// missing): all its tools at once, as the release pinned them.
pub(super) fn approve_mcp(
    doc: &mut DocumentMut,
    baseline: &Baseline,
    from: &AgentContracts,
    server: &str,
    path: &Path,
) -> Result<Approval, BaselineError> {
    let id = format!("{MCP_PREFIX}{server}");
    if !doc.contains_key("mcp") {
        let mut mcp = Table::new();
        mcp.set_implicit(true);
        doc["mcp"] = Item::Table(mcp);
    }
    let table = doc["mcp"].as_table_mut().ok_or_else(|| invalid(path, "`mcp` must be a table"))?;
    let old = baseline.mcp.get(server).map(|tools| list_fingerprint(tools));
    Ok(match from.pins.iter().find(|p| p.server == server) {
        Some(p) => {
            let new = list_fingerprint(&p.tools);
            let action = action(old.as_deref(), &new);
            if action != ApprovalAction::Unchanged {
                replace(table, server, mcp_entry(p, &from.label()));
            }
            Approval { tool: id, action, old, new: Some(new), risk: None }
        }
        None if old.is_some() => {
            table.remove(server);
            Approval { tool: id, action: ApprovalAction::Removed, old, new: None, risk: None }
        }
        None => return Err(neither(&format!("pinned MCP server `{server}`"), from, path)),
    })
}

/// One fingerprint for a server's whole list of tools (the canonical JSON of the list).
fn list_fingerprint(tools: &[Value]) -> String {
    crate::canonical::fingerprint_json(&Value::Array(tools.to_vec())).1
}

/// The risk a Tool object declares by its hints: read-only (`readOnlyHint: true`) or
/// write-capable, destructive unless it says otherwise (the specification's defaults). Hints
/// are the server's word; the guard and the gate use them only to let read-only drift pass.
fn mcp_risk(tool: &Value) -> Risk {
    let read_only = mcp_read_only(tool);
    let destructive = tool.get("annotations").and_then(|a| a.get("destructiveHint")) != Some(&Value::Bool(false));
    Risk { write: !read_only, destructive: !read_only && destructive, ..Risk::default() }
}

/// The pinned MCP servers against their approved tools, by the guard's `warn-read-only` rule:
/// a changed or new tool rejects unless it is read-only on both sides (then it is reported).
pub(super) fn judge_pins(baseline: &Baseline, agent: &AgentContracts, gate: &mut Findings) {
    let name = |t: &Value| t.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    for pin in &agent.pins {
        let approved = baseline.mcp.get(&pin.server).map(Vec::as_slice).unwrap_or_default();
        for tool in &pin.tools {
            let n = name(tool);
            let before = approved.iter().find(|a| name(a) == n);
            let fingerprint = crate::canonical::fingerprint_json(tool).1;
            let (status, changes, risk, read_only) = match before {
                Some(a) => {
                    let changes = tool_drift(a, tool);
                    if changes.is_empty() {
                        continue;
                    }
                    (
                        DriftStatus::Changed,
                        changes,
                        mcp_risk(a).union(mcp_risk(tool)),
                        mcp_read_only(a) && mcp_read_only(tool),
                    )
                }
                None => {
                    let added = list_drift(&[], std::slice::from_ref(tool));
                    (DriftStatus::New, added, mcp_risk(tool), mcp_read_only(tool))
                }
            };
            let new = if status == DriftStatus::New { "new, " } else { "" };
            let drift = Drift {
                tool: format!("{MCP_PREFIX}{}/{n}", pin.server),
                status,
                risk,
                reason: if read_only { format!("{new}read-only") } else { format!("{new}{risk}") },
                approved: before.map(|a| crate::canonical::fingerprint_json(a).1),
                fingerprint,
                changes,
                file: Some(pin.file.clone()),
            };
            if read_only { gate.warnings.push(drift) } else { gate.drift.push(drift) }
        }
        let gone = approved.iter().map(name).filter(|n| !pin.tools.iter().any(|t| &name(t) == n));
        gate.missing.extend(gone.map(|n| format!("{MCP_PREFIX}{}/{n}", pin.server)));
    }
    let servers = baseline.mcp.keys().filter(|s| !agent.pins.iter().any(|p| &p.server == *s));
    gate.missing.extend(servers.map(|s| format!("{MCP_PREFIX}{s}")));
}
