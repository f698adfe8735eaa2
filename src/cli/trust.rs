//! `bundle trust sign|verify|rotate`: manage a signed, versioned trust policy.

use std::path::PathBuf;

use agent_bundle::ops::gate::chain_rejection;
use agent_bundle::timestamp::{Timestamp, parse_span};
use agent_bundle::trust_policy::ChainReport;

use super::keys::{SecretKeyArgs, open_signer};
use super::{Format, Global, Outcome, output};

/// Manage a trust policy: sign a version, check a chain of versions, start the next version.
///
/// A policy version N+1 is followed only if signed by a threshold of version N's root signers
/// and of its own; `bundle verify --trust-policy V1 --policy-update V2 --policy-update V3`
/// follows such a chain from a pinned version.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle trust sign trust-policy.toml --key ssh-agent:\n  bundle trust verify trust-policy.toml --update trust-policy-v2.toml\n  bundle trust rotate trust-policy.toml -o v2.toml --expires-in 365d"
)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Add a signature to POLICY.minisigs (replacing an earlier one by the same key).
    Sign(SignArgs),
    /// Check a policy's signatures and follow a chain of newer versions (exit 1 if refused).
    Verify(VerifyArgs),
    /// Write the next version of a policy (version + 1, a new expiry), unsigned, to edit.
    Rotate(RotateArgs),
    /// Import a Sigstore trusted_root.json into a policy: its certificate-identity signers are
    /// judged against it. Says how old it is; the policy must then be signed again.
    ImportRoot(ImportRootArgs),
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle trust import-root trust-policy.toml trusted_root.json\n  bundle trust sign trust-policy.toml --key alice.key\n  (trusted_root.json: from `gh attestation trusted-root`, or from\n  sigstore's TUF repository)"
)]
struct ImportRootArgs {
    /// The trust policy file to edit (comments and order kept).
    policy: PathBuf,
    /// The trusted_root.json (as `gh attestation trusted-root` prints it, or the `trusted_root.json`
    /// target of sigstore's TUF repository). Copied beside the policy as
    /// trusted_root-<sha256 prefix>.json; never downloaded.
    root: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle trust sign trust-policy.toml --key alice.key\n  bundle trust sign trust-policy-v2.toml --key 'pkcs11:token=sec;object=bob'"
)]
struct SignArgs {
    /// The trust policy file.
    policy: PathBuf,
    #[command(flatten)]
    key: SecretKeyArgs,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle trust verify trust-policy.toml\n  bundle trust verify trust-policy.toml --update v2.toml --update v3.toml \\\n      --state /var/lib/agents/bundle-state.json"
)]
struct VerifyArgs {
    /// The pinned (trusted) version of the policy.
    policy: PathBuf,
    /// Newer versions to follow (repeatable, any order).
    #[arg(long = "update", value_name = "FILE")]
    updates: Vec<PathBuf>,
    /// Refuse a version older than one followed before, and record the one followed.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle trust rotate trust-policy.toml -o v2.toml --expires-in 180d\n  bundle trust rotate trust-policy.toml -o v2.toml \\\n      --expires 2027-06-01T00:00:00Z"
)]
struct RotateArgs {
    /// The current version.
    policy: PathBuf,
    /// Where to write the next version (never over an existing file).
    #[arg(long, short = 'o', value_name = "FILE")]
    out: PathBuf,
    /// When the next version expires: an RFC 3339 date-time such as 2027-06-01T00:00:00Z.
    #[arg(long, value_name = "WHEN", conflicts_with = "expires_in")]
    expires: Option<String>,
    /// When the next version expires, counted from now: `365d`, `26w` (units s, m, h, d, w).
    /// Without --expires or --expires-in: 365d.
    #[arg(long, value_name = "SPAN")]
    expires_in: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

impl Args {
    pub fn format(&self) -> Format {
        match &self.command {
            Command::Sign(a) => a.format,
            Command::Verify(a) => a.format,
            Command::Rotate(a) => a.format,
            Command::ImportRoot(a) => a.format,
        }
    }
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    match args.command {
        Command::Sign(a) => sign(a, global),
        Command::Verify(a) => verify(a, global),
        Command::Rotate(a) => rotate(a, global),
        Command::ImportRoot(a) => import_root(a, global),
    }
}

fn import_root(args: ImportRootArgs, global: Global) -> anyhow::Result<Outcome> {
    use agent_bundle::ops::trust::ROOT_STALE_DAYS;
    let imported = agent_bundle::ops::trust::import_root(&args.policy, &args.root, global.now())?;
    if args.format == Format::Json {
        let mut doc = serde_json::to_value(&imported)?;
        doc["ok"] = true.into();
        output::print_json(&doc)?;
        return Ok(Outcome::Ok);
    }
    let i = &imported;
    let age = match (&i.newest_key_start, i.age_days) {
        (Some(start), Some(days)) => format!("; its newest key is valid from {start} ({days} day(s) ago)"),
        _ => "; no key in it has a validity start".to_owned(),
    };
    output::status(
        global,
        &format!(
            "imported {} into {} as {} (sha256 {}): {} CA(s), {} transparency log(s), {} CT log(s), {} timestamp authorit(ies){age}",
            args.root.display(),
            args.policy.display(),
            i.file.display(),
            &i.sha256[..16],
            i.certificate_authorities,
            i.tlogs,
            i.ctlogs,
            i.timestamp_authorities
        ),
    );
    if i.stale {
        output::status(
            global,
            &format!(
                "warning: the root's newest key is more than {ROOT_STALE_DAYS} days old: if its Sigstore instance rotated a key since, new signatures will be refused; get a current trusted_root.json"
            ),
        );
    }
    let resign = if i.signatures_invalidated > 0 {
        format!("{} signature(s) of this version no longer match it: ", i.signatures_invalidated)
    } else {
        String::new()
    };
    output::status(
        global,
        &format!("{resign}sign the policy again: bundle trust sign {} --key KEY", args.policy.display()),
    );
    Ok(Outcome::Ok)
}

fn sign(args: SignArgs, global: Global) -> anyhow::Result<Outcome> {
    let mut signer = open_signer(&args.key)?;
    let signed = agent_bundle::ops::trust::sign(&args.policy, &mut signer)?;
    if args.format == Format::Json {
        let mut doc = serde_json::to_value(&signed)?;
        doc["ok"] = true.into();
        output::print_json(&doc)?;
    } else {
        // One pair of parentheses at most: a key outside this version asks its question in them.
        let who = match (&signed.signer, signed.root) {
            (Some(n), true) => format!(" (root signer `{n}` of this version)"),
            (Some(n), false) => format!(" (signer `{n}`, not a root signer of this version)"),
            (None, _) => ", not a signer of this version (a root signer of the previous one?)".to_owned(),
        };
        output::status(
            global,
            &format!(
                "signed trust policy `{}` version {} with key {}{who}; {} holds {} signature(s)",
                signed.policy,
                signed.version,
                signed.key_id,
                signed.file.display(),
                signed.signatures
            ),
        );
    }
    Ok(Outcome::Ok)
}

fn verify(args: VerifyArgs, global: Global) -> anyhow::Result<Outcome> {
    let result = agent_bundle::ops::trust::follow(&args.policy, &args.updates, args.state.as_deref(), global.now())?;
    let (report, refusal) = match &result {
        Ok(report) => (report, None),
        Err(e) => (&e.report, Some(chain_rejection(e))),
    };
    if args.format == Format::Json {
        let doc = serde_json::json!({
            "ok": refusal.is_none(),
            "code": refusal.as_ref().map(|r| r.reason.as_str()),
            "message": refusal.as_ref().map(|r| r.message.clone()),
            "chain": report,
        });
        output::print_json(&output::sanitize_json(doc))?;
    } else {
        chain_human(global, report);
        match &refusal {
            None => output::status(
                global,
                &format!(
                    "trust policy `{}` version {} followed; it expires at {}",
                    report.id,
                    report.version.unwrap_or_default(),
                    report.expires.as_deref().unwrap_or("?")
                ),
            ),
            Some(r) => output::print_error_line(global, &format!("rejected: {} [{}]", r.message, r.reason.as_str())),
        }
    }
    Ok(if refusal.is_some() { Outcome::Rejected } else { Outcome::Ok })
}

/// Each version followed, with its root signatures' tallies, on stderr.
pub fn chain_human(global: Global, report: &ChainReport) {
    for step in &report.steps {
        let tallies: Vec<String> = step
            .tallies
            .iter()
            .map(|t| {
                let whose = if t.by == "own" { "own roots".to_owned() } else { format!("{} roots", t.by) };
                let counted = match t.signers.as_slice() {
                    [] => "no root signature counted".to_owned(),
                    signers => signers.join(", "),
                };
                format!("{whose} {} of {} ({counted})", t.counted, t.needed)
            })
            .collect();
        output::status(global, &format!("  v{} {}: {}", step.version, step.origin, tallies.join("; ")));
    }
}

fn rotate(args: RotateArgs, global: Global) -> anyhow::Result<Outcome> {
    let expires = match (&args.expires, &args.expires_in) {
        (Some(at), _) => super::expires_flag(at)?,
        (None, span) => {
            let span = span.as_deref().unwrap_or("365d");
            let seconds = parse_span(span).map_err(|e| anyhow::anyhow!("--expires-in: {e}"))?;
            // Whole seconds: an expiry is shown and written as `…T12:00:00Z`, not with nanoseconds.
            let now = Timestamp::from_unix(global.now().unix_seconds(), 0);
            now.checked_add_seconds(seconds)
                .ok_or_else(|| anyhow::anyhow!("--expires-in {span} reaches beyond the year 9999"))?
        }
    };
    let version = agent_bundle::ops::trust::rotate(&args.policy, &args.out, expires)?;
    if args.format == Format::Json {
        output::print_json(&serde_json::json!({
            "ok": true, "file": args.out.display().to_string(), "version": version, "expires": expires.to_string()
        }))?;
    } else {
        output::status(
            global,
            &format!(
                "wrote {}: version {version}, expires {expires}, unsigned. Edit its signers and rules, then have it signed \
                 by enough root signers of version {} and of its own: bundle trust sign {} --key KEY",
                args.out.display(),
                version - 1,
                args.out.display()
            ),
        );
    }
    Ok(Outcome::Ok)
}
