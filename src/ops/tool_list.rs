//! `bundle tool list`: the tools an agent's tools.json declares, in file order. A file with
//! problems is listed as far as it is JSON (`bundle check` says what is wrong with it).

use std::path::{Path, PathBuf};

use crate::agent::{ToolsJson, read_tools_json};
use crate::diagnostic::Report;
use crate::error::Result;
use crate::json;
use crate::tools::summary::{ToolSummary, summaries};

/// What `list` found.
#[derive(Debug)]
pub struct Listed {
    pub tools_path: PathBuf,
    pub tools: Vec<ToolSummary>,
    /// Why tools.json could not be read as JSON (then `tools` is empty).
    pub report: Report,
}

/// Lists the tools of the agent in `dir`; a folder without tools.json is a usage error.
pub fn list(dir: &Path) -> Result<Listed> {
    let ToolsJson { path: tools_path, source, mut report } = read_tools_json(dir)?;
    let Some(source) = source else {
        return Ok(Listed { tools_path, tools: Vec::new(), report });
    };
    let mut diags = Vec::new();
    let tools = match json::parse(&source, &mut diags) {
        Ok(doc) => summaries(&doc.value),
        Err(d) => {
            diags.push(d);
            Vec::new()
        }
    };
    report.diagnostics.extend(diags.into_iter().filter(|d| d.is_error()));
    Ok(Listed { tools_path, tools, report })
}
