//! `bundle agentcard BUNDLE|AGENT_DIR --url URL --key KEY -o card.json`: a signed A2A agent
//! card; and the rendering of `bundle verify --agent-card`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use agent_bundle::diagnostic::sanitize;
use agent_bundle::keyless::TrustedRoot;
use agent_bundle::keys::{KeyRef, p256_key};
use agent_bundle::ops::agentcard::{self, CardFailure, CardKey, CardOptions, CardTrust, CardVerdict};
use agent_bundle::trust::TrustedKeys;

use super::args::TrustArgs;
use super::keys::{MAX_KEY_FILE, SecretKeyArgs, load_public_key, open_signer, read_key_file};
use super::{Format, Global, Outcome, output};

/// Write a signed A2A agent card (protocol 1.0) for a bundle or an agent folder.
///
/// One A2A skill per tool of tools.json (tagged with its risk class) and per skill of skills/;
/// an extension (https://agent-bundle.dev/a2a/bundle-contract/v1) names the bundle's SHA-256,
/// the manifest's BLAKE3 and each tool's contract fingerprint. The card is signed as the A2A
/// specification §8.4 says: a JWS over its RFC 8785 canonical form, signatures excluded;
/// EdDSA with a minisign key (kid = its key id), ES256 with a P-256 key from `bundle keygen
/// --kind p256` (kid = its RFC 7638 JWK thumbprint). `bundle verify --agent-card` checks it
/// offline.
///
/// Exit status: 0 written, 1 not a valid bundle or agent, 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  bundle agentcard mailer-1.4.0.agent.bundle --url https://a.example/mailer \\
      --key release.key -o mailer.card.json
  bundle verify --agent-card mailer.card.json mailer-1.4.0.agent.bundle \\
      --key release.pub
  bundle keygen --kind p256 card
  bundle agentcard agents/mailer --url https://a.example/mailer \\
      --key card.key -o mailer.card.json    # ES256")]
pub struct Args {
    /// The bundle file, or an agent folder that passes `bundle check`.
    #[arg(value_name = "BUNDLE|AGENT_DIR")]
    input: PathBuf,
    /// The URL the agent's A2A endpoint (JSON-RPC) is served at.
    #[arg(long, value_name = "URL")]
    url: String,
    /// The card's name (default: the agent's name).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// The card's description (default: a line naming the agent, its tools and skills).
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    #[command(flatten)]
    key: SecretKeyArgs,
    #[command(flatten)]
    models: super::args::ModelRootArgs,
    /// Write the card here instead of stdout (an existing file needs --force).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Overwrite the -o file.
    #[arg(long, requires = "output")]
    force: bool,
    /// Output format of the report (with -o).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    if !(args.url.starts_with("https://") || args.url.starts_with("http://")) {
        anyhow::bail!("--url {}: give the absolute http(s) URL of the agent's A2A endpoint", args.url);
    }
    let mut signer = card_key(&args.key)?;
    let opts = CardOptions {
        url: args.url.clone(),
        name: args.name.clone(),
        description: args.description.clone(),
        output: args.output.clone(),
        force: args.force,
        trusted_root: args.models.load()?.map(std::sync::Arc::new),
    };
    match agentcard::make(&args.input, &opts, &mut signer) {
        Ok(made) => {
            match (&args.output, args.format) {
                (None, _) => output::print_line(made.text.trim_end())?,
                (Some(p), Format::Json) => output::print_json(&serde_json::json!({
                    "ok": true,
                    "card": p.display().to_string(),
                    "agent": {"name": made.name, "version": made.version},
                    "key_id": made.key_id,
                    "bundle_sha256": made.bundle_sha256,
                    "tools": made.tools,
                    "skills": made.skills,
                }))?,
                (Some(p), _) => output::status(
                    global,
                    &format!(
                        "wrote agent card {} for {} {} ({} tools, {} skills; signed by {})",
                        p.display(),
                        sanitize(&made.name),
                        made.version,
                        made.tools,
                        made.skills,
                        made.key_id
                    ),
                ),
            }
            Ok(Outcome::Ok)
        }
        Err(CardFailure::Rejected(r)) => super::verify::render_rejection(&args.input, r, args.format, global),
        Err(CardFailure::Invalid(report)) => {
            super::check::render_report(&report, args.format, global, "agentcard")?;
            Ok(Outcome::Rejected)
        }
        Err(CardFailure::Error(e)) => Err(e.into()),
    }
}

/// The key `--key` names: a P-256 secret key in PEM signs ES256, any other key EdDSA.
fn card_key(args: &SecretKeyArgs) -> anyhow::Result<CardKey> {
    if let Some(reference) = &args.key
        && let KeyRef::File(path) = KeyRef::parse(reference)?
        && p256_key::is_pem(&read_key_file(&path, "secret key", MAX_KEY_FILE)?)
    {
        return Ok(CardKey::P256(p256_key::read_secret(&path)?));
    }
    Ok(CardKey::Minisign(open_signer(args)?))
}

/// The keys a card is checked against: each `--key` file a minisign public key, or a P-256
/// public key in PEM (for ES256); or a trusted-keys file (minisign keys); or the key signers of
/// a trust policy valid now (its chain followed from the pinned version through
/// `--policy-update`s; not revoked, inside their windows, scoped to their agent patterns). A
/// card counts one signature: the policy's thresholds are rules for bundles. A bundle's
/// `[[models]]` identities are judged under the policy's trusted root, else under `model_root`
/// (`--trusted-root`; refused under a policy, which names its own).
pub fn load_trust(args: &TrustArgs, model_root: Option<&Path>) -> anyhow::Result<CardTrust> {
    if let Some(policy) = super::keys::load_policy(args)? {
        if model_root.is_some() {
            anyhow::bail!(
                "--trust-policy names the trusted root the models' identities are judged by: drop --trusted-root"
            );
        }
        let now = agent_bundle::timestamp::Timestamp::now();
        let (policy, _) = agent_bundle::trust_policy::chain::follow(policy.pin, policy.updates, now, None)
            .map_err(|e| anyhow::anyhow!("--trust-policy: no version of the policy can be followed: {}", e.message))?;
        let keys = agent_bundle::trust_policy::keys::with_policy(&TrustedKeys::default(), &policy, now);
        return Ok(CardTrust { keys, p256: Vec::new(), model_root: policy.trusted_root.clone() });
    }
    let model_root = model_root.map(TrustedRoot::read).transpose()?.map(std::sync::Arc::new);
    if args.trusted_keys.is_some() {
        return Ok(CardTrust { keys: super::keys::load_trust(args)?, p256: Vec::new(), model_root });
    }
    let mut trust = CardTrust { model_root, ..CardTrust::default() };
    let mut minisign = Vec::new();
    for path in &args.keys {
        if p256_key::is_pem(&read_key_file(path, "public key", MAX_KEY_FILE)?) {
            trust.p256.push(p256_key::read_public(path)?);
        } else {
            minisign.push(load_public_key(path)?);
        }
    }
    trust.keys = TrustedKeys::from_keys(minisign);
    Ok(trust)
}

/// `bundle verify --agent-card CARD [BUNDLE]`.
pub fn verify(
    card: &Path,
    bundle: Option<&Path>,
    keys: &CardTrust,
    format: Format,
    global: Global,
) -> anyhow::Result<Outcome> {
    let verdict = agentcard::verify_card(card, bundle, keys)?;
    let outcome = if verdict.rejection.is_none() { Outcome::Ok } else { Outcome::Rejected };
    match format {
        Format::Json => output::print_json(&output::sanitize_json(verdict_json(&verdict)))?,
        _ => render(&verdict, format, global)?,
    }
    Ok(outcome)
}

fn verdict_json(v: &CardVerdict) -> serde_json::Value {
    serde_json::json!({
        "ok": v.rejection.is_none(),
        "code": v.rejection.as_ref().map(|r| r.reason.as_str()),
        "message": v.rejection.as_ref().map(|r| r.message.clone()),
        "card": v.card.display().to_string(),
        "name": v.name,
        "key_id": v.key_id,
        "bundle": v.bundle.as_ref().map(|(n, ver)| serde_json::json!({"name": n, "version": ver})),
        "signatures": v.signatures,
    })
}

fn render(v: &CardVerdict, format: Format, global: Global) -> std::io::Result<()> {
    let card = v.card.display().to_string();
    let name = sanitize(v.name.as_deref().unwrap_or("(no name)"));
    match &v.rejection {
        None => {
            let with = v
                .bundle
                .as_ref()
                .map(|(n, ver)| format!("; it describes bundle {} {ver}", sanitize(n)))
                .unwrap_or_default();
            let line = format!(
                "agent card {card} ({name}): signature valid, by trusted key {}{with}",
                v.key_id.as_deref().unwrap_or("-")
            );
            if format == Format::Github {
                output::notice(Some(&card), "verified", &line)
            } else {
                output::status(global, &line);
                Ok(())
            }
        }
        Some(r) => {
            let mut lines =
                vec![format!("agent card {card} ({name}) rejected: {} [{}]", sanitize(&r.message), r.reason)];
            // Each signature's own verdict, when there is more than the one the reason names.
            for s in v.signatures.iter().filter(|s| s.status != "valid" && v.signatures.len() > 1) {
                lines.push(format!(
                    "  signature {} (kid {}): {} [{}]",
                    s.index,
                    sanitize(s.kid.as_deref().unwrap_or("-")),
                    sanitize(&s.message),
                    s.status
                ));
            }
            if format == Format::Github {
                output::print_line(&output::github_annotation(
                    "error",
                    Some(&card),
                    r.reason.as_str(),
                    &lines.join("\n"),
                ))
            } else {
                // A rejection is shown even with --quiet.
                let mut err = std::io::stderr().lock();
                lines.iter().try_for_each(|l| writeln!(err, "{l}"))
            }
        }
    }
}
