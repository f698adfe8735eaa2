//! `bundle attest <BUNDLE> --key <KEY>`: sign the attestations of an existing bundle.

use std::path::PathBuf;

use agent_bundle::ops::attest::{self, AttestFailure, AttestOptions};

use super::keys::{SecretKeyArgs, open_signer};
use super::{Format, Global, Outcome, output};

/// Write signed in-toto attestations beside an existing bundle, as `pack --attest` does:
/// <BUNDLE>.provenance.sigstore.json (SLSA Provenance v1) and <BUNDLE>.contract.sigstore.json
/// (the agent contract), each a Sigstore bundle v0.3 whose subject is the bundle file's SHA-256.
///
/// The bundle is read once, every digest checked; its signature is not judged here (`bundle
/// verify` judges both). Exit status: 0 written, 1 not a valid bundle, 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle attest mailer-1.4.0.agent.bundle --key ci.key --from agents/mailer\n  bundle verify mailer-1.4.0.agent.bundle --trusted-keys keys.txt \\\n      --require-provenance"
)]
pub struct Args {
    /// The bundle file.
    #[arg(value_name = "BUNDLE")]
    bundle: PathBuf,
    #[command(flatten)]
    key: SecretKeyArgs,
    /// The agent folder the bundle was packed from: its git commit, remote and state go into
    /// the provenance (default: the bundle's folder).
    #[arg(long, value_name = "AGENT_DIR")]
    from: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let mut signer = open_signer(&args.key)?;
    let epoch = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => Some(
            v.trim()
                .parse::<u64>()
                .map_err(|_| anyhow::anyhow!("SOURCE_DATE_EPOCH must be a whole number of seconds, not `{v}`"))?,
        ),
        Err(_) => None,
    };
    let opts = AttestOptions { from: args.from.clone(), source_date_epoch: epoch };
    match attest::attest(&args.bundle, &mut signer, &opts) {
        Ok(a) => {
            match args.format {
                Format::Json => output::print_json(&serde_json::json!({
                    "ok": true,
                    "bundle": args.bundle.display().to_string(),
                    "agent": {"name": a.name, "version": a.version},
                    "key_id": a.key_id,
                    "sha256": a.sha256,
                    "attestations": a.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
                    "signatures": a.signatures,
                    "signed_existing_statement": a.adopted,
                }))?,
                _ => {
                    for ((f, n), adopted) in a.files.iter().zip(&a.signatures).zip(&a.adopted) {
                        let others = match n {
                            0 | 1 => String::new(),
                            n => format!("; it holds {n} signatures"),
                        };
                        let others = match adopted {
                            // Said, because this key vouches for a statement it did not make.
                            true => format!("{others}; signed the statement already there, which another key made"),
                            false => others,
                        };
                        output::status(
                            global,
                            &format!(
                                "attested {} {} -> {} (signed by {}{others})",
                                a.name,
                                a.version,
                                f.display(),
                                a.key_id
                            ),
                        );
                    }
                }
            }
            Ok(Outcome::Ok)
        }
        Err(AttestFailure::Rejected(rejection)) => {
            super::verify::render_rejection(&args.bundle, rejection, args.format, global)
        }
        Err(AttestFailure::Error(e)) => Err(e.into()),
    }
}
