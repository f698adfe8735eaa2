//! `bundle cosign BUNDLE --key KEYREF`: approve a release by adding a co-signature beside it.

use std::path::PathBuf;

use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::cosign::{self, Approval, Stored};
use agent_bundle::ops::input::BundleSource;

use super::args::TrustArgs;
use super::keys::{SecretKeyArgs, load_policy, load_trust, open_signer};
use super::{Format, Global, Outcome, output, verify};

/// Approve a bundle: judge it with the gate, show what is approved (agent, version, each
/// tool's risk classes and contract fingerprint, drift against --baseline, the signatures and
/// rules so far), then add a co-signature to BUNDLE.cosig, or for oci://REF a co-signature
/// referrer in the registry. The bundle's bytes never change, and a registry's bundle is not
/// pushed again.
///
/// A co-signature is a minisign signature over the bundle's manifest.toml with the pack
/// signature's trusted comment; `minisign -V` checks it against the extracted manifest. Under
/// --trust-policy every check but the rules' thresholds must pass (the co-signature is what
/// meets them).
///
/// Exit status: 0 co-signed, 1 the gate refused the bundle (nothing signed), 2 usage or I/O.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle cosign payments-2.0.0.agent.bundle --key ssh-agent: \\\n      --trust-policy trust-policy.toml\n  bundle cosign x.agent.bundle --key reviewer.key \\\n      --trusted-keys trusted-keys.txt --baseline approved.toml\n  bundle cosign oci://registry.example/agents/payments:2.0.0 \\\n      --key reviewer.key --trust-policy trust-policy.toml"
)]
pub struct Args {
    /// The bundle file, or a registry artifact (oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX)).
    bundle: PathBuf,
    #[command(flatten)]
    key: SecretKeyArgs,
    /// Keys the bundle's pack signature must verify with (one-key case).
    #[arg(long, value_name = "FILE", required_unless_present = "trust_policy")]
    trusted_keys: Option<PathBuf>,
    /// The trust policy (see `bundle verify --trust-policy`).
    #[arg(long, value_name = "FILE", conflicts_with = "trusted_keys")]
    trust_policy: Option<PathBuf>,
    /// Newer versions of the trust policy to follow (repeatable).
    #[arg(long, value_name = "FILE", requires = "trust_policy")]
    policy_update: Vec<PathBuf>,
    /// Also require the bundle to be this agent.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Show (and require) the tool contracts' changes against this approved baseline.
    #[arg(long, value_name = "FILE|DIR")]
    baseline: Option<PathBuf>,
    #[command(flatten)]
    models: super::args::ModelRootArgs,
    #[command(flatten)]
    registry: super::registry::RegistryArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let trust = TrustArgs {
        trusted_keys: args.trusted_keys.clone(),
        trust_policy: args.trust_policy.clone(),
        policy_update: args.policy_update.clone(),
        ..Default::default()
    };
    let keys = load_trust(&trust)?;
    let mut policy = load_policy(&trust)?;
    if let Some(p) = policy.as_mut() {
        p.require_threshold = false;
    }
    let gate = super::args::GateArgs {
        name: args.name,
        state: None,
        min_version: None,
        baseline: args.baseline,
        attest: Default::default(),
    };
    let mut opts = gate.options(keys, policy, global);
    // As `verify`: under a trust policy its pinned root judges the models' identities.
    if opts.policy.is_some() && args.models.trusted_root.is_some() {
        anyhow::bail!(
            "--trust-policy names the trusted root the models' identities are judged by: drop --trusted-root"
        );
    }
    opts.model_root = args.models.load()?.map(std::sync::Arc::new);
    let mut signer = open_signer(&args.key)?;
    let format = args.format;
    let mut review = |a: &Approval| {
        if format == Format::Human {
            approval_human(global, a);
        }
        true
    };
    let source = args.registry.source(&args.bundle)?;
    let outcome = match &source {
        BundleSource::File(bundle) => cosign::cosign(bundle, opts, &mut signer, &mut review)?,
        BundleSource::Registry { .. } => cosign::cosign_registry(&source, opts, &mut signer, &mut review)?,
    };
    match outcome {
        cosign::Outcome::Cosigned(done) => {
            if format == Format::Json {
                let mut doc = output::sanitize_json(serde_json::to_value(&*done)?);
                doc["ok"] = true.into();
                output::print_json(&doc)?;
            } else {
                let a = &done.approval;
                let (agent, version) = (sanitize(&a.agent), sanitize(&a.version));
                let line = match &done.stored {
                    Stored::Files { file, cosignatures, envelope, envelope_signatures } => format!(
                        "co-signed {agent} {version} with key {}: {} holds {cosignatures} co-signature(s), {} {envelope_signatures} signature(s)",
                        a.key_id,
                        file.display(),
                        envelope.display(),
                    ),
                    Stored::Registry { subject, referrer, cosignatures } => format!(
                        "co-signed {agent} {version} with key {}: referrer {referrer} of {subject}; the registry holds {cosignatures} co-signature(s)",
                        a.key_id
                    ),
                };
                output::status(global, &line);
            }
            Ok(Outcome::Ok)
        }
        cosign::Outcome::Refused(verdict) => verify::render(&args.bundle, &verdict, format, global),
        cosign::Outcome::Declined => Ok(Outcome::Rejected),
    }
}

/// What is about to be approved, on stderr.
fn approval_human(global: Global, a: &Approval) {
    let mut lines = vec![format!(
        "approving {} {} (manifest blake3 {}) with key {}:",
        sanitize(&a.agent),
        sanitize(&a.version),
        &a.manifest_blake3[..16],
        a.key_id
    )];
    for t in &a.tools {
        lines.push(format!("  tool {}: {} (contract {})", sanitize(&t.id), t.risk.join(", "), &t.fingerprint[..16]));
    }
    if !a.grants.is_empty() {
        lines.push(format!("  grants: {}", sanitize(&a.grants.join(", "))));
    }
    if let Some(b) = &a.baseline {
        let f = &b.findings;
        lines.push(format!(
            "  against {}: {} rejecting drift, {} read-only drift, {} approved tool(s) gone",
            b.file.display(),
            f.drift.len(),
            f.warnings.len(),
            f.missing.len()
        ));
        for d in f.drift.iter().chain(&f.warnings) {
            for c in &d.changes {
                lines.push(format!("    {}: {}: {}", sanitize(&d.tool), c.impact.as_str(), sanitize(&c.message)));
            }
        }
    }
    if let Some(s) = &a.signers {
        lines.extend(verify::signers_lines(s));
    }
    for l in lines {
        output::status(global, &l);
    }
}
