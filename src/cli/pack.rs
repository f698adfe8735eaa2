//! `bundle pack <AGENT_DIR> --key <SECRET_KEY>`: the release step.

use std::path::PathBuf;

use agent_bundle::ops::pack::{self, PackFailure, PackOptions};

use super::keys::{SecretKeyArgs, load_secret_key};
use super::{Format, Global, Outcome, output};

/// Check, lock, sign and write a reproducible <name>-<version>.agent.bundle.
///
/// Any problem in the agent stops the pack and nothing is written. The bundle is written to a
/// temp file and renamed into place, so an interrupted pack never leaves a partial bundle.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle pack agents/mailer --key release.key\n  bundle pack agents/mailer --key release.key --locked -o dist/   # CI release step\n  BUNDLE_SIGNING_KEY=\"$(cat release.key)\" bundle pack agents/mailer --locked"
)]
pub struct Args {
    /// The agent folder.
    agent_dir: PathBuf,
    #[command(flatten)]
    key: SecretKeyArgs,
    /// Output file, or an existing folder to write <name>-<version>.agent.bundle into
    /// (default: that name in the working directory).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Refuse a stale manifest instead of locking it (ship exactly what was reviewed).
    #[arg(long)]
    locked: bool,
    /// zstd compression level, 1-19.
    #[arg(long, value_name = "N", default_value_t = 3)]
    level: i32,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

/// `SOURCE_DATE_EPOCH` when set (reproducible-builds.org), else 0.
fn mtime() -> anyhow::Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("SOURCE_DATE_EPOCH must be a whole number of seconds, not `{v}`")),
        Err(_) => Ok(0),
    }
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let key = load_secret_key(&args.key)?;
    let opts =
        PackOptions { output: args.output, locked: args.locked, level: args.level, mtime: mtime()?, now: global.now() };
    let bar = super::progress::Bar::new(global);
    match pack::pack(&args.agent_dir, &key, &opts, &bar) {
        Ok(p) => {
            match args.format {
                Format::Json => output::print_json(&serde_json::json!({
                    "ok": true,
                    "bundle": p.path.display().to_string(),
                    "agent": {"name": p.name, "version": p.version},
                    "key_id": p.key_id,
                    "files": p.files,
                    "content_bytes": p.content_bytes,
                    "bundle_bytes": p.bundle_bytes,
                    "relocked": p.relocked,
                }))?,
                Format::Github => output::print_line(&output::github_annotation(
                    "notice",
                    Some(&p.path.display().to_string()),
                    "packed",
                    &format!("packed {} {} (signed by {})", p.name, p.version, p.key_id),
                ))?,
                Format::Human => output::status(
                    global,
                    &format!(
                        "packed {} {} -> {} ({} files, {} bytes, {} compressed; signed by {})",
                        p.name,
                        p.version,
                        p.path.display(),
                        p.files,
                        p.content_bytes,
                        p.bundle_bytes,
                        p.key_id
                    ),
                ),
            }
            Ok(Outcome::Ok)
        }
        Err(PackFailure::Rejected(report)) => {
            super::check::render(&report, Vec::new(), args.format, global, "pack")?;
            // An unwritable manifest is an I/O failure (exit 2), as in `bundle lock`.
            Ok(super::check::outcome(&report))
        }
        Err(PackFailure::Error(e)) => Err(e.into()),
    }
}
