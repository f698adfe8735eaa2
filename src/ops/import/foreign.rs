//! Imports whose format says what a tool takes but not how it is reached (OpenAI functions,
//! MCP tools): every tool gets the transport the user gives (`--http` or `--exec`). MCP tools
//! come from a file or from a live server over stdio or streamable HTTP (`crate::mcp_client`).

use std::path::Path;

use super::{Converted, Options, problems, read_input, single};
use crate::diagnostic::{Report, Source};
use crate::error::{Error, Result};
use crate::formats::{self, Reach};
use crate::limits;
use crate::mcp_client;
use crate::regular_file::Links;

/// The transport every imported tool gets; a usage error when none was given.
pub(super) fn reach(opts: &Options, format: &str) -> Result<Reach> {
    opts.reach.clone().ok_or_else(|| {
        Error::Usage(format!(
            "{format} tools do not say how they are reached, and tools.json needs a transport for each: give --http METHOD URL or --exec PATH (`{}` in either is replaced by each tool's id)",
            formats::TOOL_PLACEHOLDER
        ))
    })
}

pub(super) fn import_openai(opts: &Options, report: &mut Report) -> Result<Converted> {
    let reach = reach(opts, "OpenAI function")?;
    let path = Path::new(single(opts)?);
    let display = path.display().to_string();
    let Some(source) = read_input(path, limits::MAX_IMPORT_BYTES, Links::Follow, report)? else {
        return Ok((display, None));
    };
    match formats::openai::parse(&source) {
        Ok((functions, notes)) => {
            let mut imported = formats::openai::to_tools(&functions, &reach);
            imported.notes.splice(0..0, notes);
            Ok((display, Some(imported)))
        }
        Err(found) => {
            problems(report, &source, found);
            Ok((display, None))
        }
    }
}

/// What an MCP import read, kept for `--pin`: every Tool object as served, and the name the
/// server gave itself (`serverInfo.name`, from a live server).
#[derive(Debug, Clone)]
pub struct Served {
    pub server_name: Option<String>,
    pub tools: Vec<serde_json::Value>,
}

pub(super) fn import_mcp(opts: &Options, served: &mut Option<Served>, report: &mut Report) -> Result<Converted> {
    let reach = reach(opts, "MCP")?;
    let mut server_name = None;
    let live = match (&opts.server, &opts.endpoint) {
        (Some(server), _) => {
            Some((server.display(), mcp_client::list_tools(server, opts.limits).map_err(|f| f.diagnostic(server))))
        }
        (None, Some(endpoint)) => {
            // Shown without what could be a secret in the URL, as the pin records it.
            let shown = crate::formats::mcp_pin::public_url(&endpoint.url);
            let listed = mcp_client::list_tools_http(endpoint, opts.limits).map_err(|f| f.diagnostic_http(&shown));
            Some((shown, listed))
        }
        (None, None) => None,
    };
    let source = match live {
        Some((shown, listed)) => match document(&shown, listed, report) {
            Some((source, name)) => {
                server_name = name;
                source
            }
            None => return Ok((shown, None)),
        },
        None => match read_input(Path::new(single(opts)?), limits::MAX_IMPORT_BYTES, Links::Follow, report)? {
            Some(source) => source,
            None => return Ok((single(opts)?.to_owned(), None)),
        },
    };
    let display = source.name.clone();
    match formats::mcp::parse(&source) {
        Ok((tools, notes)) => {
            let mut imported = formats::mcp::to_tools(&tools, &reach);
            imported.notes.splice(0..0, notes);
            // Read again as plain JSON: parse() accepted it, so this cannot fail.
            let doc: serde_json::Value = serde_json::from_str(&source.text).unwrap_or_default();
            *served = Some(Served { server_name, tools: formats::mcp::tool_objects(&doc) });
            Ok((display, Some(imported)))
        }
        Err(found) => {
            problems(report, &source, found);
            Ok((display, None))
        }
    }
}

/// The server's tools as a document the MCP format reads (`{"tools": [...]}`, pretty, so that
/// problems point at a line); a failed listing is an `mcp_server_failed` error in `report`.
fn document(
    shown: &str,
    listed: std::result::Result<mcp_client::Listed, crate::diagnostic::Diagnostic>,
    report: &mut Report,
) -> Option<(Source, Option<String>)> {
    match listed {
        Ok(listed) => {
            let doc = serde_json::json!({"tools": listed.tools});
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
            let name = match &listed.server_name {
                Some(n) => format!("{n} (tools/list of `{shown}`)"),
                None => format!("tools/list of `{shown}`"),
            };
            Some((Source::new(name, text), listed.server_name))
        }
        Err(diagnostic) => {
            report.push(diagnostic);
            None
        }
    }
}
