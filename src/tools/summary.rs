//! A tool as `bundle tool list` shows it, read from tools.json as it is: a file with problems
//! is still listed as far as it is JSON, so that the broken tool can be named and removed.

use serde::Serialize;
use serde_json::Value;

/// One entry of tools.json, with whatever fields it has that are of the right type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSummary {
    /// `tools[i].id`, or `tools[i]` when the entry has no string id.
    pub id: String,
    pub description: String,
    /// `exec`, `http`, or what the entry says.
    pub transport: String,
    /// The command, or the method and URL.
    pub target: String,
    /// An exec tool's arguments (tools imported from one MCP server differ only here).
    pub args: Vec<String>,
    pub capabilities: Vec<String>,
    pub secrets: Vec<String>,
    pub requires_confirmation: bool,
}

/// Every entry of a tools.json document's `tools` array, in file order.
pub fn summaries(doc: &Value) -> Vec<ToolSummary> {
    let entries = doc.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    entries.iter().enumerate().map(|(i, t)| summary(i, t)).collect()
}

fn summary(index: usize, tool: &Value) -> ToolSummary {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let list = |v: &Value| v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect());
    let transport = &tool["transport"];
    let target = match transport["kind"].as_str() {
        Some("http") => format!("{} {}", text(&transport["method"]), text(&transport["url"])),
        _ => text(&transport["command"]),
    };
    ToolSummary {
        id: tool["id"].as_str().map_or_else(|| format!("tools[{index}]"), str::to_owned),
        description: text(&tool["description"]),
        transport: text(&transport["kind"]),
        target,
        args: list(&transport["args"]).unwrap_or_default(),
        capabilities: list(&tool["capabilities"]).unwrap_or_default(),
        secrets: list(&tool["secrets"]).unwrap_or_default(),
        requires_confirmation: tool["requires_confirmation"] == true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_entries_are_listed_as_far_as_they_go() {
        let doc = serde_json::json!({"tools": [
            {"id": "a.b", "transport": {"kind": "http", "method": "GET", "url": "https://x"}, "capabilities": ["net:x", 3]},
            {"description": 7},
        ]});
        let s = summaries(&doc);
        assert_eq!((s[0].id.as_str(), s[0].target.as_str()), ("a.b", "GET https://x"));
        assert_eq!(s[0].capabilities, ["net:x"]);
        assert!(s[0].args.is_empty());
        assert_eq!((s[1].id.as_str(), s[1].description.as_str()), ("tools[1]", ""));
        assert!(summaries(&serde_json::json!([])).is_empty());
    }
}
