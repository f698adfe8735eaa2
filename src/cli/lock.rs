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
    for locked in lock::lock_paths(&args.targets.paths())? {
        if args.targets.format == Format::Github && !locked.report.has_errors() {
            let message =
                if locked.written { "manifest.toml was updated; commit it" } else { "manifest.toml is up to date" };
            output::notice(Some(&locked.manifest_path.display().to_string()), "locked", message)?;
        }
        if args.targets.format == Format::Human {
            let ok = !locked.report.has_errors();
            let what = if !ok {
                "not locked".to_owned()
            } else if locked.written {
                let c = &locked.changes;
                format!("updated ({} added, {} changed, {} removed)", c.added.len(), c.updated.len(), c.removed.len())
            } else {
                "up to date".to_owned()
            };
            // An agent lock left as it was is not news (the hook runs over every agent).
            if !ok || locked.written {
                output::status(global, &format!("{}: {what}", locked.manifest_path.display()));
            }
        }
        agents.push(LockedAgent {
            dir: locked.dir.display().to_string(),
            manifest: locked.manifest_path.display().to_string(),
            written: locked.written,
            added: locked.changes.added,
            updated: locked.changes.updated,
            removed: locked.changes.removed,
            ok: !locked.report.has_errors(),
        });
        all.extend(locked.report);
    }
    let untouched = agents.iter().filter(|a| a.ok && !a.written).count();
    if args.targets.format == Format::Human && untouched == agents.len() {
        let s = if untouched == 1 { "" } else { "s" };
        output::status(global, &format!("{untouched} agent{s} up to date"));
    }
    super::check::render(&all, agents, args.targets.format, global, "lock")?;
    Ok(super::check::outcome(&all))
}
