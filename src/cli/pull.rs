//! `bundle pull oci://REF -o FILE`: download through the deployment gate.

use std::path::PathBuf;

use agent_bundle::oci::Reference;
use agent_bundle::ops::pull;

use super::keys::TrustArgs;
use super::registry::RegistryArgs;
use super::verify::{GateArgs, GateSetup, judge, report_judged};
use super::{Format, Global, Outcome, output};

/// Download a bundle from an OCI registry, running the full `verify` gate on the bytes as they
/// arrive; FILE appears (atomically) only if everything passed.
///
/// The layer is also held to the manifest: its sha256 and size must be the ones the manifest
/// names (blob_mismatch), and an @sha256: reference must be the manifest's digest. Nothing
/// unverified is ever left on disk.
///
/// Exit status: 0 pulled and accepted, 1 rejected, 2 registry, credentials or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle pull oci://ghcr.io/acme/agents/mailer:1.4.0 --key release.pub -o mailer.agent.bundle\n  bundle pull oci://registry.internal:5000/mailer@sha256:… --trusted-keys trusted-keys.txt --name mailer --state /var/lib/agents/bundle-state.json -o /srv/agents/mailer.agent.bundle"
)]
pub struct Args {
    /// The artifact: oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX).
    reference: String,
    /// The bundle file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    gate: GateArgs,
    /// Also require every tool contract to match this approved baseline (see `bundle
    /// baseline`).
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let reference = Reference::parse(&args.reference).map_err(anyhow::Error::msg)?;
    let options = args.registry.options(&reference)?;
    let mut setup = GateSetup::load(&args.trust, &args.gate, args.baseline.as_deref())?;
    let label = PathBuf::from(reference.to_string());
    let result = pull::pull(&reference, &options, &args.output, |input| {
        let judged = judge(&mut setup, &args.gate, input, &label, global)?;
        anyhow::Ok(match judged.result {
            Ok(_) => Ok(judged),
            Err(r) => Err(r),
        })
    })?;
    match result {
        Ok((pulled, judged)) => {
            let digest = pulled.manifest_digest.clone();
            if args.format == Format::Json {
                // One document: the verdict, with where it went.
                let v = judged.result.as_ref().ok();
                output::print_json(&serde_json::json!({
                    "ok": true,
                    "code": null,
                    "digest": digest,
                    "ref": reference.to_string(),
                    "output": args.output.display().to_string(),
                    "agent": v.map(|v| serde_json::json!({"name": v.manifest.name, "version": v.manifest.version.to_string()})),
                    "key_id": v.map(|v| v.key_id.clone()),
                    "bytes": pulled.artifact.layer_size,
                }))?;
                return Ok(Outcome::Ok);
            }
            let outcome = report_judged(&label, judged, &setup, args.format, global)?;
            output::status(global, &format!("wrote {} ({digest})", args.output.display()));
            Ok(outcome)
        }
        Err(r) => super::verify::report(&label, Err(r), args.format, global),
    }
}
