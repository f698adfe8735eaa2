//! A client's built-in tool, as a skill's `allowed-tools` names it and manifest.toml
//! `[skills] client_tools` declares it: `Tool` or `Tool(pattern)`, the form of Claude Code's
//! permission rules (`Read`, `WebFetch`, `Bash(git:*)`, `Bash(npm run test *)`).
//!
//! The Agent Skills specification leaves tool names to clients, so no list of built-in tools
//! is kept here: the agent declares the ones its skills may use, in the signed manifest, and
//! `bundle check` holds every skill to that list. A declaration is compared as written
//! (`Bash(git:*)` and `Bash(git *)` are two entries, though Claude Code reads them alike): what
//! the reviewer approved is the text, and a client's matching rules are the client's.

use std::fmt;

use crate::limits::{MAX_CLIENT_TOOL_NAME_CHARS, MAX_CLIENT_TOOL_PATTERN_CHARS};

/// `Tool` or `Tool(pattern)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientTool {
    pub tool: String,
    /// What is between the parentheses; `None` for the bare tool (every use of it).
    pub pattern: Option<String>,
}

impl ClientTool {
    /// Reads one entry; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<ClientTool, String> {
        let (tool, pattern) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => {
                let Some(pattern) = rest.strip_suffix(')') else {
                    return Err(format!("`{}` opens `(` and does not end with `)`", shown(text)));
                };
                (tool, Some(pattern))
            }
        };
        check_name(tool).map_err(|why| format!("`{}`: {why}", shown(text)))?;
        if let Some(p) = pattern {
            check_pattern(p).map_err(|why| format!("`{}`: {why}", shown(text)))?;
        }
        Ok(ClientTool { tool: tool.to_owned(), pattern: pattern.map(str::to_owned) })
    }

    /// Whether this declaration allows the `allowed-tools` entry `entry`: the same entry, or
    /// the bare tool declared and the entry one of its patterns.
    pub fn allows(&self, entry: &ClientTool) -> bool {
        self.tool == entry.tool && (self.pattern.is_none() || self.pattern == entry.pattern)
    }
}

impl fmt::Display for ClientTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{}({p})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// An ASCII letter, then letters, digits or `_`, at most [`MAX_CLIENT_TOOL_NAME_CHARS`]; not
/// `mcp__...` (a pinned MCP tool, checked against its pin instead).
fn check_name(tool: &str) -> Result<(), String> {
    if tool.is_empty() {
        return Err("no tool name before the pattern".to_owned());
    }
    if tool.chars().count() > MAX_CLIENT_TOOL_NAME_CHARS {
        return Err(format!("the tool name is longer than {MAX_CLIENT_TOOL_NAME_CHARS} characters"));
    }
    if !tool.starts_with(|c: char| c.is_ascii_alphabetic())
        || !tool.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err("a tool name is an ASCII letter, then ASCII letters, digits or `_`".to_owned());
    }
    if tool.starts_with(super::MCP_PREFIX) {
        return Err(format!(
            "an MCP tool is not declared here: pin its server and name it as {}<server>{}<tool>",
            super::MCP_PREFIX,
            super::MCP_SEPARATOR
        ));
    }
    Ok(())
}

/// Printable ASCII (space included), 1 to [`MAX_CLIENT_TOOL_PATTERN_CHARS`] characters, not
/// only spaces, its parentheses balanced: nothing a terminal could show as something else.
fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.trim().is_empty() {
        return Err("the pattern between `(` and `)` is empty; write the bare tool for every use of it".to_owned());
    }
    if pattern.chars().count() > MAX_CLIENT_TOOL_PATTERN_CHARS {
        return Err(format!("the pattern is longer than {MAX_CLIENT_TOOL_PATTERN_CHARS} characters"));
    }
    if !pattern.chars().all(|c| c == ' ' || c.is_ascii_graphic()) {
        return Err("a pattern is printable ASCII (no control, non-ASCII or bidi characters)".to_owned());
    }
    // One level of parentheses (`Bash(echo $(date))`), so that the published schema's regular
    // expression can say the same.
    let mut open = false;
    for c in pattern.chars() {
        match (c, open) {
            ('(', true) => return Err("the pattern nests parentheses more than one level deep".to_owned()),
            ('(', false) => open = true,
            (')', false) => return Err("the pattern closes `)` it did not open".to_owned()),
            (')', true) => open = false,
            _ => {}
        }
    }
    if open {
        return Err("the pattern opens `(` it does not close".to_owned());
    }
    Ok(())
}

/// `text` for a message: control characters and what is past 80 characters replaced.
fn shown(text: &str) -> String {
    let mut out: String = text.chars().take(80).map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect();
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> ClientTool {
        ClientTool::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn claude_code_entries_are_read() {
        assert_eq!(ok("Read"), ClientTool { tool: "Read".into(), pattern: None });
        assert_eq!(ok("Bash(git:*)").pattern.as_deref(), Some("git:*"));
        assert_eq!(ok("Bash(npm run test *)").to_string(), "Bash(npm run test *)");
        assert_eq!(ok("Bash(echo $(date))").pattern.as_deref(), Some("echo $(date)"));
        assert_eq!(ok("WebFetch(domain:example.com)").tool, "WebFetch");
    }

    #[test]
    fn malformed_entries_are_refused() {
        for bad in [
            "",
            "(x)",
            "Bash(",
            "Bash(git",
            "Bash()",
            "Bash(a))",
            "Bash((a)",
            "Bash(a((b)))",
            "Bash( )",
            "Ba sh",
            "1Read",
            "Réad",
            "Bash(caf\u{e9})",
            "Bash(a\u{202e}b)",
            "Bash(a\tb)",
            "mcp__s__t",
        ] {
            assert!(ClientTool::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(ClientTool::parse(&"R".repeat(MAX_CLIENT_TOOL_NAME_CHARS + 1)).is_err());
        assert!(ClientTool::parse(&format!("Bash({})", "a".repeat(MAX_CLIENT_TOOL_PATTERN_CHARS + 1))).is_err());
    }

    #[test]
    fn a_bare_declaration_allows_its_patterns_and_a_pattern_only_itself() {
        let (bash, git) = (ok("Bash"), ok("Bash(git:*)"));
        assert!(bash.allows(&ok("Bash")) && bash.allows(&ok("Bash(git:*)")));
        assert!(git.allows(&ok("Bash(git:*)")));
        assert!(!git.allows(&ok("Bash")) && !git.allows(&ok("Bash(git *)")) && !git.allows(&ok("Bash(git:* )")));
        assert!(!bash.allows(&ok("Read")));
    }
}
