//! `bundle import --from mcpb FILE.mcpb`: the tools an MCP bundle's manifest.json claims, read
//! from the ZIP without extracting anything (formats::mcpb_archive). Full definitions come from
//! a static `tools/list` response in `_meta`; otherwise the manifest has names and descriptions
//! only, and each tool gets an open input schema (reported). Like `--from mcp`, every tool
//! needs the transport the user gives (`--http` or `--exec`).

use std::path::Path;

use super::foreign::reach;
use super::{Converted, Options, problems, single};
use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::error::{Error, Result};
use crate::formats::mcpb_archive::{self, ArchiveError, EocdComment};
use crate::formats::{self, Note};

pub(super) fn import_mcpb(opts: &Options, report: &mut Report) -> Result<Converted> {
    let reach = reach(opts, "MCP bundle")?;
    let path = Path::new(single(opts)?);
    let display = path.display().to_string();
    let archive = match mcpb_archive::read(path) {
        Ok(a) => a,
        Err(e) => {
            report.push(refusal(&display, e)?);
            return Ok((display, None));
        }
    };
    let source = Source::new(format!("{display}!manifest.json"), archive.manifest.as_str());
    let manifest = match formats::mcpb::parse(&source) {
        Ok(m) => m,
        Err(found) => {
            problems(report, &source, found);
            return Ok((display, None));
        }
    };
    let mut notes = Vec::new();
    let list = match &manifest.static_tools_list {
        Some(text) => {
            let pretty: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Usage(e.to_string()))?;
            Source::new(
                format!("{display}!manifest.json (_meta static tools/list)"),
                serde_json::to_string_pretty(&pretty).unwrap_or_default() + "\n",
            )
        }
        None => {
            if !manifest.tools.is_empty() {
                notes.push(Note::dropped(
                    None,
                    "the manifest lists tool names and descriptions only: each tool gets an open input schema (any object); `bundle import --from mcp --stdio` lists the full definitions from the running server",
                ));
            }
            let tools: Vec<serde_json::Value> = manifest
                .tools
                .iter()
                .map(|(name, description)| {
                    serde_json::json!({
                        "name": name,
                        "description": description.clone().filter(|d| !d.trim().is_empty()).unwrap_or_else(|| format!("{name} (from the MCP bundle {})", manifest.name)),
                        "inputSchema": {"type": "object"},
                    })
                })
                .collect();
            let doc = serde_json::json!({ "tools": tools });
            Source::new(
                format!("{display}!manifest.json (tools)"),
                serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
            )
        }
    };
    if manifest.tools_generated {
        notes.push(Note::dropped(
            None,
            "`tools_generated`: the server makes tools at run time that the manifest does not list; they are not imported",
        ));
    }
    if archive.signature.is_some() {
        notes.push(Note::dropped(
            None,
            "the MCP bundle's PKCS#7 signature is not carried over (it was not judged); `bundle pack` signs the imported tools",
        ));
    }
    if let EocdComment::Undeclared { trailing, .. } = archive.eocd {
        notes.push(Note::dropped(
            None,
            format!("{trailing} bytes follow the ZIP that its end-of-central-directory comment length does not declare (as mcpb 2.1.2's `sign` writes them); strict ZIP readers refuse such a file"),
        ));
    }
    match formats::mcp::parse(&list) {
        Ok((tools, more)) => {
            let mut imported = formats::mcp::to_tools(&tools, &reach);
            imported.notes.splice(0..0, notes.into_iter().chain(more));
            Ok((display, Some(imported)))
        }
        Err(found) => {
            problems(report, &list, found);
            Ok((display, None))
        }
    }
}

/// A refused `.mcpb` as the diagnostic it is (an I/O error stops the import instead).
pub(crate) fn refusal(display: &str, e: ArchiveError) -> Result<Diagnostic> {
    Ok(match e {
        ArchiveError::Io(io) => return Err(Error::io(Path::new(display), io)),
        ArchiveError::Limit(m) => Diagnostic::error(Code::LimitExceeded, display, m)
            .with_help("an MCP bundle this large or this compressed is refused as hostile input"),
        ArchiveError::UnsafePath(m) => Diagnostic::error(Code::UnsafePath, display, m)
            .with_help("an MCP bundle's entries must be relative paths inside it"),
        ArchiveError::NotMcpb(m) => Diagnostic::error(Code::InvalidImport, display, format!("not an MCP bundle: {m}"))
            .with_help("give a `.mcpb` file made by `mcpb pack`"),
    })
}
