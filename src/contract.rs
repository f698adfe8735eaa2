//! Tool contracts: everything the model and the runtime rely on when they call a tool, reduced
//! to one document per tool, its RFC 8785 canonical JSON, and the BLAKE3 fingerprint of that.
//!
//! A signature proves who shipped a bundle, not what a release changes. Contracts make the
//! change visible: `bundle inspect` shows fingerprints, `bundle diff` classifies changes
//! (`changes`), and `bundle verify --baseline` fails closed when a risky tool's contract is not
//! the approved one. The risk class is derived here too, so that every command agrees on it.
//! The rules are specified in docs/book/src/reference/format.md, "Tool contracts".

pub mod baseline;
mod changes;
mod mcp_changes;
pub mod release;
mod schema_changes;
mod skill_changes;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::json::{Json, Object};
use crate::policy::Capability;
use crate::tools::{AgentFiles, REF_PREFIX, Resolved, Resolver, Tool, ToolsFile, Transport};

pub use changes::{Change, ChangeKind, Impact, compare, compare_grants, tool_added, tool_removed};
pub use mcp_changes::{list_drift, mcp_read_only, tool_drift};
pub use skill_changes::{compare_client_tools, compare_skills};

/// At most this many nested levels in one inlined schema (serde_json reads stored contracts
/// back with a recursion limit of 128; the contract document adds two levels).
pub use crate::limits::MAX_SCHEMA_DEPTH;
/// At most this many JSON values in the schemas of all of an agent's tools once `schema:`
/// references are inlined: shared references are copied, so a hostile bundle could otherwise
/// blow up exponentially (or multiply a large schema by the number of tools).
pub use crate::limits::MAX_SCHEMA_VALUES;

/// The contract document of one tool (docs/book/src/reference/format.md, "Tool contracts"). Fields
/// that have a default in tools.json are always present here, so that `"args": []` and no `args`
/// give the same fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractDoc {
    pub id: String,
    pub description: String,
    pub transport: ContractTransport,
    /// With every `schema:` reference replaced by the schema it names.
    pub input_schema: Value,
    pub result_schema: Value,
    /// Sorted and without duplicates: the order of capabilities means nothing.
    pub capabilities: Vec<String>,
    /// Sorted: the order of secrets means nothing.
    pub secrets: Vec<String>,
    pub budget: ContractBudget,
    pub requires_confirmation: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum ContractTransport {
    Exec { command: String, args: Vec<String> },
    Http { method: String, url: String, headers: BTreeMap<String, String> },
}

impl ContractTransport {
    /// One line for tables: `exec /usr/bin/x` or `POST https://...`.
    pub fn summary(&self) -> String {
        match self {
            ContractTransport::Exec { command, .. } => format!("exec {command}"),
            ContractTransport::Http { method, url, .. } => format!("{method} {url}"),
        }
    }

    /// `scheme://host[:port]` of an http URL (lowercased); `None` for exec.
    pub fn http_origin(&self) -> Option<String> {
        match self {
            ContractTransport::Http { url, .. } => Some(origin(url)),
            ContractTransport::Exec { .. } => None,
        }
    }
}

/// Budgets as RFC 8785 sees numbers: IEEE 754 doubles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractBudget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
}

/// One tool's contract: the document, its canonical bytes, their fingerprint, its risk.
#[derive(Debug, Clone, PartialEq)]
pub struct Contract {
    pub doc: ContractDoc,
    /// RFC 8785 canonical JSON of `doc`: the bytes that are fingerprinted.
    pub canonical: String,
    /// BLAKE3 of `canonical`, 64 lowercase hex digits (what `b3sum` prints for those bytes).
    pub fingerprint: String,
    pub risk: Risk,
}

pub use crate::canonical::{canonical_fingerprint, fingerprint_json};

impl Contract {
    pub fn from_doc(doc: ContractDoc) -> Result<Contract, ContractError> {
        let (canonical, fingerprint) = canonical_fingerprint(&doc)
            .map_err(|e| ContractError::Canonical { tool: doc.id.clone(), message: e.to_string() })?;
        let risk = Risk::of(&doc);
        Ok(Contract { doc, canonical, fingerprint, risk })
    }

    /// Reads a contract back from its canonical JSON (as a baseline stores it).
    pub fn from_canonical(text: &str) -> Result<Contract, String> {
        let doc: ContractDoc = serde_json::from_str(text).map_err(|e| format!("not a tool contract: {e}"))?;
        let contract = Contract::from_doc(doc).map_err(|e| e.to_string())?;
        if contract.canonical != text {
            return Err("the contract is not in RFC 8785 canonical form".to_owned());
        }
        Ok(contract)
    }

    pub fn id(&self) -> &str {
        &self.doc.id
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ContractError {
    #[error("tool `{tool}`: `schema:{id}` does not resolve")]
    Unresolved { tool: String, id: String },
    #[error(
        "tool `{tool}`: the agent's schemas are too large to fingerprint once `schema:` references are inlined (more than {MAX_SCHEMA_VALUES} values for all tools, or {MAX_SCHEMA_DEPTH} levels)"
    )]
    TooLarge { tool: String },
    #[error("tool `{tool}`: cannot write canonical JSON: {message}")]
    Canonical { tool: String, message: String },
    #[error("pinned MCP tools {file}: {message}")]
    Pin { file: String, message: String },
}

/// The contracts of every tool in tools.json, in file order. `files` holds the agent's other
/// files (its folder, or a bundle's held entries), from which `schema:` references resolve.
pub fn tool_contracts(tools: &ToolsFile, files: &dyn AgentFiles) -> Result<Vec<Contract>, ContractError> {
    let arena = bumpalo::Bump::new();
    let mut resolver = Resolver::new(files, &arena, String::new());
    tools.tools.iter().map(|t| Contract::from_doc(document(t, &mut resolver)?)).collect()
}

/// The contract document of one tool.
pub fn document(tool: &Tool, resolver: &mut Resolver<'_>) -> Result<ContractDoc, ContractError> {
    let arena = bumpalo::Bump::new();
    let members =
        arena.alloc_slice_fill_iter(tool.schema_refs.iter().map(|(k, v)| (k.as_str(), Json::view(v, &arena))));
    let refs = Object::new(&arena, members);
    let mut inliner = Inliner { resolver, refs, tool: &tool.id, stack: Vec::new() };
    let input_schema = inliner.inline(&tool.input_schema, 0)?;
    let result_schema = inliner.inline(&tool.result_schema, 0)?;
    let transport = match &tool.transport {
        Transport::Exec { command, args } => ContractTransport::Exec { command: command.clone(), args: args.clone() },
        Transport::Http { method, url, headers } => {
            ContractTransport::Http { method: method.clone(), url: url.clone(), headers: headers.clone() }
        }
    };
    let capabilities: BTreeSet<&String> = tool.capabilities.iter().collect();
    let secrets: BTreeSet<&String> = tool.secrets.iter().collect();
    let budget = tool
        .budget
        .as_ref()
        .map(|b| ContractBudget { tokens: b.tokens.map(|t| t as f64), usd: b.usd })
        .unwrap_or_default();
    Ok(ContractDoc {
        id: tool.id.clone(),
        description: tool.description.clone(),
        transport,
        input_schema,
        result_schema,
        capabilities: capabilities.into_iter().cloned().collect(),
        secrets: secrets.into_iter().cloned().collect(),
        budget,
        requires_confirmation: tool.requires_confirmation,
    })
}

/// Replaces `"$ref": "schema:<id>"` by the schema it names, recursively. An object that is only
/// the reference becomes the schema; a reference with sibling keywords keeps them and gets the
/// schema as the value of `$ref`. A reference to a schema that is already being inlined (a
/// cycle) stays as written.
struct Inliner<'r, 'a> {
    resolver: &'r mut Resolver<'a>,
    refs: &'r Object<'r>,
    tool: &'r str,
    stack: Vec<String>,
}

impl Inliner<'_, '_> {
    fn inline(&mut self, value: &Value, depth: usize) -> Result<Value, ContractError> {
        // Counted across every tool of the agent (the resolver is one per agent): contracts are
        // all held at once, so a per-tool cap would still multiply by the number of tools.
        self.resolver.inlined += 1;
        if self.resolver.inlined > MAX_SCHEMA_VALUES || depth > MAX_SCHEMA_DEPTH {
            return Err(ContractError::TooLarge { tool: self.tool.to_owned() });
        }
        match value {
            Value::Object(obj) => {
                let reference = obj.get("$ref").and_then(Value::as_str).and_then(|s| s.strip_prefix(REF_PREFIX));
                if let Some(id) = reference
                    && obj.len() == 1
                {
                    // The target takes this object's place, at this depth.
                    return Ok(self.expand(id, depth)?.unwrap_or_else(|| value.clone()));
                }
                let mut out = Map::new();
                for (k, v) in obj {
                    let inlined = match reference {
                        Some(id) if k == "$ref" => self.expand(id, depth + 1)?.unwrap_or_else(|| v.clone()),
                        _ => self.inline(v, depth + 1)?,
                    };
                    out.insert(k.clone(), inlined);
                }
                Ok(Value::Object(out))
            }
            Value::Array(items) => {
                items.iter().map(|v| self.inline(v, depth + 1)).collect::<Result<_, _>>().map(Value::Array)
            }
            other => Ok(other.clone()),
        }
    }

    /// The inlined schema `id` names, or `None` on a cycle.
    fn expand(&mut self, id: &str, depth: usize) -> Result<Option<Value>, ContractError> {
        if self.stack.iter().any(|s| s == id) {
            return Ok(None);
        }
        let schema = match self.resolver.resolve(id, Some(self.refs), &mut Vec::new()) {
            Resolved::Schema(v) => v.to_value(),
            Resolved::Missing(_) | Resolved::Broken => {
                return Err(ContractError::Unresolved { tool: self.tool.to_owned(), id: id.to_owned() });
            }
        };
        self.stack.push(id.to_owned());
        let inlined = self.inline(&schema, depth);
        self.stack.pop();
        inlined.map(Some)
    }
}

/// `scheme://authority` of a URL, lowercased, without user info.
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{}://{}", scheme.to_ascii_lowercase(), host.to_ascii_lowercase())
}

/// What a tool may do, derived from its contract. A tool can carry several flags; one without
/// any is read-only. docs/book/src/reference/format.md ("Risk class") gives the rules and their
/// reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Risk {
    /// exec transport, an http method other than GET/HEAD, or a capability of a family other
    /// than `net`.
    pub write: bool,
    /// A `net:` capability.
    pub network: bool,
    /// At least one secret.
    pub secrets: bool,
    /// http DELETE, or `requires_confirmation`.
    pub destructive: bool,
}

/// The http methods that only read (RFC 9110 "safe" methods a tool has reason to use).
pub const READ_METHODS: &[&str] = &["GET", "HEAD"];
/// The capability family that grants network reach.
pub const NETWORK_FAMILY: &str = "net";

impl Risk {
    pub fn of(doc: &ContractDoc) -> Risk {
        let families: Vec<String> =
            doc.capabilities.iter().map(|c| Capability::parse(c).map_or_else(|_| c.clone(), |c| c.family)).collect();
        let (writes, method) = match &doc.transport {
            // A local program can do anything its user can; tools.json cannot say it only reads.
            ContractTransport::Exec { .. } => (true, ""),
            ContractTransport::Http { method, .. } => (!READ_METHODS.contains(&method.as_str()), method.as_str()),
        };
        Risk {
            // A capability of another family grants access the bundle cannot see into (`fs:`
            // does not say read-only), so it counts as write access: fail closed.
            write: writes || families.iter().any(|f| f != NETWORK_FAMILY),
            network: families.iter().any(|f| f == NETWORK_FAMILY),
            secrets: !doc.secrets.is_empty(),
            destructive: method == "DELETE" || doc.requires_confirmation,
        }
    }

    pub fn is_read_only(self) -> bool {
        self == Risk::default()
    }

    /// Both risks' flags.
    pub fn union(self, other: Risk) -> Risk {
        Risk {
            write: self.write || other.write,
            network: self.network || other.network,
            secrets: self.secrets || other.secrets,
            destructive: self.destructive || other.destructive,
        }
    }

    /// The flags set, in a fixed order: some of `write-capable`, `network`, `secret-using`,
    /// `destructive` (none for a read-only tool).
    pub fn flags(self) -> Vec<&'static str> {
        let flags = [
            (self.write, "write-capable"),
            (self.network, "network"),
            (self.secrets, "secret-using"),
            (self.destructive, "destructive"),
        ];
        flags.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect()
    }

    /// The class names: the flags, or `read-only`.
    pub fn names(self) -> Vec<&'static str> {
        let flags = self.flags();
        if flags.is_empty() { vec!["read-only"] } else { flags }
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(", "))
    }
}

impl Serialize for Risk {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.names().serialize(s)
    }
}

impl crate::error::Coded for ContractError {
    fn code(&self) -> crate::error::ErrorCode {
        crate::error::ErrorCode::Usage
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;

    fn tools(value: Value) -> ToolsFile {
        serde_json::from_value(json!({"version": 1, "tools": [value]})).unwrap()
    }

    fn contract_of(tool: Value, files: &HashMap<String, Vec<u8>>) -> Result<Contract, ContractError> {
        tool_contracts(&tools(tool), files).map(|mut v| v.remove(0))
    }

    fn http_tool() -> Value {
        json!({
            "id": "a.b", "description": "d",
            "transport": {"kind": "http", "method": "GET", "url": "https://api.example/x",
                          "headers": {"B": "2", "A": "1"}},
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "result_schema": {"$ref": "schema:r"},
            "schema_refs": {"r": {"type": "array", "items": {"$ref": "schema:r"}}},
            "capabilities": ["net:b.example", "net:a.example", "net:a.example"],
            "secrets": ["s2", "s1"],
        })
    }

    #[test]
    fn fingerprint_ignores_key_order_whitespace_set_order_and_defaults() {
        let files = HashMap::new();
        let a = contract_of(http_tool(), &files).unwrap();
        let text = r#"{ "secrets": ["s1","s2"], "capabilities": ["net:a.example", "net:b.example"],
            "schema_refs": {"r": {"items": {"$ref": "schema:r"}, "type": "array"}},
            "result_schema": {"$ref": "schema:r"},
            "input_schema": {"properties": {"q": {"type": "string"}}, "type": "object"},
            "transport": {"headers": {"A": "1", "B": "2"}, "url": "https://api.example/x", "method": "GET", "kind": "http"},
            "description": "d", "id": "a.b", "requires_confirmation": false, "observability": {"tags": ["x"]} }"#;
        let b = contract_of(serde_json::from_str(text).unwrap(), &files).unwrap();
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(a.canonical, b.canonical);
        assert_eq!(a.fingerprint, blake3::hash(a.canonical.as_bytes()).to_hex().to_string());
        let mut changed = http_tool();
        changed["description"] = json!("e");
        assert_ne!(contract_of(changed, &files).unwrap().fingerprint, a.fingerprint);
    }

    #[test]
    fn refs_are_inlined_recursively_and_cycles_stay_as_written() {
        let mut files = HashMap::new();
        files.insert(
            "schemas/req.json".to_owned(),
            br#"{"type": "object", "properties": {"d": {"$ref": "schema:draft"}}}"#.to_vec(),
        );
        files.insert("schemas/draft.json".to_owned(), br#"{"type": "string"}"#.to_vec());
        let mut tool = http_tool();
        tool["input_schema"] = json!({"$ref": "schema:req"});
        let c = contract_of(tool.clone(), &files).unwrap();
        assert_eq!(c.doc.input_schema, json!({"type": "object", "properties": {"d": {"type": "string"}}}));
        assert_eq!(c.doc.result_schema, json!({"type": "array", "items": {"$ref": "schema:r"}}));
        // The same schema written inline has the same fingerprint.
        tool["input_schema"] = json!({"type": "object", "properties": {"d": {"type": "string"}}});
        assert_eq!(contract_of(tool, &files).unwrap().fingerprint, c.fingerprint);
    }

    #[test]
    fn exponential_or_deep_inlining_is_refused() {
        let mut refs = Map::new();
        for i in 0..40 {
            refs.insert(
                format!("s{i}"),
                json!({"allOf": [{"$ref": format!("schema:s{}", i + 1)}, {"$ref": format!("schema:s{}", i + 1)}]}),
            );
        }
        refs.insert("s40".into(), json!({"type": "string"}));
        let mut tool = http_tool();
        tool["input_schema"] = json!({"$ref": "schema:s0"});
        tool["schema_refs"] = Value::Object(refs);
        assert!(matches!(contract_of(tool.clone(), &HashMap::new()), Err(ContractError::TooLarge { .. })));
        // A long chain of references nests deeper than the limit.
        let mut refs = Map::new();
        for i in 0..MAX_SCHEMA_DEPTH {
            refs.insert(format!("s{i}"), json!({"items": {"$ref": format!("schema:s{}", i + 1)}}));
        }
        refs.insert(format!("s{MAX_SCHEMA_DEPTH}"), json!({"type": "string"}));
        tool["schema_refs"] = Value::Object(refs);
        assert!(matches!(contract_of(tool, &HashMap::new()), Err(ContractError::TooLarge { .. })));
    }

    #[test]
    fn stored_contracts_read_back_only_in_canonical_form() {
        let c = contract_of(http_tool(), &HashMap::new()).unwrap();
        assert_eq!(Contract::from_canonical(&c.canonical).unwrap(), c);
        let pretty = serde_json::to_string_pretty(&c.doc).unwrap();
        assert!(Contract::from_canonical(&pretty).is_err());
    }

    #[test]
    fn risk_classes() {
        let risk = |patch: Value| {
            let mut t = json!({"id": "t", "description": "d",
                "transport": {"kind": "http", "method": "GET", "url": "https://x.example/"},
                "input_schema": true, "result_schema": true});
            for (k, v) in patch.as_object().unwrap() {
                t[k] = v.clone();
            }
            contract_of(t, &HashMap::new()).unwrap().risk.names()
        };
        assert_eq!(risk(json!({})), ["read-only"]);
        assert_eq!(risk(json!({"capabilities": ["net:x.example"]})), ["network"]);
        assert_eq!(risk(json!({"capabilities": ["fs:/data"]})), ["write-capable"]);
        assert_eq!(risk(json!({"secrets": ["k"]})), ["secret-using"]);
        assert_eq!(risk(json!({"requires_confirmation": true})), ["destructive"]);
        assert_eq!(
            risk(json!({"transport": {"kind": "http", "method": "DELETE", "url": "https://x.example/"}})),
            ["write-capable", "destructive"]
        );
        assert_eq!(
            risk(json!({"transport": {"kind": "http", "method": "HEAD", "url": "https://x.example/"}})),
            ["read-only"]
        );
        assert_eq!(
            risk(json!({"transport": {"kind": "http", "method": "OPTIONS", "url": "https://x.example/"}})),
            ["write-capable"]
        );
        assert_eq!(risk(json!({"transport": {"kind": "exec", "command": "/bin/true"}})), ["write-capable"]);
    }

    /// RFC 8785 §3.2.2 and §3.2.3, through the same serializer the fingerprints use.
    #[test]
    fn canonical_json_matches_rfc8785_examples() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        let value: Value = serde_json::from_str(input).unwrap();
        assert_eq!(
            serde_jcs::to_string(&value).unwrap(),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
        let input = r#"{
          "\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
          "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
          "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let value: Value = serde_json::from_str(input).unwrap();
        // Keys sorted by UTF-16 code units; only controls are escaped.
        assert_eq!(
            serde_jcs::to_string(&value).unwrap(),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
             \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
             \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
    }

    #[test]
    fn origins() {
        assert_eq!(origin("HTTPS://Api.Example:8443/v1/{x}?q=1"), "https://api.example:8443");
        assert_eq!(origin("https://u@api.example?x"), "https://api.example");
    }
}
