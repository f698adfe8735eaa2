//! `bundle unpack <BUNDLE> <DIR>`: run the deployment gate, then extract into a new folder
//! atomically.

use std::path::PathBuf;

use agent_bundle::ops::gate::Verdict;
use agent_bundle::ops::unpack;

use super::args::{GateArgs, TrustArgs};
use super::{Format, Global, Outcome};

/// Verify a bundle and extract it into DIR, which must not exist (or, with --replace, is
/// swapped for the new tree).
///
/// Missing parent folders are created (and removed again if the bundle is rejected). Entries are written to a temp folder beside DIR and renamed into place only once the whole
/// bundle verified; nothing is ever written outside DIR, and a rejected bundle leaves nothing.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle unpack mailer-1.4.0.agent.bundle /srv/agents/mailer --key release.pub\n  bundle unpack mailer-1.5.0.agent.bundle /srv/agents/mailer --key release.pub \\\n      --replace --state /var/lib/agents/state.json   # redeploy"
)]
pub struct Args {
    /// The bundle file, or a registry artifact: oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX).
    bundle: PathBuf,
    /// The folder to create.
    dir: PathBuf,
    /// Redeploy over an existing DIR: the bundle is verified and extracted beside it first,
    /// then the two folders are swapped in one step (a reader sees the old tree or the new
    /// one, never a mix) and the old tree removed. A refused bundle leaves DIR untouched.
    #[arg(long)]
    replace: bool,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    gate: GateArgs,
    #[command(flatten)]
    registry: super::registry::RegistryArgs,
    #[command(flatten)]
    keyless: Box<super::keyless::KeylessArgs>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let gate = super::gate_args::open(&args.trust, args.gate, &args.keyless, global)?;
    let source = args.registry.source(&args.bundle)?;
    let verdict = unpack::unpack(&source, &args.dir, gate, args.replace)?;
    let outcome = super::verify::render(&args.bundle, &verdict, args.format, global)?;
    if matches!(verdict, Verdict::Passed { .. }) {
        let dir = args.dir.display().to_string();
        match args.format {
            Format::Github => super::output::notice(Some(&dir), "unpacked", &format!("unpacked into {dir}"))?,
            Format::Human => super::output::status(global, &format!("unpacked into {dir}")),
            Format::Json => {}
        }
    }
    Ok(outcome)
}
