//! MCP pins in an agent folder: keeping what a server listed (`bundle import --from mcp
//! --pin`, as `pins/<server>.mcp.json`, see `formats::mcp_pin`) and `bundle check --refresh`,
//! which starts each pinned stdio server again (or reaches a streamable HTTP one at its URL),
//! lists its tools, and reports per tool what
//! drifted from its pin in `bundle diff`'s words (`contract::list_drift`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::{record, repin_command};
use crate::bundle::verify::Verified;
use crate::contract::Change;
use crate::contract::ContractError;
use crate::contract::release::PinnedServer;
use crate::diagnostic::{Code, Diagnostic};
use crate::error::{Error, Result};
use crate::formats::mcp_pin::{self, McpPin};
use crate::limits;
use crate::manifest::{self, Manifest, McpStart, Pin, PinSource};
use crate::mcp_client::{self, Endpoint, EnvVar, Limits, Server};
use crate::regular_file::{self, Links};

/// How `check --refresh` reaches pinned MCP servers: the environment it passes on to a stdio
/// server (`--env`, never recorded in the manifest), the roots it trusts for an https one
/// (`--ca-cert`), and the bounds of one listing (`--timeout`).
#[derive(Debug, Clone, Default)]
pub struct McpRefresh {
    pub env: Vec<EnvVar>,
    pub ca_certs: Vec<std::path::PathBuf>,
    pub limits: Limits,
}

/// Keeps the tools `server` listed (every Tool object, as served) as `pins/<server>.mcp.json`
/// and records the pin with how the server is started (`None`: listed from a file); returns the
/// file. Pinning a server again replaces its file and pin.
pub fn pin_mcp(agent_dir: &Path, server: &str, start: Option<McpStart>, tools: Vec<Value>) -> Result<String> {
    mcp_pin::check_server_name(server).map_err(|why| Error::Usage(format!("--server: {why}")))?;
    let mut seen = BTreeSet::new();
    if let Some(name) = tools.iter().filter_map(mcp_pin::tool_name).find(|n| !seen.insert(*n)) {
        return Err(Error::Usage(format!(
            "the server lists two tools named {name:?}; a pin must name each tool once, so this server cannot be pinned"
        )));
    }
    if let Some(McpStart::Stdio { command }) = &start
        && let Some(why) = crate::tools::credentials::literal_credential_in_command(command)
    {
        return Err(Error::Usage(format!(
            "the server's command would be recorded in manifest.toml and signed, but {why}; pass secrets with --env NAME (the server reads them from its environment), or pin from a tools/list file with --server NAME"
        )));
    }
    let pin = McpPin { server: server.to_owned(), tools };
    let bytes = mcp_pin::to_bytes(&pin);
    // What check, diff and a bundle's verify read back: refused here rather than there.
    if bytes.len() as u64 > limits::MAX_IMPORT_BYTES {
        return Err(Error::Usage(format!(
            "the server's tools make a pin of {} bytes; a pin holds at most {} bytes, so this server cannot be pinned",
            bytes.len(),
            limits::MAX_IMPORT_BYTES
        )));
    }
    let file = mcp_pin::file_for(server);
    let entry = Pin { source: PinSource::Mcp { server: server.to_owned(), start }, blake3: blake3::hash(&bytes) };
    let mut files = record(agent_dir, vec![(file, entry, bytes)])?;
    Ok(files.remove(0))
}

/// Online: starts every pinned stdio MCP server again, or reaches a streamable HTTP one at its
/// pinned URL, and reports, per tool, how what it lists now differs from the pin (`pin_drift`
/// errors, one per tool, with the change classes). A server that cannot be listed is
/// `mcp_server_failed` (exit 2); a pin that says nothing of how to reach its server is a
/// warning that it was not refreshed.
pub fn refresh_mcp(
    opts: &McpRefresh,
    dir: &Path,
    prefix: &str,
    m: &Manifest,
    manifest_name: &str,
    diags: &mut Vec<Diagnostic>,
) {
    for (file, pin) in &m.pins {
        let PinSource::Mcp { server, start } = &pin.source else { continue };
        let key = manifest::join("pins", file);
        let listed = match start {
            Some(McpStart::Stdio { command }) => {
                let running =
                    Server { program: command[0].clone(), args: command[1..].to_vec(), env: opts.env.clone() };
                mcp_client::list_tools(&running, opts.limits).map_err(|f| f.diagnostic(&running))
            }
            Some(McpStart::Http { url }) => {
                let endpoint = Endpoint { url: url.clone(), ca_certs: opts.ca_certs.clone() };
                mcp_client::list_tools_http(&endpoint, opts.limits).map_err(|f| f.diagnostic_http(url))
            }
            None => {
                diags.push(not_refreshed(manifest_name, &key, format!("{server} was pinned from a tools/list file: nothing says how to start it, so it was not refreshed")));
                continue;
            }
        };
        let listed = match listed {
            Ok(listed) => listed,
            Err(diagnostic) => {
                diags.push(diagnostic.at_path(key));
                continue;
            }
        };
        // The pinned file itself was checked offline (digest, pin document).
        let Ok(bytes) = regular_file::read(&dir.join(file), limits::MAX_IMPORT_BYTES, Links::Refuse) else { continue };
        let Ok(pinned) = mcp_pin::parse(&bytes) else { continue };
        let shown = format!("{prefix}{file}");
        let help = format!(
            "review the change; to accept it: {}, then bundle lock (bundle pack signs the new pin)",
            repin_command(pin, prefix)
        );
        for d in drift(&shown, server, &pinned, &listed.tools) {
            diags.push(d.with_help(help.clone()));
        }
    }
}

fn not_refreshed(manifest_name: &str, key: &str, message: String) -> Diagnostic {
    Diagnostic::warning(Code::PinDrift, manifest_name, message)
        .at_path(key.to_owned())
        .with_help("pin the server from its command or URL to refresh it: bundle import --from mcp --stdio --pin --server NAME -- COMMAND …, or --url URL")
}

/// One `pin_drift` error per tool that drifted, in pinned order then served order: the
/// tool's name, then each change as `kind (impact): what`. A name served twice is an error of
/// its own (a guard refuses such an answer whole).
pub fn drift(file: &str, server: &str, pinned: &McpPin, served: &[Value]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for name in served.iter().filter_map(mcp_pin::tool_name) {
        if !seen.insert(name) {
            out.push(
                Diagnostic::error(Code::PinDrift, file, format!("{server} now lists two tools named {name:?}"))
                    .at_path(format!("tools.{name}")),
            );
        }
    }
    let changes = crate::contract::list_drift(&pinned.tools, served);
    let mut by_tool: BTreeMap<&str, Vec<&Change>> = BTreeMap::new();
    let mut order = Vec::new();
    for c in &changes {
        let tool = c.tool.as_deref().unwrap_or_default();
        if !by_tool.contains_key(tool) {
            order.push(tool);
        }
        by_tool.entry(tool).or_default().push(c);
    }
    for tool in order {
        let list = &by_tool[tool];
        let what: Vec<String> = list.iter().map(|c| format!("{} ({}): {}", c.kind, c.impact, c.message)).collect();
        let verb = match list.first().map(|c| c.kind) {
            Some(crate::contract::ChangeKind::ToolAdded) => "is new (not pinned)",
            Some(crate::contract::ChangeKind::ToolRemoved) => "is no longer listed",
            _ => "drifted from its pin",
        };
        out.push(
            Diagnostic::error(Code::PinDrift, file, format!("{server}: tool `{tool}` {verb}: {}", what.join("; ")))
                .at_path(format!("tools.{tool}")),
        );
    }
    out
}

/// The MCP pins `manifest` lists, each read by `read` (a bundle's held entries, a folder's
/// files) and parsed; a pin that cannot be read or parsed is an error (nothing is judged
/// without it).
pub fn pinned_servers(
    manifest: &Manifest,
    read: impl Fn(&str) -> Option<Vec<u8>>,
) -> Result<Vec<PinnedServer>, ContractError> {
    let mut out = Vec::new();
    for (file, pin) in &manifest.pins {
        let Some(server) = pin.mcp_server() else { continue };
        let err = |message: String| ContractError::Pin { file: file.clone(), message };
        let bytes = read(file).ok_or_else(|| err("the pinned file is not in the release".to_owned()))?;
        if blake3::hash(&bytes) != pin.blake3 {
            return Err(err("the pinned file does not hold the digest manifest.toml pins".to_owned()));
        }
        let parsed = mcp_pin::parse(&bytes).map_err(|e| err(e.to_string()))?;
        if parsed.server != server {
            return Err(err(format!("the pin is of server {:?}, not {server:?}", parsed.server)));
        }
        out.push(PinnedServer { server: server.to_owned(), file: file.clone(), tools: parsed.tools });
    }
    Ok(out)
}

/// The pinned MCP servers of a bundle that has been read (from its held entries).
pub fn pins_of(v: &Verified) -> Result<Vec<PinnedServer>, ContractError> {
    pinned_servers(&v.manifest, |f| v.held.get(f).cloned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MANIFEST: &str = "[bundle]\nformat = 1\n\n[agent]\nname = \"m\"\nversion = \"1.0.0\"\n";

    #[test]
    fn a_pin_too_large_to_read_back_or_with_a_name_twice_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("manifest.toml"), MANIFEST).unwrap();
        let huge = json!({"name": "t", "description": "x".repeat(5 << 20), "inputSchema": {"type": "object"}});
        let err = pin_mcp(dir.path(), "s", None, vec![huge]).unwrap_err();
        assert!(err.to_string().contains("a pin holds at most"), "{err}");
        let twice = vec![json!({"name": "t"}), json!({"name": "t"})];
        assert!(pin_mcp(dir.path(), "s", None, twice).unwrap_err().to_string().contains("two tools named"));
        assert!(pin_mcp(dir.path(), "a b", None, Vec::new()).is_err());
        assert!(!dir.path().join("pins").exists());
        assert_eq!(std::fs::read_to_string(dir.path().join("manifest.toml")).unwrap(), MANIFEST);
        // A sound one is written, with its entry.
        assert_eq!(pin_mcp(dir.path(), "s", None, vec![json!({"name": "t"})]).unwrap(), "pins/s.mcp.json");
        let text = std::fs::read_to_string(dir.path().join("manifest.toml")).unwrap();
        assert!(text.contains("[pins.\"pins/s.mcp.json\"]\nformat = \"mcp\"\nserver = \"s\"\nblake3 = "), "{text}");
    }
}
