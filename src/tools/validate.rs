//! Every rule of tools.json version 1 (docs/book/src/reference/tools-json.md), checked in one pass
//! that reports all problems instead of stopping at the first.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::credentials;
use super::model::ToolsFile;
pub use super::schema_refs::AgentFiles;
use super::schema_refs::{self, Resolved, Resolver};
use crate::diagnostic::{Code, Diagnostic, Severity, Source, did_you_mean};
use crate::json::{self, JsonDoc, JsonPath};
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
pub const HTTP_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// What validation produced: the typed file when there were no errors, and the schema files it
/// read (so that diagnostics in them can show their lines).
pub struct Validated {
    /// The document, when it had no errors.
    pub value: Option<Value>,
    pub sources: Vec<Source>,
    /// The schema files read (paths relative to the agent folder), for `pack` to check that
    /// `bundle verify` will hold each of them.
    pub schema_files: Vec<String>,
}

impl Validated {
    /// The typed model (built on demand: `check` does not need it): `Ok(None)` when the file
    /// had errors. A document that passed every rule but does not fit the model is an error,
    /// never an empty tool list (fail closed).
    pub fn model(self) -> Result<Option<ToolsFile>, String> {
        self.value
            .map(|v| {
                serde_json::from_value(v).map_err(|e| format!("tools.json does not fit the tools.json model: {e}"))
            })
            .transpose()
    }
}

/// The most problems reported for one tools.json and its schema files; the rest are counted
/// in one closing diagnostic, so a hostile file cannot make the report itself huge.
pub const MAX_REPORTED: usize = 100;

/// The closing `too_many_problems` diagnostic, when some were not reported.
pub fn hidden_summary(file: &str, (errors, warnings): (usize, usize)) -> Option<Diagnostic> {
    if errors + warnings == 0 {
        return None;
    }
    let severity = if errors > 0 { Severity::Error } else { Severity::Warning };
    Some(
        Diagnostic::new(
            severity,
            Code::TooManyProblems,
            file,
            format!(
                "{errors} more errors and {warnings} more warnings are not shown (at most {MAX_REPORTED} are reported)"
            ),
        )
        .with_help("fix the problems shown and check again"),
    )
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
    let resolver = Resolver::new(agent_files, display_dir.to_owned());
    let doc = match json::parse_within(source, &resolver.budget, diags) {
        Ok(doc) => doc,
        Err(d) => {
            diags.push(d);
            return Validated { value: None, sources: Vec::new(), schema_files: Vec::new() };
        }
    };
    let mut checker = Checker { src: source, doc: &doc, policy, diags, resolver, before, hidden: (0, 0) };
    checker.file();
    let sources = std::mem::take(&mut checker.resolver.sources);
    let loaded = std::mem::take(&mut checker.resolver.loaded);
    if let Some(d) = hidden_summary(&source.name, checker.hidden) {
        diags.push(d);
    }
    let clean = diags[before..].iter().all(|d| !d.is_error());
    Validated { value: clean.then_some(doc.value), sources, schema_files: loaded }
}

struct Checker<'a> {
    src: &'a Source,
    doc: &'a JsonDoc,
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
    secrets: HashSet<&'v str>,
    input_properties: Option<HashSet<String>>,
    url_templates: Vec<String>,
    headers: Vec<(String, &'v str)>,
}

impl<'a> Checker<'a> {
    /// A problem at `path`. Once [`MAX_REPORTED`] are reported its position is not looked up:
    /// [`Checker::emit`] only counts it.
    fn diag(&self, severity: Severity, code: Code, path: &JsonPath, on_key: bool, message: String) -> Diagnostic {
        let d = Diagnostic::new(severity, code, &self.src.name, message).at_path(path.to_string());
        if self.full() {
            return d;
        }
        let span = if on_key { self.doc.key_span(path) } else { self.doc.value_span(path) };
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

    fn error(&mut self, code: Code, path: &JsonPath, message: String, help: impl Into<String>) {
        let d = self.diag(Severity::Error, code, path, false, message).with_help(help);
        self.emit(d);
    }

    fn warning(&mut self, code: Code, path: &JsonPath, message: String, help: impl Into<String>) {
        let d = self.diag(Severity::Warning, code, path, false, message).with_help(help);
        self.emit(d);
    }

    fn wrong_type(&mut self, path: &JsonPath, expected: &str, found: &Value) {
        self.error(
            Code::WrongType,
            path,
            format!("`{}` must be {expected}, found {}", last_key(path), type_name(found)),
            format!("write {expected} here"),
        );
    }

    fn object<'v>(&mut self, value: &'v Value, path: &JsonPath) -> Option<&'v Map<String, Value>> {
        match value {
            Value::Object(obj) => Some(obj),
            other => {
                self.wrong_type(path, "an object", other);
                None
            }
        }
    }

    fn string<'v>(&mut self, value: &'v Value, path: &JsonPath) -> Option<&'v str> {
        match value {
            Value::String(s) => Some(s),
            other => {
                self.wrong_type(path, "a string", other);
                None
            }
        }
    }

    fn string_array<'v>(&mut self, value: &'v Value, path: &JsonPath) -> Vec<(usize, &'v str)> {
        let Value::Array(items) = value else {
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

    fn required<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        path: &JsonPath,
        key: &str,
        what: &str,
    ) -> Option<&'v Value> {
        let value = obj.get(key);
        if value.is_none() {
            let d = self
                .diag(Severity::Error, Code::MissingField, &path.key(key), false, format!("{what} has no `{key}`"))
                .with_help(format!("add `\"{key}\"`: it is required"));
            self.emit(d);
        }
        value
    }

    fn known_keys(&mut self, obj: &Map<String, Value>, path: &JsonPath, allowed: &[&str], what: &str) {
        for key in obj.keys() {
            if allowed.contains(&key.as_str()) {
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

    fn file(&mut self) {
        let root = JsonPath::root();
        let Some(top) = self.object(&self.doc.value, &root) else {
            return;
        };
        if let Some(schema) = top.get("$schema") {
            self.string(schema, &root.key("$schema"));
        }
        let version_ok = match top.get("version") {
            Some(Value::Number(n)) => n.is_u64() && n.as_u64() == Some(SUPPORTED_VERSION),
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
            return;
        }
        self.known_keys(top, &root, TOP_KEYS, "tools.json");
        let Some(tools) = top.get("tools") else {
            return;
        };
        let tools_path = root.key("tools");
        let Value::Array(tools) = tools else {
            self.wrong_type(&tools_path, "an array of tools", tools);
            return;
        };
        let mut ids: HashMap<&str, usize> = HashMap::new();
        for (i, tool) in tools.iter().enumerate() {
            let path = tools_path.index(i);
            if let Some(id) = self.tool(tool, &path) {
                if let Some(first) = ids.get(id) {
                    self.error(
                        Code::DuplicateId,
                        &path.key("id"),
                        format!("tool id `{id}` is already used by tools[{first}]"),
                        "ids must be unique: payload frames and the KB refer to tools by id",
                    );
                } else {
                    ids.insert(id, i);
                }
            }
        }
    }

    /// Checks one tool; returns its id when it is a valid one.
    fn tool<'v>(&mut self, tool: &'v Value, path: &JsonPath) -> Option<&'v str> {
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
            facts.input_properties = self.schema_slot(schema, &path.key("input_schema"), schema_refs);
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

    fn secrets<'v>(&mut self, value: &'v Value, path: &JsonPath, facts: &mut ToolFacts<'v>) {
        for (i, secret) in self.string_array(value, path) {
            let item = path.index(i);
            if let Err(why) = credentials::check_secret_id(secret) {
                self.error(Code::InvalidSecret, &item, why, "name a secret id such as `runloop/mail/smtp_api_key`");
            } else if !facts.secrets.insert(secret) {
                self.error(
                    Code::DuplicateSecret,
                    &item,
                    format!("secret `{secret}` is listed twice"),
                    "remove the repeated entry",
                );
            }
        }
    }

    fn schema_refs<'v>(&mut self, value: &'v Value, path: &JsonPath) -> Option<&'v Map<String, Value>> {
        let map = self.object(value, path)?;
        for (id, entry) in map {
            let entry_path = path.key(id);
            if let Err(why) = schema_refs::check_schema_id(id) {
                let d = self
                    .diag(Severity::Error, Code::InvalidSchemaRef, &entry_path, true, why)
                    .with_help("schema ids use A-Z a-z 0-9 . _ -");
                self.emit(d);
            }
            match entry {
                Value::String(rel) => {
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
                Value::Object(_) | Value::Bool(_) => self.inline_schema(entry, &entry_path, Some(map)),
                other => self.wrong_type(&entry_path, "a schema object or a relative path to a .json file", other),
            }
        }
        Some(map)
    }

    /// Checks `input_schema` / `result_schema`; returns the schema's top-level property names
    /// when it could be resolved (used to bind URL templates).
    fn schema_slot(
        &mut self,
        value: &Value,
        path: &JsonPath,
        refs: Option<&Map<String, Value>>,
    ) -> Option<HashSet<String>> {
        if let Some(id) = schema_refs::as_schema_ref(value) {
            let ref_path = path.key("$ref");
            if let Err(why) = schema_refs::check_schema_id(id) {
                self.error(Code::InvalidSchemaRef, &ref_path, why, "write `{\"$ref\": \"schema:<schema-id>\"}`");
                return None;
            }
            return match self.resolver.resolve(id, refs, self.diags) {
                Resolved::Schema(schema) => Some(property_names(&schema)),
                Resolved::Missing(why) => {
                    if self.full() {
                        self.hidden.0 += 1;
                    } else {
                        let d = schema_refs::unresolved(self.src, self.doc, &ref_path, id, &why);
                        self.emit(d);
                    }
                    None
                }
                Resolved::Broken => None,
            };
        }
        match value {
            Value::Object(_) | Value::Bool(_) => {
                self.inline_schema(value, path, refs);
                Some(property_names(value))
            }
            other => {
                self.wrong_type(path, "a JSON Schema (object or boolean) or {\"$ref\": \"schema:<id>\"}", other);
                None
            }
        }
    }

    fn inline_schema(&mut self, schema: &Value, path: &JsonPath, refs: Option<&Map<String, Value>>) {
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

    fn transport<'v>(&mut self, value: &'v Value, path: &JsonPath, facts: &mut ToolFacts<'v>) {
        let Some(obj) = self.object(value, path) else {
            return;
        };
        let Some(kind) = self.required(obj, path, "kind", "the transport") else {
            return;
        };
        let Some(kind) = self.string(kind, &path.key("kind")) else {
            return;
        };
        match kind {
            "exec" => {
                self.known_keys(obj, path, EXEC_KEYS, "an exec transport");
                if let Some(cmd) = self.required(obj, path, "command", "an exec transport")
                    && let Some(cmd) = self.string(cmd, &path.key("command"))
                    && let Err(why) = check_command(cmd)
                {
                    self.error(
                        Code::InvalidCommand,
                        &path.key("command"),
                        why,
                        "use an absolute path such as `/usr/local/bin/tool`; the runtime does not search PATH",
                    );
                }
                if let Some(args) = obj.get("args") {
                    self.string_array(args, &path.key("args"));
                }
            }
            "http" => {
                self.known_keys(obj, path, HTTP_KEYS, "an http transport");
                if let Some(method) = self.required(obj, path, "method", "an http transport")
                    && let Some(method) = self.string(method, &path.key("method"))
                    && !HTTP_METHODS.contains(&method)
                {
                    let help = match HTTP_METHODS.iter().find(|m| m.eq_ignore_ascii_case(method)) {
                        Some(m) => format!("write it in upper case: `{m}`"),
                        None => format!("use one of {}", HTTP_METHODS.join(", ")),
                    };
                    self.error(
                        Code::InvalidMethod,
                        &path.key("method"),
                        format!("`{method}` is not a supported HTTP method"),
                        help,
                    );
                }
                if let Some(url) = self.required(obj, path, "url", "an http transport")
                    && let Some(url) = self.string(url, &path.key("url"))
                {
                    self.url(url, &path.key("url"), facts);
                }
                if let Some(headers) = obj.get("headers")
                    && let Some(map) = self.object(headers, &path.key("headers"))
                {
                    for (name, v) in map {
                        if let Some(s) = self.string(v, &path.key("headers").key(name)) {
                            facts.headers.push((name.clone(), s));
                        }
                    }
                }
            }
            other => {
                let help = match did_you_mean(other, &["exec", "http"]) {
                    Some(near) => format!("did you mean `{near}`? tools.json version 1 knows `exec` and `http`"),
                    None => "tools.json version 1 knows `exec` and `http`; other kinds need a newer version".to_owned(),
                };
                self.error(
                    Code::UnknownTransport,
                    &path.key("kind"),
                    format!("unknown transport kind `{other}`"),
                    help,
                );
            }
        }
    }

    fn url(&mut self, url: &str, path: &JsonPath, facts: &mut ToolFacts<'_>) {
        match check_url(url) {
            Ok(templates) => facts.url_templates = templates,
            Err(why) => {
                self.error(
                    Code::InvalidUrl,
                    path,
                    why,
                    "write an absolute http:// or https:// URL; `{name}` inserts an input property",
                );
                return;
            }
        }
        if let Some(why) = credentials::literal_credential_in_url(url) {
            self.error(
                Code::HardcodedCredential,
                path,
                why,
                "pass credentials through `secrets` and a header placeholder `${secret:<id>}`",
            );
        }
    }

    fn capabilities(&mut self, value: &Value, path: &JsonPath, what: &str) {
        let mut seen: HashSet<&str> = HashSet::new();
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
            if !seen.insert(cap) {
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

    fn budget(&mut self, value: &Value, path: &JsonPath) {
        let Some(obj) = self.object(value, path) else {
            return;
        };
        self.known_keys(obj, path, BUDGET_KEYS, "budget");
        if let Some(tokens) = obj.get("tokens") {
            let p = path.key("tokens");
            match tokens {
                Value::Number(n) if n.is_u64() => {}
                Value::Number(n) => self.error(
                    Code::InvalidBudget,
                    &p,
                    format!("budget.tokens must be a non-negative integer, found {n}"),
                    "write a whole number of tokens, e.g. 4000",
                ),
                other => self.wrong_type(&p, "a non-negative integer", other),
            }
        }
        if let Some(usd) = obj.get("usd") {
            let p = path.key("usd");
            match usd {
                Value::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0 && f.is_finite()) => {}
                Value::Number(n) => self.error(
                    Code::InvalidBudget,
                    &p,
                    format!("budget.usd must be a non-negative number, found {n}"),
                    "write an amount in US dollars, e.g. 0.25",
                ),
                other => self.wrong_type(&p, "a non-negative number", other),
            }
        }
    }

    fn observability(&mut self, value: &Value, path: &JsonPath) {
        let Some(obj) = self.object(value, path) else {
            return;
        };
        self.known_keys(obj, path, OBSERVABILITY_KEYS, "observability");
        if let Some(tags) = obj.get("tags") {
            let tags_path = path.key("tags");
            for (i, tag) in self.string_array(tags, &tags_path) {
                if tag.trim().is_empty() {
                    self.error(
                        Code::WrongType,
                        &tags_path.index(i),
                        "a tag must be a non-empty string".to_owned(),
                        "remove the empty tag",
                    );
                }
            }
        }
    }

    fn cross_checks(&mut self, tool: &JsonPath, facts: &ToolFacts<'_>) {
        if let Some(props) = &facts.input_properties {
            for name in &facts.url_templates {
                if !props.contains(name) {
                    self.warning(
                        Code::UnboundUrlTemplate,
                        &tool.key("transport").key("url"),
                        format!("url template `{{{name}}}` is not a property of the input schema"),
                        format!("add `{name}` to input_schema.properties, or fix the template name"),
                    );
                }
            }
        }
        let headers_path = tool.key("transport").key("headers");
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
                if !facts.secrets.contains(p.secret.as_str()) {
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

const ID_HELP: &str = "ids are 1-64 characters: lowercase letters, digits, `_` and `-`, in dot-separated segments that start with a letter, e.g. `mail.smtp_send`";

/// Tool ids: 1-64 characters, `^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$`.
pub fn check_tool_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 64 {
        return Err(format!("tool id `{id}` must be 1 to 64 characters long (it has {})", id.chars().count()));
    }
    for segment in id.split('.') {
        let ok = segment.starts_with(|c: char| c.is_ascii_lowercase())
            && segment.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !ok {
            return Err(if segment.is_empty() {
                format!("tool id `{id}` has an empty segment")
            } else {
                format!("tool id `{id}` has an invalid segment `{segment}`")
            });
        }
    }
    Ok(())
}

/// Exec commands: an absolute path to a file.
pub fn check_command(cmd: &str) -> Result<(), String> {
    if !cmd.starts_with('/') {
        return Err(format!("command `{cmd}` is not an absolute path"));
    }
    if cmd.ends_with('/') || cmd.chars().any(char::is_control) {
        return Err(format!("command `{cmd}` is not a path to a file"));
    }
    Ok(())
}

/// Checks an http(s) URL with `{name}` templates; returns the template names.
pub fn check_url(url: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut concrete = String::with_capacity(url.len());
    let mut chars = url.char_indices();
    while let Some((_, c)) = chars.next() {
        match c {
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    name.push(c);
                }
                let valid = closed
                    && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    return Err(format!("url `{url}` has a malformed template `{{{name}`; templates are `{{name}}`"));
                }
                names.push(name);
                concrete.push('x');
            }
            '}' => return Err(format!("url `{url}` has a `}}` without a matching `{{`")),
            c if c.is_whitespace() || c.is_control() => {
                return Err(format!("url `{url}` contains whitespace or control characters"));
            }
            c => concrete.push(c),
        }
    }
    let uri = fluent_uri::Uri::parse(concrete.as_str())
        .map_err(|e| format!("url `{url}` is not a valid absolute URL: {e}"))?;
    let scheme = uri.scheme().as_str();
    if scheme != "http" && scheme != "https" {
        return Err(format!("url `{url}` must use http:// or https://, not `{scheme}:`"));
    }
    match uri.authority() {
        Some(a) if !a.host().is_empty() => Ok(names),
        _ => Err(format!("url `{url}` has no host")),
    }
}

fn property_names(schema: &Value) -> HashSet<String> {
    schema.get("properties").and_then(Value::as_object).map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

fn last_key(path: &JsonPath) -> String {
    let s = path.to_string();
    s.rsplit(['.', '[']).next().unwrap_or(&s).trim_end_matches(']').to_owned()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_ids() {
        assert!(check_tool_id("mail.smtp_send").is_ok());
        assert!(check_tool_id("a-b.c2").is_ok());
        for bad in ["", "Mail", "1a", "a..b", "a.", ".a", "a b", &"a".repeat(65)] {
            assert!(check_tool_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(check_url("https://api.x.com/m/{box}/send").unwrap(), vec!["box"]);
        assert!(check_url("/send").is_err());
        assert!(check_url("ftp://x.com").is_err());
        assert!(check_url("https://x.com/{a").is_err());
        assert!(check_url("https://x.com/a}").is_err());
        assert!(check_url("https:///path").is_err());
    }

    #[test]
    fn suggestions() {
        assert_eq!(did_you_mean("requires_confirmaton", TOOL_KEYS), Some("requires_confirmation"));
        assert_eq!(did_you_mean("descripton", TOOL_KEYS), Some("description"));
        assert_eq!(did_you_mean("zzz", TOOL_KEYS), None);
    }
}
