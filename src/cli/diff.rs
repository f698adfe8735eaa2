//! `bundle diff <OLD> <NEW>`: what a release changes in its tools' contracts and policy.caps.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_bundle::contract::release::AgentContracts;
use agent_bundle::contract::{Change, Impact};
use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::diff::{self, AgentDiff, FailOn, Status};

use super::json::{Clean, DiffPin, DiffReport, DiffSummary, DiffTool, PinnedTool, Release};
use super::{Format, Global, Outcome, output};

/// Compare the tool contracts and policy.caps grants of two releases of an agent.
///
/// OLD and NEW are each a bundle or an agent folder (a bundle's signature is not checked: that
/// is `bundle verify`'s job; vendor model signatures are, a Sigstore identity under
/// --trusted-root). Every change is classified: widening (a tool may do more), breaking
/// (callers or consumers of results may fail), narrowing, compatible, neutral.
///
/// Exit status: 0 compared (1 when --fail-on matches a change), 2 usage or I/O error, or a
/// side that is not a valid agent or bundle.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle diff mailer-1.4.0.agent.bundle agents/mailer   # the next release\n  bundle diff old.agent.bundle new.agent.bundle --fail-on widening,breaking\n  bundle diff old.agent.bundle new.agent.bundle --format json | jq '.summary'"
)]
pub struct Args {
    /// The old release: a bundle or an agent folder.
    old: PathBuf,
    /// The new release: a bundle or an agent folder.
    new: PathBuf,
    /// Exit 1 when a change of this impact is found: widening, breaking, any (repeat or
    /// separate with commas).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "IMPACT")]
    fail_on: Vec<FailOnArg>,
    #[command(flatten)]
    models: super::args::ModelRootArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FailOnArg {
    /// A tool may do more: a capability, secret, host, method, program, budget, or a lost
    /// confirmation; a new tool; a new policy.caps grant.
    Widening,
    /// Callers or consumers may fail: a schema change that rejects old inputs or returns
    /// unexpected results; a removed tool.
    Breaking,
    /// Any change at all.
    Any,
}

impl FailOnArg {
    fn op(self) -> FailOn {
        match self {
            FailOnArg::Widening => FailOn::Widening,
            FailOnArg::Breaking => FailOn::Breaking,
            FailOnArg::Any => FailOn::Any,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FailOnArg::Widening => "widening",
            FailOnArg::Breaking => "breaking",
            FailOnArg::Any => "any",
        }
    }
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let d = diff::diff_paths(&args.old, &args.new, args.models.load()?.as_ref())?;
    let fail_on: Vec<FailOn> = args.fail_on.iter().map(|f| f.op()).collect();
    let matched = d.matching(&fail_on).count();
    let names: Vec<&str> = args.fail_on.iter().map(|f| f.name()).collect();
    match args.format {
        Format::Json => output::print_json(&json(&d, &names, matched))?,
        Format::Github => github(&d, &fail_on, &Places::of(&args.new, &d))?,
        Format::Human => human(&d, global)?,
    }
    if matched > 0 {
        if args.format == Format::Human {
            output::print_error_line(
                global,
                &format!(
                    "diff failed: {matched} change{} match{} --fail-on {}",
                    plural(matched),
                    if matched == 1 { "es" } else { "" },
                    names.join(",")
                ),
            );
        }
        return Ok(Outcome::Rejected);
    }
    Ok(Outcome::Ok)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn count(d: &AgentDiff, status: Status) -> usize {
    d.tools.iter().filter(|t| t.status == status).count()
}

/// `6 changes: 4 widening, 2 breaking; tools: 1 changed, 1 added, 0 removed, 2 unchanged`
fn summary(d: &AgentDiff) -> String {
    let total = d.changes().count();
    let by_impact: Vec<String> = Impact::ALL
        .iter()
        .map(|&i| (d.count(i), i.as_str()))
        .filter(|(n, _)| *n > 0)
        .map(|(n, name)| format!("{n} {name}"))
        .collect();
    let impacts = if by_impact.is_empty() { String::new() } else { format!(": {}", by_impact.join(", ")) };
    format!(
        "{total} change{}{impacts}; tools: {} changed, {} added, {} removed, {} unchanged",
        plural(total),
        count(d, Status::Changed),
        count(d, Status::Added),
        count(d, Status::Removed),
        count(d, Status::Unchanged)
    )
}

fn side_label(a: &AgentContracts) -> String {
    let path = a.origin.display().to_string();
    match (&a.name, &a.version) {
        (Some(n), Some(v)) => format!("{} {} ({})", sanitize(n), sanitize(v), sanitize(&path)),
        _ => sanitize(&path),
    }
}

fn human(d: &AgentDiff, global: Global) -> std::io::Result<()> {
    let stream = output::stdout(global);
    let mut out = stream.lock();
    writeln!(out, "{} -> {}", side_label(&d.old), side_label(&d.new))?;
    if let Some((old, new)) = d.different_agents() {
        writeln!(
            out,
            "note: `{}` and `{}` are different agents, so every tool shows as added or removed; \
             diff compares two releases of one agent",
            sanitize(old),
            sanitize(new)
        )?;
    }
    if !d.grants.is_empty() {
        writeln!(out, "\n  policy.caps")?;
        output::write_changes(&mut out, &d.grants.iter().collect::<Vec<_>>(), "    ")?;
    }
    if !d.skills.is_empty() {
        writeln!(out, "\n  skills")?;
        output::write_changes(&mut out, &d.skills.iter().collect::<Vec<_>>(), "    ")?;
    }
    for t in d.tools.iter().filter(|t| t.status != Status::Unchanged) {
        let (mark, side) = match t.status {
            Status::Added => ('+', &t.new),
            Status::Removed => ('-', &t.old),
            _ => ('~', &t.new),
        };
        let risk = side.as_ref().map(|s| format!(" ({})", s.risk)).unwrap_or_default();
        writeln!(out, "\n  {mark} {}{risk}", sanitize(&t.id))?;
        output::write_changes(&mut out, &t.changes.iter().collect::<Vec<_>>(), "    ")?;
    }
    for p in d.pins.iter().filter(|p| p.status != Status::Unchanged) {
        let mark = match p.status {
            Status::Added => '+',
            Status::Removed => '-',
            _ => '~',
        };
        writeln!(out, "\n  {mark} MCP server {} ({})", sanitize(&p.server), sanitize(&p.file))?;
        // Each change says which of the server's tools it is about.
        let shown: Vec<Change> = p
            .changes
            .iter()
            .map(|c| {
                let tool = c.tool.as_deref().and_then(|t| t.split_once('/')).map_or("", |(_, t)| t);
                Change { message: format!("{tool}: {}", c.message), ..c.clone() }
            })
            .collect();
        output::write_changes(&mut out, &shown.iter().collect::<Vec<_>>(), "    ")?;
    }
    writeln!(out, "\n{}", summary(d))?;
    out.flush()
}

fn json<'a>(d: &'a AgentDiff, fail_on: &'a [&'a str], matched: usize) -> DiffReport<'a> {
    let side = |a: &'a AgentContracts| {
        Clean(Release { path: a.origin.display().to_string(), name: &a.name, version: &a.version })
    };
    let statuses = [
        (Status::Changed, "changed"),
        (Status::Added, "added"),
        (Status::Removed, "removed"),
        (Status::Unchanged, "unchanged"),
    ];
    DiffReport {
        ok: matched == 0,
        old: side(&d.old),
        new: side(&d.new),
        fail_on,
        matched,
        different_agents: d.different_agents().is_some(),
        summary: DiffSummary {
            changes: d.changes().count(),
            by_impact: Impact::ALL.iter().map(|&i| (i.as_str(), d.count(i))).collect(),
            tools: statuses.iter().map(|&(status, name)| (name, count(d, status))).collect(),
        },
        grants: d.grants.iter().map(Clean).collect(),
        skills: d.skills.iter().map(Clean).collect(),
        tools: d
            .tools
            .iter()
            .map(|t| DiffTool {
                id: &t.id,
                status: t.status,
                old: &t.old,
                new: &t.new,
                changes: t.changes.iter().map(Clean).collect(),
            })
            .collect(),
        pins: d
            .pins
            .iter()
            .map(|p| DiffPin {
                server: &p.server,
                file: &p.file,
                status: p.status,
                old: PinnedTool::list(&p.old),
                new: PinnedTool::list(&p.new),
                changes: p.changes.iter().map(Clean).collect(),
            })
            .collect(),
        changes: d.changes().map(Clean).collect(),
    }
}

/// Where a change lands in NEW when NEW is an agent folder: its tools.json and policy.caps,
/// so that a pull request shows each annotation on the changed tool's `"id"` line (or the
/// grant's line).
struct Places {
    tools: Option<(String, String)>,
    policy: Option<(String, String)>,
    /// `mcp:<server>` and the server's pin file in NEW.
    pins: Vec<(String, String)>,
}

impl Places {
    fn of(new: &Path, d: &AgentDiff) -> Places {
        let read = |name: &str| {
            let path = new.join(name);
            let text = std::fs::read_to_string(&path).ok()?;
            Some((path.display().to_string(), text))
        };
        if !new.is_dir() {
            return Places { tools: None, policy: None, pins: Vec::new() };
        }
        let pins = d
            .pins
            .iter()
            .filter(|p| p.status != Status::Removed)
            .map(|p| (format!("mcp:{}/", p.server), new.join(&p.file).display().to_string()))
            .collect();
        Places { tools: read("tools.json"), policy: read("policy.caps"), pins }
    }

    /// `file=` and, when found, `line=` for a change.
    fn of_change(&self, c: &Change) -> Vec<String> {
        if let Some(tool) = c.tool.as_deref().filter(|t| t.starts_with("mcp:")) {
            return match self.pins.iter().find(|(prefix, _)| tool.starts_with(prefix.as_str())) {
                Some((_, file)) => vec![format!("file={}", output::escape_property(&sanitize(file)))],
                None => Vec::new(),
            };
        }
        let (file, line) = match (&c.tool, &self.tools, &self.policy) {
            (Some(id), Some((file, text)), _) => (file, line_of(text, |l| declares_id(l, id))),
            (None, _, Some((file, text))) => {
                let grant = c.new.as_deref().unwrap_or_default();
                let found =
                    (!grant.is_empty()).then(|| line_of(text, |l| l.split('#').next().unwrap_or("").trim() == grant));
                (file, found.flatten())
            }
            _ => return Vec::new(),
        };
        let mut props = vec![format!("file={}", output::escape_property(&sanitize(file)))];
        if let Some(line) = line {
            props.push(format!("line={line}"));
        }
        props
    }
}

/// The 1-based number of the first line `matches` accepts.
fn line_of(text: &str, matches: impl Fn(&str) -> bool) -> Option<usize> {
    text.lines().position(matches).map(|i| i + 1)
}

/// A tools.json line that declares the tool `id`: `"id": "<id>"` (ids hold no quotes).
fn declares_id(line: &str, id: &str) -> bool {
    let Some(rest) = line.trim_start().strip_prefix("\"id\"") else { return false };
    rest.trim_start().strip_prefix(':').is_some_and(|v| v.trim_start().starts_with(&format!("\"{id}\"")))
}

/// One annotation per change: errors for those --fail-on matches, warnings for other widening
/// or breaking changes, notices for the rest; on NEW's tools.json or policy.caps line when NEW
/// is an agent folder.
fn github(d: &AgentDiff, fail_on: &[FailOn], places: &Places) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if let Some((old, new)) = d.different_agents() {
        let message = format!(
            "`{}` and `{}` are different agents, so every tool shows as added or removed; diff compares two releases of one agent",
            sanitize(old),
            sanitize(new)
        );
        writeln!(out, "{}", output::github_annotation("warning", None, "different agents", &message))?;
    }
    for c in d.changes() {
        let level = if fail_on.iter().any(|f| f.matches(c)) {
            "error"
        } else if matches!(c.impact, Impact::Widening | Impact::Breaking) {
            "warning"
        } else {
            "notice"
        };
        let subject = c.tool.as_deref().unwrap_or("policy.caps");
        let message = format!("{}: {}", sanitize(subject), sanitize(&c.message));
        let mut props = places.of_change(c);
        props.push(format!("title={}", output::escape_property(&format!("{} {}", c.impact.as_str(), c.kind.as_str()))));
        writeln!(out, "::{level} {}::{}", props.join(","), output::escape_data(&message))?;
    }
    out.flush()
}
