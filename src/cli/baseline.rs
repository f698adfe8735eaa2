//! `bundle baseline snapshot|approve`: record and update the tool contracts a release gate
//! (`bundle verify --baseline`) accepts.

use std::path::{Path, PathBuf};

use agent_bundle::contract::baseline::{Approval, ApprovalAction};
use agent_bundle::contract::release::AgentContracts;
use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::baseline;

use super::json::{AgentJson, ApproveReport, ApprovedSkill, ApprovedTool, Clean, Release, SnapshotReport};
use super::{Format, Global, Outcome, output};

/// Record and update approved tool contracts (the baseline of `bundle verify --baseline`).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle baseline snapshot mailer-1.4.0.agent.bundle -o approved.toml\n  bundle baseline approve approved.toml \\\n      --from mailer-1.5.0.agent.bundle mail.smtp_send\n  bundle verify mailer-1.5.0.agent.bundle --key release.pub \\\n      --baseline approved.toml"
)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    Snapshot(SnapshotArgs),
    Approve(ApproveArgs),
}

/// Write a baseline approving every tool of a bundle or agent folder as it is.
///
/// Each tool's entry holds its contract fingerprint, risk class and canonical contract, so that
/// later drift can be explained. Exit status: 0 written, 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle baseline snapshot agents/mailer    # writes baselines/mailer.toml\n  bundle baseline snapshot agents/    # baselines/<agent>.toml for each agent\n  bundle baseline snapshot dist/*.agent.bundle -o approved/\n  bundle baseline snapshot mailer-1.4.0.agent.bundle -o approved.toml --force"
)]
pub struct SnapshotArgs {
    /// Bundles, agent folders, or folders of agents (`agents/`: every agent below it).
    #[arg(required = true)]
    sources: Vec<PathBuf>,
    /// The baseline file to write (default: baselines/<agent>.toml, with baselines/ beside the
    /// agents/ folder that holds the agent, else in the working directory); with several
    /// releases, or ending in `/`, a folder that gets one <agent>.toml each. Never inside an
    /// agent folder: it would be packed into the bundle.
    #[arg(short, long, value_name = "FILE|DIR/")]
    output: Option<PathBuf>,
    /// Replace the file if it exists.
    #[arg(long)]
    force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Take the named tools' contracts (and skills) in a bundle or agent folder as approved.
///
/// Each TOOL_ID's entry is added or replaced in place (comments and order of the file are
/// kept); the entry of a tool the source no longer has is removed. `skills/NAME` approves a
/// skill (its digest and allowed tools) the same way, and `mcp:SERVER` every tool a pinned MCP
/// server's pin holds. Review first with `bundle diff`. Exit status: 0 done, 2 usage or I/O
/// error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle baseline approve approved.toml \\\n      --from mailer-1.5.0.agent.bundle mail.smtp_send\n  bundle baseline approve approved.toml --from agents/mailer \\\n      mail.smtp_send contacts.lookup"
)]
pub struct ApproveArgs {
    /// The baseline file to update.
    baseline: PathBuf,
    /// The bundle or agent folder whose contracts are approved.
    #[arg(long, value_name = "BUNDLE|DIR")]
    from: PathBuf,
    /// The tools to approve, skills as `skills/NAME`, pinned MCP servers as `mcp:SERVER`.
    #[arg(value_name = "TOOL_ID", required = true)]
    tools: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

impl Args {
    /// The output format the subcommand was asked for.
    pub fn format(&self) -> Format {
        match &self.command {
            Command::Snapshot(a) => a.format,
            Command::Approve(a) => a.format,
        }
    }
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    match args.command {
        Command::Snapshot(a) => snapshot(a, global),
        Command::Approve(a) => approve(a, global),
    }
}

fn short(fingerprint: &str) -> &str {
    &fingerprint[..fingerprint.len().min(16)]
}

fn snapshot(args: SnapshotArgs, global: Global) -> anyhow::Result<Outcome> {
    let sources = baseline::sources(&args.sources)?;
    let many = sources.len() > 1;
    let target = match args.output.as_deref() {
        None => baseline::Target::Default,
        Some(out) if many || out.is_dir() || out.as_os_str().to_string_lossy().ends_with('/') => {
            baseline::Target::Folder(out)
        }
        Some(out) => baseline::Target::File(out),
    };
    if !many {
        let (agent, file) = baseline::snapshot(&sources[0], target, args.force)?;
        return render_snapshot(&agent, &file, args.format, global).map(|()| Outcome::Ok);
    }
    // Every release is snapshotted; one that fails does not stop the others.
    let mut outcome = Outcome::Ok;
    let mut results = Vec::new();
    for source in &sources {
        match baseline::snapshot(source, target, args.force) {
            Ok((agent, file)) if args.format == Format::Json => results.push(snapshot_json(&agent, &file)?),
            Ok((agent, file)) => render_snapshot(&agent, &file, args.format, global)?,
            Err(e) => {
                let e = anyhow::Error::from(e);
                match args.format {
                    Format::Json => {}
                    Format::Github => output::github_error(&e),
                    Format::Human => output::print_error(global, &e),
                }
                let mut json = output::error_json(output::error_code(&e).as_str(), &e.to_string(), &[]);
                json["source"] = source.display().to_string().into();
                results.push(json);
                outcome = Outcome::Failed;
            }
        }
    }
    if args.format == Format::Json {
        output::print_json(&serde_json::json!({"ok": outcome == Outcome::Ok, "results": results}))?;
    }
    Ok(outcome)
}

fn snapshot_json(agent: &AgentContracts, file: &Path) -> anyhow::Result<serde_json::Value> {
    let mut sorted: Vec<_> = agent.contracts.iter().collect();
    sorted.sort_by(|a, b| a.id().cmp(b.id()));
    Ok(serde_json::to_value(Clean(SnapshotReport {
        ok: true,
        file: file.display().to_string(),
        agent: AgentJson { name: &agent.name, version: &agent.version },
        tools: sorted.iter().map(|c| ApprovedTool { id: c.id(), fingerprint: &c.fingerprint, risk: c.risk }).collect(),
        skills: skills_sorted(agent)
            .iter()
            .map(|s| ApprovedSkill { name: &s.name, digest: &s.digest, allowed_tools: &s.allowed_tools })
            .collect(),
    }))?)
}

fn skills_sorted(agent: &AgentContracts) -> Vec<&agent_bundle::skill::facts::SkillFacts> {
    let mut sorted: Vec<_> = agent.skills.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    sorted
}

fn render_snapshot(agent: &AgentContracts, file: &Path, format: Format, global: Global) -> anyhow::Result<()> {
    let mut sorted: Vec<_> = agent.contracts.iter().collect();
    sorted.sort_by(|a, b| a.id().cmp(b.id()));
    match format {
        Format::Json => output::print_json(&snapshot_json(agent, file)?)?,
        Format::Github => output::notice(
            Some(&file.display().to_string()),
            "baseline written",
            &format!("{} tools approved from {}", sorted.len(), sanitize(&agent.label())),
        )?,
        Format::Human => {
            let n = sorted.len();
            output::status(
                global,
                &format!(
                    "wrote {}: {n} tool{}{} approved from {}",
                    file.display(),
                    if n == 1 { "" } else { "s" },
                    match agent.skills.len() {
                        0 => String::new(),
                        1 => " and 1 skill".to_owned(),
                        k => format!(" and {k} skills"),
                    } + &match agent.pins.len() {
                        0 => String::new(),
                        1 => " and 1 pinned MCP server".to_owned(),
                        k => format!(" and {k} pinned MCP servers"),
                    },
                    sanitize(&agent.label())
                ),
            );
            let skills = skills_sorted(agent);
            let width = sorted
                .iter()
                .map(|c| c.id().len())
                .chain(skills.iter().map(|s| "skills/".len() + s.name.len()))
                .max()
                .unwrap_or(0);
            for c in sorted {
                output::status(
                    global,
                    &format!("  {:<width$}  {}  {}", sanitize(c.id()), short(&c.fingerprint), c.risk),
                );
            }
            for s in skills {
                let tools = if s.allowed_tools.is_empty() { "-".to_owned() } else { s.allowed_tools.join(" ") };
                let id = format!("skills/{}", sanitize(&s.name));
                output::status(global, &format!("  {id:<width$}  {}  allowed: {}", short(&s.digest), sanitize(&tools)));
            }
            let mut pins: Vec<_> = agent.pins.iter().collect();
            pins.sort_by(|a, b| a.server.cmp(&b.server));
            for p in pins {
                let names: Vec<&str> =
                    p.tools.iter().filter_map(|t| t.get("name").and_then(serde_json::Value::as_str)).collect();
                let id = format!("mcp:{}", sanitize(&p.server));
                output::status(
                    global,
                    &format!("  {id:<width$}  {} tools: {}", names.len(), sanitize(&names.join(" "))),
                );
            }
        }
    }
    Ok(())
}

fn approve(args: ApproveArgs, global: Global) -> anyhow::Result<Outcome> {
    let (from, done) = baseline::approve(&args.baseline, &args.from, &args.tools)?;
    match args.format {
        Format::Json => output::print_json(&Clean(ApproveReport {
            ok: true,
            file: args.baseline.display().to_string(),
            from: Release { path: args.from.display().to_string(), name: &from.name, version: &from.version },
            tools: &done,
        }))?,
        Format::Github => {
            for a in &done {
                output::notice(Some(&args.baseline.display().to_string()), "baseline updated", &describe(a))?;
            }
        }
        Format::Human => {
            for a in &done {
                output::status(global, &format!("{}: {}", args.baseline.display(), describe(a)));
            }
        }
    }
    Ok(Outcome::Ok)
}

fn describe(a: &Approval) -> String {
    let id = sanitize(&a.tool);
    let risk = a.risk.map(|r| format!(" ({r})")).unwrap_or_default();
    let (old, new) = (a.old.as_deref().map(short).unwrap_or("-"), a.new.as_deref().map(short).unwrap_or("-"));
    match a.action {
        ApprovalAction::Added => format!("approved {id}{risk}: {new}"),
        ApprovalAction::Updated => format!("approved {id}{risk}: {old} -> {new}"),
        ApprovalAction::Unchanged => format!("{id}{risk} was already approved: {new}"),
        ApprovalAction::Removed => format!("removed {id}: it is no longer in the release (was {old})"),
    }
}
