//! The skills of an agent folder (`skills/<name>/SKILL.md` and the files beside it): each
//! checked by the Agent Skills rules (`crate::skill`) and against tools.json, and summed up
//! as [`SkillFacts`] with the digest of its folder's files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::limits::{MAX_SKILL_BYTES, MAX_SKILL_FILES};
use crate::regular_file::{self, Links, ReadError};
use crate::skill::client_tool::ClientTool;
use crate::skill::facts::{SkillFacts, digest};
use crate::skill::{self, SkillDoc};

/// What a skill's `allowed-tools` may name: the ids of tools.json, each tool of an MCP server
/// pinned in manifest.toml as `mcp__<server>__<tool>` ([`skill::MCP_PREFIX`]), and the client
/// tools manifest.toml `[skills] client_tools` declares ([`ClientTool`]).
#[derive(Debug, Clone, Default)]
pub struct Callable {
    pub tools: BTreeSet<String>,
    /// Pinned MCP servers by name, each with the names of the tools its pin holds.
    pub mcp: BTreeMap<String, BTreeSet<String>>,
    /// Declared client tools, in manifest order.
    pub client: Vec<ClientTool>,
}

impl Callable {
    /// The tools of tools.json, the pinned MCP servers `pins` (those that could be read) and
    /// the declared client tools `client`.
    pub fn new<'a>(
        tools: impl IntoIterator<Item = &'a str>,
        pins: &[crate::formats::mcp_pin::McpPin],
        client: &[ClientTool],
    ) -> Callable {
        let names = |p: &crate::formats::mcp_pin::McpPin| {
            p.tools.iter().filter_map(|t| t.get("name")?.as_str().map(str::to_owned)).collect()
        };
        Callable {
            tools: tools.into_iter().map(str::to_owned).collect(),
            mcp: pins.iter().map(|p| (p.server.clone(), names(p))).collect(),
            client: client.to_vec(),
        }
    }

    /// Why `name` names no tool the agent has (the message and the help), or `None` when it
    /// names one. A tools.json id is matched first: `mcp__a__b` is a valid tool id too.
    pub fn unknown(&self, name: &str) -> Option<(String, String)> {
        if self.tools.contains(name) {
            return None;
        }
        let Some(rest) = name.strip_prefix(skill::MCP_PREFIX) else {
            return self.unknown_client_tool(name);
        };
        let each = |server: &str, tools: &BTreeSet<String>| {
            let listed: Vec<String> =
                tools.iter().map(|t| format!("{}{server}{}{t}", skill::MCP_PREFIX, skill::MCP_SEPARATOR)).collect();
            format!("name each pinned tool of `{server}`: {}", listed.join(" "))
        };
        let mut matched = None;
        for (server, tools) in &self.mcp {
            let Some(tail) = rest.strip_prefix(server.as_str()) else { continue };
            if tail.is_empty() || tail == format!("{}*", skill::MCP_SEPARATOR) {
                return Some((
                    format!("allowed tool `{name}` names every tool of MCP server `{server}`, now and later"),
                    each(server, tools),
                ));
            }
            match tail.strip_prefix(skill::MCP_SEPARATOR) {
                Some(tool) if tools.contains(tool) => return None,
                Some(tool) => matched = Some((server, tool, tools)),
                None => {}
            }
        }
        Some(match matched {
            Some((server, tool, tools)) => {
                let close = tools.iter().find(|t| strsim::jaro_winkler(t, tool) > 0.85);
                let help = match close {
                    Some(t) => format!("did you mean `{}{server}{}{t}`?", skill::MCP_PREFIX, skill::MCP_SEPARATOR),
                    None => format!(
                        "{}; if the server serves it now, pin it again (`bundle check --refresh` shows the drift)",
                        each(server, tools)
                    ),
                };
                (format!("allowed tool `{name}`: the pinned MCP server `{server}` has no tool `{tool}`"), help)
            }
            None if self.mcp.is_empty() => (
                format!("allowed tool `{name}` names an MCP tool, but the agent pins no MCP server"),
                "pin the server first: `bundle import --from mcp --stdio CMD --pin --server NAME`".to_owned(),
            ),
            None => (
                format!("allowed tool `{name}` names no pinned MCP server"),
                format!(
                    "the pinned servers are {}; write {}<server>{}<tool>",
                    self.mcp.keys().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
                    skill::MCP_PREFIX,
                    skill::MCP_SEPARATOR
                ),
            ),
        })
    }
}

impl Callable {
    /// Why `name`, neither a tools.json id nor an MCP tool, is no declared client tool either.
    fn unknown_client_tool(&self, name: &str) -> Option<(String, String)> {
        let entry = match ClientTool::parse(name) {
            Ok(entry) => entry,
            Err(why) if name.contains('(') => {
                return Some((
                    format!("allowed tool {why}: not a well-formed `Tool(pattern)`"),
                    "write a client tool's use as Claude Code does, e.g. `Bash(git diff *)` or `Bash(git:*)`, \
                     and declare it in manifest.toml `[skills] client_tools`"
                        .to_owned(),
                ));
            }
            Err(_) => return Some(self.not_a_tool(name)),
        };
        if self.client.iter().any(|c| c.allows(&entry)) {
            return None;
        }
        let message =
            format!("allowed tool `{name}` is not a tool of tools.json nor a client tool manifest.toml declares");
        let close =
            self.tools.iter().cloned().chain(self.client.iter().map(ClientTool::to_string)).find(|t| near(t, name));
        let same_tool: Vec<String> =
            self.client.iter().filter(|c| c.tool == entry.tool).map(|c| format!("`{c}`")).collect();
        let help = match close {
            Some(t) => format!("did you mean `{t}`?"),
            None if !same_tool.is_empty() => format!(
                "manifest.toml declares only {} of `{}`; declare `{name}` in `[skills] client_tools` if the skill \
                 needs it (a widening `bundle diff` reports)",
                same_tool.join(", "),
                entry.tool
            ),
            None => format!(
                "if `{name}` is a built-in tool of the skill's client, declare it in manifest.toml: \
                 `[skills] client_tools = [{name:?}]` (a widening `bundle diff` reports); else name a tool of tools.json"
            ),
        };
        Some((message, help))
    }

    /// `name` is neither a tools.json id nor shaped like a client tool.
    fn not_a_tool(&self, name: &str) -> (String, String) {
        let close = self.tools.iter().find(|t| strsim::jaro_winkler(t, name) > 0.85);
        let help = match close {
            Some(t) => format!("did you mean `{t}`? allowed-tools names tools.json ids"),
            None => format!(
                "name a tool of tools.json (or add it there), a pinned MCP tool as {}<server>{}<tool>, \
                     or a client tool as `Read` or `Bash(git:*)`",
                skill::MCP_PREFIX,
                skill::MCP_SEPARATOR
            ),
        };
        (format!("allowed tool `{name}` is not a tool of tools.json"), help)
    }
}

/// Whether `a` looks like a typo of `b`: at most one edit in four characters (`Reed`, `Read`),
/// not a neighbour with the same prefix (`WebSearch`, `WebFetch`).
fn near(a: &str, b: &str) -> bool {
    strsim::damerau_levenshtein(a, b) <= (a.chars().count().max(b.chars().count()) / 4).max(1)
}

/// Checks the skills of the agent in `dir` (nothing to do without a `skills/` folder).
/// `callable`: what allowed tools may name, when tools.json was valid (they are checked only
/// then).
pub fn check(
    dir: &Path,
    prefix: &str,
    callable: Option<&Callable>,
    report: &mut Report,
    diags: &mut Vec<Diagnostic>,
) -> Vec<SkillFacts> {
    let root = dir.join(skill::DIR);
    let Ok(meta) = std::fs::symlink_metadata(&root) else { return Vec::new() };
    if !meta.is_dir() {
        return Vec::new();
    }
    let shown = format!("{prefix}{}", skill::DIR);
    let mut entries: Vec<_> = match std::fs::read_dir(&root) {
        Ok(rd) => rd.filter_map(Result::ok).collect(),
        Err(e) => {
            diags.push(Diagnostic::error(Code::IoError, &shown, format!("cannot read {}: {e}", skill::DIR)));
            return Vec::new();
        }
    };
    if entries.len() > MAX_SKILL_FILES {
        diags.push(Diagnostic::error(
            Code::LimitExceeded,
            &shown,
            format!("more than {MAX_SKILL_FILES} entries in {}/", skill::DIR),
        ));
        return Vec::new();
    }
    entries.sort_by_key(|e| e.file_name());
    let mut facts = Vec::new();
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        // Symlinks and other files are the agent check's business (unsupported_file_type).
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let rel = format!("{}/{name}/{}", skill::DIR, skill::FILE_NAME);
        let display = format!("{prefix}{rel}");
        let Some(source) = read_skill(&dir.join(&rel), &display, diags) else { continue };
        report.add_source(&source);
        let Some(doc) = skill::parse(&source, &name, diags) else { continue };
        if let Some(callable) = callable {
            check_allowed(&source, &doc, callable, diags);
        }
        match folder_digest(dir, &name) {
            Ok((digest, files)) => facts.push(SkillFacts::of(&doc, digest, files)),
            Err(message) => diags.push(Diagnostic::error(Code::LimitExceeded, &display, message)),
        }
    }
    facts
}

/// Every allowed tool of `doc` that names nothing the agent has is an `unknown_allowed_tool`.
pub fn check_allowed(source: &Source, doc: &SkillDoc, callable: &Callable, diags: &mut Vec<Diagnostic>) {
    for (name, span) in &doc.allowed_tools {
        if let Some((message, help)) = callable.unknown(name) {
            diags.push(
                Diagnostic::error(Code::UnknownAllowedTool, &source.name, message)
                    .at_path("allowed-tools")
                    .at_span(source, span.clone())
                    .with_help(help),
            );
        }
    }
}

fn read_skill(path: &Path, display: &str, diags: &mut Vec<Diagnostic>) -> Option<Source> {
    match regular_file::read(path, MAX_SKILL_BYTES, Links::Refuse) {
        Ok(bytes) => match crate::json::decode_utf8(display, bytes) {
            Ok(text) => Some(Source::new(display, text)),
            Err(d) => {
                diags.push(d);
                None
            }
        },
        Err(ReadError::NotFound) => {
            diags.push(
                Diagnostic::error(Code::MissingSkillFile, display, "the skill folder has no SKILL.md")
                    .with_help("add a SKILL.md with `name` and `description`, or move the folder out of skills/"),
            );
            None
        }
        Err(ReadError::TooLarge { limit }) => {
            diags.push(Diagnostic::error(
                Code::LimitExceeded,
                display,
                format!("SKILL.md is larger than {limit} bytes"),
            ));
            None
        }
        Err(ReadError::NotRegular { what }) => {
            diags.push(Diagnostic::error(
                Code::UnsupportedFileType,
                display,
                format!("SKILL.md is {what}; it must be a regular file"),
            ));
            None
        }
        Err(ReadError::Io(e)) => {
            diags.push(Diagnostic::error(Code::IoError, display, format!("cannot read SKILL.md: {e}")));
            None
        }
    }
}

/// The digest and file count of `skills/<name>/` in the agent folder `dir` (symlinks are not
/// followed; the agent check reports them).
fn folder_digest(dir: &Path, name: &str) -> Result<(String, usize), String> {
    let mut files = BTreeMap::new();
    let base = dir.join(skill::DIR).join(name);
    for entry in walkdir::WalkDir::new(&base).follow_links(false) {
        let entry = entry.map_err(|e| e.to_string())?;
        if !entry.file_type().is_file() {
            continue;
        }
        if files.len() >= MAX_SKILL_FILES {
            return Err(format!("the skill has more than {MAX_SKILL_FILES} files"));
        }
        let rel = entry.path().strip_prefix(dir).map_err(|e| e.to_string())?;
        let rel: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let mut hasher = blake3::Hasher::new();
        let file = std::fs::File::open(entry.path()).map_err(|e| format!("{}: {e}", entry.path().display()))?;
        hasher.update_reader(file).map_err(|e| format!("{}: {e}", entry.path().display()))?;
        files.insert(rel.join("/"), hasher.finalize().to_hex().to_string());
    }
    let count = files.len();
    Ok((digest(&files), count))
}
