//! MCP tools (specification 2025-11-25, "Tools" and the schema's `Tool`): `{name, title?,
//! description?, inputSchema, outputSchema?, annotations?, icons?, execution?, _meta?}`, read
//! from a `tools/list` response, its `result`, a bare array, or a live server
//! (`crate::mcp_client`), and written as a `tools/list` result.
//!
//! The mapping keeps what tools.json can hold and reports the rest: `title` becomes the
//! observability tag `mcp.title=<title>` (and comes back on export); `outputSchema` is the
//! result schema; the annotations become `requires_confirmation` by the spec's defaults
//! (`destructiveHint` true unless `readOnlyHint`). On export the annotations are derived from
//! the tool's contract, never defaulted, so no read-only tool looks destructive.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::{ExportTool, Hints, Imported, JsonInput, Note, Reach, any_result, assign_id};
use crate::diagnostic::{Diagnostic, Source};
use crate::json::JsonPath;
use crate::tools::Tool;
use crate::tools::model::Observability;
use crate::tools::schema_refs::meta_errors_of_value;

/// The observability tag prefix the tool's `title` is kept under.
pub const TITLE_TAG: &str = "mcp.title=";

const TOOL_FIELDS: &[&str] = &["name", "title", "description", "inputSchema", "outputSchema", "annotations"];
const HINTS: &[&str] = &["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

/// The hints a tool was sent with (absent ones `None`).
#[derive(Debug, Clone, Default)]
pub struct Annotations {
    pub title: Option<String>,
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

/// One validated MCP tool.
#[derive(Debug, Clone)]
pub struct McpTool {
    /// Where it is in the input (`result.tools[3]`), for notes.
    pub path: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub annotations: Annotations,
}

const HELP: &str =
    "an MCP client would refuse this tool too; fix it by the MCP specification's Tool object, then import again";

/// Validates a tool list. Errors are what breaks the specification's schema (no name, an
/// inputSchema or outputSchema that is not an object schema, a hint that is not a boolean, a
/// name used twice); fields with no tools.json place come back as notes.
pub fn parse(source: &Source) -> Result<(Vec<McpTool>, Vec<Note>), Vec<Diagnostic>> {
    let mut input = JsonInput::parse(source, HELP)?;
    let doc = input.doc.value.clone();
    let mut notes = Vec::new();
    let root = JsonPath::root();
    let (result, result_path) = match doc.get("result") {
        Some(r) if doc.get("jsonrpc").is_some() => (r, root.key("result")),
        _ => (&doc, root.clone()),
    };
    if let Some(error) = doc.get("error").filter(|_| doc.get("jsonrpc").is_some()) {
        input.at(&root.key("error"), format!("this is a JSON-RPC error response, not a tool list: {error}"));
        return Err(input.problems);
    }
    let (items, base) = match result {
        Value::Array(items) => (items, result_path),
        Value::Object(obj) => match obj.get("tools") {
            Some(Value::Array(items)) => {
                for key in obj.keys().filter(|k| *k != "tools") {
                    let p = result_path.key(key);
                    let what = if key == "nextCursor" {
                        "is set: this is one page of the list; the server has more tools (import from the server with --stdio to get them all)"
                    } else {
                        "has no tools.json field"
                    };
                    notes.push(dropped_at(&p, key, what));
                }
                (items, result_path.key("tools"))
            }
            _ => {
                input.at(
                    &result_path,
                    "expected a tools/list result (an object with a `tools` array) or an array of tools",
                );
                return Err(input.problems);
            }
        },
        _ => {
            input
                .at(&result_path, "expected a tools/list result (an object with a `tools` array) or an array of tools");
            return Err(input.problems);
        }
    };
    let mut seen = BTreeSet::new();
    let mut tools = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(t) = tool(&mut input, item, &base.index(i), &mut seen, &mut notes) {
            tools.push(t);
        }
    }
    input.finish(tools).map(|(t, _)| (t, notes))
}

/// The Tool objects of a document [`parse`] accepted, exactly as written (what `--pin` keeps).
pub fn tool_objects(doc: &Value) -> Vec<Value> {
    let result = match doc.get("result") {
        Some(r) if doc.get("jsonrpc").is_some() => r,
        _ => doc,
    };
    match result {
        Value::Array(items) => items.clone(),
        other => other.get("tools").and_then(Value::as_array).cloned().unwrap_or_default(),
    }
}

fn tool(
    input: &mut JsonInput<'_>,
    item: &Value,
    path: &JsonPath,
    seen: &mut BTreeSet<String>,
    notes: &mut Vec<Note>,
) -> Option<McpTool> {
    let Some(obj) = item.as_object() else {
        input.at(path, "a tool must be an object");
        return None;
    };
    let before = input.errors();
    let name = match obj.get("name") {
        Some(Value::String(n)) if !n.is_empty() => {
            if !seen.insert(n.clone()) {
                input.at(&path.key("name"), format!("tool name {n:?} is listed twice"));
            }
            n.clone()
        }
        Some(Value::String(_)) => {
            input.at(&path.key("name"), "name must not be empty");
            String::new()
        }
        Some(_) => {
            input.at(&path.key("name"), "name must be a string");
            String::new()
        }
        None => {
            input.at(path, "name is required");
            String::new()
        }
    };
    for key in obj.keys().filter(|k| !TOOL_FIELDS.contains(&k.as_str())) {
        let what = match key.as_str() {
            "icons" => "(for display) have no tools.json field",
            "execution" => "(task-augmented execution) has no tools.json field",
            "_meta" => "(protocol metadata) has no tools.json field",
            _ => "is not a Tool field the specification defines; it has no tools.json field",
        };
        notes.push(dropped_at(&path.key(key), key, what));
    }
    let title = optional_string(input, obj, path, "title");
    let description = optional_string(input, obj, path, "description");
    let input_schema = match obj.get("inputSchema") {
        Some(v) => object_schema(input, v, &path.key("inputSchema"), "inputSchema"),
        None => {
            input.at(path, "inputSchema is required");
            Value::Null
        }
    };
    let output_schema =
        obj.get("outputSchema").map(|v| object_schema(input, v, &path.key("outputSchema"), "outputSchema"));
    let annotations = match obj.get("annotations") {
        None => Annotations::default(),
        Some(Value::Object(a)) => annotations(input, a, &path.key("annotations"), notes),
        Some(_) => {
            input.at(&path.key("annotations"), "annotations must be an object");
            Annotations::default()
        }
    };
    (input.errors() == before).then(|| McpTool {
        path: path.to_string(),
        name,
        title,
        description,
        input_schema,
        output_schema,
        annotations,
    })
}

fn optional_string(input: &mut JsonInput<'_>, obj: &Map<String, Value>, path: &JsonPath, key: &str) -> Option<String> {
    match obj.get(key) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            input.at(&path.key(key), format!("{key} must be a string"));
            None
        }
    }
}

/// inputSchema and outputSchema: a JSON Schema object whose root is `"type": "object"`.
fn object_schema(input: &mut JsonInput<'_>, v: &Value, path: &JsonPath, what: &str) -> Value {
    if !v.is_object() {
        input.at(path, format!("{what} must be a JSON Schema object"));
        return Value::Null;
    }
    if v.get("type") != Some(&json!("object")) {
        input.at(path, format!("{what} must have \"type\": \"object\" at its root"));
    }
    for (at, message) in meta_errors_of_value(v, path) {
        input.at(&at, format!("{what} must be a valid JSON Schema: {message}"));
    }
    v.clone()
}

fn annotations(
    input: &mut JsonInput<'_>,
    a: &Map<String, Value>,
    path: &JsonPath,
    notes: &mut Vec<Note>,
) -> Annotations {
    let mut out = Annotations::default();
    for (key, value) in a {
        let at = path.key(key);
        if key == "title" {
            match value {
                Value::String(s) => out.title = Some(s.clone()),
                _ => input.at(&at, "annotations.title must be a string"),
            }
            continue;
        }
        if !HINTS.contains(&key.as_str()) {
            notes.push(dropped_at(
                &at,
                key,
                "is not an annotation the specification defines; it has no tools.json field",
            ));
            continue;
        }
        let Some(b) = value.as_bool() else {
            input.at(&at, format!("annotations.{key} must be a boolean"));
            continue;
        };
        let slot = match key.as_str() {
            "readOnlyHint" => &mut out.read_only,
            "destructiveHint" => &mut out.destructive,
            "idempotentHint" => &mut out.idempotent,
            _ => &mut out.open_world,
        };
        *slot = Some(b);
    }
    out
}

/// A field that is not carried over, reported at its JSON path.
/// The message names the field, not where it is (the path does), so that the same field on
/// many tools is shown once with a count.
fn dropped_at(path: &JsonPath, key: &str, what: &str) -> Note {
    Note::dropped(Some(&path.to_string()), format!("`{key}` {what}"))
}

/// Converts validated tools; each is reached by `reach`.
pub fn to_tools(tools: &[McpTool], reach: &Reach) -> Imported {
    let mut out = Imported::default();
    let mut taken = BTreeSet::new();
    for t in tools {
        let id = assign_id(&t.name, &mut taken, &mut out.notes);
        // Display name precedence in the specification: title, annotations.title, name.
        let title = t.title.clone().or_else(|| t.annotations.title.clone());
        if let (Some(a), Some(b)) = (&t.title, &t.annotations.title)
            && a != b
        {
            out.notes.push(Note::dropped(
                Some(&format!("{}.annotations.title", t.path)),
                "annotations.title differs from title; only title is kept",
            ));
        }
        let description = match t.description.as_deref().map(str::trim) {
            Some(d) if !d.is_empty() => t.description.clone().unwrap_or_default(),
            _ => {
                out.notes.push(Note::dropped(
                    Some(&t.path),
                    "no description; tools.json requires one, so the title (or the name) is used",
                ));
                title.clone().unwrap_or_else(|| t.name.clone())
            }
        };
        let result_schema = t.output_schema.clone().unwrap_or_else(any_result);
        let read_only = t.annotations.read_only.unwrap_or(false);
        let tool = Tool {
            id: id.clone(),
            description,
            transport: reach.transport(&id),
            input_schema: t.input_schema.clone(),
            result_schema,
            schema_refs: Default::default(),
            capabilities: reach.capabilities(),
            secrets: Vec::new(),
            budget: None,
            requires_confirmation: !read_only && t.annotations.destructive.unwrap_or(true),
            observability: title.map(|t| Observability { tags: vec![format!("{TITLE_TAG}{t}")] }),
        };
        note_hints(t, &tool, &mut out.notes);
        out.tools.push(tool);
    }
    if tools.iter().any(|t| t.output_schema.is_none()) {
        out.notes.push(Note::dropped(None, "tools without an outputSchema get result_schema {} (any JSON)"));
    }
    out
}

/// Reports each hint the server gave that the imported tool's contract does not imply (an
/// export writes the contract's value instead).
fn note_hints(t: &McpTool, tool: &Tool, notes: &mut Vec<Note>) {
    let derived = Hints::of_tool(tool);
    let given = [
        ("readOnlyHint", t.annotations.read_only, derived.read_only),
        (
            "destructiveHint",
            t.annotations.destructive.filter(|_| !t.annotations.read_only.unwrap_or(false)),
            derived.destructive,
        ),
        ("idempotentHint", t.annotations.idempotent, derived.idempotent),
        ("openWorldHint", t.annotations.open_world, derived.open_world),
    ];
    for (key, value, implied) in given {
        if let Some(v) = value
            && v != implied
        {
            notes.push(Note::dropped(
                Some(&format!("{}.annotations.{key}", t.path)),
                format!(
                    "{key}: {v} does not follow from the tool's transport and capabilities, which give {implied}; tools.json has no field for it (an export writes {implied})"
                ),
            ));
        }
    }
}

/// A `tools/list` result.
pub fn export(tools: &[ExportTool]) -> (Value, Vec<Note>) {
    let mut notes = Vec::new();
    let list: Vec<Value> = tools.iter().map(|t| entry(t, &mut notes)).collect();
    (json!({"tools": list}), notes)
}

fn entry(t: &ExportTool, notes: &mut Vec<Note>) -> Value {
    let id = t.tool.id.as_str();
    super::note_unexpressed(t, "an MCP tool", true, notes);
    let mut entry = Map::new();
    entry.insert("name".into(), id.into());
    let tags: Vec<&String> = t.tool.observability.iter().flat_map(|o| &o.tags).collect();
    if let Some(title) = tags.iter().find_map(|tag| tag.strip_prefix(TITLE_TAG)) {
        entry.insert("title".into(), title.into());
    }
    if tags.iter().any(|tag| !tag.starts_with(TITLE_TAG)) {
        notes.push(Note::dropped(Some(id), "observability tags have no MCP field"));
    }
    entry.insert("description".into(), t.tool.description.as_str().into());
    entry.insert("inputSchema".into(), input_schema(t, notes));
    if let Some(output) = output_schema(t, notes) {
        entry.insert("outputSchema".into(), output);
    }
    let hints = Hints::of(t.risk, &t.tool.transport);
    entry.insert(
        "annotations".into(),
        json!({
            "readOnlyHint": hints.read_only,
            "destructiveHint": hints.destructive,
            "idempotentHint": hints.idempotent,
            "openWorldHint": hints.open_world,
        }),
    );
    Value::Object(entry)
}

/// The input schema as an MCP inputSchema, whose root must be `"type": "object"` (tool
/// arguments are always an object): added when the schema leaves the type open, reported when
/// it says something else (MCP clients may refuse the tool then).
fn input_schema(t: &ExportTool, notes: &mut Vec<Note>) -> Value {
    let mut schema = t.input_schema.clone();
    match schema.get("type") {
        Some(ty) if ty == "object" => {}
        None if schema.is_object() => {
            schema["type"] = json!("object");
            notes.push(Note::dropped(
                Some(&t.tool.id),
                "input_schema leaves the type open; MCP's inputSchema is written with \"type\": \"object\"",
            ));
        }
        _ => notes.push(Note::dropped(
            Some(&t.tool.id),
            "input_schema is not an object schema, which MCP's inputSchema must be; it is written as it is",
        )),
    }
    schema
}

/// The result schema as an MCP outputSchema, which must be object-typed at its root: none for
/// "any JSON" (the tool returns unstructured content), as it is for an object schema, else
/// wrapped as the property `result` (reported: the server must send `{"result": ...}` as its
/// structuredContent).
fn output_schema(t: &ExportTool, notes: &mut Vec<Note>) -> Option<Value> {
    let schema = &t.result_schema;
    if schema == &json!({}) || schema == &json!(true) {
        return None;
    }
    if schema.get("type") == Some(&json!("object")) {
        return Some(schema.clone());
    }
    notes.push(Note::dropped(
        Some(&t.tool.id),
        "result_schema is not an object schema, which MCP's outputSchema must be: it is wrapped as the property `result` (structuredContent is {\"result\": ...})",
    ));
    let mut wrapped = json!({"type": "object", "properties": {"result": schema}, "required": ["result"]});
    // The root keeps the JSON Schema dialect and definitions the wrapped schema refers to.
    for key in ["$schema", "$defs", "definitions"] {
        if let Some(v) = schema.get(key) {
            wrapped[key] = v.clone();
            if let Some(inner) = wrapped["properties"]["result"].as_object_mut() {
                inner.remove(key);
            }
        }
    }
    Some(wrapped)
}
