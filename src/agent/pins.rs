//! Pinned remote toolsets (the RAP document's "pinned URLs"): `bundle import --from rap URL
//! --pin` keeps the exact bytes the server sent in the agent folder (`pins/<host>.rap.json`)
//! and records the URL and their BLAKE3 digest in manifest.toml `[pins]`. `bundle check` then
//! holds the pinned file to that digest without touching the network, and `bundle check
//! --refresh` fetches every pinned URL again and reports how the served toolset drifted.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::atomic;
use crate::diagnostic::{Code, Diagnostic, Source};
use crate::error::{Error, Result};
use crate::fetch::{Fetched, Fetcher};
use crate::formats::{mcp_pin, rap};
use crate::limits;
use crate::manifest::{self, Manifest, McpStart, Pin, PinSource};
use crate::regular_file::{self, Links};

pub(crate) mod mcp;

pub use mcp::{McpRefresh, pin_mcp};

/// What `bundle check --refresh` reaches pinned definitions with: the http(s) client for RAP
/// URLs, and how MCP servers are started.
#[derive(Debug)]
pub struct Refresh {
    pub fetcher: Fetcher,
    pub mcp: McpRefresh,
}

/// The folder pinned files go in, inside the agent folder.
pub const DIR: &str = "pins";

/// The agent file a pinned URL is kept in: `pins/<host>[_<port>][_<path>].rap.json`, with
/// every character outside `[A-Za-z0-9.-]` written as `_`.
pub fn file_for(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix(rap::WELL_KNOWN).unwrap_or(rest).trim_end_matches('/');
    let mut stem: String =
        rest.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    stem = stem.trim_matches(|c| c == '.' || c == '_').to_owned();
    stem.truncate(96);
    if stem.is_empty() {
        stem.push_str("toolset");
    }
    format!("{DIR}/{stem}.rap.json")
}

/// Keeps each fetched toolset in the agent folder and records it in the agent's
/// manifest.toml; returns the files written. The manifest must exist and parse. Pinning a
/// URL again replaces its file and pin.
pub fn pin(agent_dir: &Path, fetched: &[Fetched]) -> Result<Vec<String>> {
    let mut pins: Vec<(String, Pin, Vec<u8>)> = Vec::new();
    for f in fetched {
        let mut file = file_for(&f.url);
        let mut n = 2;
        while pins.iter().any(|(p, ..)| *p == file) {
            file = format!("{}-{n}.rap.json", file_for(&f.url).trim_end_matches(".rap.json"));
            n += 1;
        }
        let pin = Pin { source: PinSource::Rap { url: f.url.clone() }, blake3: blake3::hash(f.text.as_bytes()) };
        pins.push((file, pin, f.text.clone().into_bytes()));
    }
    record(agent_dir, pins)
}

/// Writes each pinned file into the agent folder and its `[pins]` entry into manifest.toml
/// (which must exist and parse: checked before anything is written); returns the files.
/// Each write is atomic; the pinned files go first, so that the manifest never names a pin
/// whose file was not written.
fn record(agent_dir: &Path, pins: Vec<(String, Pin, Vec<u8>)>) -> Result<Vec<String>> {
    let manifest_path = agent_dir.join(manifest::FILE_NAME);
    let text =
        regular_file::read_to_string(&manifest_path, limits::MAX_MANIFEST_BYTES, Links::Refuse).map_err(|e| {
            Error::Usage(format!(
                "--pin records the pin in {}, which cannot be read ({e}); create the agent with `bundle init` first",
                manifest_path.display()
            ))
        })?;
    let mut diags = Vec::new();
    if manifest::parse(&Source::new(manifest_path.display().to_string(), text.as_str()), &mut diags).is_none()
        || diags.iter().any(Diagnostic::is_error)
    {
        return Err(Error::Usage(format!(
            "{} has problems (run `bundle check`); fix it before pinning",
            manifest_path.display()
        )));
    }
    let entries: Vec<(String, Pin)> = pins.iter().map(|(f, p, _)| (f.clone(), p.clone())).collect();
    // Computed before anything is written: a manifest that cannot take the pins changes nothing.
    let edited = manifest::edit::set_pins(&text, &entries).map_err(|e| Error::Usage(e.to_string()))?;
    for (file, _, bytes) in &pins {
        // Never through a symlinked pins/: nothing is written outside the agent folder.
        atomic::write_inside(agent_dir, file, bytes, true).map_err(|e| Error::io(agent_dir.join(file), e))?;
    }
    if edited != text {
        atomic::write(&manifest_path, edited.as_bytes(), true).map_err(|e| Error::io(&manifest_path, e))?;
    }
    Ok(entries.into_iter().map(|(f, _)| f).collect())
}

/// How to pin `pin` again, for help texts.
pub fn repin_command(pin: &Pin, prefix: &str) -> String {
    match &pin.source {
        PinSource::Rap { url } => format!("bundle import --from rap {url} --pin -o {prefix}tools.json --force"),
        PinSource::Mcp { server, start: Some(McpStart::Stdio { command }) } => format!(
            "bundle import --from mcp --stdio --pin --server {server} -o {prefix}tools.json --force -- {}",
            command.join(" ")
        ),
        PinSource::Mcp { server, start: Some(McpStart::Http { url }) } => {
            format!("bundle import --from mcp --url {url} --pin --server {server} -o {prefix}tools.json --force")
        }
        PinSource::Mcp { server, start: None } => {
            format!("bundle import --from mcp FILE --pin --server {server} -o {prefix}tools.json --force")
        }
    }
}

/// Offline: every pinned file exists and still holds the bytes that were pinned, and an MCP
/// pin is a pin document (`invalid_pin`) of the server its entry names. Returns the MCP pins
/// that are sound (what a skill's `allowed-tools` may name).
pub fn check(
    dir: &Path,
    prefix: &str,
    m: &Manifest,
    manifest_name: &str,
    diags: &mut Vec<Diagnostic>,
) -> Vec<mcp_pin::McpPin> {
    let mut mcp = Vec::new();
    for (file, pin) in &m.pins {
        let key = manifest::join("pins", file);
        let origin = pin.origin();
        let repin = format!("restore {file}, or pin again: {}", repin_command(pin, prefix));
        match regular_file::read(&dir.join(file), limits::MAX_IMPORT_BYTES, Links::Refuse) {
            Ok(bytes) if blake3::hash(&bytes) == pin.blake3 => {
                if let Some(server) = pin.mcp_server() {
                    mcp.extend(check_mcp_pin(&format!("{prefix}{file}"), &bytes, server, diags));
                }
            }
            Ok(_) => diags.push(
                Diagnostic::error(
                    Code::PinMismatch,
                    manifest_name,
                    format!("{prefix}{file} no longer holds the definition pinned from {origin} (its digest differs)"),
                )
                .at_path(format!("{key}.blake3"))
                .with_help(repin),
            ),
            Err(regular_file::ReadError::NotFound) => diags.push(
                Diagnostic::error(
                    Code::PinMismatch,
                    manifest_name,
                    format!("{prefix}{file}, pinned from {origin}, does not exist"),
                )
                .at_path(key)
                .with_help(repin),
            ),
            Err(e) => diags.push(
                Diagnostic::error(Code::IoError, format!("{prefix}{file}"), format!("cannot read {file}: {e}"))
                    .at_path(key),
            ),
        }
    }
    mcp
}

/// A pinned MCP file is a pin document of the server its manifest entry names.
fn check_mcp_pin(file: &str, bytes: &[u8], server: &str, diags: &mut Vec<Diagnostic>) -> Option<mcp_pin::McpPin> {
    match mcp_pin::parse_named(file, bytes) {
        Ok(pin) if pin.server == server => return Some(pin),
        Ok(pin) => diags.push(
            Diagnostic::error(
                Code::InvalidPin,
                file,
                format!("the pin is of server {:?}, but manifest.toml pins it as server {server:?}", pin.server),
            )
            .at_path("server")
            .with_help("pin the server again with the name it should have"),
        ),
        Err(problems) => diags.extend(problems),
    }
    None
}

/// Online: every pin's source again; RAP pins by [`refresh_rap`], MCP pins by
/// [`mcp::refresh_mcp`].
pub fn refresh(
    with: &Refresh,
    dir: &Path,
    prefix: &str,
    m: &Manifest,
    manifest_name: &str,
    diags: &mut Vec<Diagnostic>,
) {
    refresh_rap(&with.fetcher, dir, prefix, m, manifest_name, diags);
    mcp::refresh_mcp(&with.mcp, dir, prefix, m, manifest_name, diags);
}

/// Fetches every pinned URL and reports drift from the pinned file: an error when the
/// definition changed (tools added, removed or changed, or no longer valid RAP), a warning when
/// only the formatting did. A URL that cannot be fetched is an `io_error` (`tls_error` when the
/// server's certificate is not trusted).
fn refresh_rap(
    fetcher: &Fetcher,
    dir: &Path,
    prefix: &str,
    m: &Manifest,
    manifest_name: &str,
    diags: &mut Vec<Diagnostic>,
) {
    for (file, pin) in &m.pins {
        let PinSource::Rap { url } = &pin.source else { continue };
        let key = format!("{}.url", manifest::join("pins", file));
        let served = match fetcher.get(url) {
            Ok(text) => text,
            Err(e) => {
                let d = e.diagnostic(manifest_name, "`bundle check --refresh --ca-cert FILE.pem`");
                diags.push(d.at_path(key));
                continue;
            }
        };
        if blake3::hash(served.as_bytes()) == pin.blake3 {
            continue;
        }
        // The pinned file itself was checked offline; compare with what it holds if readable.
        let pinned =
            regular_file::read_to_string(&dir.join(file), limits::MAX_IMPORT_BYTES, Links::Refuse).unwrap_or_default();
        let help = format!("review the change; to accept it: {}, then bundle lock", repin_command(pin, prefix));
        let d = match drift(&pinned, &served) {
            Drift::Formatting => Diagnostic::warning(
                Code::PinDrift,
                manifest_name,
                format!("{url} now serves the pinned toolset with different formatting (same JSON)"),
            ),
            Drift::Changed(what) => Diagnostic::error(
                Code::PinDrift,
                manifest_name,
                format!("the toolset at {url} changed since it was pinned in {file}: {what}"),
            ),
        };
        diags.push(d.at_path(key).with_help(help));
    }
}

enum Drift {
    Formatting,
    Changed(String),
}

/// What changed between the pinned and the served toolset text.
fn drift(pinned: &str, served: &str) -> Drift {
    let (Ok(old), Ok(new)) = (serde_json::from_str::<Value>(pinned), serde_json::from_str::<Value>(served)) else {
        return Drift::Changed("the server no longer sends JSON".to_owned());
    };
    if old == new {
        return Drift::Formatting;
    }
    let new_set = match rap::parse_text("served", served) {
        Ok(ts) => ts,
        Err(errs) => return Drift::Changed(format!("it is no longer a valid RAP toolset: {}", errs.join("; "))),
    };
    let Ok(old_set) = rap::parse_text("pinned", pinned) else {
        return Drift::Changed("the pinned file is not a valid RAP toolset".to_owned());
    };
    let mut parts = Vec::new();
    for (what, a, b) in [
        ("name", Some(&old_set.name), Some(&new_set.name)),
        ("endpoint", Some(&old_set.endpoint), Some(&new_set.endpoint)),
        ("description", old_set.description.as_ref(), new_set.description.as_ref()),
    ] {
        if a != b {
            parts.push(format!("{what} {} → {}", show(a), show(b)));
        }
    }
    let old_tools: BTreeMap<&str, &rap::RapTool> = old_set.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let new_tools: BTreeMap<&str, &rap::RapTool> = new_set.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let added: Vec<&str> = new_tools.keys().filter(|n| !old_tools.contains_key(*n)).copied().collect();
    let removed: Vec<&str> = old_tools.keys().filter(|n| !new_tools.contains_key(*n)).copied().collect();
    let mut changed = Vec::new();
    for (name, old) in &old_tools {
        let Some(new) = new_tools.get(name) else { continue };
        let mut fields = Vec::new();
        if old.description != new.description {
            fields.push("description");
        }
        if old.input_schema != new.input_schema {
            fields.push("inputSchema");
        }
        if old.annotations != new.annotations {
            fields.push("annotations");
        }
        if old.display_script != new.display_script {
            fields.push("displayScript");
        }
        if !fields.is_empty() {
            changed.push(format!("{name} ({})", fields.join(", ")));
        }
    }
    if !added.is_empty() {
        parts.push(format!("tools added: {}", added.join(", ")));
    }
    if !removed.is_empty() {
        parts.push(format!("tools removed: {}", removed.join(", ")));
    }
    if !changed.is_empty() {
        parts.push(format!("tools changed: {}", changed.join(", ")));
    }
    if parts.is_empty() {
        parts.push("fields outside the tools changed".to_owned());
    }
    Drift::Changed(parts.join("; "))
}

fn show(s: Option<&String>) -> String {
    s.map_or_else(|| "(none)".to_owned(), |s| format!("\"{s}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        assert_eq!(file_for("http://127.0.0.1:8080/.well-known/rap-toolset"), "pins/127.0.0.1_8080.rap.json");
        assert_eq!(file_for("https://tools.example.com/github/"), "pins/tools.example.com_github.rap.json");
        assert_eq!(file_for("https://x/.well-known/rap-toolset"), "pins/x.rap.json");
        assert_eq!(file_for("https://../"), "pins/toolset.rap.json");
        assert!(crate::paths::check(&file_for("https://a/b?c=d&e=../../f")).is_ok());
    }

    fn toolset(tools: &str) -> String {
        format!(r#"{{"name": "gh", "endpoint": "https://api.example.com/rap", "tools": [{tools}]}}"#)
    }

    #[test]
    fn describes_drift() {
        let a = r#"{"name": "a", "description": "A", "inputSchema": {"type": "object"}}"#;
        let a2 = r#"{"name": "a", "description": "A, now deleting", "inputSchema": {"type": "object"}}"#;
        let b = r#"{"name": "b", "description": "B", "inputSchema": {"type": "object"}}"#;
        let pinned = toolset(a);
        assert!(matches!(drift(&pinned, &pinned.replace(", ", ",")), Drift::Formatting));
        let Drift::Changed(what) = drift(&pinned, &toolset(&format!("{a2}, {b}"))) else { panic!() };
        assert_eq!(what, "tools added: b; tools changed: a (description)");
        let Drift::Changed(what) = drift(&pinned, r#"{"name": "gh"}"#) else { panic!() };
        assert!(what.starts_with("it is no longer a valid RAP toolset"), "{what}");
    }
}
