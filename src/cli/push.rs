//! `bundle push BUNDLE oci://REF`: publish a verified bundle to an OCI registry.

use std::path::PathBuf;

use agent_bundle::bundle::verify::{Reason, Rejection};
use agent_bundle::oci::Reference;
use agent_bundle::oci::{OciError, Refusal};
use agent_bundle::ops::push::{self, PushError};
use agent_bundle::trust::TrustedKeys;

use super::json::{AgentJson, PushReport, PushedConfig, PushedLayer};
use super::keys::{load_public_key, load_trust};
use super::registry::RegistryArgs;
use super::{Format, Global, Outcome, output};

/// Upload a bundle to an OCI registry as an artifact (one layer, the bundle's bytes unchanged)
/// and print the manifest digest.
///
/// The bundle is verified first and refused if it does not verify: with --key/--trusted-keys
/// fully; without, everything but the signature's key. The same bundle always gives the same
/// digest. Credentials: BUNDLE_REGISTRY_USERNAME/BUNDLE_REGISTRY_PASSWORD, else the `auths` of
/// $DOCKER_CONFIG/config.json or ~/.docker/config.json.
///
/// Exit status: 0 pushed, 1 the bundle was rejected, 2 registry, credentials or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle push mailer-1.4.0.agent.bundle \\\n      oci://ghcr.io/acme/agents/mailer:1.4.0 --key release.pub\n  bundle push mailer-1.4.0.agent.bundle \\\n      oci://registry.internal:5000/mailer:1.4.0 --tag latest --ca-cert ca.pem\n  bundle push x.agent.bundle oci://127.0.0.1:5000/x:dev --plain-http \\\n      --format json | jq -r .digest"
)]
pub struct Args {
    /// The bundle file.
    bundle: PathBuf,
    /// Where: oci://HOST[:PORT]/REPO:TAG (or @sha256:… to check the digest).
    reference: String,
    /// Also tag the pushed manifest with TAG (repeatable).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Check the signature against this public key (repeatable).
    #[arg(long = "key", value_name = "PUBLIC_KEY")]
    keys: Vec<PathBuf>,
    /// Check the signature against a trusted-keys file.
    #[arg(long, value_name = "FILE", conflicts_with = "keys")]
    trusted_keys: Option<PathBuf>,
    /// Mount the blobs from this repository of the same registry when it has them, instead of
    /// uploading them again.
    #[arg(long, value_name = "REPO")]
    mount_from: Option<String>,
    /// Also push this verification summary of the bundle (`verify --emit-vsa`) as a referrer of
    /// its manifest, in cosign's Sigstore-bundle layout, for admission steps that read it.
    #[arg(long, value_name = "FILE")]
    attach_vsa: Option<PathBuf>,
    /// The Sigstore trusted_root.json the identities of the bundle's vendor-signed models
    /// (manifest.toml `[[models]]`) are judged against; never downloaded. Without it, a model
    /// signed with a Sigstore identity is refused (`model_trusted_root_missing`).
    #[arg(long, value_name = "FILE")]
    trusted_root: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Upload blobs larger than BYTES in PATCH chunks of BYTES (default 32 MiB); for tests.
    #[arg(long, hide = true, value_name = "BYTES")]
    chunk_size: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let reference = Reference::parse(&args.reference).map_err(anyhow::Error::msg)?;
    let mut registry = args.registry.options();
    if registry.plain_http && !registry.ca_certs.is_empty() {
        anyhow::bail!(
            "--plain-http and --ca-cert exclude each other: a plain-http registry has no certificate ({reference})"
        );
    }
    registry.chunk_size = args.chunk_size;
    let keys: Option<TrustedKeys> = if args.trusted_keys.is_some() {
        Some(load_trust(&super::args::TrustArgs { trusted_keys: args.trusted_keys.clone(), ..Default::default() })?)
    } else if !args.keys.is_empty() {
        Some(TrustedKeys::from_keys(args.keys.iter().map(|p| load_public_key(p)).collect::<anyhow::Result<Vec<_>>>()?))
    } else {
        None
    };
    let root = args.trusted_root.as_deref().map(agent_bundle::keyless::TrustedRoot::read).transpose()?;
    let opts = push::Options {
        bundle: &args.bundle,
        reference,
        tags: args.tags.clone(),
        keys: keys.as_ref(),
        registry,
        mount_from: args.mount_from.clone(),
        now: global.now(),
        created: super::args::source_date_epoch()?
            .map(|s| agent_bundle::timestamp::Timestamp::from_unix(i64::try_from(s).unwrap_or(i64::MAX), 0)),
        vsa: args.attach_vsa.as_deref(),
        trusted_root: root.as_ref(),
    };
    let result = match push::push(&opts) {
        Ok(p) => Ok(p),
        Err(PushError::Rejected(r)) => Err(r),
        Err(PushError::Registry(e)) => match e {
            OciError::Rejected(Refusal::UnsupportedArtifact, m) => {
                Err(Rejection::new(Reason::UnsupportedArtifact, None, m))
            }
            OciError::Rejected(Refusal::BlobMismatch, m) => Err(Rejection::new(Reason::BlobMismatch, None, m)),
            // The registry failed: an error (exit 2), not a judgement of the bundle.
            e => return Err(e.into()),
        },
    };
    let pushed = match result {
        Ok(p) => p,
        Err(r) => {
            let outcome = super::verify::render_rejection(&args.bundle, r, args.format, global)?;
            return Ok(outcome);
        }
    };
    let v = &pushed.verified;
    match args.format {
        Format::Json => output::print_json(&PushReport {
            ok: true,
            digest: &pushed.digest,
            reference: pushed.references.first(),
            refs: &pushed.references,
            agent: AgentJson { name: &v.manifest.name, version: v.manifest.version.to_string() },
            key_id: &v.key_id,
            signature_checked: v.signature_checked,
            layer: PushedLayer { digest: &pushed.layer_digest, size: pushed.layer_size, upload: pushed.layer },
            config: PushedConfig { upload: pushed.config },
            referrers: &pushed.referrers,
        })?,
        Format::Human | Format::Github => {
            let checked = if v.signature_checked { "" } else { " (signature not checked: pass --key)" };
            output::status(
                global,
                &format!(
                    "pushed {} {} ({} bytes, layer {}){checked} to {}",
                    v.manifest.name,
                    v.manifest.version,
                    pushed.layer_size,
                    serde_json::to_value(pushed.layer)
                        .ok()
                        .and_then(|s| s.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    pushed.references.join(", ")
                ),
            );
            output::print_line(&pushed.digest)?;
        }
    }
    Ok(Outcome::Ok)
}
