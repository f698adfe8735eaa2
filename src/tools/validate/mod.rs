//! Every rule of tools.json version 1 (docs/book/src/reference/tools-json.md), checked in one pass
//! that reports all problems instead of stopping at the first.

use std::collections::HashMap;
use std::sync::Arc;

use bumpalo::Bump;

use super::credentials;
use super::model::ToolsFile;
pub use super::schema_refs::AgentFiles;
use super::schema_refs::{self, Resolved, Resolver};
use crate::diagnostic::{Code, Diagnostic, Severity, Source, did_you_mean};
use crate::json::{self, At, Json, JsonPath, Object, ToPath, TreeDoc};
use crate::policy::{Capability, Policy};

/// The only tools.json version this build understands.
pub const SUPPORTED_VERSION: u64 = 1;

const TOP_KEYS: &[&str] = &["$schema", "version", "tools"];
const TOOL_KEYS: &[&str] = &[
    "id",
    "description",
    "transport",
    "input_schema",
    "result_schema",
    "schema_refs",
    "capabilities",
    "secrets",
    "budget",
    "requires_confirmation",
    "observability",
];
const EXEC_KEYS: &[&str] = &["kind", "command", "args"];
const HTTP_KEYS: &[&str] = &["kind", "method", "url", "headers"];
const BUDGET_KEYS: &[&str] = &["tokens", "usd"];
const OBSERVABILITY_KEYS: &[&str] = &["tags"];
mod fields;

pub use super::rules::{ID_HELP, check_command, check_tool_id, check_url};
use crate::diagnostic::{MAX_REPORTED, hidden_summary};

pub const HTTP_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// What validation produced: the document when it had no errors, and the schema files it read
/// (so that diagnostics in them can show their lines).
pub struct Validated {
    /// The document, when it had no errors.
    pub valid: Option<ValidTools>,
    pub sources: Vec<Source>,
    /// The schema files read (paths relative to the agent folder), for `pack` to check that
    /// `bundle verify` will hold each of them.
    pub schema_files: Vec<String>,
}

/// A tools.json that passed every rule. Its typed model is built when a command asks for it
/// ([`ValidTools::model`]): `bundle check` of 20,000 agents never does, and building the
/// schemas' `serde_json::Value`s cost as much as the whole validation.
#[derive(Debug, Clone)]
pub struct ValidTools {
    name: String,
    text: Arc<str>,
    /// The tools' ids, in file order.
    pub ids: Vec<String>,
}

impl ValidTools {
    /// The typed model. A document that passed every rule but does not fit the model is an
    /// error, never an empty tool list (fail closed); the rules are written so that it cannot
    /// happen, and a test holds every valid testdata tools.json to it.
    pub fn model(&self) -> Result<ToolsFile, Diagnostic> {
        serde_json::from_str(&self.text).map_err(|e| {
            Diagnostic::error(
                Code::InvalidJson,
                &self.name,
                format!("tools.json does not fit the tools.json model: {e}"),
            )
        })
    }
}

/// Validates tools.json (already read as `source`) of an agent whose other files (schemas) come
/// from `agent_files`. `display_dir`
/// prefixes file names in diagnostics (e.g. `agents/mailer/`).
pub fn validate(
    source: &Source,
    agent_files: &dyn AgentFiles,
    display_dir: &str,
    policy: &Policy,
    diags: &mut Vec<Diagnostic>,
) -> Validated {
    let before = diags.len();
    // tools.json's tree and its schema files' live here until the check ends; sized for the
    // tree of a typical tools.json, so that it is allocated once.
    let arena = Bump::with_capacity(source.text.len() * 4);
    let resolver = Resolver::new(agent_files, &arena, display_dir.to_owned());
    let doc = match json::parse_tree_within(source, &arena, &resolver.budget, diags) {
        Ok(doc) => doc,
        Err(d) => {
            diags.push(d);
            return Validated { valid: None, sources: Vec::new(), schema_files: Vec::new() };
        }
    };
    let mut checker = Checker { src: source, doc: &doc, policy, diags, resolver, before, hidden: (0, 0) };
    let ids = checker.file();
    let sources = std::mem::take(&mut checker.resolver.sources);
    let loaded = std::mem::take(&mut checker.resolver.loaded);
    if let Some(d) = hidden_summary(&source.name, checker.hidden) {
        diags.push(d);
    }
    let clean = diags[before..].iter().all(|d| !d.is_error());
    let valid = clean.then(|| ValidTools { name: source.name.clone(), text: source.text.clone(), ids });
    Validated { valid, sources, schema_files: loaded }
}

struct Checker<'a> {
    src: &'a Source,
    doc: &'a TreeDoc<'a>,
    policy: &'a Policy,
    diags: &'a mut Vec<Diagnostic>,
    resolver: Resolver<'a>,
    /// `diags.len()` when this check began.
    before: usize,
    /// Problems found after [`MAX_REPORTED`] were: (errors, warnings).
    hidden: (usize, usize),
}

/// What the walk learned about one tool, for the checks that span several fields.
#[derive(Default)]
struct ToolFacts<'v> {
    secrets: Seen<'v, ()>,
    /// The input schema, when it could be resolved: URL templates name its properties.
    input_schema: Option<Json<'v>>,
    url_templates: Vec<String>,
    headers: Vec<(String, &'v str)>,
}

impl<'a> Checker<'a> {
    /// A problem at `path`. Once [`MAX_REPORTED`] are reported its position is not looked up:
    /// [`Checker::emit`] only counts it.
    fn diag(&self, severity: Severity, code: Code, path: &dyn ToPath, on_key: bool, message: String) -> Diagnostic {
        let path = path.to_path();
        let d = Diagnostic::new(severity, code, &self.src.name, message).at_path(path.to_string());
        if self.full() {
            return d;
        }
        let span = if on_key { self.doc.key_span(&path) } else { self.doc.value_span(&path) };
        d.at_span(self.src, span)
    }

    fn full(&self) -> bool {
        self.diags.len() - self.before >= MAX_REPORTED
    }

    fn emit(&mut self, d: Diagnostic) {
        if !self.full() {
            self.diags.push(d);
        } else if d.is_error() {
            self.hidden.0 += 1;
        } else {
            self.hidden.1 += 1;
        }
    }

    fn error(&mut self, code: Code, path: &dyn ToPath, message: String, help: impl Into<String>) {
        let d = self.diag(Severity::Error, code, path, false, message).with_help(help);
        self.emit(d);
    }

    fn warning(&mut self, code: Code, path: &dyn ToPath, message: String, help: impl Into<String>) {
        let d = self.diag(Severity::Warning, code, path, false, message).with_help(help);
        self.emit(d);
    }

    fn wrong_type(&mut self, path: &At<'_>, expected: &str, found: &Json<'_>) {
        self.error(
            Code::WrongType,
            path,
            format!("`{}` must be {expected}, found {}", last_key(&path.to_path()), type_name(found)),
            format!("write {expected} here"),
        );
    }

    fn object<'v, 'j>(&mut self, value: &'v Json<'j>, path: &At<'_>) -> Option<&'v Object<'j>> {
        match value {
            Json::Object(obj) => Some(obj),
            other => {
                self.wrong_type(path, "an object", other);
                None
            }
        }
    }

    fn string<'v>(&mut self, value: &'v Json<'_>, path: &At<'_>) -> Option<&'v str> {
        match value {
            Json::String(s) => Some(s),
            other => {
                self.wrong_type(path, "a string", other);
                None
            }
        }
    }

    fn string_array<'v>(&mut self, value: &'v Json<'_>, path: &At<'_>) -> Vec<(usize, &'v str)> {
        let Json::Array(items) = value else {
            self.wrong_type(path, "an array of strings", value);
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if let Some(s) = self.string(item, &path.index(i)) {
                out.push((i, s));
            }
        }
        out
    }

    fn required<'v, 'j>(&mut self, obj: &'v Object<'j>, path: &At<'_>, key: &str, what: &str) -> Option<&'v Json<'j>> {
        let value = obj.get(key);
        if value.is_none() {
            let d = self
                .diag(Severity::Error, Code::MissingField, &path.key(key), false, format!("{what} has no `{key}`"))
                .with_help(format!("add `\"{key}\"`: it is required"));
            self.emit(d);
        }
        value
    }

    fn known_keys(&mut self, obj: &Object<'_>, path: &At<'_>, allowed: &[&str], what: &str) {
        for key in obj.keys() {
            if allowed.contains(&key) {
                continue;
            }
            let help = match did_you_mean(key, allowed) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("{what} allows only: {}", allowed.join(", ")),
            };
            let d = self
                .diag(
                    Severity::Error,
                    Code::UnknownField,
                    &path.key(key),
                    true,
                    format!("unknown field `{key}` in {what}"),
                )
                .with_help(help);
            self.emit(d);
        }
    }

    /// Checks the whole document; returns the valid tool ids, in file order.
    fn file(&mut self) -> Vec<String> {
        let root = At::root();
        let Some(top) = self.object(&self.doc.value, &root) else {
            return Vec::new();
        };
        if let Some(schema) = top.get("$schema") {
            self.string(schema, &root.key("$schema"));
        }
        let version_ok = match top.get("version") {
            Some(Json::Number(n)) => n.as_u64() == Some(SUPPORTED_VERSION),
            _ => false,
        };
        if !version_ok {
            let found = match top.get("version") {
                None => "no `version`".to_owned(),
                Some(v) => format!("`\"version\": {v}`"),
            };
            let d = self
                .diag(
                    Severity::Error,
                    Code::UnsupportedVersion,
                    &root.key("version"),
                    false,
                    format!("unsupported tools.json version: found {found}; this bundle supports version {SUPPORTED_VERSION}"),
                )
                .with_help(format!(
                    "set `\"version\": {SUPPORTED_VERSION}` (an integer), or upgrade bundle if the file was written for a newer version"
                ));
            self.emit(d);
            // Fail closed: the other rules are only defined for version 1.
            return Vec::new();
        }
        self.known_keys(top, &root, TOP_KEYS, "tools.json");
        let Some(tools) = top.get("tools") else {
            return Vec::new();
        };
        let tools_path = root.key("tools");
        let Json::Array(tools) = tools else {
            self.wrong_type(&tools_path, "an array of tools", tools);
            return Vec::new();
        };
        let mut ids: Seen<'_, usize> = Seen::default();
        let mut order = Vec::with_capacity(tools.len());
        for (i, tool) in tools.iter().enumerate() {
            let path = tools_path.index(i);
            if let Some(id) = self.tool(tool, &path) {
                if let Some(first) = ids.insert(id, i) {
                    self.error(
                        Code::DuplicateId,
                        &path.key("id"),
                        format!("tool id `{id}` is already used by tools[{first}]"),
                        "ids must be unique: payload frames and the KB refer to tools by id",
                    );
                } else {
                    order.push(id.to_owned());
                }
            }
        }
        order
    }

    /// Checks one tool; returns its id when it is a valid one.
    fn tool<'v>(&mut self, tool: &'v Json<'a>, path: &At<'_>) -> Option<&'v str> {
        let obj = self.object(tool, path)?;
        self.known_keys(obj, path, TOOL_KEYS, "a tool");
        let mut facts = ToolFacts::default();

        let id = self.required(obj, path, "id", "the tool").and_then(|v| self.string(v, &path.key("id")));
        let id = id.filter(|id| match check_tool_id(id) {
            Ok(()) => true,
            Err(why) => {
                self.error(Code::InvalidId, &path.key("id"), why, ID_HELP);
                false
            }
        });
        let what = id.map_or_else(|| "the tool".to_owned(), |id| format!("tool `{id}`"));

        if let Some(desc) = self.required(obj, path, "description", &what)
            && let Some(s) = self.string(desc, &path.key("description"))
            && s.trim().is_empty()
        {
            self.error(
                Code::EmptyDescription,
                &path.key("description"),
                format!("{what} has an empty description"),
                "describe in one sentence what the tool does; the model and reviewers read it",
            );
        }

        if let Some(secrets) = obj.get("secrets") {
            self.secrets(secrets, &path.key("secrets"), &mut facts);
        }

        let schema_refs = obj.get("schema_refs").and_then(|v| self.schema_refs(v, &path.key("schema_refs")));
        if let Some(schema) = self.required(obj, path, "input_schema", &what) {
            facts.input_schema = self.schema_slot(schema, &path.key("input_schema"), schema_refs);
        }
        if let Some(schema) = self.required(obj, path, "result_schema", &what) {
            self.schema_slot(schema, &path.key("result_schema"), schema_refs);
        }

        if let Some(transport) = self.required(obj, path, "transport", &what) {
            self.transport(transport, &path.key("transport"), &mut facts);
        }
        if let Some(caps) = obj.get("capabilities") {
            self.capabilities(caps, &path.key("capabilities"), &what);
        }
        if let Some(budget) = obj.get("budget") {
            self.budget(budget, &path.key("budget"));
        }
        if let Some(confirm) = obj.get("requires_confirmation")
            && !confirm.is_boolean()
        {
            self.wrong_type(&path.key("requires_confirmation"), "`true` or `false`", confirm);
        }
        if let Some(obs) = obj.get("observability") {
            self.observability(obs, &path.key("observability"));
        }
        self.cross_checks(path, &facts);
        id
    }

    fn secrets<'v>(&mut self, value: &'v Json<'_>, path: &At<'_>, facts: &mut ToolFacts<'v>) {
        for (i, secret) in self.string_array(value, path) {
            let item = path.index(i);
            if let Err(why) = credentials::check_secret_id(secret) {
                self.error(Code::InvalidSecret, &item, why, "name a secret id such as `runloop/mail/smtp_api_key`");
            } else if facts.secrets.insert(secret, ()).is_some() {
                self.error(
                    Code::DuplicateSecret,
                    &item,
                    format!("secret `{secret}` is listed twice"),
                    "remove the repeated entry",
                );
            }
        }
    }

    fn schema_refs<'v>(&mut self, value: &'v Json<'a>, path: &At<'_>) -> Option<&'v Object<'a>> {
        let map = self.object(value, path)?;
        for (id, entry) in map.iter() {
            let entry_path = path.key(id);
            if let Err(why) = schema_refs::check_schema_id(id) {
                let d = self
                    .diag(Severity::Error, Code::InvalidSchemaRef, &entry_path, true, why)
                    .with_help("schema ids use A-Z a-z 0-9 . _ -");
                self.emit(d);
            }
            match entry {
                Json::String(rel) => {
                    if let Err(why) = schema_refs::check_relative_json_path(rel) {
                        self.error(
                            Code::InvalidSchemaRef,
                            &entry_path,
                            why,
                            "point at a .json file inside the agent folder, e.g. `schemas/x.json`",
                        );
                    } else if let Resolved::Missing(why) = self.resolver.load_file(rel, Some(map), self.diags) {
                        self.error(Code::UnresolvedSchemaRef, &entry_path, why, "add the file or fix the path");
                    }
                }
                Json::Object(_) | Json::Bool(_) => self.inline_schema(entry, &entry_path, Some(map)),
                other => self.wrong_type(&entry_path, "a schema object or a relative path to a .json file", other),
            }
        }
        Some(map)
    }

    /// Checks `input_schema` / `result_schema`; returns the schema when it could be resolved
    /// (its properties bind URL templates).
    fn schema_slot(&mut self, value: &Json<'a>, path: &At<'_>, refs: Option<&Object<'a>>) -> Option<Json<'a>> {
        if let Some(id) = schema_refs::as_schema_ref(value) {
            let ref_path = path.key("$ref");
            if let Err(why) = schema_refs::check_schema_id(id) {
                self.error(Code::InvalidSchemaRef, &ref_path, why, "write `{\"$ref\": \"schema:<schema-id>\"}`");
                return None;
            }
            return match self.resolver.resolve(id, refs, self.diags) {
                Resolved::Schema(schema) => Some(schema),
                Resolved::Missing(why) => {
                    if self.full() {
                        self.hidden.0 += 1;
                    } else {
                        let d = schema_refs::unresolved(self.src, self.doc, &ref_path.to_path(), id, &why);
                        self.emit(d);
                    }
                    None
                }
                Resolved::Broken => None,
            };
        }
        match value {
            Json::Object(_) | Json::Bool(_) => {
                self.inline_schema(value, path, refs);
                Some(*value)
            }
            other => {
                self.wrong_type(path, "a JSON Schema (object or boolean) or {\"$ref\": \"schema:<id>\"}", other);
                None
            }
        }
    }

    fn inline_schema(&mut self, schema: &Json<'_>, path: &At<'_>, refs: Option<&Object<'_>>) {
        for (at, message) in schema_refs::meta_errors(schema, path) {
            if self.full() {
                self.hidden.0 += 1;
                continue;
            }
            let d = schema_refs::schema_diag(self.src, self.doc, &at, message);
            self.emit(d);
        }
        let mut nested = Vec::new();
        schema_refs::nested_refs(schema, path, &mut nested);
        for (at, id) in nested {
            if let Err(why) = schema_refs::check_schema_id(&id) {
                self.error(Code::InvalidSchemaRef, &at, why, "write `\"$ref\": \"schema:<schema-id>\"`");
            } else if let Resolved::Missing(why) = self.resolver.resolve(&id, refs, self.diags) {
                if self.full() {
                    self.hidden.0 += 1;
                    continue;
                }
                let d = schema_refs::unresolved(self.src, self.doc, &at, &id, &why);
                self.emit(d);
            }
        }
    }

    fn capabilities(&mut self, value: &Json<'_>, path: &At<'_>, what: &str) {
        let mut seen: Seen<'_, ()> = Seen::default();
        for (i, cap) in self.string_array(value, path) {
            let item = path.index(i);
            let parsed = match Capability::parse(cap) {
                Ok(c) => c,
                Err(why) => {
                    self.error(
                        Code::InvalidCapability,
                        &item,
                        why,
                        "write capabilities as `family:scope`, e.g. `net:api.mail.example`",
                    );
                    continue;
                }
            };
            if seen.insert(cap, ()).is_some() {
                self.warning(
                    Code::DuplicateCapability,
                    &item,
                    format!("capability `{cap}` is listed twice"),
                    "remove the repeated entry",
                );
                continue;
            }
            if self.policy.grant_for(&parsed).is_none() {
                self.error(
                    Code::CapabilityNotGranted,
                    &item,
                    format!(
                        "{what} requires `{cap}`, which policy.caps does not grant; the runtime would deny the tool"
                    ),
                    format!("add the line `{cap}` to policy.caps, or remove the capability from the tool"),
                );
            }
        }
    }

    fn cross_checks(&mut self, tool: &At<'_>, facts: &ToolFacts<'_>) {
        if let Some(schema) = &facts.input_schema {
            let props = schema.get("properties").and_then(Json::as_object);
            for name in &facts.url_templates {
                if !props.is_some_and(|p| p.contains_key(name)) {
                    self.warning(
                        Code::UnboundUrlTemplate,
                        &tool.key("transport").key("url"),
                        format!("url template `{{{name}}}` is not a property of the input schema"),
                        format!("add `{name}` to input_schema.properties, or fix the template name"),
                    );
                }
            }
        }
        let transport = tool.key("transport");
        let headers_path = transport.key("headers");
        for (name, value) in &facts.headers {
            let path = headers_path.key(name);
            let found = match credentials::placeholders(value) {
                Ok(found) => found,
                Err(why) => {
                    self.error(
                        Code::InvalidPlaceholder,
                        &path,
                        why,
                        "secret placeholders are written `${secret:<secret-id>}`",
                    );
                    continue;
                }
            };
            for p in &found {
                if facts.secrets.get(p.secret.as_str()).is_none() {
                    self.error(
                        Code::UnknownSecret,
                        &path,
                        format!(
                            "header `{name}` uses secret `{}`, which the tool does not list in `secrets`",
                            p.secret
                        ),
                        format!("add \"{}\" to the tool's `secrets`", p.secret),
                    );
                }
            }
            if let Some(why) = credentials::literal_credential_in_header(name, value, &found) {
                self.error(
                    Code::HardcodedCredential,
                    &path,
                    why,
                    "list the secret in `secrets` and write `Bearer ${secret:<secret-id>}`; the runtime injects it",
                );
            }
        }
    }
}

/// Strings seen so far, for duplicate checks: compared one by one while there are few
/// (hashing a key costs more than comparing it with a handful), hashed beyond [`Seen::FEW`].
struct Seen<'v, T> {
    few: Vec<(&'v str, T)>,
    many: HashMap<&'v str, T>,
}

impl<T> Default for Seen<'_, T> {
    fn default() -> Self {
        Seen { few: Vec::new(), many: HashMap::new() }
    }
}

impl<'v, T: Copy> Seen<'v, T> {
    const FEW: usize = 16;

    /// Adds `key` unless it was seen; returns what the first one was given.
    fn insert(&mut self, key: &'v str, value: T) -> Option<T> {
        if let Some(first) = self.get(key) {
            return Some(first);
        }
        if self.few.len() < Self::FEW {
            self.few.push((key, value));
        } else {
            self.many.insert(key, value);
        }
        None
    }

    fn get(&self, key: &str) -> Option<T> {
        self.few.iter().find(|(k, _)| *k == key).map(|(_, v)| *v).or_else(|| self.many.get(key).copied())
    }
}

fn last_key(path: &JsonPath) -> String {
    let s = path.to_string();
    s.rsplit(['.', '[']).next().unwrap_or(&s).trim_end_matches(']').to_owned()
}

fn type_name(v: &Json<'_>) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules are the model's (fail closed, see [`ValidTools::model`]): every testdata
    /// tools.json that passes them fits the typed model.
    #[test]
    fn every_valid_testdata_tools_json_fits_the_model() {
        let mut valid = 0;
        for entry in walkdir::WalkDir::new(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata")) {
            let entry = entry.unwrap();
            if entry.file_name() != "tools.json" {
                continue;
            }
            let dir = entry.path().parent().unwrap().to_path_buf();
            let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
            let mut diags = Vec::new();
            let policy = std::fs::read_to_string(dir.join("policy.caps"))
                .map(|p| Policy::parse(&Source::new("policy.caps", p), &mut Vec::new()))
                .unwrap_or_default();
            let validated = validate(&Source::new("tools.json", text), &dir, "", &policy, &mut diags);
            if let Some(v) = validated.valid {
                let model = v.model().unwrap_or_else(|d| panic!("{}: {}", entry.path().display(), d.message));
                assert_eq!(model.tools.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), v.ids);
                valid += 1;
            }
        }
        assert!(valid >= 15, "only {valid} valid tools.json files found");
    }

    #[test]
    fn suggestions() {
        assert_eq!(did_you_mean("requires_confirmaton", TOOL_KEYS), Some("requires_confirmation"));
        assert_eq!(did_you_mean("descripton", TOOL_KEYS), Some("description"));
        assert_eq!(did_you_mean("zzz", TOOL_KEYS), None);
    }
}
