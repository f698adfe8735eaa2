//! `bundle cat <BUNDLE> <PATH>`: one file of a bundle, checked against the signed manifest,
//! without decoding the rest.

use std::io::Write;
use std::path::PathBuf;

use agent_bundle::ops::cat::{self, Destination};
use agent_bundle::timestamp::Timestamp;
use agent_bundle::trust::TrustedKeys;

use super::keys::{load_public_key, load_trust};
use super::{Format, Global, Outcome};

/// Write one file of a bundle to standard output (or --output), once its bytes are the ones the
/// signed manifest gives.
///
/// The signature and the manifest are checked as `bundle verify` checks them (key, agent name,
/// expiry); then only the zstd frames that hold PATH are decoded (bundles with a seek table;
/// others are decoded from the start up to PATH), and its BLAKE3 is compared with the manifest's
/// before anything is written. The rest of the bundle is not read: this is not a verification
/// of the whole bundle. Files over 64 MiB need --output.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle cat mailer-1.4.0.agent.bundle tools.json --key release.pub\n  bundle cat kb-2.0.0.agent.bundle knowledge/part0001.txt --key release.pub \\\n      -o part.txt"
)]
pub struct Args {
    /// The bundle file.
    bundle: PathBuf,
    /// The file's path inside the bundle, as the manifest lists it.
    path: String,
    /// A trusted minisign public key file (repeatable).
    #[arg(long = "key", value_name = "PUBLIC_KEY", required_unless_present = "trusted_keys")]
    keys: Vec<PathBuf>,
    /// A file of trusted public keys, each optionally limited to agent-name patterns.
    #[arg(long, value_name = "FILE", conflicts_with = "keys")]
    trusted_keys: Option<PathBuf>,
    /// Require this agent name.
    #[arg(long)]
    name: Option<String>,
    /// Write the file here (through a temp file beside it, renamed into place once checked)
    /// instead of to standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Output format of a refusal (the file itself is always written as it is).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let keys = if args.trusted_keys.is_some() {
        load_trust(&super::args::TrustArgs { trusted_keys: args.trusted_keys.clone(), ..Default::default() })?
    } else {
        TrustedKeys::from_keys(args.keys.iter().map(|p| load_public_key(p)).collect::<anyhow::Result<Vec<_>>>()?)
    };
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    let to = match &args.output {
        Some(path) => Destination::File(path),
        None => Destination::Writer(&mut lock as &mut dyn Write),
    };
    match cat::cat(&args.bundle, &args.path, &keys, args.name.as_deref(), Timestamp::now(), to)? {
        Ok(done) => {
            // With standard output taken by the file, only --output leaves room for a report.
            if let Some(out) = &args.output {
                let (name, version) = &done.agent;
                let what = format!(
                    "{} of {name} {version} ({} bytes, key {}) -> {}",
                    args.path,
                    done.size,
                    done.key_id,
                    out.display()
                );
                match args.format {
                    Format::Human => super::output::status(global, &format!("wrote {what}")),
                    Format::Github => super::output::notice(Some(&args.path), "cat", &what)?,
                    Format::Json => super::output::print_json(&serde_json::json!({
                        "ok": true,
                        "path": args.path,
                        "size": done.size,
                        "seekable": done.seekable,
                        "key_id": done.key_id,
                        "agent": { "name": name, "version": version },
                        "output": out.display().to_string(),
                    }))?,
                }
            }
            Ok(Outcome::Ok)
        }
        Err(refused) => super::verify::render_rejection(&args.bundle, refused.into_rejection(), args.format, global),
    }
}
