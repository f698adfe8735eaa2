//! Rune tool descriptors (seed 003, "tools/*.yaml Reference"): one YAML file per tool. Only
//! the `process` runtime has a tools.json equivalent (`exec`); wasm, container, agent, mcp and
//! builtin tools are reported as not representable.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use super::{Imported, Note, any_result, assign_id};
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

/// Parses and checks one descriptor (`file` names it in messages).
pub fn parse(file: &str, text: &str) -> Result<Descriptor, Vec<String>> {
    let d: Descriptor = serde_yaml_ng::from_str(text).map_err(|e| vec![format!("{file}: {e}")])?;
    let mut errors = Vec::new();
    if d.name.trim().is_empty() {
        errors.push(format!("{file}: name is required"));
    }
    if d.runtime == Runtime::Agent && d.agent_ref.as_deref().unwrap_or_default().is_empty() {
        errors.push(format!("{file}: agent_ref is required when runtime: agent"));
    }
    if d.runtime == Runtime::Mcp && d.mcp_server.as_deref().unwrap_or_default().is_empty() {
        errors.push(format!("{file}: mcp_server is required when runtime: mcp"));
    }
    if d.runtime == Runtime::Process && d.module.is_empty() {
        errors.push(format!("{file}: a process tool needs a module to run"));
    }
    if d.runtime == Runtime::Process && (d.module.starts_with('/') || d.module.split('/').any(|s| s == "..")) {
        errors.push(format!("{file}: module {:?} must be relative to the agent folder", d.module));
    }
    if errors.is_empty() { Ok(d) } else { Err(errors) }
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
