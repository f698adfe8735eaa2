//! The pin of an MCP server's tools (`pins/<server>.mcp.json`): every `Tool` object the
//! server listed, exactly as served, so that a release can sign what a server offered when it
//! was approved and `bundle check --refresh`, `bundle diff` and `bundle guard` can hold the
//! server to it.
//!
//! The document is `{"version": 1, "server": NAME, "tools": [Tool, …]}`: the tools of every
//! page of `tools/list`, concatenated in the order served, each with every field it had
//! (`name`, `title`, `description`, `inputSchema`, `outputSchema`, `annotations`, `icons`,
//! `execution`, `_meta` and fields no specification defines yet), its keys in the order served.
//! Nothing is normalised here: a tool is compared with its pin through [`fingerprint`], the
//! BLAKE3 of the RFC 8785 canonical form of the whole Tool object, made by the same function
//! as the tool contracts' fingerprints (`canonical::fingerprint_json`), so key order, spacing
//! and number spelling never count as drift and everything else does.
//!
//! The pin is listed in manifest.toml as `[pins."pins/<server>.mcp.json"]` with `format =
//! "mcp"`, `server`, `command = [...]` (stdio) or `url` (streamable HTTP), neither for a pin
//! made from a `tools/list` file, and `blake3` of the file (`manifest::PinSource::Mcp {
//! server, start: Option<McpStart> }`; `Manifest::mcp_pins(server)` finds a server's pins);
//! `bundle pack` signs it like any file of the agent.
//!
//! Drift between a pinned and a served tool is classified by [`tool_drift`] and [`list_drift`]
//! (re-exported from `contract`), in `bundle diff`'s words.
//!
//! This is a format: no I/O. Parsing is strict like every signed JSON input (bounded values
//! and depth, a repeated key anywhere refused) and refuses two tools of one name, because a
//! judge that looks tools up by name must never have to choose between them.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::diagnostic::{Code, Diagnostic, Source};
use crate::json::{self, JsonPath};

pub use crate::manifest::check_server_name;

/// The pin document version this build reads and writes.
pub const VERSION: u64 = 1;
/// The folder of the agent pins are kept in (as `agent::pins::DIR`).
pub const DIR: &str = "pins";
/// The file name suffix of MCP pins (beside `.rap.json`).
pub const SUFFIX: &str = ".mcp.json";

/// A pinned MCP tool list.
#[derive(Debug, Clone, PartialEq)]
pub struct McpPin {
    /// The server's name in this agent (`--server NAME`, `[pins] server`).
    pub server: String,
    /// Every Tool object served, in order, as served.
    pub tools: Vec<Value>,
}

impl McpPin {
    /// The pinned tool named `name`, if any (names are unique in a pin).
    #[allow(dead_code)] // for `bundle guard`'s judge
    pub fn tool(&self, name: &str) -> Option<&Value> {
        self.tools.iter().find(|t| tool_name(t) == Some(name))
    }
}

/// A pin file that could not be read, with every problem found.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", .problems.iter().map(|d| d.message.as_str()).collect::<Vec<_>>().join("; "))]
pub struct PinError {
    pub problems: Vec<Diagnostic>,
}

const HELP: &str = "pin the server again: bundle import --from mcp --stdio --pin --server NAME -- COMMAND …";

/// A valid server name made from what a server calls itself (`serverInfo.name`): characters
/// outside the name rules become `_`; `server` when nothing is left.
pub fn server_name_from(text: &str) -> String {
    let mut name: String =
        text.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') { c } else { '_' }).collect();
    name = name.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_owned();
    name.truncate(64);
    if check_server_name(&name).is_err() { "server".to_owned() } else { name }
}

/// The agent file the pin of `server` is kept in: `pins/<server>.mcp.json`, with every
/// character outside `[A-Za-z0-9.-]` written as `_` (as the RAP pins' names are).
pub fn file_for(server: &str) -> String {
    let mut stem: String =
        server.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    stem = stem.trim_matches(|c| c == '.' || c == '_').to_owned();
    stem.truncate(96);
    if stem.is_empty() {
        stem.push_str("server");
    }
    format!("{DIR}/{stem}{SUFFIX}")
}

/// The URL of a streamable HTTP server as a pin records it (`[pins] url`, signed and copied
/// with every bundle): without `user:password@`, without a fragment, and without the query
/// parameters that could be secrets (named like a credential, or holding what looks like a
/// token); the rest of the query is kept, as written.
pub fn public_url(url: &str) -> String {
    use crate::tools::credentials::{is_credential_parameter, is_token};
    let url = url.split('#').next().unwrap_or(url);
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => {
            let cut = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(cut);
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => base.to_owned(),
    };
    let kept: Vec<&str> = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            !pair.is_empty() && !is_credential_parameter(key) && !is_token(value)
        })
        .collect();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    out
}

/// The host of an http(s) URL (for a server name when nothing else gives one).
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// A tool's `name`, when it is a string.
pub fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("name").and_then(Value::as_str)
}

/// The fingerprint of one Tool object: BLAKE3 (64 lowercase hex digits) of its RFC 8785
/// canonical JSON, the function the tool contracts use.
pub fn fingerprint(tool: &Value) -> String {
    crate::canonical::fingerprint_json(tool).1
}

/// The pin document: pretty JSON, two-space indented, keys of each tool in the order served,
/// ending in a newline. The same pin always gives the same bytes.
pub fn to_bytes(pin: &McpPin) -> Vec<u8> {
    let mut doc = Map::new();
    doc.insert("version".into(), VERSION.into());
    doc.insert("server".into(), pin.server.clone().into());
    doc.insert("tools".into(), Value::Array(pin.tools.clone()));
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(doc)).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Reads a pin document (see [`parse_named`]); the problems come back as one error.
pub fn parse(bytes: &[u8]) -> Result<McpPin, PinError> {
    parse_named("mcp pin", bytes).map_err(|problems| PinError { problems })
}

/// Reads a pin document named `file` (for diagnostics), reporting every problem: not UTF-8,
/// not JSON (`invalid_json`, `duplicate_key`, `limit_exceeded` beyond the JSON caps or
/// [`crate::limits::MAX_IMPORT_BYTES`]), and `invalid_pin` for a document that is not
/// `{"version": 1, "server", "tools"}`, a tool that is not an object with a string name, or a
/// name used twice.
pub fn parse_named(file: &str, bytes: &[u8]) -> Result<McpPin, Vec<Diagnostic>> {
    if bytes.len() as u64 > crate::limits::MAX_IMPORT_BYTES {
        return Err(vec![
            Diagnostic::error(
                Code::LimitExceeded,
                file,
                format!("a pin holds at most {} bytes", crate::limits::MAX_IMPORT_BYTES),
            )
            .with_help("a server listing this much is not one to pin"),
        ]);
    }
    let text = json::decode_utf8(file, bytes.to_vec()).map_err(|d| vec![d])?;
    let source = Source::new(file, text.as_str());
    let mut problems = Vec::new();
    let doc = json::parse(&source, &mut problems).map_err(|d| {
        let mut all = problems.clone();
        all.push(d);
        all
    })?;
    let root = JsonPath::root();
    let mut bad = |path: &JsonPath, message: String| {
        let span = doc.value_span(path);
        problems.push(
            Diagnostic::error(Code::InvalidPin, file, message)
                .at_path(path.to_string())
                .at_span(&source, span)
                .with_help(HELP),
        );
    };
    let Some(obj) = doc.value.as_object() else {
        bad(&root, "a pin is an object {\"version\": 1, \"server\": …, \"tools\": […]}".to_owned());
        return Err(problems);
    };
    for key in obj.keys().filter(|k| !["version", "server", "tools"].contains(&k.as_str())) {
        bad(&root.key(key), format!("unknown key `{key}` in a pin (it has version, server and tools)"));
    }
    match obj.get("version") {
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v) => bad(&root.key("version"), format!("pin version {v} is not supported; this bundle reads version 1")),
        None => bad(&root, "a pin has no `version`".to_owned()),
    }
    let server = match obj.get("server") {
        Some(Value::String(s)) => {
            if let Err(why) = check_server_name(s) {
                bad(&root.key("server"), why);
            }
            s.clone()
        }
        Some(_) => {
            bad(&root.key("server"), "`server` must be a string".to_owned());
            String::new()
        }
        None => {
            bad(&root, "a pin has no `server`".to_owned());
            String::new()
        }
    };
    let tools = match obj.get("tools") {
        Some(Value::Array(tools)) => tools.clone(),
        Some(_) => {
            bad(&root.key("tools"), "`tools` must be an array of Tool objects".to_owned());
            Vec::new()
        }
        None => {
            bad(&root, "a pin has no `tools`".to_owned());
            Vec::new()
        }
    };
    let mut seen = BTreeSet::new();
    for (i, tool) in tools.iter().enumerate() {
        let at = root.key("tools").index(i);
        match tool.get("name") {
            _ if !tool.is_object() => bad(&at, "a tool must be an object".to_owned()),
            Some(Value::String(n)) if !n.is_empty() => {
                if !seen.insert(n.as_str()) {
                    bad(&at.key("name"), format!("tool name {n:?} is pinned twice"));
                }
            }
            Some(_) => bad(&at.key("name"), "a tool's name must be a non-empty string".to_owned()),
            None => bad(&at, "a tool has no `name`".to_owned()),
        }
    }
    if problems.iter().any(Diagnostic::is_error) {
        return Err(problems);
    }
    Ok(McpPin { server, tools })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pin() -> McpPin {
        McpPin {
            server: "time".into(),
            tools: vec![
                json!({"name": "get_current_time", "description": "Now", "inputSchema": {"type": "object"}, "x-new": [1, 2]}),
                json!({"name": "convert_time", "inputSchema": {"type": "object", "properties": {}}, "annotations": {"readOnlyHint": true}}),
            ],
        }
    }

    #[test]
    fn round_trips_every_field_in_the_served_order() {
        let bytes = to_bytes(&pin());
        assert!(bytes.ends_with(b"]\n}\n"), "{}", String::from_utf8_lossy(&bytes));
        assert_eq!(parse(&bytes).unwrap(), pin());
        assert_eq!(to_bytes(&parse(&bytes).unwrap()), bytes, "deterministic");
        // Keys stay in the order served (not sorted): the file is what the server sent.
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.find("\"name\": \"get_current_time\"").unwrap() < text.find("\"description\": \"Now\"").unwrap());
        assert!(text.find("\"inputSchema\": {\n        \"type\"").unwrap() < text.find("\"x-new\"").unwrap());
    }

    #[test]
    fn refuses_what_a_judge_could_not_look_up_unambiguously() {
        let codes = |text: &str| match parse(text.as_bytes()) {
            Ok(_) => Vec::new(),
            Err(e) => e.problems.iter().map(|d| (d.code, d.path.clone().unwrap_or_default())).collect(),
        };
        let two = r#"{"version": 1, "server": "s", "tools": [{"name": "a"}, {"name": "a"}]}"#;
        assert_eq!(codes(two), [(Code::InvalidPin, "tools[1].name".to_owned())]);
        let dup_key = r#"{"version": 1, "server": "s", "tools": [{"name": "a", "name": "b"}]}"#;
        assert_eq!(codes(dup_key)[0].0, Code::DuplicateKey);
        let nameless = r#"{"version": 1, "server": "s", "tools": [{"title": "a"}, 3, {"name": ""}]}"#;
        assert_eq!(codes(nameless).len(), 3);
        assert_eq!(codes(r#"{"version": 2, "server": "s", "tools": []}"#)[0].1, "version");
        assert_eq!(codes(r#"{"version": 1, "server": "a b", "tools": []}"#)[0].1, "server");
        assert_eq!(codes(r#"{"version": 1, "server": "s", "tools": [], "extra": 1}"#)[0].1, "extra");
        assert_eq!(codes("[]")[0].0, Code::InvalidPin);
        let deep = format!(
            r#"{{"version": 1, "server": "s", "tools": [{{"name": "a", "x": {}1{}}}]}}"#,
            "[".repeat(80),
            "]".repeat(80)
        );
        assert_eq!(codes(&deep)[0].0, Code::LimitExceeded);
        assert!(parse(&vec![b' '; (crate::limits::MAX_IMPORT_BYTES + 1) as usize]).is_err());
    }

    #[test]
    fn fingerprints_the_canonical_form_of_the_whole_tool() {
        let a = json!({"name": "t", "inputSchema": {"type": "object"}, "n": 1.0});
        let b: Value = serde_json::from_str(r#"{ "n": 1, "inputSchema": {"type":"object"}, "name":"t" }"#).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b), "key order, spacing and number spelling do not count");
        let canonical = r#"{"inputSchema":{"type":"object"},"n":1,"name":"t"}"#;
        assert_eq!(fingerprint(&a), blake3::hash(canonical.as_bytes()).to_hex().to_string());
        let c = json!({"name": "t", "inputSchema": {"type": "object"}, "n": 1, "_meta": {}});
        assert_ne!(fingerprint(&a), fingerprint(&c), "every field counts");
    }

    #[test]
    fn a_pinned_url_keeps_no_secret() {
        assert_eq!(public_url("https://mcp.example/mcp"), "https://mcp.example/mcp");
        assert_eq!(public_url("https://user:pw@mcp.example:8443/mcp#x"), "https://mcp.example:8443/mcp");
        assert_eq!(
            public_url("https://mcp.example/mcp?profile=dev&api_key=s3cret&token=t&x=ghp_0123456789abcdef"),
            "https://mcp.example/mcp?profile=dev"
        );
        assert_eq!(public_url("http://127.0.0.1:3001/mcp?key=k"), "http://127.0.0.1:3001/mcp");
        assert_eq!(host_of("https://u:p@mcp.example:8443/mcp?q"), "mcp.example");
        assert_eq!(host_of("http://127.0.0.1/mcp"), "127.0.0.1");
    }

    #[test]
    fn server_names_and_files() {
        assert_eq!(file_for("time"), "pins/time.mcp.json");
        assert_eq!(file_for("a/../b"), "pins/a_.._b.mcp.json");
        assert_eq!(file_for("..."), "pins/server.mcp.json");
        assert!(crate::paths::check(&file_for("x/../../y\u{202e}")).is_ok());
        assert_eq!(server_name_from("mcp-time"), "mcp-time");
        assert_eq!(server_name_from("My Server\n"), "My_Server");
        assert_eq!(server_name_from("???"), "server");
        assert!(check_server_name("time").is_ok());
        assert!(check_server_name("-x").is_err());
        assert!(check_server_name(&"a".repeat(65)).is_err());
    }
}
