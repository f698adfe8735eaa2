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
/// verify` judges both).
///
/// With --model-signing, an OpenSSF model signature of an agent folder instead (default: .),
/// signed with a P-256 key (`bundle keygen --kind p256`), which `model_signing verify key
/// --signature FILE --public_key KEY.pub AGENT_DIR` accepts, and so for the folder `bundle
/// unpack` makes of its bundle.
///
/// Exit status: 0 written, 1 not a valid bundle (or agent folder), 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle attest mailer-1.4.0.agent.bundle --key ci.key --from agents/mailer\n  bundle verify mailer-1.4.0.agent.bundle --trusted-keys keys.txt \\\n      --require-provenance\n  bundle keygen --kind p256 model\n  bundle attest --model-signing --key model.key agents/mailer\n  model_signing verify key --signature agents/mailer.model.sig \\\n      --public_key model.pub agents/mailer"
)]
pub struct Args {
    /// The bundle file (with --model-signing: the agent folder, default .).
    #[arg(value_name = "BUNDLE|AGENT_DIR", required_unless_present = "model_signing")]
    bundle: Option<PathBuf>,
    /// Write an OpenSSF model signature (`model_signing` v1.0, SHA-256 file digests) of the agent
    /// folder, signed with the P-256 key --key names: a PEM file, `ssh-agent:` (the agent's
    /// ecdsa-sha2-nistp256 key) or a `pkcs11:` URI naming a P-256 key on a token.
    #[arg(long, conflicts_with = "from")]
    model_signing: bool,
    /// With --model-signing: the signature file (default: <AGENT_DIR>.model.sig beside the folder).
    #[arg(short = 'o', long, value_name = "FILE", requires = "model_signing")]
    output: Option<PathBuf>,
    #[command(flatten)]
    key: SecretKeyArgs,
    /// The agent folder the bundle was packed from: its git commit, remote and state go into
    /// the provenance (default: the bundle's folder).
    #[arg(long, value_name = "AGENT_DIR")]
    from: Option<PathBuf>,
    #[command(flatten)]
    models: super::args::ModelRootArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    if args.model_signing {
        if args.models.trusted_root.is_some() {
            anyhow::bail!(
                "--trusted-root judges the models of a bundle; --model-signing signs a folder and judges none"
            );
        }
        return model_signing(&args, global);
    }
    let bundle = args.bundle.clone().unwrap_or_default();
    let mut signer = open_signer(&args.key)?;
    let epoch = super::args::source_date_epoch()?;
    let trusted_root = args.models.load()?.map(std::sync::Arc::new);
    let opts = AttestOptions { from: args.from.clone(), source_date_epoch: epoch, trusted_root };
    match attest::attest(&bundle, &mut signer, &opts) {
        Ok(a) => {
            match args.format {
                Format::Json => output::print_json(&serde_json::json!({
                    "ok": true,
                    "bundle": bundle.display().to_string(),
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
            super::verify::render_rejection(&bundle, rejection, args.format, global)
        }
        Err(AttestFailure::Error(e)) => Err(e.into()),
    }
}

/// `--model-signing`: the OpenSSF model signature of an agent folder.
fn model_signing(args: &Args, global: Global) -> anyhow::Result<Outcome> {
    use agent_bundle::ops::model_sign::{self, ModelSignError};
    let dir = args.bundle.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut key = super::keys::open_p256_signer(&args.key)?;
    let output = match &args.output {
        Some(o) => o.clone(),
        None => model_sign::default_output(&dir)?,
    };
    match model_sign::sign(&dir, &mut key, &output) {
        Ok(done) => {
            match args.format {
                Format::Json => output::print_json(&serde_json::json!({
                    "ok": true,
                    "name": done.name,
                    "root_digest": {"sha256": done.root},
                    "resources": done.resources,
                    "signature": done.output.display().to_string(),
                }))?,
                Format::Human | Format::Github => output::status(
                    global,
                    &format!(
                        "model-signed {} ({} files, root sha256 {}) -> {}",
                        done.name,
                        done.resources,
                        done.root,
                        done.output.display()
                    ),
                ),
            }
            Ok(Outcome::Ok)
        }
        Err(ModelSignError::Invalid(report)) => {
            super::check::render_report(&report, args.format, global, "model-sign")?;
            Ok(Outcome::Rejected)
        }
        Err(ModelSignError::Error(e)) => Err(e.into()),
    }
}
