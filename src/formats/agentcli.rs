//! agentcli's tools.json (seed 001, "Tools Manifest Reference"): `{"tools": [ToolSpec]}` with
//! argv commands under `./tools/bin/`. Validation follows that document and uses its error
//! texts verbatim (`tool[i]: name is required`, ...), so that a user sees what agentcli would say.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::{Imported, JsonInput, Note, any_result, assign_id};
use crate::diagnostic::{Diagnostic, Source};
use crate::json::JsonPath;
use crate::tools::{Tool, Transport};

const FIELDS: &[&str] = &["name", "description", "schema", "command", "timeoutSec", "envPassthrough"];

/// One validated ToolSpec.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
    pub schema: Option<Value>,
    pub command: Vec<String>,
    pub timeout_sec: Option<u64>,
    /// Normalised to upper case, duplicates removed (first kept), as agentcli does.
    pub env_passthrough: Vec<String>,
}

/// What an `invalid_import` problem in an agentcli manifest tells the user to do.
const HELP: &str =
    "agentcli refuses this manifest too; fix it by the agentcli Tools Manifest Reference, then import again";

/// Validates a manifest; every problem is reported, in the document's words, at its JSON path
/// and line:column (a duplicate key is `duplicate_key`, which agentcli's own parser would let
/// through with the last value winning).
pub fn parse(source: &Source) -> Result<Vec<ToolSpec>, Vec<Diagnostic>> {
    let mut input = JsonInput::parse(source, HELP)?;
    let doc = input.doc.value.clone();
    let root_path = JsonPath::root();
    let Some(root) = doc.as_object() else {
        input.at(&root_path, "the manifest must be a JSON object with a `tools` array");
        return Err(input.problems);
    };
    for key in root.keys().filter(|k| *k != "tools") {
        input.at_key(&root_path.key(key), format!("unknown top-level field {key:?}"));
    }
    let tools_path = root_path.key("tools");
    let Some(items) = root.get("tools").and_then(Value::as_array) else {
        input.at(&tools_path, "`tools` must be an array");
        return Err(input.problems);
    };
    let mut seen = BTreeSet::new();
    let mut specs = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = tools_path.index(i);
        let Some(obj) = item.as_object() else {
            input.at(&path, format!("tool[{i}]: must be an object"));
            continue;
        };
        let name = obj.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        if name.is_empty() {
            input.at(&path.key("name"), format!("tool[{i}]: name is required"));
        }
        let at = if name.is_empty() { format!("tool[{i}]") } else { format!("tool[{i}] {name:?}") };
        let before = input.errors();
        if !name.is_empty() && !seen.insert(name.clone()) {
            input.at(&path.key("name"), format!("{at}: duplicate name"));
        }
        for key in obj.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
            input.at_key(&path.key(key), format!("{at}: unknown field {key:?}"));
        }
        let description = match obj.get("description") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                input.at(&path.key("description"), format!("{at}: description must be a string"));
                None
            }
        };
        let schema = match obj.get("schema") {
            None => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => {
                input.at(&path.key("schema"), format!("{at}: schema must be an object"));
                None
            }
        };
        let command_path = path.key("command");
        let command: Vec<String> = match obj.get("command") {
            None => Vec::new(),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
                a.iter().filter_map(Value::as_str).map(str::to_owned).collect()
            }
            Some(_) => {
                input.at(&command_path, format!("{at}: command must be an array of strings"));
                vec![String::new()]
            }
        };
        if command.is_empty() {
            input.at(&command_path, format!("{at}: command must have at least program name"));
        } else if !command[0].is_empty()
            && let Err(e) = check_program(&command[0])
        {
            input.at(&command_path.index(0), format!("{at}: {e}"));
        }
        let timeout_sec = match obj.get("timeoutSec") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) => Some(n),
                None => {
                    input.at(&path.key("timeoutSec"), format!("{at}: timeoutSec must be a non-negative integer"));
                    None
                }
            },
        };
        let mut env_passthrough: Vec<String> = Vec::new();
        let env_path = path.key("envPassthrough");
        match obj.get("envPassthrough") {
            None => {}
            Some(Value::Array(a)) => {
                for (j, v) in a.iter().enumerate() {
                    let Some(raw) = v.as_str() else {
                        input.at(&env_path.index(j), format!("{at}: envPassthrough[{j}]: must be a string"));
                        continue;
                    };
                    let upper = raw.to_ascii_uppercase();
                    if !valid_env_name(&upper) {
                        input.at(
                            &env_path.index(j),
                            format!("{at}: envPassthrough[{j}]: invalid name {raw:?} (must match [A-Z_][A-Z0-9_]*)"),
                        );
                    } else if !env_passthrough.contains(&upper) {
                        env_passthrough.push(upper);
                    }
                }
            }
            Some(_) => input.at(&env_path, format!("{at}: envPassthrough must be an array of strings")),
        }
        if input.errors() == before && !name.is_empty() {
            specs.push(ToolSpec { name, description, schema, command, timeout_sec, env_passthrough });
        }
    }
    input.finish(specs).map(|(specs, _)| specs)
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// command[0]: absolute, or relative under `./tools/bin/` and still there after normalisation.
fn check_program(program: &str) -> Result<(), String> {
    if program.starts_with('/') {
        return Ok(());
    }
    if !program.starts_with("./tools/bin/") {
        return Err("relative command[0] must start with ./tools/bin/".to_owned());
    }
    let cleaned = normalize(program);
    if !cleaned.starts_with("./tools/bin/") {
        return Err(format!("command[0] escapes ./tools/bin after normalization (got {program:?} -> {cleaned:?})"));
    }
    Ok(())
}

/// Lexical normalisation of a `./`-relative path, as Go's `path.Clean` (kept `./` prefixed).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("./{}", parts.join("/"))
}

/// Converts validated specs. Relative commands resolve against `exec_root` (the manifest's
/// folder unless `--exec-root` says otherwise), which must be absolute.
pub fn to_tools(specs: &[ToolSpec], exec_root: &Path) -> Imported {
    let mut out = Imported::default();
    let mut taken = BTreeSet::new();
    for spec in specs {
        let name = spec.name.as_str();
        let id = assign_id(name, &mut taken, &mut out.notes);
        let program = &spec.command[0];
        let command = if program.starts_with('/') {
            program.clone()
        } else {
            let rel = normalize(program);
            let rel = rel.trim_start_matches("./");
            let joined: PathBuf = exec_root.join(rel);
            debug_assert!(joined.components().all(|c| c != Component::ParentDir));
            joined.to_string_lossy().into_owned()
        };
        let description = match spec.description.as_deref().map(str::trim) {
            Some(d) if !d.is_empty() => spec.description.clone().unwrap_or_default(),
            _ => {
                out.notes.push(Note::dropped(
                    Some(name),
                    "no description in agentcli; tools.json requires one, so the tool name is used",
                ));
                name.to_owned()
            }
        };
        let input_schema = spec.schema.clone().unwrap_or_else(|| {
            out.notes.push(Note::dropped(
                Some(name),
                "no schema in agentcli; input_schema is set to {\"type\": \"object\"}",
            ));
            serde_json::json!({"type": "object"})
        });
        if let Some(t) = spec.timeout_sec {
            out.notes.push(Note::dropped(Some(name), format!("timeoutSec {t} has no tools.json field")));
        }
        if !spec.env_passthrough.is_empty() {
            out.notes.push(Note::dropped(
                Some(name),
                format!(
                    "envPassthrough [{}] has no tools.json field (the runtime decides the environment)",
                    spec.env_passthrough.join(", ")
                ),
            ));
        }
        out.tools.push(Tool {
            id,
            description,
            transport: Transport::Exec { command, args: spec.command[1..].to_vec() },
            input_schema,
            result_schema: any_result(),
            schema_refs: Default::default(),
            capabilities: Vec::new(),
            secrets: Vec::new(),
            budget: None,
            requires_confirmation: false,
            observability: None,
        });
    }
    if !specs.is_empty() {
        out.notes.push(Note::dropped(None, "agentcli has no result schemas; every result_schema is {} (any JSON)"));
    }
    out
}
