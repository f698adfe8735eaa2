//! `bundle check [PATH]...`: validate agent folders; the pre-commit hook.

use agent_bundle::agent::display_prefix;
use agent_bundle::agent::pins::{McpRefresh, Refresh};
use agent_bundle::diagnostic::{Code, Report};
use agent_bundle::fetch::Fetcher;
use agent_bundle::mcp_client::Limits;
use agent_bundle::ops::check;

use serde::Serialize;

use super::json::{self, CheckReport, CheckedAgent};
use super::{Format, Global, Outcome, output};

/// Validate agent folders: tools.json, policy.caps, manifest.toml and its digests.
///
/// A PATH is an agent folder (it holds manifest.toml) or a folder of agent folders: every agent
/// below it is checked (below its agents/ when it has one), at any depth, in sorted order.
/// Exit status: 0 clean (warnings allowed), 1 problems found, 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle check                 # the agent in ., or every agent in agents/\n  bundle check agents/mailer\n  bundle check agents/team-a      # every agent below it\n  bundle check --refresh agents/github   # also fetch pinned toolsets\n  bundle check --refresh --ca-cert corp-root.pem agents/internal\n  bundle check --refresh --env TZ agents/clock   # also start pinned MCP servers\n  bundle check --format json . | jq '.diagnostics[].code'"
)]
pub struct Args {
    #[command(flatten)]
    pub(super) targets: super::args::Targets,

    /// Also fetch every URL pinned in manifest.toml `[pins]`, and start every pinned MCP server
    /// (stdio, as `import --stdio` does), and report drift from the pinned copy (`pin_drift`,
    /// per MCP tool with the change classes of `bundle diff`). Uses the network and runs the
    /// pinned commands; without it check does neither.
    #[arg(long)]
    refresh: bool,

    /// With --refresh, MCP servers: pass this variable of the environment to the server (NAME),
    /// or set it (NAME=VALUE); repeatable. A server otherwise gets only HOME, LOGNAME, PATH,
    /// SHELL, TERM and USER. Never recorded in the manifest.
    #[arg(long = "env", value_name = "NAME[=VALUE]", requires = "refresh")]
    env: Vec<agent_bundle::mcp_client::EnvVar>,

    /// With --refresh, MCP servers: give up on a server that has not listed its tools after
    /// this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, requires = "refresh",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,

    /// With --refresh: also trust the root certificates in this PEM file (a private CA's), in
    /// addition to the public (Mozilla) roots. Repeatable.
    #[arg(long, value_name = "PEM", requires = "refresh")]
    ca_cert: Vec<std::path::PathBuf>,
    #[command(flatten)]
    models: super::args::ModelRootArgs,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let paths = args.targets.paths();
    let refresh = if args.refresh {
        let limits = Limits { timeout: std::time::Duration::from_secs(args.timeout), ..Limits::default() };
        Some(Refresh {
            fetcher: Fetcher::new(&args.ca_cert)?,
            mcp: McpRefresh { env: args.env, ca_certs: args.ca_cert.clone(), limits },
        })
    } else {
        None
    };
    let root = args.models.load()?;
    let opts =
        agent_bundle::agent::CheckOptions { digests: true, refresh: refresh.as_ref(), trusted_root: root.as_ref() };
    let mut all = Report::default();
    let mut agents = Vec::new();
    // Only the summaries and the problems stay, taken from each result on its checking thread.
    let keep = |c: agent_bundle::agent::AgentCheck| {
        let ok = c.is_ok();
        let (dir, manifest, report) = agent_bundle::agent::into_parts(c);
        let summary = CheckedAgent {
            dir: dir.display().to_string(),
            name: manifest.as_ref().map(|m| m.name.clone()),
            version: manifest.as_ref().map(|m| m.version.to_string()),
            ok,
        };
        // A clean agent's report holds only its source texts (kept to show problems in):
        // dropped, so that memory grows with the problems found, not with the agents checked.
        (summary, (!report.diagnostics.is_empty()).then_some(report))
    };
    check::check_each(&paths, opts, keep, |(summary, report)| {
        agents.push(summary);
        if let Some(report) = report {
            all.extend(report);
        }
    })?;
    render(&all, agents, args.targets.format, global, "check")?;
    Ok(outcome(&all))
}

/// Exit status for a report: I/O and TLS problems are errors of the run (2), others
/// rejections (1).
pub fn outcome(report: &Report) -> Outcome {
    if report.diagnostics.iter().any(|d| matches!(d.code, Code::IoError | Code::TlsError | Code::McpServerFailed)) {
        Outcome::Failed
    } else if report.has_errors() {
        Outcome::Rejected
    } else {
        Outcome::Ok
    }
}

/// The JSON document of a report (what `render` prints for `--format json`).
pub fn report_json<A: Serialize>(report: &Report, agents: &[A]) -> serde_json::Value {
    let doc = CheckReport {
        ok: !report.has_errors(),
        errors: report.errors(),
        warnings: report.warnings(),
        agents,
        diagnostics: json::diagnostics(&report.diagnostics),
    };
    serde_json::to_value(doc).expect("a report serialises")
}

/// Renders the report of a command that judged agent files (pack, import, export, tool add).
pub fn render_report(report: &Report, format: Format, global: Global, verb: &str) -> std::io::Result<()> {
    render(report, Vec::<CheckedAgent>::new(), format, global, verb)
}

pub fn render<A: Serialize>(
    report: &Report,
    agents: Vec<A>,
    format: Format,
    global: Global,
    verb: &str,
) -> std::io::Result<()> {
    match format {
        Format::Json => output::print_json(&report_json(report, &agents)),
        Format::Github => {
            output::github(report)?;
            if verb != "check" {
                return Ok(());
            }
            let agents = serde_json::to_value(&agents)?;
            for a in agents.as_array().into_iter().flatten().filter(|a| a["ok"] == true) {
                let label: Vec<&str> = [&a["name"], &a["version"]].into_iter().filter_map(|v| v.as_str()).collect();
                let manifest =
                    format!("{}manifest.toml", display_prefix(std::path::Path::new(a["dir"].as_str().unwrap_or("."))));
                output::notice(Some(&manifest), "checked", &format!("{} passes check", label.join(" ")))?;
            }
            Ok(())
        }
        Format::Human => {
            output::human(report, global)?;
            let (e, w) = (report.errors(), report.warnings());
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            let summary = match verb {
                "check" => format!(
                    "checked {} agent{}: {e} error{}, {w} warning{}",
                    agents.len(),
                    plural(agents.len()),
                    plural(e),
                    plural(w)
                ),
                _ if e > 0 => format!("{verb} failed: {e} error{}, {w} warning{}", plural(e), plural(w)),
                _ if w > 0 => format!("{w} warning{}", plural(w)),
                _ => return Ok(()),
            };
            if e > 0 {
                output::print_error_line(global, &summary);
            } else {
                output::status(global, &summary);
            }
            Ok(())
        }
    }
}
