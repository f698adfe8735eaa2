//! `bundle unpack <BUNDLE> <DIR>`: verify, then extract into a new folder atomically.

use std::io::BufReader;
use std::path::PathBuf;

use agent_bundle::oci;
use agent_bundle::ops::pull::rejection;

use agent_bundle::ops::unpack::{self, Unpacked};

use super::keys::{TrustArgs, load_trust};
use super::{Format, Global, Outcome};

/// Verify a bundle and extract it into DIR, which must not exist.
///
/// Missing parent folders are created (and removed again if the bundle is rejected). Entries are written to a temp folder beside DIR and renamed into place only once the whole
/// bundle verified; nothing is ever written outside DIR, and a rejected bundle leaves nothing.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  bundle unpack mailer-1.4.0.agent.bundle /srv/agents/mailer --key release.pub")]
pub struct Args {
    /// The bundle file, or a registry artifact: oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX).
    bundle: PathBuf,
    /// The folder to create.
    dir: PathBuf,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    gate: super::verify::GateArgs,
    #[command(flatten)]
    registry: super::registry::RegistryArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let keys = load_trust(&args.trust)?;
    let mut state = args.gate.open_state()?;
    let expect = args.gate.expect(state.as_ref(), global);
    let result = match super::registry::reference(&args.bundle)? {
        Some(reference) => {
            let options = args.registry.options(&reference)?;
            match oci::open_layer(&reference, &options) {
                Err(e) => Err(rejection(&e)),
                Ok(layer) => {
                    // The stream is read to its end (where the layer's digest is checked)
                    // before the folder is renamed into place.
                    let mismatch = layer.reader.mismatch();
                    let input = BufReader::with_capacity(1 << 20, layer.reader);
                    let unpacked = unpack::unpack_from(input, &args.dir, &keys, &expect)?;
                    match (unpacked, mismatch.lock().unwrap_or_else(|p| p.into_inner()).clone()) {
                        (Unpacked::Rejected(r), Some(m)) => {
                            Err(super::registry::blob_mismatch(&reference, &m, Some(r)))
                        }
                        (Unpacked::Done(v), _) => Ok(*v),
                        (Unpacked::Rejected(r), None) => Err(r),
                    }
                }
            }
        }
        None => {
            args.registry.refuse_for_file(&args.bundle)?;
            match unpack::unpack(&args.bundle, &args.dir, &keys, &expect)? {
                Unpacked::Done(v) => Ok(*v),
                Unpacked::Rejected(r) => Err(r),
            }
        }
    };
    if let Ok(v) = &result {
        super::verify::record(state.as_mut(), v)?;
    }
    let outcome = super::verify::report(&args.bundle, result, args.format, global)?;
    if outcome == Outcome::Ok {
        super::output::status(global, &format!("unpacked into {}", args.dir.display()));
    }
    Ok(outcome)
}
