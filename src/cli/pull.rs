//! `bundle pull oci://REF -o FILE`: download through the deployment gate.

use std::path::{Path, PathBuf};

use agent_bundle::oci::Reference;
use agent_bundle::ops::gate::Verdict;
use agent_bundle::ops::pull;

use super::args::{GateArgs, TrustArgs};
use super::registry::RegistryArgs;
use super::verify::render;
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
    after_help = "Examples:\n  bundle pull oci://ghcr.io/acme/agents/mailer:1.4.0 --key release.pub \\\n      -o mailer.agent.bundle\n  bundle pull oci://registry.internal:5000/mailer@sha256:… \\\n      --trusted-keys trusted-keys.txt --name mailer \\\n      --state /var/lib/agents/state.json -o /srv/agents/mailer.agent.bundle"
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
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    keyless: Box<super::keyless::KeylessArgs>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let reference = Reference::parse(&args.reference).map_err(anyhow::Error::msg)?;
    let source = args.registry.source(Path::new(&args.reference))?;
    // A baseline or state file that cannot be read stops the run before anything is fetched.
    let gate = super::gate_args::open(&args.trust, args.gate, &args.keyless, global)?;
    let label = PathBuf::from(reference.to_string());
    let (pulled, verdict) = pull::pull(&source, &args.output, gate)?;
    if matches!(verdict, Verdict::Refused { .. }) {
        return render(&label, &verdict, args.format, global);
    }
    if args.format == Format::Json {
        // One document: the verdict's report, with where the bundle went.
        let mut doc = serde_json::to_value(verdict.report())?;
        doc["digest"] = pulled.manifest_digest.clone().into();
        doc["ref"] = reference.to_string().into();
        doc["output"] = args.output.display().to_string().into();
        doc["evidence"] = pulled.evidence.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().into();
        output::print_json(&output::sanitize_json(doc))?;
        return Ok(Outcome::Ok);
    }
    let outcome = render(&label, &verdict, args.format, global)?;
    output::status(global, &format!("wrote {} ({})", args.output.display(), pulled.manifest_digest));
    for kept in &pulled.evidence {
        output::status(global, &format!("kept beside it: {}", kept.display()));
    }
    Ok(outcome)
}
