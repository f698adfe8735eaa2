//! `bundle init <DIR>`: scaffold an agent folder that passes `bundle check`.

use std::path::PathBuf;

use agent_bundle::ops::init;

use super::{Global, Outcome, output};

/// Create an agent folder: tools.json (version 1, no tools), policy.caps, manifest.toml.
///
/// Refuses to overwrite existing files unless --force is given.
#[derive(Debug, clap::Args)]
#[command(
    disable_version_flag = true,
    after_help = "Examples:\n  bundle init agents/mailer\n  bundle init agents/kb --name knowledge-base --version 1.0.0"
)]
pub struct Args {
    /// The folder to create (or fill).
    dir: PathBuf,
    /// Agent name (default: derived from the folder name).
    #[arg(long)]
    name: Option<String>,
    /// The first version, semantic versioning (default: 0.1.0).
    #[arg(long, value_name = "X.Y.Z", value_parser = semver::Version::parse)]
    version: Option<semver::Version>,
    /// Overwrite existing files.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let opts = init::Options { name: args.name.as_deref(), version: args.version.as_ref(), force: args.force };
    let done = init::init(&args.dir, &opts)?;
    output::status(global, &format!("created agent `{}` in {}", done.name, args.dir.display()));
    for f in &done.files {
        output::status(global, &format!("  {}", f.display()));
    }
    Ok(Outcome::Ok)
}
