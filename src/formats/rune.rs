//! Rune tool descriptors (seed 003, "tools/*.yaml Reference"): one YAML file per tool. Only
//! the `process` runtime has a tools.json equivalent (`exec`); wasm, container, agent, mcp and
//! builtin tools are reported as not representable.

use crate::yaml_depth::too_deep;
use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use super::{Imported, Note, any_result, assign_id};
use crate::diagnostic::{Code, Diagnostic, Source};
use crate::limits::MAX_YAML_DEPTH;
use crate::tools::{Tool, Transport};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Descriptor {
    pub name: String,
    #[serde(default = "default_version")]
    pub version: String,
    #[serde(default)]
    pub runtime: Runtime,
    #[serde(default)]
    pub module: String,
    pub timeout_ms: Option<u64>,
    pub retry_policy: Option<RetryPolicy>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    pub input_schema_ref: Option<String>,
    pub output_schema_ref: Option<String>,
    pub agent_ref: Option<String>,
    /// Part of the format (an agent tool's recursion limit), so accepted; only agent tools use
    /// it, and those are reported as not representable.
    #[expect(dead_code, reason = "parsed so that valid descriptors parse, never converted")]
    pub max_depth: Option<u64>,
    pub mcp_server: Option<String>,
}

fn default_version() -> String {
    "0.1.0".to_owned()
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Wasm,
    #[default]
    Process,
    Container,
    Agent,
    Mcp,
    Builtin,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    #[serde(default = "one")]
    pub max_attempts: u64,
}

fn one() -> u64 {
    1
}

/// What an `invalid_import` problem in a descriptor tells the user to do.
const HELP: &str = "Rune refuses this descriptor too; fix it by the Rune tools/*.yaml Reference, then import again";

/// Parses and checks one descriptor. A YAML or schema error (unknown key, wrong type) carries
/// the line and column serde_yaml_ng reports, and the key path its message starts with; a rule
/// checked after parsing points at its top-level key (serde_yaml_ng keeps no spans for values,
/// so the key's line is found in the text when it is written in block style).
pub fn parse(source: &Source) -> Result<Descriptor, Vec<Diagnostic>> {
    // The YAML parser takes time quadratic in the nesting depth: bound it before parsing.
    if let Some(offset) = too_deep(&source.text, MAX_YAML_DEPTH) {
        return Err(vec![
            Diagnostic::error(
                Code::LimitExceeded,
                &source.name,
                format!("the descriptor nests more than {MAX_YAML_DEPTH} levels deep"),
            )
            .at_span(source, offset..offset)
            .with_help("a tool descriptor needs only a few levels; flatten it"),
        ]);
    }
    let d: Descriptor = serde_yaml_ng::from_str(&source.text).map_err(|e| vec![yaml_error(source, &e)])?;
    let mut errors = Vec::new();
    let mut error = |key: &str, message: String| errors.push(at_key(source, key, message));
    if d.name.trim().is_empty() {
        error("name", "name is required".to_owned());
    }
    if d.runtime == Runtime::Agent && d.agent_ref.as_deref().unwrap_or_default().is_empty() {
        error("agent_ref", "agent_ref is required when runtime: agent".to_owned());
    }
    if d.runtime == Runtime::Mcp && d.mcp_server.as_deref().unwrap_or_default().is_empty() {
        error("mcp_server", "mcp_server is required when runtime: mcp".to_owned());
    }
    if d.runtime == Runtime::Process && d.module.is_empty() {
        error("module", "a process tool needs a module to run".to_owned());
    }
    if d.runtime == Runtime::Process && (d.module.starts_with('/') || d.module.split('/').any(|s| s == "..")) {
        error("module", format!("module {:?} must be relative to the agent folder", d.module));
    }
    if errors.is_empty() { Ok(d) } else { Err(errors) }
}

fn problem(source: &Source, message: String) -> Diagnostic {
    Diagnostic::error(Code::InvalidImport, &source.name, message).with_help(HELP)
}

/// A problem with a top-level key: located at the key's line when the text has it in block
/// style (`key: ...` at the start of a line), else (a missing key, flow style) by path only.
fn at_key(source: &Source, key: &str, message: String) -> Diagnostic {
    let d = problem(source, message).at_path(key);
    match key_offsets(source, key).first() {
        Some(&offset) => d.at_span(source, offset..offset + key.len()),
        None => d,
    }
}

/// Where a top-level key is written in block style: each line that starts with `key:`.
fn key_offsets(source: &Source, key: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut offset = 0;
    for line in source.text.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix(key)
            && rest.trim_start_matches([' ', '\t']).starts_with(':')
        {
            found.push(offset);
        }
        offset += line.len();
    }
    found
}

/// A serde_yaml_ng error: its message without the trailing `at line L column C` (the position
/// goes to line and column instead), and the key path the message starts with, if any.
fn yaml_error(source: &Source, e: &serde_yaml_ng::Error) -> Diagnostic {
    let text = e.to_string();
    let message = match text.rfind(" at line ") {
        Some(i) if e.location().is_some() => text[..i].to_owned(),
        _ => text,
    };
    let (prefix, rest) = match message.split_once(": ") {
        Some((p, r)) if !p.is_empty() && !p.contains(char::is_whitespace) => (Some(p), r),
        _ => (None, message.as_str()),
    };
    let field = ["unknown field `", "duplicate field `", "missing field `"]
        .iter()
        .find_map(|p| rest.strip_prefix(p))
        .and_then(|r| r.split_once('`'))
        .map(|(field, _)| field);
    let path = match (prefix, field) {
        (Some(p), Some(f)) => Some(format!("{p}.{f}")),
        (Some(p), None) => Some(p.to_owned()),
        (None, Some(f)) => Some(f.to_owned()),
        (None, None) => None,
    };
    let mut d = problem(source, format!("not a valid tool descriptor: {rest}"));
    if let Some(p) = &path {
        d = d.at_path(p);
    }
    // serde reports a repeated key at the start of its mapping; point at the second one when
    // it is a top-level key written in block style, and use the code JSON inputs get.
    if rest.starts_with("duplicate field `") {
        d.code = Code::DuplicateKey;
        d.help = Some("remove one of the two entries".to_owned());
        if let (None, Some(f)) = (prefix, field)
            && let Some(&offset) = key_offsets(source, f).get(1)
        {
            return d.at_span(source, offset..offset + f.len());
        }
    }
    match e.location() {
        Some(loc) => {
            let offset = source.offset_of(loc.line(), loc.column());
            d.at_span(source, offset..offset)
        }
        None => d,
    }
}

/// Converts descriptors of the agent at `agent_dir` (absolute). `schema` loads an
/// `*_schema_ref` (a file relative to the agent folder) when it can.
pub fn to_tools(
    descriptors: &[Descriptor],
    agent_dir: &Path,
    schema: &dyn Fn(&str) -> Option<serde_json::Value>,
) -> Imported {
    let mut out = Imported::default();
    let mut taken = BTreeSet::new();
    for d in descriptors {
        let name = d.name.as_str();
        if d.runtime != Runtime::Process || name.starts_with("rune@") {
            let runtime = format!("{:?}", d.runtime).to_lowercase();
            out.notes.push(Note::dropped(
                Some(name),
                format!("runtime `{runtime}` has no tools.json transport (only `process` maps to `exec`); the tool is not imported"),
            ));
            continue;
        }
        let id = assign_id(name, &mut taken, &mut out.notes);
        let mut load = |field: &str, r: &Option<String>| match r {
            None => None,
            Some(r) => {
                let v = schema(r);
                if v.is_none() {
                    out.notes.push(Note::dropped(
                        Some(name),
                        format!("{field} {r:?} is not a JSON schema file in the agent folder"),
                    ));
                }
                v
            }
        };
        let input_schema =
            load("input_schema_ref", &d.input_schema_ref).unwrap_or_else(|| serde_json::json!({"type": "object"}));
        let result_schema = load("output_schema_ref", &d.output_schema_ref).unwrap_or_else(any_result);
        if d.input_schema_ref.is_none() {
            out.notes.push(Note::dropped(Some(name), "no input_schema_ref; input_schema is {\"type\": \"object\"}"));
        }
        let mut dropped = vec![format!("version {}", d.version)];
        if let Some(t) = d.timeout_ms {
            dropped.push(format!("timeout_ms {t}"));
        }
        if let Some(r) = &d.retry_policy {
            dropped.push(format!("retry_policy.max_attempts {}", r.max_attempts));
        }
        if !d.capabilities.is_empty() {
            dropped.push(format!("capabilities [{}] (not `family:scope` grants)", d.capabilities.join(", ")));
        }
        out.notes.push(Note::dropped(Some(name), format!("no tools.json field for: {}", dropped.join("; "))));
        out.tools.push(Tool {
            id,
            description: format!("{name} (imported from Rune; the descriptor has no description)"),
            transport: Transport::Exec {
                command: agent_dir.join(&d.module).to_string_lossy().into_owned(),
                args: Vec::new(),
            },
            input_schema,
            result_schema,
            schema_refs: Default::default(),
            capabilities: Vec::new(),
            secrets: Vec::new(),
            budget: None,
            requires_confirmation: false,
            observability: None,
        });
        out.notes.push(Note::dropped(Some(name), "Rune descriptors have no description; a placeholder is written"));
    }
    out
}
