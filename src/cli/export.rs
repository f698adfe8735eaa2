//! `bundle export --to openai|rap|mcp AGENT_DIR|BUNDLE`: an agent's tools for another runtime.

use std::path::PathBuf;

use agent_bundle::ops::export::{self, Options, To};

use super::{Format, Global, Outcome, check, output};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Target {
    /// OpenAI function tools (a `tools` array); ids with `.` become `__`.
    Openai,
    /// A RAP toolset document (one endpoint: --endpoint, or the URL all http tools share).
    Rap,
    /// An MCP `tools/list` result.
    Mcp,
}

/// Write an agent's tools in another format, with every `schema:` reference inlined.
///
/// The agent folder must pass `bundle check`'s tools.json rules; a bundle is read without
/// checking its signature (use `bundle verify` for that). Renamed tools and fields the target
/// cannot express are reported as warnings.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  bundle export --to openai agents/mailer > openai-tools.json
  bundle export --to mcp mailer-1.4.0.agent.bundle -o tools-list.json
  bundle export --to rap agents/mailer --endpoint https://tools.example.com/invoke")]
pub struct Args {
    /// The target format.
    #[arg(long, value_enum)]
    to: Target,

    /// An agent folder or a .agent.bundle file.
    #[arg(value_name = "AGENT_DIR|BUNDLE")]
    input: PathBuf,

    /// Write the document here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// RAP: the toolset name (default: the agent's name).
    #[arg(long)]
    name: Option<String>,

    /// RAP: the toolset endpoint (default: the one URL every http tool shares).
    #[arg(long)]
    endpoint: Option<String>,

    /// Output format of the report.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let to = match args.to {
        Target::Openai => To::Openai,
        Target::Rap => To::Rap,
        Target::Mcp => To::Mcp,
    };
    let result = export::export(&Options { to, input: args.input, name: args.name, endpoint: args.endpoint })?;
    let text = result.document.as_ref().map(|d| serde_json::to_string_pretty(d).unwrap_or_default() + "\n");
    if let (Some(text), Some(path)) = (&text, &args.output) {
        agent_bundle::atomic::write(path, text.as_bytes(), true)?;
    }
    if args.format == Format::Json {
        output::print_json(&serde_json::json!({
            "ok": result.document.is_some(),
            "output": args.output.as_ref().map(|p| p.display().to_string()),
            "document": if args.output.is_none() { result.document.clone() } else { None },
            "diagnostics": result.report.diagnostics.iter().map(output::json_diagnostic).collect::<Vec<_>>(),
        }))?;
    } else {
        check::render(&result.report, Vec::new(), args.format, global, "export")?;
        if let (Some(text), None) = (&text, &args.output) {
            output::print_line(text.trim_end())?;
        }
    }
    Ok(if result.document.is_some() { Outcome::Ok } else { check::outcome(&result.report) })
}
