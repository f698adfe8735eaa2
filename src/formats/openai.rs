//! OpenAI function tools, as the function-calling guide and the API reference write them:
//! Chat Completions' `{"type": "function", "function": {name, description, parameters,
//! strict}}`, the Responses API's flat `{"type": "function", name, description, parameters,
//! strict}`, and the legacy bare `{name, description, parameters}` (`functions`). A list is a
//! top-level array or the array under `"tools"` (or `"functions"`). Function names match
//! `^[a-zA-Z0-9_-]{1,64}$`; our ids with dots are exported reversibly (`.` → `__`) and the
//! import maps `__` back to `.`, so that export → import gives the same tools.json.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::{ExportTool, Imported, JsonInput, Note, Reach, any_result, assign_id, function_names};
use crate::diagnostic::{Diagnostic, Source};
use crate::json::JsonPath;
use crate::tools::Tool;
use crate::tools::schema_refs::meta_errors_of_value;
use crate::tools::validate::check_tool_id;

/// OpenAI's limit on a function name.
pub const MAX_NAME: usize = 64;

const WRAPPED_FIELDS: &[&str] = &["type", "function"];
const FUNCTION_FIELDS: &[&str] = &["name", "description", "parameters", "strict"];
const FLAT_FIELDS: &[&str] = &["type", "name", "description", "parameters", "strict"];

/// One function definition, validated.
#[derive(Debug, Clone)]
pub struct Function {
    /// Where it is in the input (`tools[2].function`), for notes.
    pub path: String,
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
    pub strict: bool,
}

const HELP: &str =
    "the OpenAI API refuses this function definition too; fix it by the function-calling guide, then import again";

/// Validates a list of function tools. Errors are what the API would refuse (a missing or
/// invalid name, parameters that are not a JSON Schema object, a name used twice); fields
/// with no tools.json place come back as notes.
pub fn parse(source: &Source) -> Result<(Vec<Function>, Vec<Note>), Vec<Diagnostic>> {
    let mut input = JsonInput::parse(source, HELP)?;
    let doc = input.doc.value.clone();
    let mut notes = Vec::new();
    let (items, base) = match &doc {
        Value::Array(items) => (items, JsonPath::root()),
        Value::Object(root) => {
            let key = ["tools", "functions"].into_iter().find(|k| root.contains_key(*k));
            match key.and_then(|k| root.get(k).and_then(Value::as_array).map(|a| (a, k))) {
                Some((items, k)) => {
                    for other in root.keys().filter(|o| *o != k) {
                        notes.push(dropped_at(&JsonPath::root().key(other), other, "is not a function definition"));
                    }
                    (items, JsonPath::root().key(k))
                }
                None => {
                    input.at(
                        &JsonPath::root(),
                        "expected an array of function tools, or an object with a `tools` array",
                    );
                    return Err(input.problems);
                }
            }
        }
        _ => {
            input.at(&JsonPath::root(), "expected an array of function tools, or an object with a `tools` array");
            return Err(input.problems);
        }
    };
    let mut seen = BTreeSet::new();
    let mut functions = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = base.index(i);
        let Some(obj) = item.as_object() else {
            input.at(&path, format!("tools[{i}] must be an object"));
            continue;
        };
        let (fields, at, allowed) = match (obj.get("type"), obj.get("function")) {
            (Some(Value::String(t)), _) if t != "function" => {
                notes.push(Note::dropped(
                    Some(&path.to_string()),
                    format!("a `{t}` tool is built into OpenAI, not a function; it is not imported"),
                ));
                continue;
            }
            (_, Some(Value::Object(f))) => {
                unknown(obj, WRAPPED_FIELDS, &path, &mut notes);
                (f, path.key("function"), FUNCTION_FIELDS)
            }
            (_, Some(_)) => {
                input.at(&path.key("function"), format!("tools[{i}].function must be an object"));
                continue;
            }
            (Some(Value::String(_)), None) => (obj, path.clone(), FLAT_FIELDS),
            (Some(_), None) => {
                input.at(&path.key("type"), format!("tools[{i}].type must be a string"));
                continue;
            }
            (None, None) => (obj, path.clone(), FUNCTION_FIELDS),
        };
        if let Some(f) = function(&mut input, fields, &at, allowed, &mut seen, &mut notes) {
            functions.push(f);
        }
    }
    input.finish(functions).map(|(f, _)| (f, notes))
}

fn function(
    input: &mut JsonInput<'_>,
    obj: &Map<String, Value>,
    path: &JsonPath,
    allowed: &[&str],
    seen: &mut BTreeSet<String>,
    notes: &mut Vec<Note>,
) -> Option<Function> {
    let before = input.errors();
    unknown(obj, allowed, path, notes);
    let name = match obj.get("name") {
        Some(Value::String(n)) if super::valid_function_name(n, MAX_NAME) => {
            if !seen.insert(n.clone()) {
                input.at(&path.key("name"), format!("function name {n:?} is used twice"));
            }
            n.clone()
        }
        Some(Value::String(n)) => {
            input.at(&path.key("name"), format!("function name {n:?} does not match ^[a-zA-Z0-9_-]{{1,{MAX_NAME}}}$"));
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
    let description = match obj.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            input.at(&path.key("description"), "description must be a string");
            None
        }
    };
    let parameters = match obj.get("parameters") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => {
            for (at, message) in meta_errors_of_value(v, &path.key("parameters")) {
                input.at(&at, format!("parameters must be a valid JSON Schema object: {message}"));
            }
            Some(v.clone())
        }
        Some(_) => {
            input.at(&path.key("parameters"), "parameters must be a JSON Schema object");
            None
        }
    };
    let strict = match obj.get("strict") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            input.at(&path.key("strict"), "strict must be a boolean");
            false
        }
    };
    (input.errors() == before).then(|| Function { path: path.to_string(), name, description, parameters, strict })
}

fn unknown(obj: &Map<String, Value>, allowed: &[&str], path: &JsonPath, notes: &mut Vec<Note>) {
    for key in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
        notes.push(dropped_at(&path.key(key), key, "has no tools.json field"));
    }
}

/// A field that is not carried over, reported at its JSON path.
/// The message names the field, not where it is (the path does), so that the same field on
/// many tools is shown once with a count.
fn dropped_at(path: &JsonPath, key: &str, what: &str) -> Note {
    Note::dropped(Some(&path.to_string()), format!("`{key}` {what}"))
}

/// Converts validated functions; each tool is reached by `reach`.
pub fn to_tools(functions: &[Function], reach: &Reach) -> Imported {
    let mut out = Imported::default();
    let mut taken = BTreeSet::new();
    for f in functions {
        let id = id_for(&f.name, &mut taken, &mut out.notes);
        let description = match f.description.as_deref().map(str::trim) {
            Some(d) if !d.is_empty() => f.description.clone().unwrap_or_default(),
            _ => {
                out.notes.push(Note::dropped(
                    Some(&f.path),
                    "no description; tools.json requires one, so the function name is used",
                ));
                f.name.clone()
            }
        };
        let input_schema = f.parameters.clone().unwrap_or_else(|| {
            out.notes.push(Note::dropped(
                Some(&f.path),
                "no parameters (a function without arguments); input_schema is {\"type\": \"object\", \"properties\": {}}",
            ));
            json!({"type": "object", "properties": {}})
        });
        if f.strict {
            out.notes.push(Note::dropped(
                Some(&format!("{}.strict", f.path)),
                "strict: true (Structured Outputs for the arguments) has no tools.json field",
            ));
        }
        out.tools.push(Tool {
            id: id.clone(),
            description,
            transport: reach.transport(&id),
            input_schema,
            result_schema: any_result(),
            schema_refs: Default::default(),
            capabilities: reach.capabilities(),
            secrets: Vec::new(),
            budget: None,
            requires_confirmation: false,
            observability: None,
        });
    }
    if !functions.is_empty() {
        out.notes
            .push(Note::dropped(None, "OpenAI functions have no result schema; every result_schema is {} (any JSON)"));
    }
    out
}

/// The id of a function: `__` is read back as `.` (how `bundle export --to openai` writes a
/// dotted id) when that gives a valid, unused id; otherwise the usual mapping.
fn id_for(name: &str, taken: &mut BTreeSet<String>, notes: &mut Vec<Note>) -> String {
    let dotted = super::id_from_function_name(name);
    if dotted != name && check_tool_id(&dotted).is_ok() && !taken.contains(&dotted) {
        notes
            .push(Note::renamed(name, format!("function `{name}` is imported as id `{dotted}` (`__` stands for `.`)")));
        taken.insert(dotted.clone());
        return dotted;
    }
    assign_id(name, taken, notes)
}

/// The `tools` array for a Chat Completions request (the wrapped form, which the Responses
/// API's flat form maps to one to one).
pub fn export(tools: &[ExportTool]) -> Result<(Value, Vec<Note>), Vec<String>> {
    let mut notes = Vec::new();
    let mut errors = Vec::new();
    let names = function_names(tools, MAX_NAME, &mut notes, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut out = Vec::new();
    for (t, name) in tools.iter().zip(names) {
        out.push(json!({
            "type": "function",
            "function": {"name": name, "description": t.tool.description, "parameters": t.input_schema},
        }));
        super::note_unexpressed(t, "OpenAI function tools", false, &mut notes);
    }
    Ok((Value::Array(out), notes))
}
