//! RAP toolsets (seed 002, "Toolsets"): `{name, description?, endpoint, tools: [{name,
//! description, inputSchema, annotations?, displayScript?}], needsMigration?}`. Every MUST of
//! the document is enforced; a toolset with any problem imports nothing (no partial loading).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::{ExportTool, Hints, Imported, JsonInput, Note, any_result, assign_id, function_names};
use crate::diagnostic::{Diagnostic, Source};
use crate::json::{JsonDoc, JsonPath};
use crate::tools::model::Observability;
use crate::tools::schema_refs::meta_errors_of_value;
use crate::tools::validate::check_url;
use crate::tools::{Tool, Transport};

/// The path runtimes append to a tool server's base URL.
pub const WELL_KNOWN: &str = "/.well-known/rap-toolset";

/// RAP tool names: at most 128 characters of `[A-Za-z0-9_-]`.
const MAX_NAME: usize = 128;

const TOOLSET_FIELDS: &[&str] = &["name", "description", "endpoint", "tools", "needsMigration"];
const TOOL_FIELDS: &[&str] = &["name", "description", "inputSchema", "annotations", "displayScript"];

#[derive(Debug, Clone)]
pub struct Toolset {
    pub name: String,
    pub description: Option<String>,
    pub endpoint: String,
    pub tools: Vec<RapTool>,
    pub needs_migration: bool,
}

#[derive(Debug, Clone)]
pub struct RapTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub annotations: Map<String, Value>,
    pub display_script: Option<String>,
}

/// What an `invalid_import` problem in a toolset tells the user to do.
const HELP: &str =
    "a runtime refuses this toolset too (no partial loading); fix it by the RAP Toolsets document, then import again";

/// Validates one toolset document; every problem is reported at its JSON path and line:column
/// (a duplicate key is `duplicate_key`).
pub fn parse(source: &Source) -> Result<(Toolset, JsonDoc), Vec<Diagnostic>> {
    let mut input = JsonInput::parse(source, HELP)?;
    let doc = input.doc.value.clone();
    let root_path = JsonPath::root();
    let Some(root) = doc.as_object() else {
        input.at(&root_path, "a toolset MUST be a JSON object");
        return Err(input.problems);
    };
    for key in root.keys().filter(|k| !TOOLSET_FIELDS.contains(&k.as_str())) {
        input.at_key(&root_path.key(key), format!("unknown toolset field {key:?}"));
    }
    let name_path = root_path.key("name");
    let name = match root.get("name") {
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= 128 => s.clone(),
        Some(Value::String(_)) => {
            input.at(&name_path, "toolset name MUST be between 1 and 128 characters");
            String::new()
        }
        Some(_) => {
            input.at(&name_path, "toolset name MUST be a string");
            String::new()
        }
        None => {
            input.at(&name_path, "toolset name MUST be present and non-empty");
            String::new()
        }
    };
    let description = match root.get("description") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            input.at(&root_path.key("description"), "toolset description must be a string");
            None
        }
    };
    let endpoint_path = root_path.key("endpoint");
    let endpoint = match root.get("endpoint") {
        Some(Value::String(s)) => {
            if let Err(e) = check_url(s) {
                input.at(&endpoint_path, format!("endpoint MUST be a valid URL: {e}"));
            } else if s.contains('{') {
                input.at(&endpoint_path, format!("endpoint MUST be a valid URL: {s:?} has a `{{` template"));
            }
            s.clone()
        }
        Some(_) => {
            input.at(&endpoint_path, "endpoint MUST be a string (a valid URL)");
            String::new()
        }
        None => {
            input.at(&endpoint_path, "endpoint is required");
            String::new()
        }
    };
    let needs_migration = match root.get("needsMigration") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            input.at(&root_path.key("needsMigration"), "needsMigration must be a boolean");
            false
        }
    };
    let mut tools = Vec::new();
    let tools_path = root_path.key("tools");
    match root.get("tools") {
        Some(Value::Array(items)) if items.is_empty() => input.at(&tools_path, "tools MUST contain at least one tool"),
        Some(Value::Array(items)) => {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                if let Some(t) = parse_tool(&mut input, &tools_path.index(i), i, item, &mut seen) {
                    tools.push(t);
                }
            }
        }
        Some(_) => input.at(&tools_path, "tools MUST be an array"),
        None => input.at(&tools_path, "tools is required"),
    }
    input.finish(Toolset { name, description, endpoint, tools, needs_migration })
}

/// Validates a toolset's text and lists its problems as `path: message` lines (for `bundle
/// check --refresh`, which compares toolsets rather than reporting on them).
pub fn parse_text(name: &str, text: &str) -> Result<Toolset, Vec<String>> {
    parse(&Source::new(name, text)).map(|(ts, _)| ts).map_err(|problems| {
        problems.iter().map(|d| format!("{}: {}", d.path.as_deref().unwrap_or("$"), d.message)).collect()
    })
}

fn parse_tool(
    input: &mut JsonInput<'_>,
    path: &JsonPath,
    i: usize,
    item: &Value,
    seen: &mut BTreeSet<String>,
) -> Option<RapTool> {
    let Some(obj) = item.as_object() else {
        input.at(path, format!("tools[{i}]: MUST be an object"));
        return None;
    };
    let before = input.errors();
    let name = obj.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let at = if name.is_empty() { format!("tools[{i}]") } else { format!("tools[{i}] {name:?}") };
    let name_path = path.key("name");
    match obj.get("name") {
        Some(Value::String(n)) => {
            let len = n.chars().count();
            if len == 0 || len > 128 {
                input.at(&name_path, format!("{at}: tool name MUST be between 1 and 128 characters"));
            } else if let Some(c) = n.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
                input.at(
                    &name_path,
                    format!(
                        "{at}: tool name MUST NOT contain spaces or special characters (found {c:?}; use A-Z, a-z, 0-9, _ and -)"
                    ),
                );
            } else if !seen.insert(n.clone()) {
                input.at(&name_path, format!("{at}: tool name MUST be unique within a toolset"));
            }
        }
        Some(_) => input.at(&name_path, format!("{at}: name MUST be a string")),
        None => input.at(&name_path, format!("{at}: name is required")),
    }
    for key in obj.keys().filter(|k| !TOOL_FIELDS.contains(&k.as_str())) {
        input.at_key(&path.key(key), format!("{at}: unknown tool field {key:?}"));
    }
    let description_path = path.key("description");
    let description = match obj.get("description") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => {
            input.at(&description_path, format!("{at}: description MUST be a non-empty string"));
            String::new()
        }
        Some(_) => {
            input.at(&description_path, format!("{at}: description MUST be a string"));
            String::new()
        }
        None => {
            input.at(&description_path, format!("{at}: description is required"));
            String::new()
        }
    };
    let schema_path = path.key("inputSchema");
    let input_schema = match obj.get("inputSchema") {
        Some(v @ Value::Object(_)) => {
            for (at_path, message) in meta_errors_of_value(v, &schema_path) {
                input.at(&at_path, format!("{at}: inputSchema MUST be a valid JSON Schema object: {message}"));
            }
            v.clone()
        }
        Some(_) => {
            input.at(&schema_path, format!("{at}: inputSchema MUST be a JSON Schema object"));
            Value::Null
        }
        None => {
            input.at(&schema_path, format!("{at}: inputSchema is required"));
            Value::Null
        }
    };
    let annotations_path = path.key("annotations");
    let annotations = match obj.get("annotations") {
        None => Map::new(),
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let ok = match k.as_str() {
                    "requiresAuth" => v.is_string(),
                    "readOnly" | "destructive" | "idempotent" | "longRunning" => v.is_boolean(),
                    _ => true,
                };
                if !ok {
                    input.at(&annotations_path.key(k), format!("{at}: annotations.{k} has the wrong type"));
                }
            }
            m.clone()
        }
        Some(_) => {
            input.at(&annotations_path, format!("{at}: annotations must be an object"));
            Map::new()
        }
    };
    let display_script = match obj.get("displayScript") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            input.at(&path.key("displayScript"), format!("{at}: displayScript must be a string"));
            None
        }
    };
    (input.errors() == before).then_some(RapTool { name, description, input_schema, annotations, display_script })
}

/// A tool name two or more toolsets define: every occurrence, as (toolset, tool) indices.
#[derive(Debug, Clone)]
pub struct Clash {
    pub message: String,
    pub at: Vec<(usize, usize)>,
}

/// Converts several toolsets at once. Tool names MUST be unique across them: a name two
/// toolsets share makes neither tool available, and (no partial loading) the import fails.
pub fn to_tools(toolsets: &[Toolset]) -> Result<Imported, Vec<Clash>> {
    let mut owners: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    for (i, ts) in toolsets.iter().enumerate() {
        for (j, t) in ts.tools.iter().enumerate() {
            owners.entry(&t.name).or_default().push((i, j));
        }
    }
    let clashes: Vec<Clash> = owners
        .iter()
        .filter(|(_, o)| o.len() > 1)
        .map(|(n, o)| {
            let names: Vec<&str> = o.iter().map(|&(i, _)| toolsets[i].name.as_str()).collect();
            Clash {
                message: format!(
                    "tool name {n:?} is defined by more than one toolset ({}); neither is loaded",
                    names.join(", ")
                ),
                at: o.clone(),
            }
        })
        .collect();
    if !clashes.is_empty() {
        return Err(clashes);
    }
    let mut out = Imported::default();
    let mut taken = BTreeSet::new();
    for ts in toolsets {
        if let Some(d) = &ts.description {
            out.notes
                .push(Note::dropped(None, format!("toolset {:?} description {d:?} has no tools.json field", ts.name)));
        }
        if ts.needs_migration {
            out.notes
                .push(Note::dropped(None, format!("toolset {:?} needsMigration has no tools.json field", ts.name)));
        }
        for t in &ts.tools {
            let name = t.name.as_str();
            let id = assign_id(name, &mut taken, &mut out.notes);
            let mut tags = Vec::new();
            let mut confirm = false;
            for (k, v) in &t.annotations {
                match (k.as_str(), v) {
                    ("destructive", Value::Bool(b)) => confirm = *b,
                    (_, Value::String(s)) => tags.push(format!("rap.{k}={s}")),
                    (_, Value::Bool(true)) => tags.push(format!("rap.{k}")),
                    (_, Value::Bool(false)) => {}
                    (_, other) => tags.push(format!("rap.{k}={other}")),
                }
            }
            if let Some(s) = &t.display_script {
                out.notes.push(Note::dropped(Some(name), format!("displayScript {s:?} has no tools.json field")));
            }
            out.notes.push(Note::dropped(
                Some(name),
                format!("RAP invocations carry `\"operation\": {name:?}`; a tools.json http transport has no body template, so the runtime must add it"),
            ));
            out.tools.push(Tool {
                id,
                description: t.description.clone(),
                transport: Transport::Http {
                    method: "POST".to_owned(),
                    url: ts.endpoint.clone(),
                    headers: BTreeMap::new(),
                },
                input_schema: t.input_schema.clone(),
                result_schema: any_result(),
                schema_refs: BTreeMap::new(),
                capabilities: Vec::new(),
                secrets: Vec::new(),
                budget: None,
                requires_confirmation: confirm,
                observability: (!tags.is_empty()).then_some(Observability { tags }),
            });
        }
    }
    out.notes.push(Note::dropped(None, "RAP has no result schemas; every result_schema is {} (any JSON)"));
    Ok(out)
}

/// A toolset document. Its endpoint is `endpoint`, or the one URL every tool's http transport
/// shares; exec tools cannot be reached over RAP.
pub fn export(
    tools: &[ExportTool],
    name: &str,
    endpoint: Option<&str>,
) -> Result<(Value, Vec<super::Note>), Vec<String>> {
    let mut notes = Vec::new();
    let mut errors = Vec::new();
    let names = function_names(tools, MAX_NAME, &mut notes, &mut errors);
    let urls: BTreeSet<&str> = tools
        .iter()
        .filter_map(|t| match &t.tool.transport {
            Transport::Http { url, .. } => Some(url.as_str()),
            Transport::Exec { .. } => None,
        })
        .collect();
    let endpoint = match (endpoint, urls.len()) {
        (Some(e), _) => e.to_owned(),
        (None, 1) => urls.first().map(|s| (*s).to_owned()).unwrap_or_default(),
        (None, _) => {
            errors.push(format!(
                "a RAP toolset has one endpoint, and these tools have {} http URLs; give one with --endpoint",
                urls.len()
            ));
            String::new()
        }
    };
    if tools.is_empty() {
        errors.push("a RAP toolset MUST contain at least one tool; this agent has none".to_owned());
    }
    let mut list = Vec::new();
    for (t, fname) in tools.iter().zip(names) {
        let mut entry = json!({"name": fname, "description": t.tool.description, "inputSchema": t.input_schema});
        let mut ann = Map::new();
        if t.tool.requires_confirmation {
            ann.insert("destructive".to_owned(), Value::Bool(true));
        }
        if Hints::of(t.risk, &t.tool.transport).read_only {
            ann.insert("readOnly".to_owned(), Value::Bool(true));
        }
        for tag in t.tool.observability.iter().flat_map(|o| &o.tags) {
            match tag.strip_prefix("rap.").map(|r| r.split_once('=').unwrap_or((r, ""))) {
                Some((k, "")) => ann.insert(k.to_owned(), Value::Bool(true)),
                Some((k, v)) => ann.insert(k.to_owned(), Value::String(v.to_owned())),
                None => ann.insert(format!("x-bundle-tag-{tag}"), Value::Bool(true)),
            };
        }
        if !ann.is_empty() {
            entry["annotations"] = Value::Object(ann);
        }
        if let Transport::Http { url, .. } = &t.tool.transport
            && url != &endpoint
        {
            notes.push(Note::dropped(Some(&t.tool.id), format!("http url {url} is replaced by the toolset endpoint")));
        }
        if let Transport::Exec { .. } = &t.tool.transport {
            notes.push(Note::dropped(
                Some(&t.tool.id),
                format!(
                    "transport `{}` is not reachable over RAP; the toolset endpoint is used",
                    t.tool.transport.summary()
                ),
            ));
        }
        list.push(entry);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((json!({"name": name, "endpoint": endpoint, "tools": list}), notes))
}
