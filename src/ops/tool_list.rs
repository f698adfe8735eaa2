//! `bundle tool list`: the tools an agent's tools.json declares, in file order. A file with
//! problems is listed as far as it is JSON (`bundle check` says what is wrong with it).

use std::path::{Path, PathBuf};

use crate::agent::{display_prefix, read_source};
use crate::diagnostic::{Code, Report};
use crate::error::{Error, Result};
use crate::tools::summary::{ToolSummary, summaries};
use crate::{json, tools};

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
    std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
    let prefix = display_prefix(dir);
    let tools_path = dir.join(tools::FILE_NAME);
    let mut report = Report::default();
    let Some(source) = read_source(dir, &prefix, tools::FILE_NAME, true, &mut report) else {
        if report.diagnostics.iter().any(|d| d.code == Code::MissingFile) {
            return Err(Error::Usage(format!("{} has no tools.json (is it an agent folder?)", dir.display())));
        }
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
