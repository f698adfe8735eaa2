//! `bundle export --to openai|rap|mcp AGENT_DIR|BUNDLE`: an agent's tools for another runtime.

use std::path::PathBuf;

use agent_bundle::ops::export::{self, BundleTrust, Options, To};

use super::args::TrustArgs;
use super::json::{self, ExportReport};
use super::keys::load_trust;
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
/// The agent folder must pass `bundle check`'s tools.json rules. A bundle is verified first:
/// fully with --key or --trusted-keys (as `bundle verify`; a rejected bundle exports nothing,
/// exit 1), else every digest but not the signature (an `unchecked_signature` warning).
/// Renamed tools and fields the target cannot express are reported as warnings.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  bundle export --to openai agents/mailer > openai-tools.json
  bundle export --to mcp mailer-1.4.0.agent.bundle --key release.pub -o tools-list.json
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

    /// A bundle: verify it fully against this trusted public key first (repeatable).
    #[arg(long = "key", value_name = "PUBLIC_KEY")]
    keys: Vec<PathBuf>,

    /// A bundle: verify it fully against a trusted-keys file first.
    #[arg(long, value_name = "FILE", conflicts_with = "keys")]
    trusted_keys: Option<PathBuf>,

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
    let keys = if args.keys.is_empty() && args.trusted_keys.is_none() {
        None
    } else if args.input.is_dir() {
        anyhow::bail!(
            "--key and --trusted-keys verify a bundle; {} is an agent folder, which has no signature",
            args.input.display()
        );
    } else {
        Some(load_trust(&TrustArgs { keys: args.keys, trusted_keys: args.trusted_keys })?)
    };
    let trust = match &keys {
        Some(keys) => BundleTrust::Keys { keys, now: global.now() },
        None => BundleTrust::Unchecked,
    };
    let opts = Options { to, input: args.input, name: args.name, endpoint: args.endpoint };
    let result = export::export(&opts, &trust)?;
    if let Some(rejection) = result.rejection {
        // Nothing is exported from a bundle that fails verification; say why as `verify` does.
        if args.format == Format::Human {
            output::human(&result.report, global)?;
        }
        return super::verify::render_rejection(&opts.input, rejection, args.format, global);
    }
    let text = result.document.as_ref().map(|d| serde_json::to_string_pretty(d).unwrap_or_default() + "\n");
    if let (Some(text), Some(path)) = (&text, &args.output) {
        agent_bundle::atomic::write(path, text.as_bytes(), true)?;
    }
    if args.format == Format::Json {
        output::print_json(&ExportReport {
            ok: result.document.is_some(),
            output: args.output.as_ref().map(|p| p.display().to_string()),
            document: if args.output.is_none() { result.document.as_ref() } else { None },
            diagnostics: json::diagnostics(&result.report.diagnostics),
        })?;
    } else {
        check::render_report(&result.report, args.format, global, "export")?;
        if let (Some(text), None) = (&text, &args.output) {
            output::print_line(text.trim_end())?;
        }
    }
    Ok(if result.document.is_some() { Outcome::Ok } else { check::outcome(&result.report) })
}
