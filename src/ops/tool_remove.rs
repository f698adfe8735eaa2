//! `bundle tool remove`: take one tool out of an agent's tools.json, then relock manifest.toml
//! so that the agent passes `bundle check` right after (as `tool add` does).
//!
//! The document is re-written in the same canonical pretty form as `tool add` writes. An id
//! that is not there is refused with the closest one, and nothing is written.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::agent::{LockOutcome, ToolsJson, lock_agent, read_tools_json};
use crate::diagnostic::Report;
use crate::diagnostic::did_you_mean;
use crate::error::Error;
use crate::tools::summary::{ToolSummary, summaries};
use crate::{atomic, json, tools};

/// What `remove_tool` did.
#[derive(Debug)]
pub struct Removed {
    pub tools_path: PathBuf,
    /// The tool as it was.
    pub tool: ToolSummary,
    /// Capabilities of the removed tool that no remaining tool needs: policy.caps still grants
    /// them (the grants are left for the user to judge).
    pub unused_capabilities: Vec<String>,
    /// The relock that followed; its report holds any problem that kept it from locking.
    pub lock: LockOutcome,
}

/// Why nothing was removed.
#[derive(Debug)]
pub enum RemoveFailure {
    /// tools.json is not readable JSON (exit 1); nothing was written.
    Rejected(Report),
    /// Usage (an unknown id) or I/O (exit 2).
    Error(Error),
}

impl From<Error> for RemoveFailure {
    fn from(e: Error) -> Self {
        RemoveFailure::Error(e)
    }
}

/// Removes the tool `id` from the agent in `dir` and relocks.
pub fn remove_tool(dir: &Path, id: &str) -> std::result::Result<Removed, RemoveFailure> {
    let ToolsJson { path: tools_path, source, mut report } = read_tools_json(dir)?;
    let Some(source) = source else {
        return Err(RemoveFailure::Rejected(report));
    };
    let mut diags = Vec::new();
    let mut doc = match json::parse(&source, &mut diags) {
        Ok(doc) => doc.value,
        Err(d) => {
            report.push(d);
            return Err(RemoveFailure::Rejected(report));
        }
    };
    let listed = summaries(&doc);
    let Some(index) = listed.iter().position(|t| t.id == id) else {
        return Err(unknown(dir, id, &listed).into());
    };
    let Some(Value::Array(entries)) = doc.get_mut("tools") else {
        return Err(unknown(dir, id, &listed).into());
    };
    entries.remove(index);
    let tool = listed[index].clone();
    let remaining = summaries(&doc);
    let unused_capabilities =
        tool.capabilities.iter().filter(|c| !remaining.iter().any(|t| t.capabilities.contains(c))).cloned().collect();
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| Error::Usage(e.to_string()))?;
    text.push('\n');
    atomic::write(&tools_path, text.as_bytes(), true).map_err(|e| Error::io(&tools_path, e))?;
    let lock = lock_agent(dir);
    Ok(Removed { tools_path, tool, unused_capabilities, lock })
}

fn unknown(dir: &Path, id: &str, listed: &[ToolSummary]) -> Error {
    let ids: Vec<&str> = listed.iter().map(|t| t.id.as_str()).collect();
    let hint = match did_you_mean(id, &ids) {
        Some(near) => format!("did you mean `{near}`?"),
        None if ids.is_empty() => "it has no tools".to_owned(),
        None => format!("its tools are: {}", ids.join(", ")),
    };
    Error::Usage(format!("no tool `{id}` in {}; {hint}", dir.join(tools::FILE_NAME).display()))
}
