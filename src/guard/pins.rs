//! Where the guard finds a server's signed tool definitions in a bundle, and how it reads
//! them: `pins/<server>.mcp.json`, `{"server": NAME, "tools": [Tool, ...]}` with every Tool
//! object exactly as the server served it when it was pinned.

use serde_json::Value;

/// The agent file the pins of `server` are kept in.
pub fn file_for(server: &str) -> String {
    format!("pins/{server}.mcp.json")
}

/// The Tool objects of a pin file.
pub fn tools(bytes: &[u8]) -> Result<Vec<Value>, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    match doc.get("tools") {
        Some(Value::Array(tools)) => Ok(tools.clone()),
        _ => Err("it has no `tools` array".to_owned()),
    }
}
