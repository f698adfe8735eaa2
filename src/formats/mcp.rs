//! An MCP `tools/list` result: `{"tools": [{name, description, inputSchema, annotations}]}`.
//! MCP tool names allow `.`, so ids are kept as they are.

use serde_json::{Value, json};

use super::{ExportTool, Note};

pub fn export(tools: &[ExportTool]) -> (Value, Vec<Note>) {
    let mut notes = Vec::new();
    let list: Vec<Value> = tools
        .iter()
        .map(|t| {
            super::note_unexpressed(t, "an MCP tool", &mut notes);
            let mut entry =
                json!({"name": t.tool.id, "description": t.tool.description, "inputSchema": t.input_schema});
            if t.tool.requires_confirmation {
                entry["annotations"] = json!({"destructiveHint": true});
            }
            if t.tool.observability.as_ref().is_some_and(|o| !o.tags.is_empty()) {
                notes.push(Note::dropped(Some(&t.tool.id), "observability tags have no MCP annotation"));
            }
            entry
        })
        .collect();
    (json!({"tools": list}), notes)
}
