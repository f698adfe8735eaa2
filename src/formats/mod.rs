//! The neighbouring tool-manifest formats `bundle import` reads and `bundle export` writes.
//!
//! Each format lives in its own file: its document model, its own validation rules (with the
//! error texts its specification prints), and the mapping to or from our tools.json model.
//! Nothing here reads the network or prints; `ops::import` and `ops::export` drive them.

pub mod agent_card;
pub mod agentcli;
pub mod mcp;
pub mod mcp_pin;
pub mod mcpb;
pub mod mcpb_archive;
pub mod openai;
pub mod rap;
pub mod rune;

use std::collections::BTreeSet;

use crate::contract::{READ_METHODS, Risk};
use crate::diagnostic::{Code, Diagnostic, Source};
use crate::json::{self, JsonDoc, JsonPath};
use crate::tools::validate::check_tool_id;
use crate::tools::{Tool, Transport};

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

/// Maps a foreign tool name to a valid tools.json id (docs/book/src/reference/tools-json.md):
/// lowercase, characters outside `[a-z0-9_-]` become `_`, a leading non-letter gets a `t_` prefix,
/// at most 64 characters, and unique among `taken` (a numeric suffix). Returns `None` when the name
/// is already a valid, unused id.
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

/// A function name for export formats whose names match `^[a-zA-Z0-9_-]+$` (OpenAI, RAP): our
/// ids differ only by allowing `.`, which becomes `__`. Reversible as long as the id has no
/// `__` of its own; the caller checks that and reports the mapping.
pub fn function_name(id: &str) -> String {
    id.replace('.', "__")
}

/// The id a function name came from (the inverse of [`function_name`]).
pub fn id_from_function_name(name: &str) -> String {
    name.replace("__", ".")
}

/// A name cut to `max` characters deterministically: a prefix, `_` and the first 8 hex digits
/// of the BLAKE3 of `id`, so that two long ids with the same prefix still differ.
pub fn shorten(name: &str, id: &str, max: usize) -> String {
    let hash = blake3::hash(id.as_bytes()).to_hex();
    let keep = max.saturating_sub(9);
    format!("{}_{}", &name[..keep.min(name.len())], &hash[..8])
}

/// A tool ready for export: the tools.json entry with its schemas' `$ref`s inlined, and the
/// risk class its contract gives it.
#[derive(Debug, Clone)]
pub struct ExportTool {
    pub tool: Tool,
    pub input_schema: serde_json::Value,
    pub result_schema: serde_json::Value,
    pub risk: Risk,
}

/// Function names for export, at most `max` characters of `[a-zA-Z0-9_-]`: the reversible
/// `.` → `__` mapping, then a deterministic shortening ([`shorten`]) when that is too long;
/// each change reported. An id with its own `__` and a `.` could not be mapped back, and two
/// tools on one name cannot both be exported: both are errors, never an invalid name.
pub fn function_names(
    tools: &[ExportTool],
    max: usize,
    notes: &mut Vec<Note>,
    errors: &mut Vec<String>,
) -> Vec<String> {
    let mut seen = BTreeSet::new();
    tools
        .iter()
        .map(|t| {
            let id = &t.tool.id;
            let mut name = function_name(id);
            if id.contains('.') && id.contains("__") {
                errors
                    .push(format!("tool `{id}`: has both `.` and `__`, so its function name could not be mapped back"));
            } else if name.len() > max {
                name = shorten(&name, id, max);
                notes.push(Note::renamed(
                    id,
                    format!("tool `{id}` is exported as `{name}` (function names are at most {max} characters: a prefix and a hash of the id)"),
                ));
            } else if name != *id {
                notes.push(Note::renamed(id, format!("tool `{id}` is exported as `{name}` (`.` becomes `__`)")));
            }
            if !valid_function_name(&name, max) {
                errors.push(format!("tool `{id}`: `{name}` is not a valid function name"));
            }
            if !seen.insert(name.clone()) {
                errors.push(format!("tool `{id}`: function name `{name}` is already taken"));
            }
            name
        })
        .collect()
}

/// `^[a-zA-Z0-9_-]{1,max}$`, the function-name rule of OpenAI (max 64) and RAP (max 128).
pub fn valid_function_name(name: &str, max: usize) -> bool {
    !name.is_empty() && name.len() <= max && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// How imported tools are reached when their format does not say (OpenAI functions, MCP
/// tools): one transport for all of them, with [`TOOL_PLACEHOLDER`] in the URL, command or
/// arguments replaced by each tool's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    Http { method: String, url: String },
    Exec { command: String, args: Vec<String> },
}

/// Replaced by the tool's id in `--http URL`, `--exec PATH` and `--arg`.
pub const TOOL_PLACEHOLDER: &str = "{tool}";

impl Reach {
    pub fn transport(&self, id: &str) -> Transport {
        let fill = |s: &str| s.replace(TOOL_PLACEHOLDER, id);
        match self {
            Reach::Http { method, url } => {
                Transport::Http { method: method.clone(), url: fill(url), headers: Default::default() }
            }
            Reach::Exec { command, args } => {
                Transport::Exec { command: fill(command), args: args.iter().map(|a| fill(a)).collect() }
            }
        }
    }

    /// What the tool needs in policy.caps: `net:<host>` for an http transport.
    pub fn capabilities(&self) -> Vec<String> {
        match self {
            Reach::Http { url, .. } => url_host(url).map(|h| vec![format!("net:{h}")]).unwrap_or_default(),
            Reach::Exec { .. } => Vec::new(),
        }
    }
}

/// The lowercased host of an http(s) URL (no user info, no port), if it has a literal one.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if host.starts_with('[') { host.split(']').next().map(|h| &h[1..])? } else { host.split(':').next()? };
    (!host.is_empty() && !host.contains('{')).then(|| host.to_ascii_lowercase())
}

/// The MCP tool annotations a tool's contract implies (docs/book: import and export).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// Neither write-capable nor destructive.
    pub read_only: bool,
    pub destructive: bool,
    /// An http GET or HEAD.
    pub idempotent: bool,
    /// A `net:` capability or an http transport.
    pub open_world: bool,
}

impl Hints {
    pub fn of(risk: Risk, transport: &Transport) -> Hints {
        let (idempotent, http) = match transport {
            Transport::Http { method, .. } => (READ_METHODS.contains(&method.as_str()), true),
            Transport::Exec { .. } => (false, false),
        };
        Hints {
            read_only: !risk.write && !risk.destructive,
            destructive: risk.destructive,
            idempotent,
            open_world: risk.network || http,
        }
    }

    /// For a tool not yet written anywhere (an import): its risk from its own contract.
    pub fn of_tool(tool: &Tool) -> Hints {
        let none: std::collections::HashMap<String, Vec<u8>> = Default::default();
        let arena = bumpalo::Bump::new();
        let mut resolver = crate::tools::Resolver::new(&none, &arena, String::new());
        let risk = crate::contract::document(tool, &mut resolver).map(|d| Risk::of(&d)).unwrap_or(Risk {
            write: true,
            network: true,
            secrets: false,
            destructive: true,
        });
        Hints::of(risk, &tool.transport)
    }
}

/// Reports the parts of a tool that a schema-only export format (OpenAI, MCP) has no place
/// for. The messages name no tool (the path does), so that the same loss on many tools is
/// shown once with a count.
pub fn note_unexpressed(t: &ExportTool, format: &str, carries_result: bool, notes: &mut Vec<Note>) {
    let id = Some(t.tool.id.as_str());
    notes.push(Note::dropped(id, format!("the {} transport is not part of {format}", t.tool.transport.kind())));
    if !carries_result
        && t.tool.result_schema != serde_json::json!({})
        && t.tool.result_schema != serde_json::json!(true)
    {
        notes.push(Note::dropped(id, format!("result_schema has no place in {format}")));
    }
    if !t.tool.capabilities.is_empty() || !t.tool.secrets.is_empty() || t.tool.budget.is_some() {
        notes.push(Note::dropped(id, format!("capabilities, secrets and budget have no place in {format}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_urls() {
        assert_eq!(url_host("https://User@API.Example.com:8443/x?y").as_deref(), Some("api.example.com"));
        assert_eq!(url_host("http://[::1]:8080/").as_deref(), Some("::1"));
        assert_eq!(url_host("https://{host}/x"), None);
        assert_eq!(url_host("not a url"), None);
    }

    #[test]
    fn the_tool_placeholder_is_filled_everywhere() {
        let exec = Reach::Exec { command: "/opt/{tool}/run".into(), args: vec!["--tool={tool}".into()] };
        let Transport::Exec { command, args } = exec.transport("a.b") else { panic!() };
        assert_eq!((command.as_str(), args[0].as_str()), ("/opt/a.b/run", "--tool=a.b"));
        let http = Reach::Http { method: "GET".into(), url: "https://gw.example/{tool}?q={query}".into() };
        let Transport::Http { url, .. } = http.transport("x") else { panic!() };
        assert_eq!(url, "https://gw.example/x?q={query}", "other templates stay");
        assert_eq!(http.capabilities(), ["net:gw.example"]);
    }

    #[test]
    fn shortened_names_fit_and_differ() {
        let a = shorten(&"x".repeat(70), "id-a", 64);
        let b = shorten(&"x".repeat(70), "id-b", 64);
        assert_eq!(a.len(), 64);
        assert!(valid_function_name(&a, 64));
        assert_ne!(a, b);
    }
}
