//! `[skills]`: what the agent's skills may name beyond its own tools. `client_tools` declares
//! the built-in tools of the client the skills are written for (Claude Code's `Read`,
//! `Bash(git:*)`), so that `bundle check` can hold every skill's `allowed-tools` to a list a
//! reviewer signed, catch a typo, and show a new one in `bundle diff` (crate::skill::client_tool).

use toml_edit::TableLike;

use super::Parser;
use crate::diagnostic::Code;
use crate::limits::MAX_CLIENT_TOOLS;
use crate::skill::client_tool::ClientTool;

const SKILLS_KEYS: &[&str] = &["client_tools"];
const EXAMPLE: &str = "write e.g. `client_tools = [\"Read\", \"Grep\", \"Bash(git:*)\"]`";

impl Parser<'_> {
    /// `[skills] client_tools`, in file order; every entry that is not well-formed or is
    /// listed twice is reported and left out.
    pub(super) fn skills(&mut self, root: &dyn TableLike) -> Vec<ClientTool> {
        let mut declared = Vec::new();
        let Some(table) = self.table(root, "", "skills", false) else { return declared };
        self.known_keys(table, "skills", SKILLS_KEYS, "[skills]");
        let Some(item) = table.get("client_tools") else { return declared };
        let Some(list) = item.as_array() else {
            self.error(
                Code::WrongType,
                "skills.client_tools",
                item.span(),
                "`skills.client_tools` must be an array of client tool names".to_owned(),
                EXAMPLE,
            );
            return declared;
        };
        if list.len() > MAX_CLIENT_TOOLS {
            self.error(
                Code::InvalidClientTool,
                "skills.client_tools",
                item.span(),
                format!("{} client tools declared; at most {MAX_CLIENT_TOOLS} are accepted", list.len()),
                "declare the bare tool (`Bash`) instead of many of its patterns, or fewer tools",
            );
            return declared;
        }
        for (i, value) in list.iter().enumerate() {
            let key = format!("skills.client_tools[{i}]");
            let Some(text) = value.as_str() else {
                self.error(Code::WrongType, &key, value.span(), format!("`{key}` must be a string"), EXAMPLE);
                continue;
            };
            match ClientTool::parse(text) {
                Err(why) => self.error(
                    Code::InvalidClientTool,
                    &key,
                    value.span(),
                    format!("client tool {why}"),
                    "write a tool as `Read`, or one use of it as `Bash(git:*)`",
                ),
                Ok(tool) if declared.contains(&tool) => self.error(
                    Code::InvalidClientTool,
                    &key,
                    value.span(),
                    format!("client tool `{tool}` is declared twice"),
                    "keep one of them",
                ),
                Ok(tool) => declared.push(tool),
            }
        }
        declared
    }
}
