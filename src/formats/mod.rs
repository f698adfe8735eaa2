//! The neighbouring tool-manifest formats `bundle import` reads and `bundle export` writes.
//!
//! Each format lives in its own file: its document model, its own validation rules (with the
//! error texts its specification prints), and the mapping to or from our tools.json model.
//! Nothing here reads the network or prints; `ops::import` and `ops::export` drive them.

pub mod agentcli;
pub mod mcp;
pub mod openai;
pub mod rap;
pub mod rune;

use std::collections::BTreeSet;

use crate::diagnostic::{Code, Diagnostic, Source};
use crate::json::{self, JsonDoc, JsonPath};
use crate::tools::Tool;
use crate::tools::validate::check_tool_id;

/// A JSON input being validated by its own format's rules (agentcli, RAP). It is parsed with
/// the same machinery as tools.json (`crate::json`): a syntax error is `invalid_json` and a
/// key repeated in one object is `duplicate_key`, both with line:column; every other problem is
/// `invalid_import` at its JSON path, with the line and column of that value (or key).
pub struct JsonInput<'a> {
    pub source: &'a Source,
    pub doc: JsonDoc,
    pub problems: Vec<Diagnostic>,
    help: &'static str,
}

impl<'a> JsonInput<'a> {
    /// Parses `source`; `help` is what every `invalid_import` problem tells the user to do.
    pub fn parse(source: &'a Source, help: &'static str) -> Result<Self, Vec<Diagnostic>> {
        let mut problems = Vec::new();
        match json::parse(source, &mut problems) {
            Ok(doc) => Ok(JsonInput { source, doc, problems, help }),
            Err(d) => {
                problems.push(d);
                Err(problems)
            }
        }
    }

    /// A problem with the value at `path` (for a missing key, the object that lacks it).
    pub fn at(&mut self, path: &JsonPath, message: impl Into<String>) {
        let span = self.doc.value_span(path);
        self.push(path, span, message.into());
    }

    /// A problem with the key at `path` (an unknown field).
    pub fn at_key(&mut self, path: &JsonPath, message: impl Into<String>) {
        let span = self.doc.key_span(path);
        self.push(path, span, message.into());
    }

    fn push(&mut self, path: &JsonPath, span: std::ops::Range<usize>, message: String) {
        let d = Diagnostic::error(Code::InvalidImport, &self.source.name, message)
            .at_path(path.to_string())
            .at_span(self.source, span)
            .with_help(self.help);
        self.problems.push(d);
    }

    /// How many errors so far (to tell whether one item added any).
    pub fn errors(&self) -> usize {
        self.problems.iter().filter(|d| d.is_error()).count()
    }

    /// The problems, or `Ok(value)` when there were none.
    pub fn finish<T>(self, value: T) -> Result<(T, JsonDoc), Vec<Diagnostic>> {
        if self.errors() == 0 { Ok((value, self.doc)) } else { Err(self.problems) }
    }
}

/// Something a conversion could not carry over, or changed on the way (a renamed id). Never
/// dropped silently: the CLI shows each one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The tool it concerns (its name in the source format), if any.
    pub tool: Option<String>,
    pub kind: NoteKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    /// A field or a whole tool the target format cannot express.
    NotCarriedOver,
    /// A name was changed to fit the target format's name rules.
    Renamed,
}

impl Note {
    pub fn dropped(tool: Option<&str>, message: impl Into<String>) -> Self {
        Note { tool: tool.map(str::to_owned), kind: NoteKind::NotCarriedOver, message: message.into() }
    }

    pub fn renamed(tool: &str, message: impl Into<String>) -> Self {
        Note { tool: Some(tool.to_owned()), kind: NoteKind::Renamed, message: message.into() }
    }

    /// Turns a note into a warning on the input file.
    pub fn diagnostic(&self, file: &str) -> Diagnostic {
        let code = match self.kind {
            NoteKind::NotCarriedOver => Code::NotCarriedOver,
            NoteKind::Renamed => Code::RenamedTool,
        };
        let d = Diagnostic::warning(code, file, &self.message);
        match &self.tool {
            Some(t) => d.at_path(t.clone()),
            None => d,
        }
    }
}

/// The tools an import produced, with everything it could not carry over.
#[derive(Debug, Default)]
pub struct Imported {
    pub tools: Vec<Tool>,
    pub notes: Vec<Note>,
}

/// The result schema an import gives tools whose format has none: any JSON value.
pub fn any_result() -> serde_json::Value {
    serde_json::json!({})
}

/// Maps a foreign tool name to a valid tools.json id (docs/TOOLS.md): lowercase, characters
/// outside `[a-z0-9_-]` become `_`, a leading non-letter gets a `t_` prefix, at most 64
/// characters, and unique among `taken` (a numeric suffix). Returns `None` when the name is
/// already a valid, unused id.
pub fn to_id(name: &str, taken: &BTreeSet<String>) -> String {
    let mut id: String = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' { c } else { '_' }
        })
        .collect();
    if !id.starts_with(|c: char| c.is_ascii_lowercase()) {
        id = format!("t_{id}");
    }
    id.truncate(64);
    if check_tool_id(&id).is_err() {
        id = "tool".to_owned();
    }
    let base = id.clone();
    let mut n = 2;
    while taken.contains(&id) {
        let suffix = format!("_{n}");
        let mut b = base.clone();
        b.truncate(64 - suffix.len());
        id = format!("{b}{suffix}");
        n += 1;
    }
    id
}

/// Assigns an id to a foreign name, reporting a rename when the name was not already a valid id.
pub fn assign_id(name: &str, taken: &mut BTreeSet<String>, notes: &mut Vec<Note>) -> String {
    let id = if check_tool_id(name).is_ok() && !taken.contains(name) { name.to_owned() } else { to_id(name, taken) };
    if id != name {
        notes.push(Note::renamed(name, format!("tool `{name}` is imported as id `{id}` (tools.json id rules)")));
    }
    taken.insert(id.clone());
    id
}

/// A function name for export formats whose names match `^[a-zA-Z0-9_-]{1,64}$` (OpenAI, RAP):
/// our ids differ only by allowing `.`, which becomes `__`. Reversible as long as the id has no
/// `__` of its own; the caller checks that and reports the mapping.
pub fn function_name(id: &str) -> String {
    id.replace('.', "__")
}

/// A tool ready for export: the tools.json entry with its input schema's `$ref`s inlined.
#[derive(Debug, Clone)]
pub struct ExportTool {
    pub tool: Tool,
    pub input_schema: serde_json::Value,
}

/// Function names for export: the reversible `.` → `__` mapping, each change reported; an id
/// with its own `__` and a `.` could not be mapped back, so it is an error.
pub fn function_names(tools: &[ExportTool], notes: &mut Vec<Note>, errors: &mut Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    tools
        .iter()
        .map(|t| {
            let id = &t.tool.id;
            let name = function_name(id);
            if id.contains('.') && id.contains("__") {
                errors
                    .push(format!("tool `{id}`: has both `.` and `__`, so its function name could not be mapped back"));
            } else if name != *id {
                notes.push(Note::renamed(id, format!("tool `{id}` is exported as `{name}` (`.` becomes `__`)")));
            }
            if !seen.insert(name.clone()) {
                errors.push(format!("tool `{id}`: function name `{name}` is already taken"));
            }
            name
        })
        .collect()
}

/// Reports the parts of a tool that a schema-only export format (OpenAI, MCP) has no place for.
pub fn note_unexpressed(t: &ExportTool, format: &str, notes: &mut Vec<Note>) {
    let id = Some(t.tool.id.as_str());
    notes.push(Note::dropped(id, format!("transport `{}` is not part of {format}", t.tool.transport.summary())));
    if t.tool.result_schema != serde_json::json!({}) && t.tool.result_schema != serde_json::json!(true) {
        notes.push(Note::dropped(id, format!("result_schema has no place in {format}")));
    }
    if !t.tool.capabilities.is_empty() || !t.tool.secrets.is_empty() || t.tool.budget.is_some() {
        notes.push(Note::dropped(id, format!("capabilities, secrets and budget have no place in {format}")));
    }
}
