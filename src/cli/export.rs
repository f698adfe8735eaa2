//! `bundle export --to openai|rap|mcp AGENT_DIR|BUNDLE`: an agent's tools for another runtime.

use std::path::PathBuf;

use agent_bundle::agent;
use agent_bundle::diagnostic::{Code, Diagnostic, Report, Severity};
use agent_bundle::ops::export::{self, BundleTrust, Options, To};

use super::args::TrustArgs;
use super::json::{self, ExportReport, ExportedAgent, Results};
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
  bundle export --to mcp mailer-1.4.0.agent.bundle --key release.pub \\
      -o tools-list.json
  bundle export --to rap agents/mailer \\
      --endpoint https://tools.example.com/invoke")]
pub struct Args {
    /// The target format.
    #[arg(long, value_enum)]
    to: Target,

    /// An agent folder, a folder of agent folders (every one of them, needs -o DIR), or a
    /// .agent.bundle file.
    #[arg(value_name = "AGENT_DIR|BUNDLE")]
    input: PathBuf,

    /// Write the document here instead of stdout; for a folder of agents, the folder each
    /// agent's document goes into as <agent folder>.<format>.json (created if missing).
    #[arg(short, long, value_name = "FILE|DIR")]
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

    #[command(flatten)]
    models: super::args::ModelRootArgs,

    /// List each field the target format cannot carry, tool by tool (by default one summary;
    /// `--format json` always lists each).
    #[arg(short, long)]
    verbose: bool,

    /// Output format of the report.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(mut args: Args, global: Global) -> anyhow::Result<Outcome> {
    let to = match args.to {
        Target::Openai => To::Openai,
        Target::Rap => To::Rap,
        Target::Mcp => To::Mcp,
    };
    if args.input.is_dir() && !agent::is_agent_folder(&args.input) {
        let dirs = agent::find_agents(&args.input)?;
        if let [dir] = dirs.as_slice() {
            args.input = dir.clone();
        } else {
            return export_all(&args, to, dirs, global);
        }
    }
    let keys = if args.keys.is_empty() && args.trusted_keys.is_none() {
        None
    } else if args.input.is_dir() {
        anyhow::bail!(
            "--key and --trusted-keys verify a bundle; {} is an agent folder, which has no signature",
            args.input.display()
        );
    } else {
        Some(load_trust(&TrustArgs { keys: args.keys, trusted_keys: args.trusted_keys, ..Default::default() })?)
    };
    let trust = match &keys {
        Some(keys) => BundleTrust::Keys { keys, now: global.now() },
        None => BundleTrust::Unchecked,
    };
    // Checked before anything is exported: -o names a regular file (or nothing yet).
    let target = args.output.as_deref().map(|p| agent_bundle::atomic::Output::new(p, "-o")).transpose()?;
    let trusted_root = args.models.load()?.map(std::sync::Arc::new);
    let opts = Options { to, input: args.input, name: args.name, endpoint: args.endpoint, trusted_root };
    let result = export::export(&opts, &trust)?;
    if let Some(rejection) = result.rejection {
        // Nothing is exported from a bundle that fails verification; say why as `verify` does.
        if args.format == Format::Human {
            output::human(&result.report, global)?;
        }
        return super::verify::render_rejection(&opts.input, rejection, args.format, global);
    }
    let text = result.document.as_ref().map(|d| serde_json::to_string_pretty(d).unwrap_or_default() + "\n");
    if let (Some(text), Some(target)) = (&text, &target) {
        target.write(text.as_bytes())?;
    }
    if args.format == Format::Json {
        output::print_json(&ExportReport {
            ok: result.document.is_some(),
            output: args.output.as_ref().map(|p| p.display().to_string()),
            document: if args.output.is_none() { result.document.as_ref() } else { None },
            diagnostics: json::diagnostics(&result.report.diagnostics),
        })?;
    } else {
        check::render_report(&shown(&result.report, args.format, args.verbose), args.format, global, "export")?;
        match (&text, &args.output) {
            (Some(text), None) => output::print_line(text.trim_end())?,
            (Some(_), Some(path)) if args.format == Format::Github => {
                output::notice(Some(&path.display().to_string()), "exported", &format!("wrote {}", path.display()))?
            }
            _ => {}
        }
    }
    Ok(if result.document.is_some() { Outcome::Ok } else { check::outcome(&result.report) })
}

/// Every agent of a folder of agents, each into `-o DIR` as `<agent folder>.<format>.json`.
/// What a person is shown: every field the target format cannot carry (`not_carried_over`),
/// and every renamed tool, as one summary each, unless `--verbose`; JSON and GitHub annotations
/// keep each.
fn shown(report: &Report, format: Format, verbose: bool) -> Report {
    let mut out = Report { diagnostics: Vec::new(), sources: report.sources.clone() };
    if verbose || format != Format::Human {
        out.diagnostics.clone_from(&report.diagnostics);
        return out;
    }
    for code in [Code::NotCarriedOver, Code::RenamedTool] {
        let group: Vec<&Diagnostic> =
            report.diagnostics.iter().filter(|d| d.code == code && d.severity == Severity::Warning).collect();
        if let Some(summary) = summarize(code, &group) {
            out.diagnostics.push(summary);
        }
    }
    let grouped =
        |d: &Diagnostic| matches!(d.code, Code::NotCarriedOver | Code::RenamedTool) && d.severity == Severity::Warning;
    out.diagnostics.extend(report.diagnostics.iter().filter(|d| !grouped(d)).cloned());
    out
}

/// One warning for `group` (of one code): how many, of how many tools, and each kind once.
fn summarize(code: Code, group: &[&Diagnostic]) -> Option<Diagnostic> {
    let first = group.first()?;
    if group.len() == 1 {
        return Some((*first).clone());
    }
    let mut tools: Vec<&str> = group.iter().filter_map(|d| d.path.as_deref()).collect();
    tools.sort_unstable();
    tools.dedup();
    let message = match code {
        Code::RenamedTool => {
            let names: Vec<&str> = group.iter().filter_map(|d| d.path.as_deref()).collect();
            format!("{} tools are exported under other names: {}", group.len(), names.join(", "))
        }
        _ => {
            let mut kinds: Vec<(&str, usize)> = Vec::new();
            for d in group {
                match kinds.iter_mut().find(|(m, _)| *m == d.message) {
                    Some((_, n)) => *n += 1,
                    None => kinds.push((&d.message, 1)),
                }
            }
            let kinds: Vec<String> =
                kinds.iter().map(|(m, n)| if *n == 1 { (*m).to_owned() } else { format!("{m} ({n} tools)") }).collect();
            format!(
                "{} field{} of {} tool{} cannot be carried over and {} left out: {}",
                group.len(),
                if group.len() == 1 { "" } else { "s" },
                tools.len().max(1),
                if tools.len() > 1 { "s" } else { "" },
                if group.len() == 1 { "is" } else { "are" },
                kinds.join("; ")
            )
        }
    };
    let help = "--verbose lists each tool; --format json gives each as a diagnostic";
    Some(Diagnostic::warning(code, &first.file, message).with_help(help))
}

fn export_all(args: &Args, to: To, dirs: Vec<PathBuf>, global: Global) -> anyhow::Result<Outcome> {
    let Some(out_dir) = &args.output else {
        anyhow::bail!(
            "{} holds {} agents; say which folder their documents go into with -o DIR",
            args.input.display(),
            dirs.len()
        );
    };
    if args.name.is_some() {
        anyhow::bail!("--name names one toolset; export the agents one at a time to name each");
    }
    let format_name =
        clap::ValueEnum::to_possible_value(&args.to).map_or_else(String::new, |v| v.get_name().to_owned());
    let mut targets: Vec<(PathBuf, PathBuf)> = Vec::new();
    for dir in dirs {
        let stem = dir.file_name().map_or_else(|| "agent".into(), |n| n.to_string_lossy().into_owned());
        let file = out_dir.join(format!("{stem}.{format_name}.json"));
        if let Some((other, _)) = targets.iter().find(|(_, f)| *f == file) {
            anyhow::bail!("{} and {} would both be exported to {}", other.display(), dir.display(), file.display());
        }
        targets.push((dir, file));
    }
    let trusted_root = args.models.load()?.map(std::sync::Arc::new);
    std::fs::create_dir_all(out_dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out_dir.display()))?;
    let mut outcome = Outcome::Ok;
    let mut results = Vec::new();
    for (dir, file) in targets {
        let opts =
            Options { to, input: dir, name: None, endpoint: args.endpoint.clone(), trusted_root: trusted_root.clone() };
        let result = export::export(&opts, &BundleTrust::Unchecked)?;
        if let Some(doc) = &result.document {
            let text = serde_json::to_string_pretty(doc)? + "\n";
            agent_bundle::atomic::write(&file, text.as_bytes(), true)?;
        }
        let this = if result.document.is_some() { Outcome::Ok } else { check::outcome(&result.report) };
        outcome = outcome.worst(this);
        match args.format {
            Format::Json => results.push(json::value(ExportedAgent {
                ok: result.document.is_some(),
                input: opts.input.display().to_string(),
                output: result.document.is_some().then(|| file.display().to_string()),
                diagnostics: json::diagnostics(&result.report.diagnostics),
            })),
            _ => {
                check::render_report(&shown(&result.report, args.format, args.verbose), args.format, global, "export")?;
                let wrote = format!("{}: wrote {}", opts.input.display(), file.display());
                match (result.document.is_some(), args.format) {
                    (true, Format::Github) => output::notice(Some(&file.display().to_string()), "exported", &wrote)?,
                    (true, _) => output::status(global, &wrote),
                    (false, _) => {}
                }
            }
        }
    }
    if args.format == Format::Json {
        output::print_json(&Results { ok: outcome == Outcome::Ok, results })?;
    }
    Ok(outcome)
}
