//! Agent Skills: a folder `skills/<name>/` whose `SKILL.md` starts with YAML front matter
//! (`name`, `description`, optional `license`, `compatibility`, `metadata`, `allowed-tools`),
//! by the Agent Skills specification (agentskills.io/specification).
//!
//! The format has no signature of its own; in an agent folder a skill is packed, locked and
//! signed like every other file, and what it may call (`allowed-tools`) is checked against the
//! agent's tools.json. This module reads one SKILL.md (its front matter, by the
//! specification's rules, every problem at its line and column) and sums a skill up
//! ([`facts`]); reading an agent folder's skills is `agent::skills`. It sits low (below
//! `contract` and `bundle`, which show skills) and depends only on diagnostics and limits.

pub mod client_tool;
pub mod facts;

use std::ops::Range;

use serde_yaml_ng::Value;

use crate::diagnostic::{Code, Diagnostic, Source};
use crate::limits::{MAX_SKILL_FRONT_MATTER_BYTES, MAX_YAML_DEPTH};

/// The folder of an agent that holds its skills.
pub const DIR: &str = "skills";
/// The file that makes a folder a skill.
pub const FILE_NAME: &str = "SKILL.md";
/// The specification's limits: `name` 1–64 characters, `description` 1–1024, `compatibility`
/// at most 500.
pub const MAX_NAME_CHARS: usize = 64;
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// The fields the specification defines; others are kept by clients (Claude Code adds a few)
/// and get a warning.
const KNOWN_FIELDS: &[&str] = &["name", "description", "license", "compatibility", "metadata", "allowed-tools"];

/// One SKILL.md's front matter, as far as it could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDoc {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    /// In file order, each with where it is written (for `unknown_allowed_tool`).
    pub allowed_tools: Vec<(String, Range<usize>)>,
}

impl SkillDoc {
    pub fn allowed_tool_names(&self) -> Vec<String> {
        self.allowed_tools.iter().map(|(t, _)| t.clone()).collect()
    }
}

/// How `allowed-tools` names a tool of an MCP server pinned in the agent (manifest.toml
/// `[pins]`, `format = "mcp"`): `mcp__<server>__<tool>`, the name Claude Code gives MCP tools
/// in its permission rules (the Agent Skills specification leaves tool names to clients).
/// Each tool is named on its own: a whole server (`mcp__<server>`, `mcp__<server>__*`) would
/// allow whatever the server serves next, which no pin can vouch for.
pub const MCP_PREFIX: &str = "mcp__";
/// Between the server's name and the tool's in an [`MCP_PREFIX`] name.
pub const MCP_SEPARATOR: &str = "__";

/// Whether a bundle path is a skill's SKILL.md (`skills/<name>/SKILL.md`): what verify holds.
pub fn is_skill_md(path: &str) -> bool {
    let mut parts = path.split('/');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(DIR), Some(name), Some(FILE_NAME), None) if !name.is_empty()
    )
}

/// Whether `name` is a skill name by the specification: 1–64 lowercase letters, digits and
/// hyphens, no hyphen first, last or twice in a row.
pub fn valid_name(name: &str) -> bool {
    let chars = name.chars().count();
    (1..=MAX_NAME_CHARS).contains(&chars)
        && name.chars().all(|c| c == '-' || (c.is_alphanumeric() && !c.is_uppercase()))
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The front matter's text and where it starts in the file, or a problem: no front matter,
/// no closing `---`, or more than [`MAX_SKILL_FRONT_MATTER_BYTES`].
fn front_matter(source: &Source) -> Result<(usize, &str), Diagnostic> {
    let text = &*source.text;
    let first_end = text.find('\n').map_or(text.len(), |i| i + 1);
    if text[..first_end].trim_end() != "---" {
        return Err(Diagnostic::error(
            Code::MissingFrontMatter,
            &source.name,
            "SKILL.md does not start with YAML front matter (a `---` line)",
        )
        .at_span(source, 0..first_end.min(text.len()).saturating_sub(1))
        .with_help("start the file with `---`, `name: <folder name>`, `description: ...` and `---`"));
    }
    let mut offset = first_end;
    for line in text[first_end..].split_inclusive('\n') {
        if offset - first_end > MAX_SKILL_FRONT_MATTER_BYTES as usize {
            break;
        }
        if line.trim_end() == "---" {
            return Ok((first_end, &text[first_end..offset]));
        }
        offset += line.len();
    }
    if offset - first_end > MAX_SKILL_FRONT_MATTER_BYTES as usize {
        return Err(Diagnostic::error(
            Code::LimitExceeded,
            &source.name,
            format!("the front matter is larger than {MAX_SKILL_FRONT_MATTER_BYTES} bytes"),
        )
        .at_span(source, 0..3)
        .with_help(
            "keep only name, description and the short fields in the front matter; move the rest into the body",
        ));
    }
    Err(Diagnostic::error(Code::MissingFrontMatter, &source.name, "the front matter has no closing `---` line")
        .at_span(source, 0..3)
        .with_help("end the front matter with a line `---`"))
}

/// Reads and checks the SKILL.md of the folder `folder`; every problem goes to `diags`. The
/// document is returned whenever the front matter could be read (even with problems), so that
/// later checks still see its allowed tools.
pub fn parse(source: &Source, folder: &str, diags: &mut Vec<Diagnostic>) -> Option<SkillDoc> {
    let (start, yaml) = match front_matter(source) {
        Ok(found) => found,
        Err(d) => {
            diags.push(d);
            return None;
        }
    };
    if let Some(at) = crate::yaml_depth::too_deep(yaml, MAX_YAML_DEPTH) {
        diags.push(
            Diagnostic::error(
                Code::LimitExceeded,
                &source.name,
                format!("the front matter nests more than {MAX_YAML_DEPTH} levels deep"),
            )
            .at_span(source, start + at..start + at),
        );
        return None;
    }
    let value: Value = match serde_yaml_ng::from_str(yaml) {
        Ok(v) => v,
        Err(e) => {
            let mut d = invalid(source, format!("the front matter is not YAML: {}", strip_location(&e)));
            if let Some(loc) = e.location() {
                let offset = start + loc.index();
                d = d.at_span(source, offset..offset);
            }
            diags.push(d);
            return None;
        }
    };
    let Value::Mapping(map) = value else {
        diags.push(invalid(source, "the front matter is not a mapping of fields").at_span(source, start..start));
        return None;
    };
    let key_at = |key: &str| key_span(source, start, yaml, key);
    let string = |key: &str, diags: &mut Vec<Diagnostic>| -> Option<String> {
        match map.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            _ => {
                diags.push(
                    invalid(source, format!("`{key}` must be a string")).at_path(key).at_span(source, key_at(key)),
                );
                None
            }
        }
    };
    let name = string("name", diags);
    let description = string("description", diags);
    let license = string("license", diags);
    let compatibility = string("compatibility", diags);

    match &name {
        None if !map.contains_key("name") => diags.push(
            Diagnostic::error(Code::InvalidSkillName, &source.name, "the front matter has no `name`")
                .at_path("name")
                .at_span(source, start..start)
                .with_help(format!("add `name: {folder}`")),
        ),
        None => {}
        Some(n) if !valid_name(n) => diags.push(
            Diagnostic::error(
                Code::InvalidSkillName,
                &source.name,
                format!("skill name `{n}` is not 1–{MAX_NAME_CHARS} lowercase letters, digits and single hyphens"),
            )
            .at_path("name")
            .at_span(source, key_at("name"))
            .with_help("use lowercase letters, digits and `-` (not first, not last, never two in a row)"),
        ),
        Some(n) if n != folder => diags.push(
            Diagnostic::error(
                Code::InvalidSkillName,
                &source.name,
                format!("skill name `{n}` does not match its folder `{folder}`"),
            )
            .at_path("name")
            .at_span(source, key_at("name"))
            .with_help("rename the folder or the skill so that they are the same"),
        ),
        Some(_) => {}
    }
    match &description {
        Some(d) if d.trim().is_empty() => {
            diags.push(description_problem(source, "`description` is empty", key_at("description")))
        }
        Some(d) if d.chars().count() > MAX_DESCRIPTION_CHARS => diags.push(description_problem(
            source,
            &format!("`description` is {} characters; the most is {MAX_DESCRIPTION_CHARS}", d.chars().count()),
            key_at("description"),
        )),
        Some(_) => {}
        None if !map.contains_key("description") => {
            diags.push(description_problem(source, "the front matter has no `description`", start..start))
        }
        None => {}
    }
    if let Some(c) = &compatibility
        && c.chars().count() > MAX_COMPATIBILITY_CHARS
    {
        diags.push(
            invalid(source, format!("`compatibility` is longer than {MAX_COMPATIBILITY_CHARS} characters"))
                .at_path("compatibility")
                .at_span(source, key_at("compatibility")),
        );
    }
    if let Some(m) = map.get("metadata")
        && !matches!(m, Value::Mapping(entries) if entries.iter().all(|(k, v)| k.is_string() && v.is_string()))
    {
        diags.push(
            invalid(source, "`metadata` must map strings to strings")
                .at_path("metadata")
                .at_span(source, key_at("metadata")),
        );
    }
    for key in map.keys() {
        let shown = key.as_str().map_or_else(|| format!("{key:?}"), str::to_owned);
        if !KNOWN_FIELDS.contains(&shown.as_str()) {
            diags.push(
                Diagnostic::warning(
                    Code::UnknownField,
                    &source.name,
                    format!("`{shown}` is not a field of the Agent Skills specification"),
                )
                .at_path(shown.clone())
                .at_span(source, key_at(&shown))
                .with_help("clients may ignore it; `metadata` holds fields of your own"),
            );
        }
    }
    let allowed_tools = allowed_tools(source, start, yaml, map.get("allowed-tools"), diags);
    Some(SkillDoc {
        name: name.unwrap_or_default(),
        description: description.unwrap_or_default(),
        license,
        allowed_tools,
    })
}

/// `allowed-tools`: the specification's space-separated string, or (as some clients write it)
/// a list of strings; commas between names are tolerated. A `Tool(pattern)` entry is one entry
/// whatever its pattern holds (`Bash(git diff *)`).
fn allowed_tools(
    source: &Source,
    start: usize,
    yaml: &str,
    value: Option<&Value>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<(String, Range<usize>)> {
    let at = key_span(source, start, yaml, "allowed-tools");
    let names: Vec<String> = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::String(s)) => split_entries(s),
        Some(Value::Sequence(items)) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).map(|s| s.trim().to_owned()).collect()
        }
        Some(_) => {
            diags.push(
                invalid(source, "`allowed-tools` must be a space-separated string of tool names")
                    .at_path("allowed-tools")
                    .at_span(source, at),
            );
            return Vec::new();
        }
    };
    // Point at each name where it is written (on the key's line or below it), in file order:
    // a name found as a whole word after the one before it (`mcp__a` inside `mcp__a__b` is not).
    let end = start + yaml.len();
    let mut from = at.start.min(source.text.len());
    names
        .into_iter()
        .map(|n| {
            let span = whole_word(&source.text[..end.min(source.text.len())], from, &n);
            if let Some(span) = &span {
                from = span.end;
            }
            (n, span.unwrap_or_else(|| at.clone()))
        })
        .collect()
}

/// The entries of a space-separated `allowed-tools`: split at spaces, tabs, newlines and commas
/// outside parentheses, so that Claude Code's `Bash(npm run test *)` stays whole. An entry
/// whose `(` is never closed runs to the end (and is then no tool the agent has).
fn split_entries(text: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            ' ' | '\t' | '\n' | '\r' | ',' if depth == 0 => {
                if !current.is_empty() {
                    entries.push(std::mem::take(&mut current));
                }
                continue;
            }
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        entries.push(current);
    }
    entries
}

/// Where `word` is next written in `text` from byte `from` on, not as part of a longer name.
fn whole_word(text: &str, mut from: usize, word: &str) -> Option<Range<usize>> {
    let part_of_name = |c: char| !(c.is_whitespace() || matches!(c, ',' | '"' | '\'' | '[' | ']'));
    while let Some(i) = text.get(from..)?.find(word) {
        let (s, e) = (from + i, from + i + word.len());
        let before = text[..s].chars().next_back().is_some_and(part_of_name);
        let after = text[e..].chars().next().is_some_and(part_of_name);
        if !before && !after {
            return Some(s..e);
        }
        from = e;
    }
    None
}

/// Where `key:` is written at the start of a line of the front matter (block style), as a byte
/// range of the file; the front matter's start when it is not found.
fn key_span(source: &Source, start: usize, yaml: &str, key: &str) -> Range<usize> {
    let mut offset = start;
    for line in yaml.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix(key)
            && rest.trim_start_matches([' ', '\t']).starts_with(':')
        {
            return offset..offset + key.len();
        }
        offset += line.len();
    }
    let _ = source;
    start..start
}

fn invalid(source: &Source, message: impl Into<String>) -> Diagnostic {
    Diagnostic::error(Code::InvalidFrontMatter, &source.name, message)
        .with_help("fix the front matter by the Agent Skills specification (agentskills.io/specification)")
}

fn description_problem(source: &Source, message: &str, span: Range<usize>) -> Diagnostic {
    Diagnostic::error(Code::InvalidSkillDescription, &source.name, message)
        .at_path("description")
        .at_span(source, span)
        .with_help(format!("say in 1–{MAX_DESCRIPTION_CHARS} characters what the skill does and when to use it"))
}

/// A serde_yaml_ng message without its trailing ` at line L column C` (line and column are
/// the diagnostic's).
fn strip_location(e: &serde_yaml_ng::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) if e.location().is_some() => text[..i].to_owned(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str, folder: &str) -> (Option<SkillDoc>, Vec<Diagnostic>) {
        let source = Source::new("skills/x/SKILL.md", text);
        let mut diags = Vec::new();
        (parse(&source, folder, &mut diags), diags)
    }

    #[test]
    fn skill_md_paths() {
        assert!(is_skill_md("skills/pdf/SKILL.md"));
        assert!(!is_skill_md("skills/pdf/refs/SKILL.md"));
        assert!(!is_skill_md("skills//SKILL.md"));
        assert!(!is_skill_md("SKILL.md"));
    }

    #[test]
    fn names_follow_the_specification() {
        for ok in ["pdf", "pdf-processing", "a1", "données"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-pdf", "pdf-", "pdf--x", "PDF", "pdf_x", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_valid_skill_has_no_problems() {
        let (doc, diags) = parse_text("---\nname: x\ndescription: Does x.\nallowed-tools: a b.c\n---\n# X\n", "x");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(doc.unwrap().allowed_tool_names(), ["a", "b.c"]);
    }

    #[test]
    fn each_allowed_tool_points_at_itself_not_at_a_longer_name() {
        let text = "---\nname: x\ndescription: D.\nallowed-tools: mcp__a__b mcp__a b b\n---\n";
        let (doc, _) = parse_text(text, "x");
        let spans: Vec<_> = doc.unwrap().allowed_tools.into_iter().map(|(n, r)| (n, &text[r])).collect();
        let at = |n: &str| text.find(&format!("{n}\n")).or_else(|| text.find(&format!("{n} "))).unwrap();
        assert_eq!(
            spans,
            [("mcp__a__b".into(), "mcp__a__b"), ("mcp__a".into(), "mcp__a"), ("b".into(), "b"), ("b".into(), "b")]
        );
        let doc = parse_text(text, "x").0.unwrap();
        let starts: Vec<usize> = doc.allowed_tools.iter().map(|(_, r)| r.start).collect();
        assert_eq!(starts[1], at("mcp__a"));
        assert!(starts[2] < starts[3], "the second `b` is the second one written");
    }

    #[test]
    fn a_claude_code_pattern_with_spaces_is_one_entry() {
        let text = "---\nname: x\ndescription: d\nallowed-tools: Read, Bash(git diff *) Bash(npm run test:*)\n---\n";
        let doc = parse_text(text, "x").0.unwrap();
        assert_eq!(doc.allowed_tool_names(), ["Read", "Bash(git diff *)", "Bash(npm run test:*)"]);
        let at = text.find("Bash(git diff *)").unwrap();
        assert_eq!(doc.allowed_tools[1].1, at..at + "Bash(git diff *)".len());
        assert_eq!(split_entries("Bash(git  Read"), ["Bash(git  Read"]);
    }

    #[test]
    fn problems_have_lines_and_columns() {
        let (_, diags) = parse_text("---\nname: y\ndescription: \"\"\n---\n", "x");
        let codes: Vec<_> = diags.iter().map(|d| (d.code, d.line, d.column)).collect();
        assert_eq!(
            codes,
            [(Code::InvalidSkillName, Some(2), Some(1)), (Code::InvalidSkillDescription, Some(3), Some(1))]
        );
    }

    #[test]
    fn no_front_matter_and_an_unclosed_one_are_refused() {
        assert_eq!(parse_text("# Title\n", "x").1[0].code, Code::MissingFrontMatter);
        assert_eq!(parse_text("---\nname: x\n", "x").1[0].code, Code::MissingFrontMatter);
        let huge = format!("---\nname: x\ndescription: {}\n---\n", "y".repeat(MAX_SKILL_FRONT_MATTER_BYTES as usize));
        assert_eq!(parse_text(&huge, "x").1[0].code, Code::LimitExceeded);
    }
}
