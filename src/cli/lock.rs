//! `bundle lock [PATH]...`: write current digests into manifest.toml.

use agent_bundle::diagnostic::Report;
use agent_bundle::ops::lock;

use super::json::LockedAgent;
use super::{Format, Global, Outcome, output};

/// Write the BLAKE3 digest and size of every file into manifest.toml.
///
/// Comments, key order and formatting are kept; stale entries are removed and new files added
/// in sorted order. An up-to-date manifest is not rewritten. The write is atomic.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle lock                  # the agent in ., or every agent in agents/\n  bundle lock agents/mailer && git add agents/mailer/manifest.toml"
)]
pub struct Args {
    #[command(flatten)]
    pub(super) targets: super::args::Targets,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let mut all = Report::default();
    let mut agents = Vec::new();
    for outcome in lock::lock_paths(&args.targets.paths())? {
        let (dir, manifest_path, written, changes, report) = match outcome {
            Ok(l) => (l.dir, l.manifest_path, l.written, Some(l.changes), l.report),
            Err(n) => (n.dir, n.manifest_path, false, None, n.report),
        };
        if args.targets.format == Format::Github && changes.is_some() {
            let message = if written { "manifest.toml was updated; commit it" } else { "manifest.toml is up to date" };
            output::notice(Some(&manifest_path.display().to_string()), "locked", message)?;
        }
        if args.targets.format == Format::Human {
            let what = match &changes {
                None => "not locked".to_owned(),
                Some(c) if written => {
                    format!(
                        "updated ({} added, {} changed, {} removed)",
                        c.added.len(),
                        c.updated.len(),
                        c.removed.len()
                    )
                }
                Some(_) => "up to date".to_owned(),
            };
            // An agent lock left as it was is not news (the hook runs over every agent).
            if changes.is_none() || written {
                output::status(global, &format!("{}: {what}", manifest_path.display()));
            }
        }
        let ok = changes.is_some();
        let changes = changes.unwrap_or_default();
        agents.push(LockedAgent {
            dir: dir.display().to_string(),
            manifest: manifest_path.display().to_string(),
            written,
            added: changes.added,
            updated: changes.updated,
            removed: changes.removed,
            ok,
        });
        all.extend(report);
    }
    let untouched = agents.iter().filter(|a| a.ok && !a.written).count();
    if args.targets.format == Format::Human && untouched == agents.len() {
        let s = if untouched == 1 { "" } else { "s" };
        output::status(global, &format!("{untouched} agent{s} up to date"));
    }
    super::check::render(&all, agents, args.targets.format, global, "lock")?;
    Ok(super::check::outcome(&all))
}
