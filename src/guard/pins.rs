//! Where the guard finds a server's signed tool definitions in a bundle and how it reads them:
//! the pin format of `crate::formats::mcp_pin` (`pins/<server>.mcp.json`, every Tool object
//! exactly as served when it was pinned), held to the server the guard was asked for.

use serde_json::Value;

use crate::formats::mcp_pin;

/// The agent file the pins of `server` are kept in.
pub fn file_for(server: &str) -> String {
    mcp_pin::file_for(server)
}

/// The Tool objects of the pin file of `server`: a pin of another server is refused.
pub fn tools(server: &str, bytes: &[u8]) -> Result<Vec<Value>, String> {
    let pin = mcp_pin::parse(bytes).map_err(|e| e.to_string())?;
    if pin.server != server {
        return Err(format!("it pins server `{}`, not `{server}`", crate::diagnostic::sanitize(&pin.server)));
    }
    Ok(pin.tools)
}
