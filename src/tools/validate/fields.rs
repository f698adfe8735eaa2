//! The checks of a tool's transport, budget and observability fields.

use super::{
    BUDGET_KEYS, Checker, EXEC_KEYS, HTTP_KEYS, HTTP_METHODS, OBSERVABILITY_KEYS, ToolFacts, check_command, check_url,
};
use crate::diagnostic::{Code, did_you_mean};
use crate::json::{At, Json};
use crate::tools::credentials;

impl Checker<'_> {
    pub(super) fn transport<'v>(&mut self, value: &'v Json<'_>, path: &At<'_>, facts: &mut ToolFacts<'v>) {
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
                    for (name, v) in map.iter() {
                        if let Some(s) = self.string(v, &path.key("headers").key(name)) {
                            facts.headers.push((name.to_owned(), s));
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

    pub(super) fn url(&mut self, url: &str, path: &At<'_>, facts: &mut ToolFacts<'_>) {
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

    pub(super) fn budget(&mut self, value: &Json<'_>, path: &At<'_>) {
        let Some(obj) = self.object(value, path) else {
            return;
        };
        self.known_keys(obj, path, BUDGET_KEYS, "budget");
        if let Some(tokens) = obj.get("tokens") {
            let p = path.key("tokens");
            match tokens {
                Json::Number(n) if n.is_u64() => {}
                Json::Number(n) => self.error(
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
                Json::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0 && f.is_finite()) => {}
                Json::Number(n) => self.error(
                    Code::InvalidBudget,
                    &p,
                    format!("budget.usd must be a non-negative number, found {n}"),
                    "write an amount in US dollars, e.g. 0.25",
                ),
                other => self.wrong_type(&p, "a non-negative number", other),
            }
        }
    }

    pub(super) fn observability(&mut self, value: &Json<'_>, path: &At<'_>) {
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
}
