//! `bundle init <DIR>`: scaffold an agent folder that passes `bundle check`.

use std::path::PathBuf;

use agent_bundle::ops::init;

use super::{Global, Outcome, output};

/// Create an agent folder: tools.json (version 1, no tools), policy.caps, manifest.toml.
///
/// Refuses to overwrite existing files unless --force is given.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  bundle init agents/mailer\n  bundle init agents/kb --name knowledge-base")]
pub struct Args {
    /// The folder to create (or fill).
    dir: PathBuf,
    /// Agent name (default: derived from the folder name).
    #[arg(long)]
    name: Option<String>,
    /// Overwrite existing files.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let done = init::init(&args.dir, args.name.as_deref(), args.force)?;
    output::status(global, &format!("created agent `{}` in {}", done.name, args.dir.display()));
    for f in &done.files {
        output::status(global, &format!("  {}", f.display()));
    }
    Ok(Outcome::Ok)
}
