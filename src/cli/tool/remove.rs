//! `bundle tool remove <AGENT_DIR> <ID>`: take a tool out of tools.json and relock.

use std::path::PathBuf;

use agent_bundle::agent::LockReport;
use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::tool_remove::{self, RemoveFailure};

use crate::cli::json::{Clean, ToolRemoveReport};
use crate::cli::{Format, Global, Outcome, check, output};

/// Remove the tool ID from AGENT_DIR/tools.json, then relock manifest.toml.
///
/// An ID that is not there is refused (with the closest id) and nothing is written. Grants in
/// policy.caps that only the removed tool needed are kept and named. tools.json is rewritten
/// pretty-printed (2-space indent), keeping its key order. Exit status: 0 removed, 1
/// tools.json is not JSON, 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  bundle tool remove agents/mailer mail.draft_render")]
pub struct Args {
    /// The agent folder (it holds tools.json).
    agent_dir: PathBuf,
    /// The id of the tool to remove.
    id: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(in crate::cli) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let removed = match tool_remove::remove_tool(&args.agent_dir, &args.id) {
        Ok(removed) => removed,
        Err(RemoveFailure::Error(e)) => return Err(e.into()),
        Err(RemoveFailure::Rejected(report)) => {
            check::render_report(&report, args.format, global, "tool remove")?;
            return Ok(check::outcome(&report));
        }
    };
    let report = removed.lock.report();
    let file = removed.tools_path.display().to_string();
    let id = sanitize(&removed.tool.id);
    match args.format {
        Format::Json => output::print_json(&Clean(ToolRemoveReport {
            ok: !report.has_errors(),
            tool: &removed.tool,
            tools_file: file.clone(),
            relocked: removed.lock.written(),
            unused_capabilities: &removed.unused_capabilities,
            diagnostics: crate::cli::json::diagnostics(&report.diagnostics),
        }))?,
        Format::Github => {
            output::github(report)?;
            output::notice(Some(&file), "tool removed", &format!("removed tool `{id}`"))?;
        }
        Format::Human => {
            output::human(report, global)?;
            output::status(global, &format!("removed tool `{id}` from {file}"));
            if !removed.unused_capabilities.is_empty() {
                output::status(
                    global,
                    &format!(
                        "note: no remaining tool needs {}; policy.caps still grants it (remove the line if unwanted)",
                        sanitize(&removed.unused_capabilities.join(", "))
                    ),
                );
            }
            if removed.lock.written() {
                output::status(global, &format!("relocked {}", removed.lock.manifest_path().display()));
            }
        }
    }
    Ok(check::outcome(report))
}
