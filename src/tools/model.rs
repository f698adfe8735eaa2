//! The typed tools.json model, built from a document that passed validation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsFile {
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub version: u64,
    #[serde(default)]
    pub tools: Vec<Tool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub id: String,
    pub description: String,
    pub transport: Transport,
    pub input_schema: Value,
    pub result_schema: Value,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub schema_refs: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    #[serde(default)]
    pub requires_confirmation: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observability: Option<Observability>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Transport {
    Exec {
        command: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
    },
    Http {
        method: String,
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Exec { .. } => "exec",
            Transport::Http { .. } => "http",
        }
    }

    /// One line for tables: `exec /usr/bin/x` or `POST https://...`.
    pub fn summary(&self) -> String {
        match self {
            Transport::Exec { command, .. } => format!("exec {command}"),
            Transport::Http { method, url, .. } => format!("{method} {url}"),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observability {
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The typed model built by moving the parts out of a parsed document (what `validate` does
/// once every rule passed): the schemas are moved, not rebuilt, which serde's derive cannot do
/// for a `Value` field. It accepts exactly what the derived `Deserialize` accepts (a test
/// holds the two to the same result); anything else is an error naming where.
impl ToolsFile {
    pub fn from_value(value: Value) -> Result<ToolsFile, String> {
        let (mut schema, mut version, mut tools) = (None, None, Vec::new());
        for (key, v) in members(value, "tools.json")? {
            match key.as_str() {
                "$schema" => schema = optional(v, "$schema", string)?,
                "version" => version = Some(unsigned(v, "version")?),
                "tools" => {
                    let Value::Array(items) = v else { return Err(wrong("tools", "an array")) };
                    tools = items.into_iter().map(Tool::from_value).collect::<Result<_, _>>()?;
                }
                other => return Err(format!("unknown field `{other}` in tools.json")),
            }
        }
        Ok(ToolsFile { schema, version: version.ok_or("missing field `version`")?, tools })
    }
}

impl Tool {
    fn from_value(value: Value) -> Result<Tool, String> {
        let (mut id, mut description, mut transport, mut input_schema, mut result_schema) =
            (None, None, None, None, None);
        let (mut schema_refs, mut capabilities, mut secrets) = (BTreeMap::new(), Vec::new(), Vec::new());
        let (mut budget, mut requires_confirmation, mut observability) = (None, false, None);
        for (key, v) in members(value, "a tool")? {
            match key.as_str() {
                "id" => id = Some(string(v, "id")?),
                "description" => description = Some(string(v, "description")?),
                "transport" => transport = Some(Transport::from_value(v)?),
                "input_schema" => input_schema = Some(v),
                "result_schema" => result_schema = Some(v),
                "schema_refs" => schema_refs = members(v, "schema_refs")?.into_iter().collect(),
                "capabilities" => capabilities = strings(v, "capabilities")?,
                "secrets" => secrets = strings(v, "secrets")?,
                "budget" => budget = optional(v, "budget", |v, _| Budget::from_value(v))?,
                "requires_confirmation" => {
                    let Value::Bool(b) = v else { return Err(wrong("requires_confirmation", "a boolean")) };
                    requires_confirmation = b;
                }
                "observability" => observability = optional(v, "observability", |v, _| Observability::from_value(v))?,
                other => return Err(format!("unknown field `{other}` in a tool")),
            }
        }
        let missing = |field: &str| format!("missing field `{field}`");
        Ok(Tool {
            id: id.ok_or_else(|| missing("id"))?,
            description: description.ok_or_else(|| missing("description"))?,
            transport: transport.ok_or_else(|| missing("transport"))?,
            input_schema: input_schema.ok_or_else(|| missing("input_schema"))?,
            result_schema: result_schema.ok_or_else(|| missing("result_schema"))?,
            schema_refs,
            capabilities,
            secrets,
            budget,
            requires_confirmation,
            observability,
        })
    }
}

impl Transport {
    fn from_value(value: Value) -> Result<Transport, String> {
        let mut fields = members(value, "transport")?;
        let kind = string(fields.remove("kind").ok_or("missing field `kind`")?, "kind")?;
        let (mut command, mut method, mut url) = (None, None, None);
        let (mut args, mut headers) = (Vec::new(), BTreeMap::new());
        for (key, v) in fields {
            match (kind.as_str(), key.as_str()) {
                ("exec", "command") => command = Some(string(v, "command")?),
                ("exec", "args") => args = strings(v, "args")?,
                ("http", "method") => method = Some(string(v, "method")?),
                ("http", "url") => url = Some(string(v, "url")?),
                ("http", "headers") => {
                    headers = members(v, "headers")?
                        .into_iter()
                        .map(|(k, v)| Ok((k, string(v, "a header")?)))
                        .collect::<Result<_, String>>()?
                }
                ("exec" | "http", other) => return Err(format!("unknown field `{other}` in the transport")),
                (other, _) => return Err(format!("unknown variant `{other}`, expected `exec` or `http`")),
            }
        }
        let missing = |field: &str| format!("missing field `{field}`");
        match kind.as_str() {
            "exec" => Ok(Transport::Exec { command: command.ok_or_else(|| missing("command"))?, args }),
            "http" => Ok(Transport::Http {
                method: method.ok_or_else(|| missing("method"))?,
                url: url.ok_or_else(|| missing("url"))?,
                headers,
            }),
            other => Err(format!("unknown variant `{other}`, expected `exec` or `http`")),
        }
    }
}

impl Budget {
    fn from_value(value: Value) -> Result<Budget, String> {
        let mut budget = Budget { tokens: None, usd: None };
        for (key, v) in members(value, "budget")? {
            match key.as_str() {
                "tokens" => budget.tokens = optional(v, "tokens", unsigned)?,
                "usd" => {
                    budget.usd = optional(v, "usd", |v, what| match v {
                        Value::Number(n) => n.as_f64().ok_or_else(|| wrong(what, "a number")),
                        _ => Err(wrong(what, "a number")),
                    })?
                }
                other => return Err(format!("unknown field `{other}` in budget")),
            }
        }
        Ok(budget)
    }
}

impl Observability {
    fn from_value(value: Value) -> Result<Observability, String> {
        let mut tags = Vec::new();
        for (key, v) in members(value, "observability")? {
            match key.as_str() {
                "tags" => tags = strings(v, "tags")?,
                other => return Err(format!("unknown field `{other}` in observability")),
            }
        }
        Ok(Observability { tags })
    }
}

fn wrong(what: &str, expected: &str) -> String {
    format!("`{what}` must be {expected}")
}

fn members(value: Value, what: &str) -> Result<serde_json::Map<String, Value>, String> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(wrong(what, "an object")),
    }
}

fn string(value: Value, what: &str) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s),
        _ => Err(wrong(what, "a string")),
    }
}

fn strings(value: Value, what: &str) -> Result<Vec<String>, String> {
    match value {
        Value::Array(items) => items.into_iter().map(|v| string(v, what)).collect(),
        _ => Err(wrong(what, "an array of strings")),
    }
}

fn unsigned(value: Value, what: &str) -> Result<u64, String> {
    match &value {
        Value::Number(n) => n.as_u64().ok_or_else(|| wrong(what, "a non-negative integer")),
        _ => Err(wrong(what, "a non-negative integer")),
    }
}

/// `null` is absent, as serde reads an `Option`.
fn optional<T>(value: Value, what: &str, read: impl Fn(Value, &str) -> Result<T, String>) -> Result<Option<T>, String> {
    match value {
        Value::Null => Ok(None),
        v => read(v, what).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the derived `Deserialize` makes of `value`, for comparison (errors by kind only:
    /// their words differ).
    fn derived(value: &Value) -> Result<Value, ()> {
        ToolsFile::deserialize(value).map(|f| serde_json::to_value(f).unwrap()).map_err(|_| ())
    }

    fn built(value: Value) -> Result<Value, ()> {
        ToolsFile::from_value(value).map(|f| serde_json::to_value(f).unwrap()).map_err(|_| ())
    }

    #[test]
    fn from_value_accepts_what_the_derived_model_accepts_in_every_testdata_tools_json() {
        let mut seen = 0;
        for entry in walkdir::WalkDir::new(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata")) {
            let entry = entry.unwrap();
            if entry.file_name() != "tools.json" {
                continue;
            }
            let Ok(value) = serde_json::from_slice::<Value>(&std::fs::read(entry.path()).unwrap()) else {
                continue;
            };
            assert_eq!(built(value.clone()), derived(&value), "{}", entry.path().display());
            seen += 1;
        }
        assert!(seen >= 50, "only {seen} tools.json files found");
    }

    #[test]
    fn from_value_refuses_what_the_derived_model_refuses() {
        let tool = serde_json::json!({
            "id": "a.b", "description": "d", "input_schema": {}, "result_schema": true,
            "transport": {"kind": "exec", "command": "/bin/x", "args": ["-v"]},
            "budget": {"tokens": 5, "usd": 1}, "observability": {"tags": ["t"]},
            "schema_refs": {"x": {"type": "object"}}, "capabilities": ["net:a"], "secrets": ["s/t"],
            "requires_confirmation": true
        });
        let file = |tool: Value| serde_json::json!({"version": 1, "tools": [tool]});
        let edits: Vec<(&str, Value)> = vec![
            ("id", Value::Null),
            ("requires_confirmation", Value::Null),
            ("budget", Value::Null),
            ("budget", serde_json::json!({"tokens": 1.5})),
            ("budget", serde_json::json!({"tokens": -1})),
            ("budget", serde_json::json!({"usd": "1"})),
            ("budget", serde_json::json!({"other": 1})),
            ("observability", serde_json::json!({"tags": [1]})),
            ("capabilities", Value::Null),
            ("schema_refs", serde_json::json!([])),
            ("transport", serde_json::json!({"kind": "ftp"})),
            ("transport", serde_json::json!({"command": "/bin/x"})),
            ("transport", serde_json::json!({"kind": "exec"})),
            ("transport", serde_json::json!({"kind": "exec", "command": "/x", "url": "u"})),
            ("transport", serde_json::json!({"kind": "http", "method": "GET", "url": "u", "headers": {"a": 1}})),
            ("transport", serde_json::json!({"kind": "http", "method": "GET", "url": "u", "headers": {"a": "b"}})),
            ("transport", serde_json::json!({"kind": "http", "method": "GET"})),
            ("extra", Value::Bool(true)),
        ];
        assert!(built(file(tool.clone())).is_ok());
        assert_eq!(built(file(tool.clone())), derived(&file(tool.clone())));
        for (key, v) in edits {
            let mut t = tool.clone();
            t[key] = v;
            assert_eq!(built(file(t.clone())), derived(&file(t.clone())), "{key}: {t}");
        }
        for key in ["id", "description", "transport", "input_schema", "result_schema"] {
            let mut t = tool.clone();
            t.as_object_mut().unwrap().remove(key);
            assert_eq!(built(file(t.clone())), derived(&file(t)), "without {key}");
        }
        for top in [
            serde_json::json!({"tools": []}),
            serde_json::json!({"version": 1.0}),
            serde_json::json!({"version": 1, "$schema": null}),
            serde_json::json!({"version": 1, "$schema": 3}),
            serde_json::json!({"version": 1, "other": 3}),
            serde_json::json!({"version": 1, "tools": {}}),
            serde_json::json!([]),
        ] {
            assert_eq!(built(top.clone()), derived(&top), "{top}");
        }
    }
}
