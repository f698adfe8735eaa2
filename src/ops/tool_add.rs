//! `bundle tool add`: append one tool to an agent's tools.json (seed §4's scaffold wizard).
//!
//! The new tools.json is validated with the same rules as `bundle check`, against the policy it
//! will run under, before anything is written: a tool that `check` would reject is refused and
//! the folder stays as it was. The document is re-written in the canonical pretty form
//! (2-space indent, trailing newline) with its existing key order; then the manifest is
//! relocked so that the agent passes `check` as it is.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::agent::{LockOutcome, display_prefix, lock_agent, read_source};
use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::error::Error;
use crate::limits;
use crate::policy::{self, Capability, Policy};
use crate::regular_file::{self, Links};
use crate::{atomic, tools};

/// The schema given to a tool's input and result when none is named: any JSON object.
pub fn default_schema() -> Value {
    json!({"type": "object"})
}

/// How the new tool is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum NewTransport {
    Exec { command: String, args: Vec<String> },
    Http { method: String, url: String, headers: Vec<(String, String)> },
}

impl NewTransport {
    /// What the transport itself needs: an http tool's `net:<host>`. Both forms of `tool add`
    /// start from these (the wizard offers them, the flags take them when no --capability is
    /// given), so that the same tool gets the same capabilities, and risk class, either way.
    pub fn implied_capabilities(&self) -> Vec<String> {
        match self {
            NewTransport::Http { url, .. } => {
                crate::formats::url_host(url).map(|h| vec![format!("net:{h}")]).unwrap_or_default()
            }
            NewTransport::Exec { .. } => Vec::new(),
        }
    }

    /// The secrets its headers name (`${secret:<id>}`), in order.
    pub fn implied_secrets(&self) -> Vec<String> {
        match self {
            NewTransport::Http { headers, .. } => headers
                .iter()
                .flat_map(|(_, v)| tools::credentials::placeholders(v).unwrap_or_default())
                .map(|p| p.secret)
                .collect(),
            NewTransport::Exec { .. } => Vec::new(),
        }
    }
}

/// The tool to add, as the user described it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTool {
    pub id: String,
    pub description: String,
    pub transport: NewTransport,
    pub input_schema: Value,
    pub result_schema: Value,
    pub capabilities: Vec<String>,
    pub secrets: Vec<String>,
    pub requires_confirmation: bool,
}

impl NewTool {
    /// The tools.json entry, keys in the order docs/book/src/reference/tools-json.md lists them.
    /// Secrets named by a `${secret:<id>}` header placeholder are added to `secrets` when missing.
    pub fn to_json(&self) -> Value {
        let mut secrets = self.secrets.clone();
        let transport = match &self.transport {
            NewTransport::Exec { command, args } => {
                let mut t = Map::new();
                t.insert("kind".into(), "exec".into());
                t.insert("command".into(), command.as_str().into());
                if !args.is_empty() {
                    t.insert("args".into(), args.clone().into());
                }
                t
            }
            NewTransport::Http { method, url, headers } => {
                let mut t = Map::new();
                t.insert("kind".into(), "http".into());
                t.insert("method".into(), method.as_str().into());
                t.insert("url".into(), url.as_str().into());
                if !headers.is_empty() {
                    let h: Map<String, Value> = headers.iter().map(|(k, v)| (k.clone(), v.as_str().into())).collect();
                    t.insert("headers".into(), h.into());
                }
                for (_, value) in headers {
                    for p in tools::credentials::placeholders(value).unwrap_or_default() {
                        if !secrets.contains(&p.secret) {
                            secrets.push(p.secret);
                        }
                    }
                }
                t
            }
        };
        let mut tool = Map::new();
        tool.insert("id".into(), self.id.as_str().into());
        tool.insert("description".into(), self.description.as_str().into());
        tool.insert("transport".into(), transport.into());
        tool.insert("input_schema".into(), self.input_schema.clone());
        tool.insert("result_schema".into(), self.result_schema.clone());
        if !self.capabilities.is_empty() {
            tool.insert("capabilities".into(), self.capabilities.clone().into());
        }
        if !secrets.is_empty() {
            tool.insert("secrets".into(), secrets.into());
        }
        if self.requires_confirmation {
            tool.insert("requires_confirmation".into(), true.into());
        }
        tool.into()
    }
}

/// What `add_tool` did.
#[derive(Debug)]
pub struct Added {
    pub tools_path: PathBuf,
    /// Capabilities appended to policy.caps (with `grant`).
    pub granted: Vec<String>,
    pub policy_path: PathBuf,
    /// Warnings about the new tools.json (errors refuse the write).
    pub report: Report,
    /// The relock that followed; its report holds any problem that kept it from locking.
    pub lock: LockOutcome,
}

/// Why nothing was added.
#[derive(Debug)]
pub enum AddFailure {
    /// The result would not pass `bundle check` (exit 1); nothing was written.
    Rejected(Report),
    /// Usage or I/O (exit 2).
    Error(Error),
}

impl From<Error> for AddFailure {
    fn from(e: Error) -> Self {
        AddFailure::Error(e)
    }
}

/// The capabilities in `wanted` that the agent's policy.caps does not grant yet (malformed
/// ones included, so that validation reports them).
pub fn ungranted(dir: &Path, wanted: &[String]) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join(policy::FILE_NAME)).unwrap_or_default();
    let policy = Policy::parse(&Source::new(policy::FILE_NAME, text), &mut Vec::new());
    wanted
        .iter()
        .filter(|c| Capability::parse(c).map_or(true, |cap| policy.grant_for(&cap).is_none()))
        .cloned()
        .collect()
}

/// Refuses a folder without tools.json before any question is asked (`bundle init` first).
pub fn require_agent(dir: &Path) -> Result<(), Error> {
    if dir.join(tools::FILE_NAME).is_file() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{} has no tools.json; create the agent first with `bundle init {}`",
        dir.display(),
        dir.display()
    )))
}

/// Adds `tool` to the agent in `dir`; with `grant`, also appends the capabilities policy.caps
/// lacks. Writes nothing unless the result passes validation.
pub fn add_tool(dir: &Path, tool: &NewTool, grant: bool) -> Result<Added, AddFailure> {
    let prefix = display_prefix(dir);
    let tools_path = dir.join(tools::FILE_NAME);
    let policy_path = dir.join(policy::FILE_NAME);
    let mut report = Report::default();
    let Some(existing) = read_source(dir, &prefix, tools::FILE_NAME, true, &mut report) else {
        if report.diagnostics.iter().any(|d| d.code == Code::MissingFile) {
            return Err(Error::Usage(format!(
                "{} has no tools.json; create the agent first with `bundle init {}`",
                dir.display(),
                dir.display()
            ))
            .into());
        }
        return Err(AddFailure::Rejected(report));
    };
    let policy_text = match regular_file::read_to_string(&policy_path, limits::MAX_POLICY_BYTES, Links::Refuse) {
        Ok(t) => t,
        Err(regular_file::ReadError::NotFound) => String::new(),
        Err(e) => return Err(Error::io(&policy_path, e.into_io()).into()),
    };

    // A tool is added only to a file that passes as it is: then every problem found below is
    // the new tool's, and nothing the parse would silently drop (a duplicate key) is lost.
    let mut diags = Vec::new();
    let current_policy_source = Source::new(format!("{prefix}{}", policy::FILE_NAME), policy_text.as_str());
    let current_policy = Policy::parse(&current_policy_source, &mut diags);
    let validated = tools::validate(&existing, &dir.to_path_buf(), &prefix, &current_policy, &mut diags);
    let errors: Vec<Diagnostic> = diags.into_iter().filter(Diagnostic::is_error).collect();
    // The document as written (its members in their order), parsed again from the text that
    // just passed: the validation moved its own parse into the typed model.
    let written = validated.valid.filter(|_| errors.is_empty()).and_then(|_| serde_json::from_str(&existing.text).ok());
    let Some(Value::Object(mut doc)) = written else {
        report.add_source(&current_policy_source);
        for s in &validated.sources {
            report.add_source(s);
        }
        report.diagnostics.extend(errors);
        if !report.has_errors() {
            report.push(Diagnostic::error(Code::InvalidJson, &existing.name, "tools.json is not a JSON object"));
        }
        return Err(AddFailure::Rejected(report));
    };
    match doc.get_mut("tools") {
        Some(Value::Array(list)) => list.push(tool.to_json()),
        _ => {
            doc.insert("tools".into(), Value::Array(vec![tool.to_json()]));
        }
    }
    let mut tools_text = serde_json::to_string_pretty(&Value::Object(doc)).map_err(|e| Error::Usage(e.to_string()))?;
    tools_text.push('\n');

    let granted = if grant { ungranted(dir, &tool.capabilities) } else { Vec::new() };
    let granted: Vec<String> = granted.into_iter().filter(|c| Capability::parse(c).is_ok()).collect();
    let mut new_policy = policy_text.clone();
    if !granted.is_empty() {
        if !new_policy.is_empty() && !new_policy.ends_with('\n') {
            new_policy.push('\n');
        }
        for c in &granted {
            new_policy.push_str(c);
            new_policy.push('\n');
        }
    }

    let mut diags = Vec::new();
    let policy_source = Source::new(format!("{prefix}{}", policy::FILE_NAME), new_policy.as_str());
    let policy = Policy::parse(&policy_source, &mut diags);
    let tools_source = Source::new(existing.name.clone(), tools_text.as_str());
    report.sources.clear();
    report.add_source(&tools_source);
    report.add_source(&policy_source);
    let validated = tools::validate(&tools_source, &dir.to_path_buf(), &prefix, &policy, &mut diags);
    for s in &validated.sources {
        report.add_source(s);
    }
    report.diagnostics.extend(diags);
    if report.has_errors() {
        return Err(AddFailure::Rejected(report));
    }

    if new_policy != policy_text {
        atomic::write(&policy_path, new_policy.as_bytes(), true).map_err(|e| Error::io(&policy_path, e))?;
    }
    atomic::write(&tools_path, tools_text.as_bytes(), true).map_err(|e| Error::io(&tools_path, e))?;
    let lock = lock_agent(dir);
    Ok(Added { tools_path, granted, policy_path, report, lock })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_keys_follow_the_documented_order_and_header_secrets_are_listed() {
        let tool = NewTool {
            id: "mail.send".into(),
            description: "Send mail.".into(),
            transport: NewTransport::Http {
                method: "POST".into(),
                url: "https://api.mail.example/send".into(),
                headers: vec![("Authorization".into(), "Bearer ${secret:mail/key}".into())],
            },
            input_schema: default_schema(),
            result_schema: default_schema(),
            capabilities: vec!["net:api.mail.example".into()],
            secrets: Vec::new(),
            requires_confirmation: true,
        };
        let v = tool.to_json();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "id",
                "description",
                "transport",
                "input_schema",
                "result_schema",
                "capabilities",
                "secrets",
                "requires_confirmation"
            ]
        );
        assert_eq!(v["secrets"], json!(["mail/key"]));
        assert_eq!(v["transport"]["kind"], "http");
    }
}
