//! MCP bundles (`.mcpb`, formerly `.dxt`): a ZIP whose `manifest.json` (manifest versions
//! 0.2–0.4 of the mcpb specification, github.com/modelcontextprotocol/mcpb MANIFEST.md) says
//! what the MCP server is and which tools it claims; `mcpb sign` appends a PKCS#7 signature
//! block after the ZIP (`MCPB_SIG_V1`, u32 length, DER, `MCPB_SIG_END`).
//!
//! This module checks a manifest by the specification's own rules (its schemas are strict:
//! an unknown key is an error) and reads the tools it claims: names and descriptions, or full
//! definitions when `_meta.<vendor>.static_responses["tools/list"]` holds a `tools/list`
//! response (as `mcpb pack --update` writes for Windows). Reading the ZIP is
//! [`super::mcpb_archive`].

use serde_json::{Map, Value};

use super::JsonInput;
use crate::diagnostic::{Diagnostic, Source};
use crate::json::JsonPath;

const HELP: &str =
    "mcpb refuses this manifest too (`mcpb validate`); fix it by the mcpb MANIFEST.md, then import again";

/// The manifest versions read here.
pub const VERSIONS: &[&str] = &["0.2", "0.3", "0.4"];

const KEYS_02: &[&str] = &[
    "$schema",
    "dxt_version",
    "manifest_version",
    "name",
    "display_name",
    "version",
    "description",
    "long_description",
    "author",
    "repository",
    "homepage",
    "documentation",
    "support",
    "icon",
    "screenshots",
    "server",
    "tools",
    "tools_generated",
    "prompts",
    "prompts_generated",
    "keywords",
    "license",
    "privacy_policies",
    "compatibility",
    "user_config",
];
/// 0.3 and 0.4 add these.
const KEYS_03: &[&str] = &["icons", "localization", "_meta"];

/// What a manifest claims.
#[derive(Debug, Clone, PartialEq)]
pub struct McpbManifest {
    pub manifest_version: String,
    pub name: String,
    pub display_name: Option<String>,
    pub version: String,
    pub description: String,
    pub author: String,
    /// `python`, `node`, `binary` (and `uv` from 0.4).
    pub server_type: String,
    pub entry_point: String,
    /// `mcp_config.command` and `args`: how a client starts the server.
    pub command: String,
    pub args: Vec<String>,
    /// The tools the manifest lists (name, description).
    pub tools: Vec<(String, Option<String>)>,
    /// `tools_generated`: the server makes more tools at run time than the list says.
    pub tools_generated: bool,
    /// The user_config keys, and which of them are `sensitive`.
    pub user_config: Vec<(String, bool)>,
    /// A static `tools/list` response (the JSON text of its result), when `_meta` has one.
    pub static_tools_list: Option<String>,
}

/// Parses and checks `manifest.json`; every problem at its JSON path with line and column.
pub fn parse(source: &Source) -> Result<McpbManifest, Vec<Diagnostic>> {
    let mut input = JsonInput::parse(source, HELP)?;
    let root = JsonPath::root();
    let Some(doc) = input.doc.value.as_object().cloned() else {
        input.at(&root, "manifest.json must be a JSON object");
        return Err(input.problems);
    };
    let version = manifest_version(&mut input, &doc);
    let allowed: Vec<&str> = match version.as_deref() {
        Some("0.2") => KEYS_02.to_vec(),
        _ => KEYS_02.iter().chain(KEYS_03).copied().collect(),
    };
    for key in doc.keys().filter(|k| !allowed.contains(&k.as_str())) {
        let v = version.as_deref().unwrap_or("?");
        input.at_key(&root.key(key), format!("`{key}` is not a field of manifest version {v}"));
    }
    let name = string(&mut input, &doc, &root, "name", true);
    let display_name = string(&mut input, &doc, &root, "display_name", false);
    let mver = string(&mut input, &doc, &root, "version", true);
    let description = string(&mut input, &doc, &root, "description", true);
    let author = match doc.get("author") {
        Some(Value::Object(a)) => string(&mut input, a, &root.key("author"), "name", true),
        Some(_) => {
            input.at(&root.key("author"), "`author` must be an object with a `name`");
            None
        }
        None => {
            input.at(&root, "`author` is required");
            None
        }
    };
    let server = server(&mut input, &doc, version.as_deref());
    let tools = tools(&mut input, &doc);
    let tools_generated = match doc.get("tools_generated") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            input.at(&root.key("tools_generated"), "`tools_generated` must be true or false");
            false
        }
    };
    let user_config = match doc.get("user_config") {
        None => Vec::new(),
        Some(Value::Object(m)) => {
            m.iter().map(|(k, v)| (k.clone(), v.get("sensitive").and_then(Value::as_bool).unwrap_or(false))).collect()
        }
        Some(_) => {
            input.at(&root.key("user_config"), "`user_config` must be an object of options");
            Vec::new()
        }
    };
    let static_tools_list = static_tools_list(&doc);
    let (server_type, entry_point, command, args) = server.unwrap_or_default();
    input
        .finish(McpbManifest {
            manifest_version: version.unwrap_or_default(),
            name: name.unwrap_or_default(),
            display_name,
            version: mver.unwrap_or_default(),
            description: description.unwrap_or_default(),
            author: author.unwrap_or_default(),
            server_type,
            entry_point,
            command,
            args,
            tools,
            tools_generated,
            user_config,
            static_tools_list,
        })
        .map(|(m, _)| m)
}

/// `manifest_version` (or the deprecated `dxt_version`): one of [`VERSIONS`].
fn manifest_version(input: &mut JsonInput<'_>, doc: &Map<String, Value>) -> Option<String> {
    let root = JsonPath::root();
    let (key, v) = match (doc.get("manifest_version"), doc.get("dxt_version")) {
        (Some(m), Some(d)) if m != d => {
            input.at(&root.key("dxt_version"), "`dxt_version` and `manifest_version` differ");
            ("manifest_version", m)
        }
        (Some(m), _) => ("manifest_version", m),
        (None, Some(d)) => ("dxt_version", d),
        (None, None) => {
            input.at(&root, "either `manifest_version` or `dxt_version` (deprecated) must be given");
            return None;
        }
    };
    match v.as_str() {
        Some(s) if VERSIONS.contains(&s) => Some(s.to_owned()),
        _ => {
            input.at(
                &root.key(key),
                format!("manifest version {v} is not supported here (supported: {})", VERSIONS.join(", ")),
            );
            None
        }
    }
}

fn string(
    input: &mut JsonInput<'_>,
    obj: &Map<String, Value>,
    at: &JsonPath,
    key: &str,
    required: bool,
) -> Option<String> {
    match obj.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            input.at(&at.key(key), format!("`{key}` must be a string"));
            None
        }
        None if required => {
            input.at(at, format!("`{key}` is required"));
            None
        }
        None => None,
    }
}

type Server = (String, String, String, Vec<String>);

fn server(input: &mut JsonInput<'_>, doc: &Map<String, Value>, version: Option<&str>) -> Option<Server> {
    let at = JsonPath::root().key("server");
    let Some(Value::Object(s)) = doc.get("server") else {
        input.at(&JsonPath::root(), "`server` is required: an object with type, entry_point and mcp_config");
        return None;
    };
    let kind = string(input, s, &at, "type", true)?;
    let kinds: &[&str] =
        if version == Some("0.4") { &["python", "node", "binary", "uv"] } else { &["python", "node", "binary"] };
    if !kinds.contains(&kind.as_str()) {
        input.at(&at.key("type"), format!("server type `{kind}` is not one of {}", kinds.join(", ")));
    }
    let entry = string(input, s, &at, "entry_point", true)?;
    let Some(Value::Object(cfg)) = s.get("mcp_config") else {
        input.at(&at, "`mcp_config` is required: an object with `command`");
        return None;
    };
    let command = string(input, cfg, &at.key("mcp_config"), "command", true)?;
    let args = match cfg.get("args") {
        None => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            a.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        Some(_) => {
            input.at(&at.key("mcp_config").key("args"), "`args` must be a list of strings");
            Vec::new()
        }
    };
    Some((kind, entry, command, args))
}

fn tools(input: &mut JsonInput<'_>, doc: &Map<String, Value>) -> Vec<(String, Option<String>)> {
    let at = JsonPath::root().key("tools");
    let items = match doc.get("tools") {
        None => return Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => {
            input.at(&at, "`tools` must be a list of {name, description}");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = at.index(i);
        let Some(obj) = item.as_object() else {
            input.at(&p, "a tool must be an object with `name`");
            continue;
        };
        for key in obj.keys().filter(|k| !["name", "description"].contains(&k.as_str())) {
            input.at_key(&p.key(key), format!("`{key}` is not a field of a manifest tool (name, description)"));
        }
        let name = string(input, obj, &p, "name", true);
        let description = string(input, obj, &p, "description", false);
        if let Some(name) = name {
            out.push((name, description));
        }
    }
    out
}

/// `_meta.<vendor>.static_responses["tools/list"]`, as JSON text, when a vendor block has one.
fn static_tools_list(doc: &Map<String, Value>) -> Option<String> {
    let meta = doc.get("_meta")?.as_object()?;
    meta.values().find_map(|vendor| {
        let list = vendor.get("static_responses")?.get("tools/list")?;
        list.get("tools").is_some().then(|| serde_json::to_string(list).expect("JSON serialises"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(extra: &str) -> String {
        format!(
            r#"{{"manifest_version": "0.3", "name": "w", "version": "1.0.0", "description": "d",
               "author": {{"name": "a"}},
               "server": {{"type": "node", "entry_point": "s.js", "mcp_config": {{"command": "node", "args": ["s.js"]}}}}{extra}}}"#
        )
    }

    #[test]
    fn a_minimal_manifest_reads() {
        let m = parse(&Source::new("manifest.json", manifest(r#", "tools": [{"name": "t"}]"#))).unwrap();
        assert_eq!((m.name.as_str(), m.command.as_str(), m.tools.len()), ("w", "node", 1));
    }

    #[test]
    fn unknown_keys_and_versions_are_errors_with_positions() {
        let e = parse(&Source::new("manifest.json", manifest(r#", "extra": 1"#))).unwrap_err();
        assert!(e[0].message.contains("`extra` is not a field"), "{:?}", e[0]);
        assert_eq!(e[0].line, Some(3));
        let old = manifest("").replace("\"0.3\"", "\"0.1\"");
        assert!(parse(&Source::new("manifest.json", old)).unwrap_err()[0].message.contains("not supported"));
    }

    #[test]
    fn a_static_tools_list_is_found_in_meta() {
        let meta = r#", "_meta": {"com.microsoft.windows": {"static_responses": {"tools/list": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}}}"#;
        let m = parse(&Source::new("manifest.json", manifest(meta))).unwrap();
        assert!(m.static_tools_list.unwrap().contains("inputSchema"));
    }
}
