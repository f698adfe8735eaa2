//! JSON Schemas inside tools.json: meta-schema validation of inline schemas, and resolution of
//! `{"$ref": "schema:<id>"}` through a tool's `schema_refs` or the agent's `schemas/<id>.json`.

use std::collections::HashMap;

use bumpalo::Bump;
use serde_json::Value;

use crate::diagnostic::MAX_REPORTED;
use crate::diagnostic::{Code, Diagnostic, Source};
use crate::json::{self, Budget, Doc, Json, JsonPath, Object, ToPath};
use crate::limits::MAX_JSON_BYTES;
use crate::regular_file::{self, Links, ReadError};

pub const REF_PREFIX: &str = "schema:";

/// The outcome of resolving a schema id.
pub enum Resolved<'a> {
    /// A valid schema: a schema file's (parsed once however many tools use it) or a
    /// `schema_refs` entry of the document.
    Schema(Json<'a>),
    /// Nothing found; the string says where we looked.
    Missing(String),
    /// Found, but broken; already reported against its own file.
    Broken,
}

/// Schema ids: 1-128 characters of `[A-Za-z0-9._-]`, starting with a letter or digit.
pub fn check_schema_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "schema id `{id}` must be 1 to 128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        ))
    }
}

/// If `schema` is exactly `{"$ref": "schema:<id>"}`, the id.
pub fn as_schema_ref<'v>(schema: &'v Json<'_>) -> Option<&'v str> {
    let obj = schema.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    obj.get("$ref")?.as_str()?.strip_prefix(REF_PREFIX)
}

/// Every `"$ref": "schema:<id>"` nested in a schema, with its path relative to `base`.
pub fn nested_refs(schema: &Json<'_>, base: &dyn ToPath, out: &mut Vec<(JsonPath, String)>) {
    /// One step below the schema, borrowed from it: a path is built only for a reference found.
    enum Step<'v> {
        Key(&'v str),
        Index(usize),
    }
    fn walk<'v>(v: &'v Json<'_>, steps: &mut Vec<Step<'v>>, base: &dyn ToPath, out: &mut Vec<(JsonPath, String)>) {
        match v {
            Json::Object(obj) => {
                for (k, v) in obj.iter() {
                    match (k, v) {
                        ("$ref", Json::String(s)) => {
                            if let Some(id) = s.strip_prefix(REF_PREFIX) {
                                let mut path = base.to_path();
                                for step in steps.iter() {
                                    match step {
                                        Step::Key(k) => path.push_key(k),
                                        Step::Index(i) => path.push_index(*i),
                                    }
                                }
                                path.push_key(k);
                                out.push((path, id.to_owned()));
                            }
                        }
                        (_, Json::Object(_) | Json::Array(_)) => {
                            steps.push(Step::Key(k));
                            walk(v, steps, base, out);
                            steps.pop();
                        }
                        _ => {}
                    }
                }
            }
            Json::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    if v.is_object() || v.is_array() {
                        steps.push(Step::Index(i));
                        walk(v, steps, base, out);
                        steps.pop();
                    }
                }
            }
            _ => {}
        }
    }
    walk(schema, &mut Vec::new(), base, out);
}

/// [`meta_errors`] of a schema held as a `serde_json::Value`.
pub fn meta_errors_of_value(schema: &Value, base: &dyn ToPath) -> Vec<(JsonPath, String)> {
    meta_errors(&Json::view(schema, &Bump::new()), base)
}

/// Meta-schema problems of a schema, as (path below the schema, message).
pub fn meta_errors(schema: &Json<'_>, base: &dyn ToPath) -> Vec<(JsonPath, String)> {
    if schema.is_boolean() {
        return Vec::new();
    }
    if !schema.is_object() {
        return vec![(base.to_path(), "a JSON Schema must be an object or a boolean".to_owned())];
    }
    if super::meta_schema::surely_valid(schema) {
        return Vec::new();
    }
    // The full meta-schema validator reads `serde_json::Value`s.
    let value = schema.to_value();
    let validator = match jsonschema::meta::validator_for(&value) {
        Ok(v) => v,
        Err(e) => {
            return vec![(base.to_path().key("$schema"), format!("unsupported `$schema`: {e}"))];
        }
    };
    // The common case is a valid schema; `is_valid` is cheaper than collecting errors.
    if validator.is_valid(&value) {
        return Vec::new();
    }
    let base = base.to_path();
    validator
        .iter_errors(&value)
        .take(MAX_REPORTED)
        .map(|e| (pointer_to_path(schema, &base, &e.instance_path().to_string()), e.to_string()))
        .collect()
}

/// Converts a JSON pointer inside `root` into a path below `base`.
fn pointer_to_path(root: &Json<'_>, base: &JsonPath, pointer: &str) -> JsonPath {
    let mut path = base.clone();
    let mut at = Some(root);
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        match at {
            Some(Json::Array(items)) => {
                let i = seg.parse::<usize>().unwrap_or(0);
                path = path.index(i);
                at = items.get(i);
            }
            Some(Json::Object(obj)) => {
                path = path.key(&seg);
                at = obj.get(&seg);
            }
            _ => break,
        }
    }
    path
}

/// Where the agent's files come from: its folder when checking sources, the bundle's entries
/// (held in memory) when verifying.
pub trait AgentFiles {
    /// The file's bytes, `Ok(None)` when there is no such file.
    fn read(&self, rel: &str) -> Result<Option<Vec<u8>>, ReadError>;
}

/// An agent folder: a schema file is read like tools.json (a regular file, never through a
/// symlink, at most [`MAX_JSON_BYTES`], the most `bundle verify` holds).
impl AgentFiles for std::path::PathBuf {
    fn read(&self, rel: &str) -> Result<Option<Vec<u8>>, ReadError> {
        match regular_file::read(&self.join(rel), MAX_JSON_BYTES, Links::Refuse) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(ReadError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl AgentFiles for HashMap<String, Vec<u8>> {
    fn read(&self, rel: &str) -> Result<Option<Vec<u8>>, ReadError> {
        Ok(self.get(rel).cloned())
    }
}

/// Loads, parses and validates schema files of one agent, each once.
pub struct Resolver<'a> {
    files_in: &'a dyn AgentFiles,
    /// Where the schema files' texts and trees live while the resolver is used.
    arena: &'a Bump,
    display_dir: String,
    files: HashMap<String, Option<Json<'a>>>,
    pub sources: Vec<Source>,
    /// The schema files read, relative to the agent folder, in the order they were read.
    pub loaded: Vec<String>,
    /// The JSON values tools.json and these schema files may hold together.
    pub budget: Budget,
    /// Values written so far by inlining `schema:` references into tool contracts
    /// ([`crate::contract`]), across all tools of the agent.
    pub inlined: usize,
}

impl<'a> Resolver<'a> {
    pub fn new(files_in: &'a dyn AgentFiles, arena: &'a Bump, display_dir: String) -> Self {
        Resolver {
            files_in,
            arena,
            display_dir,
            files: HashMap::new(),
            sources: Vec::new(),
            loaded: Vec::new(),
            budget: Budget::default(),
            inlined: 0,
        }
    }

    /// Resolves `id` through `schema_refs` (inline schema or relative file path), else
    /// `schemas/<id>.json`. Inline `schema_refs` entries are validated by the caller.
    pub fn resolve<'s>(
        &mut self,
        id: &str,
        schema_refs: Option<&Object<'s>>,
        diags: &mut Vec<Diagnostic>,
    ) -> Resolved<'s>
    where
        'a: 's,
    {
        if let Some(entry) = schema_refs.and_then(|m| m.get(id)) {
            return match entry {
                Json::String(rel) => match check_relative_json_path(rel) {
                    // A missing file is reported at the `schema_refs` entry, not again here.
                    Ok(()) => match self.load_file(rel, schema_refs, diags) {
                        Resolved::Missing(_) => Resolved::Broken,
                        other => other,
                    },
                    Err(_) => Resolved::Broken,
                },
                other => Resolved::Schema(*other),
            };
        }
        if check_schema_id(id).is_err() {
            return Resolved::Broken;
        }
        let rel = format!("schemas/{id}.json");
        match self.load_file(&rel, schema_refs, diags) {
            Resolved::Missing(_) => Resolved::Missing(format!("no `schema_refs` entry `{id}` and no file {rel}")),
            other => other,
        }
    }

    /// Reads `rel` (relative to the agent folder) as a schema, reporting problems in it.
    pub fn load_file(
        &mut self,
        rel: &str,
        schema_refs: Option<&Object<'_>>,
        diags: &mut Vec<Diagnostic>,
    ) -> Resolved<'a> {
        let full = rel.to_owned();
        if let Some(cached) = self.files.get(&full) {
            return cached.map_or(Resolved::Broken, Resolved::Schema);
        }
        let display = format!("{}{rel}", self.display_dir);
        let bytes = match self.files_in.read(rel) {
            Ok(Some(b)) => b,
            Ok(None) => return Resolved::Missing(format!("file {rel} does not exist")),
            Err(e) => {
                let code = match e {
                    ReadError::TooLarge { .. } => Code::LimitExceeded,
                    ReadError::NotRegular { .. } => Code::UnsupportedFileType,
                    _ => Code::IoError,
                };
                diags.push(Diagnostic::error(code, &display, format!("cannot read {rel}: {e}")));
                self.files.insert(full, None);
                return Resolved::Broken;
            }
        };
        self.loaded.push(rel.to_owned());
        // Mark as in progress so that reference cycles terminate.
        self.files.insert(full.clone(), None);
        let value = self.parse_and_check(&display, bytes, schema_refs, diags);
        self.files.insert(full, value);
        value.map_or(Resolved::Broken, Resolved::Schema)
    }

    fn parse_and_check(
        &mut self,
        display: &str,
        bytes: Vec<u8>,
        schema_refs: Option<&Object<'_>>,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<Json<'a>> {
        let text = match json::decode_utf8(display, bytes) {
            Ok(t) => t,
            Err(d) => {
                diags.push(d);
                return None;
            }
        };
        let source = Source::new(display, text);
        self.sources.push(source.clone());
        let before = diags.len();
        let doc = match json::parse_tree_within(&source, self.arena, &self.budget, diags) {
            Ok(doc) => doc,
            Err(d) => {
                diags.push(d);
                return None;
            }
        };
        let root = JsonPath::root();
        let mut shown = 0;
        for (path, message) in meta_errors(&doc.value, &root) {
            diags.push(schema_diag(&source, &doc, &path, message));
            shown += 1;
        }
        let mut refs = Vec::new();
        nested_refs(&doc.value, &root, &mut refs);
        let mut hidden = 0;
        for (path, id) in refs {
            if let Resolved::Missing(why) = self.resolve(&id, schema_refs, diags) {
                if shown < MAX_REPORTED {
                    diags.push(unresolved(&source, &doc, &path, &id, &why));
                    shown += 1;
                } else {
                    hidden += 1;
                }
            }
        }
        if let Some(d) = crate::diagnostic::hidden_summary(display, (hidden, 0)) {
            diags.push(d);
        }
        (diags[before..].iter().all(|d| !d.is_error())).then_some(doc.value)
    }
}

pub fn schema_diag<V>(source: &Source, doc: &Doc<V>, path: &JsonPath, message: String) -> Diagnostic {
    Diagnostic::error(Code::InvalidSchema, &source.name, format!("invalid JSON Schema: {message}"))
        .at_path(path.to_string())
        .at_span(source, doc.value_span(path))
        .with_help("fix the schema so that it validates against its meta-schema (draft 2020-12 unless `$schema` says otherwise)")
}

pub fn unresolved<V>(source: &Source, doc: &Doc<V>, path: &JsonPath, id: &str, why: &str) -> Diagnostic {
    Diagnostic::error(Code::UnresolvedSchemaRef, &source.name, format!("`schema:{id}` does not resolve: {why}"))
        .at_path(path.to_string())
        .at_span(source, doc.value_span(path))
        .with_help(format!("add schemas/{id}.json to the agent folder, or map `{id}` in the tool's `schema_refs`"))
}

/// A `schema_refs` path: relative, `/`-separated, inside the agent folder, ending in `.json`.
pub fn check_relative_json_path(rel: &str) -> Result<(), String> {
    if rel.starts_with('/') || rel.contains('\\') || rel.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(format!(
            "`{rel}` must be a relative path inside the agent folder (no leading `/`, no `.` or `..`)"
        ));
    }
    if !rel.ends_with(".json") {
        return Err(format!("`{rel}` must name a `.json` file"));
    }
    Ok(())
}
