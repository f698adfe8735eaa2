//! `bundle tool add <AGENT_DIR>`: add a tool to tools.json from flags, or by asking for what
//! is missing on a terminal. The questions are asked here (only the CLI talks to the user);
//! `ops::tool_add` validates the result and writes it.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::Value;

use agent_bundle::agent::LockReport;
use agent_bundle::bundle::MAX_JSON_BYTES;
use agent_bundle::diagnostic::Code;
use agent_bundle::ops::tool_add::{self, AddFailure, NewTool, NewTransport};
use agent_bundle::tools::validate::{HTTP_METHODS, check_command, check_tool_id, check_url};

use crate::cli::json::{self, ToolAddReport};
use crate::cli::{Format, Global, Outcome, output};

/// Add a tool to AGENT_DIR/tools.json, then relock manifest.toml.
///
/// Describe the tool with flags; on a terminal, whatever required field is left out is asked
/// for. The result is checked with the rules of `bundle check` before anything is written: if
/// the new tool would fail (a bad id, a capability policy.caps does not grant, a literal
/// credential in a header...) nothing is written. Input and result schemas default to
/// {"type": "object"}. tools.json is rewritten pretty-printed (2-space indent), keeping its
/// key order.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  bundle tool add agents/mailer          # on a terminal: asks for each field
  bundle tool add agents/mailer --id mail.render \\
      --description 'Render a draft.' --exec /usr/bin/mail-render --arg --stdin
  bundle tool add agents/mailer --id mail.send --description 'Send a draft.' \\
      --http POST 'https://api.mail.example/v1/send' \\
      --header 'Authorization=Bearer ${secret:mail/api_key}' \\
      --capability net:api.mail.example --grant --requires-confirmation")]
pub struct AddArgs {
    /// The agent folder (it holds tools.json).
    agent_dir: PathBuf,
    /// Tool id: lowercase dot-separated segments, e.g. mail.smtp_send.
    #[arg(long)]
    id: Option<String>,
    /// What the tool does.
    #[arg(long)]
    description: Option<String>,
    /// Run a local program, given by its absolute path.
    #[arg(long, value_name = "PATH", conflicts_with = "http")]
    exec: Option<String>,
    /// An argument for --exec (repeatable, kept in order).
    #[arg(long = "arg", value_name = "ARG", requires = "exec", allow_hyphen_values = true)]
    args: Vec<String>,
    /// Call an HTTP endpoint: a method and an absolute URL ({name} is filled from the input).
    #[arg(long, num_args = 2, value_names = ["METHOD", "URL"])]
    http: Option<Vec<String>>,
    /// An HTTP header as NAME=VALUE (repeatable); write secrets as ${secret:<id>}.
    #[arg(long = "header", value_name = "NAME=VALUE", requires = "http")]
    headers: Vec<String>,
    /// A capability the tool needs, e.g. net:api.mail.example (repeatable; without any, an
    /// --http tool needs net:<its host>, as the interactive form suggests).
    #[arg(long = "capability", value_name = "CAP")]
    capabilities: Vec<String>,
    /// A secret the tool needs, e.g. mail/api_key (repeatable; header placeholders add theirs).
    #[arg(long = "secret", value_name = "ID")]
    secrets: Vec<String>,
    /// A person must confirm each call.
    #[arg(long)]
    requires_confirmation: bool,
    /// Input JSON Schema: inline JSON, @FILE to read it from a file, or schema:<id> for a
    /// schema file of the agent.
    #[arg(long, value_name = "SCHEMA")]
    input_schema: Option<String>,
    /// Result JSON Schema: inline JSON, @FILE, or schema:<id> for a schema file of the agent.
    #[arg(long, value_name = "SCHEMA")]
    result_schema: Option<String>,
    /// Also grant the tool's capabilities in policy.caps where they are not granted yet.
    #[arg(long)]
    grant: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(in crate::cli) format: Format,
}

/// The required fields the flags leave out.
fn missing_flags(a: &AddArgs) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if a.id.is_none() {
        missing.push("--id");
    }
    if a.description.is_none() {
        missing.push("--description");
    }
    if a.exec.is_none() && a.http.is_none() {
        missing.push("(--exec PATH or --http METHOD URL)");
    }
    missing
}

pub fn run(a: AddArgs, global: Global) -> anyhow::Result<Outcome> {
    let missing = missing_flags(&a);
    let (tool, grant) = if missing.is_empty() {
        (from_flags(&a)?, a.grant)
    } else if io::stdin().is_terminal() {
        let dir = a.agent_dir.clone();
        // Said before the questions, not after them.
        tool_add::require_agent(&dir)?;
        let mut prompter = Prompter { input: io::stdin().lock(), output: io::stderr() };
        ask(&a, &mut prompter, |caps| tool_add::ungranted(&dir, caps))?
    } else {
        bail!("missing {}: give them as flags, or run on a terminal to be asked for them", missing.join(" "));
    };
    let id = tool.id.clone();
    match tool_add::add_tool(&a.agent_dir, &tool, grant) {
        Ok(added) => {
            let mut report = added.report;
            let locked = added.lock.is_ok();
            let relocked = added.lock.written();
            let manifest_path = added.lock.manifest_path().to_path_buf();
            report.extend(added.lock.into_report());
            match a.format {
                Format::Json => output::print_json(&ToolAddReport {
                    ok: locked,
                    tool: &id,
                    tools_file: added.tools_path.display().to_string(),
                    granted: &added.granted,
                    relocked,
                    diagnostics: json::diagnostics(&report.diagnostics),
                })?,
                Format::Github => {
                    output::github(&report)?;
                    output::print_line(&output::github_annotation(
                        "notice",
                        Some(&added.tools_path.display().to_string()),
                        "tool added",
                        &format!("added tool `{id}`"),
                    ))?;
                }
                Format::Human => {
                    output::human(&report, global)?;
                    output::status(global, &format!("added tool `{id}` to {}", added.tools_path.display()));
                    if !added.granted.is_empty() {
                        output::status(
                            global,
                            &format!("granted {} in {}", added.granted.join(", "), added.policy_path.display()),
                        );
                    }
                    if relocked {
                        output::status(global, &format!("relocked {}", manifest_path.display()));
                    }
                    if !locked {
                        output::print_error_line(
                            global,
                            "the tool was added, but manifest.toml could not be relocked: fix the above, then run `bundle lock`",
                        );
                    }
                }
            }
            Ok(if locked { Outcome::Ok } else { Outcome::Rejected })
        }
        Err(AddFailure::Rejected(report)) => {
            crate::cli::check::render_report(&report, a.format, global, "tool add")?;
            if a.format == Format::Human {
                output::status(global, "nothing was written");
                let ungranted = report.diagnostics.iter().any(|d| d.code == Code::CapabilityNotGranted);
                if ungranted && !grant {
                    output::status(global, "hint: add --grant to grant the tool's capabilities in policy.caps too");
                }
            }
            Ok(crate::cli::check::outcome(&report))
        }
        Err(AddFailure::Error(e)) => Err(e.into()),
    }
}

/// A UTF-8 text file of at most `limit` bytes (a schema file is held to the cap verify puts on
/// a bundle's JSON files, and a FIFO or /dev/zero cannot make it read forever).
fn read_capped(path: &std::path::Path, limit: u64) -> anyhow::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        bail!("not a regular file");
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        bail!("larger than {limit} bytes");
    }
    Ok(String::from_utf8(bytes)?)
}

/// `NAME=VALUE` (or `NAME: VALUE`): split at the first `=` or `:`, which a header name cannot hold.
fn parse_header(text: &str) -> anyhow::Result<(String, String)> {
    match text.find(['=', ':']) {
        Some(i) if !text[..i].trim().is_empty() => Ok((text[..i].trim().to_owned(), text[i + 1..].trim().to_owned())),
        _ => bail!("header `{text}` is not NAME=VALUE"),
    }
}

/// Inline JSON, `@FILE` for the JSON in a file, or `schema:<id>` for `{"$ref": "schema:<id>"}`.
fn parse_schema(flag: &str, text: Option<&str>) -> anyhow::Result<Value> {
    match text {
        None => Ok(tool_add::default_schema()),
        Some(t) if t.starts_with("schema:") => Ok(serde_json::json!({ "$ref": t })),
        Some(t) if t.starts_with('@') => {
            let path = std::path::Path::new(&t[1..]);
            let text =
                read_capped(path, MAX_JSON_BYTES).with_context(|| format!("{flag}: cannot read {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{flag}: {} is not JSON", path.display()))
        }
        Some(t) => serde_json::from_str(t).with_context(|| format!("{flag} is neither JSON, @FILE nor schema:<id>")),
    }
}

fn from_flags(a: &AddArgs) -> anyhow::Result<NewTool> {
    let transport = match (&a.exec, &a.http) {
        (Some(command), _) => NewTransport::Exec { command: command.clone(), args: a.args.clone() },
        (None, Some(http)) => NewTransport::Http {
            method: http[0].to_ascii_uppercase(),
            url: http[1].clone(),
            headers: a.headers.iter().map(|h| parse_header(h)).collect::<anyhow::Result<_>>()?,
        },
        (None, None) => bail!("give --exec PATH or --http METHOD URL"),
    };
    Ok(NewTool {
        id: a.id.clone().unwrap_or_default(),
        description: a.description.clone().unwrap_or_default(),
        input_schema: parse_schema("--input-schema", a.input_schema.as_deref())?,
        result_schema: parse_schema("--result-schema", a.result_schema.as_deref())?,
        capabilities: if a.capabilities.is_empty() { transport.implied_capabilities() } else { a.capabilities.clone() },
        secrets: a.secrets.clone(),
        requires_confirmation: a.requires_confirmation,
        transport,
    })
}

/// Questions on `output`, answers from `input`, one line each.
struct Prompter<R, W> {
    input: R,
    output: W,
}

impl<R: BufRead, W: Write> Prompter<R, W> {
    /// One answer, trimmed; an empty answer takes the default.
    fn line(&mut self, question: &str, default: Option<&str>) -> anyhow::Result<String> {
        match default {
            Some(d) if !d.is_empty() => write!(self.output, "{question} [{d}]: ")?,
            _ => write!(self.output, "{question}: ")?,
        }
        self.output.flush()?;
        let mut answer = String::new();
        if self.input.read_line(&mut answer)? == 0 {
            bail!("the input ended before the tool was complete; nothing was written");
        }
        let answer = answer.trim();
        Ok(if answer.is_empty() { default.unwrap_or_default().to_owned() } else { answer.to_owned() })
    }

    /// Asks until `check` accepts the answer, saying why it did not.
    fn valid(
        &mut self,
        question: &str,
        default: Option<&str>,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> anyhow::Result<String> {
        loop {
            let answer = self.line(question, default)?;
            match check(&answer) {
                Ok(()) => return Ok(answer),
                Err(why) => writeln!(self.output, "  {why}")?,
            }
        }
    }

    /// A comma- or space-separated list.
    fn list(&mut self, question: &str, default: &[String]) -> anyhow::Result<Vec<String>> {
        let answer = self.line(question, Some(&default.join(", ")))?;
        Ok(answer.split([',', ' ']).filter(|s| !s.is_empty()).map(str::to_owned).collect())
    }

    /// One answer per line until an empty one.
    fn many(&mut self, question: &str, check: impl Fn(&str) -> Result<(), String>) -> anyhow::Result<Vec<String>> {
        let mut answers = Vec::new();
        loop {
            let answer = self.line(&format!("{question} (empty line to finish)"), None)?;
            if answer.is_empty() {
                return Ok(answers);
            }
            match check(&answer) {
                Ok(()) => answers.push(answer),
                Err(why) => writeln!(self.output, "  {why}")?,
            }
        }
    }

    fn yes_no(&mut self, question: &str, default: bool) -> anyhow::Result<bool> {
        let hint = if default { "Y/n" } else { "y/N" };
        loop {
            match self.line(&format!("{question} [{hint}]"), None)?.to_ascii_lowercase().as_str() {
                "" => return Ok(default),
                "y" | "yes" => return Ok(true),
                "n" | "no" => return Ok(false),
                _ => writeln!(self.output, "  answer y or n")?,
            }
        }
    }
}

fn non_empty(s: &str) -> Result<(), String> {
    if s.is_empty() { Err("this cannot be empty".to_owned()) } else { Ok(()) }
}

/// The wizard: asks for every field the flags did not give. `ungranted` says which
/// capabilities policy.caps lacks, to offer granting them.
fn ask<R: BufRead, W: Write>(
    a: &AddArgs,
    p: &mut Prompter<R, W>,
    ungranted: impl Fn(&[String]) -> Vec<String>,
) -> anyhow::Result<(NewTool, bool)> {
    writeln!(
        p.output,
        "Adding a tool to {}. Enter accepts the [default].",
        a.agent_dir.join(agent_bundle::tools::FILE_NAME).display()
    )?;
    let id = match &a.id {
        Some(id) => id.clone(),
        None => p.valid("Tool id (e.g. mail.smtp_send)", None, check_tool_id)?,
    };
    let description = match &a.description {
        Some(d) => d.clone(),
        None => p.valid("Description", None, non_empty)?,
    };
    let transport = if a.exec.is_some() || a.http.is_some() {
        from_flags(a)?.transport
    } else {
        let kind = p.valid("Transport: exec (a local program) or http", Some("exec"), |k| match k {
            "exec" | "http" => Ok(()),
            _ => Err("answer exec or http".to_owned()),
        })?;
        if kind == "exec" {
            let command = p.valid("Command (absolute path)", None, check_command)?;
            let args = p.many("Argument", |_| Ok(()))?;
            NewTransport::Exec { command, args }
        } else {
            let method = p
                .valid("HTTP method", Some("POST"), |m| {
                    if HTTP_METHODS.contains(&m.to_ascii_uppercase().as_str()) {
                        Ok(())
                    } else {
                        Err(format!("use one of {}", HTTP_METHODS.join(" ")))
                    }
                })?
                .to_ascii_uppercase();
            let url = p.valid("URL ({name} is filled from the input)", None, |u| check_url(u).map(|_| ()))?;
            let headers = p
                .many("Header as Name: value (secrets as ${secret:<id>})", |h| {
                    parse_header(h).map(|_| ()).map_err(|e| e.to_string())
                })?
                .iter()
                .map(|h| parse_header(h))
                .collect::<anyhow::Result<_>>()?;
            NewTransport::Http { method, url, headers }
        }
    };
    let capabilities = if a.capabilities.is_empty() {
        let suggested = transport.implied_capabilities();
        p.list("Capabilities it needs (comma-separated, - for none)", &suggested)?
            .into_iter()
            .filter(|c| c != "-")
            .collect()
    } else {
        a.capabilities.clone()
    };
    let secrets = if a.secrets.is_empty() {
        let from_headers = transport.implied_secrets();
        p.list("Secrets it needs (comma-separated)", &from_headers)?
    } else {
        a.secrets.clone()
    };
    let requires_confirmation = a.requires_confirmation || p.yes_no("Must a person confirm each call?", false)?;
    let missing = ungranted(&capabilities);
    let grant = a.grant
        || (!missing.is_empty()
            && p.yes_no(&format!("policy.caps does not grant {}; grant it there?", missing.join(", ")), true)?);
    let tool = NewTool {
        id,
        description,
        transport,
        input_schema: parse_schema("--input-schema", a.input_schema.as_deref())?,
        result_schema: parse_schema("--result-schema", a.result_schema.as_deref())?,
        capabilities,
        secrets,
        requires_confirmation,
    };
    Ok((tool, grant))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn args(extra: &[&str]) -> AddArgs {
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            add: AddArgs,
        }
        let mut argv = vec!["add", "agents/a"];
        argv.extend(extra);
        Wrap::parse_from(argv).add
    }

    fn wizard(extra: &[&str], input: &str, ungranted: &[&str]) -> (anyhow::Result<(NewTool, bool)>, String) {
        let mut output = Vec::new();
        let result = {
            let mut p = Prompter { input: input.as_bytes(), output: &mut output };
            let missing: Vec<String> = ungranted.iter().map(|s| s.to_string()).collect();
            ask(&args(extra), &mut p, |_| missing.clone())
        };
        (result, String::from_utf8(output).unwrap())
    }

    #[test]
    fn wizard_asks_for_an_http_tool_and_re_asks_invalid_answers() {
        let input = "Mail.Send\nmail.send\nSend a draft.\nhttp\nFETCH\npost\nhttps://api.mail.example/v1/send\n\
                     Authorization: Bearer ${secret:mail/key}\n\n\n\ny\n\n";
        let (result, shown) = wizard(&[], input, &["net:api.mail.example"]);
        let (tool, grant) = result.unwrap();
        assert_eq!(tool.id, "mail.send");
        assert_eq!(tool.description, "Send a draft.");
        assert_eq!(
            tool.transport,
            NewTransport::Http {
                method: "POST".into(),
                url: "https://api.mail.example/v1/send".into(),
                headers: vec![("Authorization".into(), "Bearer ${secret:mail/key}".into())],
            }
        );
        assert_eq!(tool.capabilities, ["net:api.mail.example"], "the host is suggested");
        assert_eq!(tool.secrets, ["mail/key"], "the header's secret is suggested");
        assert!(tool.requires_confirmation);
        assert!(grant, "granting defaults to yes");
        assert!(shown.contains("invalid segment `Mail`"), "{shown}");
        assert!(shown.contains("use one of GET"), "{shown}");
        assert!(
            shown.contains("Capabilities it needs (comma-separated, - for none) [net:api.mail.example]: "),
            "{shown}"
        );
    }

    /// Issue 24 item 9: the same http tool, added with flags or through the wizard (accepting
    /// its suggestions), gets the same capabilities, and so the same risk class.
    #[test]
    fn the_wizard_and_the_flags_give_one_tool_the_same_capabilities() {
        let flags =
            ["--id", "mail.send", "--description", "Send.", "--http", "POST", "https://api.mail.example/v1/send"];
        let by_flags = from_flags(&args(&flags)).unwrap();
        let (result, _) = wizard(&flags, "\n\nn\nn\n", &["net:api.mail.example"]);
        let (asked, _) = result.unwrap();
        assert_eq!(by_flags.capabilities, ["net:api.mail.example"]);
        assert_eq!(asked.capabilities, by_flags.capabilities);
        assert_eq!(asked.secrets, by_flags.secrets);
    }

    #[test]
    fn wizard_asks_only_what_the_flags_leave_out() {
        let (result, shown) = wizard(
            &["--id", "kb.search", "--capability", "fs:/data/*"],
            "Search.\nexec\n/usr/bin/kb\n--json\n\n\nn\nn\n",
            &["fs:/data/*"],
        );
        let (tool, grant) = result.unwrap();
        assert_eq!(tool.id, "kb.search");
        assert_eq!(tool.transport, NewTransport::Exec { command: "/usr/bin/kb".into(), args: vec!["--json".into()] });
        assert_eq!(tool.capabilities, ["fs:/data/*"]);
        assert!(!tool.requires_confirmation && !grant);
        assert!(!shown.contains("Tool id") && !shown.contains("Capabilities"), "{shown}");
    }

    #[test]
    fn wizard_stops_when_the_input_ends() {
        let (result, _) = wizard(&[], "mail.send\n", &[]);
        assert!(result.unwrap_err().to_string().contains("nothing was written"));
    }

    #[test]
    fn headers_and_schemas_from_flags() {
        assert_eq!(parse_header("X-Key=a=b").unwrap(), ("X-Key".into(), "a=b".into()));
        assert_eq!(parse_header("Authorization: Bearer ${secret:a}").unwrap().1, "Bearer ${secret:a}");
        assert!(parse_header("=x").is_err());
        assert_eq!(parse_schema("--input-schema", Some("schema:mail.v1")).unwrap()["$ref"], "schema:mail.v1");
        assert!(parse_schema("--input-schema", Some("{")).is_err());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.json");
        std::fs::write(&file, r#"{"type": "object", "required": ["to"]}"#).unwrap();
        let at = format!("@{}", file.display());
        assert_eq!(parse_schema("--input-schema", Some(&at)).unwrap()["required"][0], "to");
        let missing = parse_schema("--input-schema", Some("@/nonexistent/in.json")).unwrap_err();
        assert!(format!("{missing:#}").contains("cannot read /nonexistent/in.json"), "{missing:#}");
        assert_eq!(crate::formats::url_host("https://u@api.x.com:8443/v1/{id}").as_deref(), Some("api.x.com"));
    }
}
