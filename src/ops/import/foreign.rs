//! Imports whose format says what a tool takes but not how it is reached (OpenAI functions,
//! MCP tools): every tool gets the transport the user gives (`--http` or `--exec`). MCP tools
//! come from a file or from a live server over stdio (`crate::mcp_client`).

use std::path::Path;

use super::{Converted, Options, problems, read_input, single};
use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::error::{Error, Result};
use crate::formats::{self, Reach};
use crate::limits;
use crate::mcp_client::{self, Failure, Server};
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

pub(super) fn import_mcp(opts: &Options, report: &mut Report) -> Result<Converted> {
    let reach = reach(opts, "MCP")?;
    let source = match &opts.server {
        Some(server) => match list(server, opts, report) {
            Some(source) => source,
            None => return Ok((server.display(), None)),
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
            Ok((display, Some(imported)))
        }
        Err(found) => {
            problems(report, &source, found);
            Ok((display, None))
        }
    }
}

/// Lists the server's tools as a document the MCP format reads (`{"tools": [...]}`, pretty,
/// so that problems point at a line); a failure is an `mcp_server_failed` error in `report`.
fn list(server: &Server, opts: &Options, report: &mut Report) -> Option<Source> {
    match mcp_client::list_tools(server, opts.limits) {
        Ok(listed) => {
            let doc = serde_json::json!({"tools": listed.tools});
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
            let name = match &listed.server_name {
                Some(n) => format!("{n} (tools/list of `{}`)", server.display()),
                None => format!("tools/list of `{}`", server.display()),
            };
            Some(Source::new(name, text))
        }
        Err(failure) => {
            report.push(failure_diagnostic(server, &failure));
            None
        }
    }
}

fn failure_diagnostic(server: &Server, failure: &Failure) -> Diagnostic {
    let mut message = failure.error.to_string();
    let tail: Vec<&str> = failure.stderr.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    if !tail.is_empty() {
        let last = &tail[tail.len().saturating_sub(12)..];
        let mut said = last.join(" ⏎ ");
        if said.chars().count() > 1500 {
            said = said.chars().rev().take(1500).collect::<Vec<_>>().into_iter().rev().collect();
            said.insert(0, '…');
        }
        message.push_str(&format!("; its stderr ended with: {said}"));
    }
    let help = match &failure.error {
        mcp_client::McpError::Spawn { .. } => "check the command after `--`: it must be a program on PATH or a path to one".to_owned(),
        mcp_client::McpError::Timeout { .. } => {
            "check that the command starts an MCP server on stdio (not the HTTP transport); a slow server needs a longer --timeout".to_owned()
        }
        _ => format!(
            "check that `{}` is an MCP server speaking the stdio transport (JSON-RPC, one message per line, nothing else on stdout)",
            server.display()
        ),
    };
    Diagnostic::error(Code::McpServerFailed, server.display(), message).with_help(help)
}
