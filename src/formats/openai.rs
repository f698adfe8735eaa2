//! OpenAI function tools (the mapping in seed 001): `{"type": "function", "function": {name,
//! description, parameters}}`. Function names match `^[a-zA-Z0-9_-]{1,64}$`, so ids with dots
//! are renamed reversibly (`.` → `__`).

use serde_json::{Value, json};

use super::{ExportTool, Note, function_names};

/// The `tools` array for a Chat Completions / Responses request.
pub fn export(tools: &[ExportTool]) -> Result<(Value, Vec<Note>), Vec<String>> {
    let mut notes = Vec::new();
    let mut errors = Vec::new();
    let names = function_names(tools, &mut notes, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut out = Vec::new();
    for (t, name) in tools.iter().zip(names) {
        out.push(json!({
            "type": "function",
            "function": {"name": name, "description": t.tool.description, "parameters": t.input_schema},
        }));
        super::note_unexpressed(t, "OpenAI function tools", &mut notes);
    }
    Ok((Value::Array(out), notes))
}
