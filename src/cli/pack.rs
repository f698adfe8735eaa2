//! `bundle pack <AGENT_DIR> --key <SECRET_KEY>`: the release step.

use std::path::PathBuf;

use agent_bundle::agent;
use agent_bundle::ops::pack::{self, PackFailure, PackOptions};
use agent_bundle::timestamp::{Timestamp, parse_span};

use super::json::{self, AgentJson, FailedAgent, PackReport, Results};
use super::keys::{SecretKeyArgs, open_signer};
use super::{Format, Global, Outcome, check, output};

/// Check, lock, sign and write a reproducible <name>-<version>.agent.bundle.
///
/// Several agent folders (or a folder of agent folders) are packed one after the other, each
/// under its default name into -o DIR; every agent is reported, and the exit status is 1 if any
/// was not packed. Any problem in an agent stops its pack and nothing is written for it. The bundle is written to a
/// temp file and renamed into place, so an interrupted pack never leaves a partial bundle.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle pack agents/mailer --key release.key\n  bundle pack agents --key release.key --locked -o dist/   # every agent\n  bundle pack agents/mailer --key release.key --expires-in 90d\n  bundle pack agents/mailer --key ssh-agent: --locked\n  bundle pack agents/mailer --locked \\\n      --key 'pkcs11:token=release;object=bundle?pin-source=/run/pin'\n  BUNDLE_SIGNING_KEY=\"$(cat release.key)\" bundle pack agents/mailer --locked"
)]
pub struct Args {
    /// Agent folders, or folders of agent folders (every agent below them).
    #[arg(value_name = "AGENT_DIR", required = true)]
    agent_dirs: Vec<PathBuf>,
    #[command(flatten)]
    key: SecretKeyArgs,
    /// Output file, or a folder to write <name>-<version>.agent.bundle into (default: that name
    /// in the working directory). With several agents, or ending in `/`, a folder, created if
    /// missing.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Refuse a stale manifest instead of locking it (ship exactly what was reviewed).
    #[arg(long)]
    locked: bool,
    /// Replace an existing bundle file that holds other bytes (without it, packing the same
    /// agent and version again over a released bundle is refused: bump the version).
    #[arg(long)]
    force: bool,
    /// Bundles stop verifying at this instant (`expired`): an RFC 3339 date-time such as
    /// 2027-01-01T00:00:00Z, signed into the bundle's manifest as `[bundle] expires`
    /// (replacing the agent's own; the agent folder is not changed).
    #[arg(long, value_name = "WHEN", conflicts_with = "expires_in")]
    expires: Option<String>,
    /// Like --expires, counted from SOURCE_DATE_EPOCH when set (reproducible), else from now:
    /// `90d`, `12h`, `2w` (units s, m, h, d, w).
    #[arg(long, value_name = "SPAN")]
    expires_in: Option<String>,
    /// Also write signed in-toto attestations beside the bundle, as Sigstore bundles:
    /// <BUNDLE>.provenance.sigstore.json (SLSA Provenance v1) and
    /// <BUNDLE>.contract.sigstore.json (the agent contract). Without it, stale ones are removed.
    #[arg(long)]
    attest: bool,
    #[command(flatten)]
    models: super::args::ModelRootArgs,
    /// zstd compression level, 1-19.
    #[arg(long, value_name = "N", default_value_t = agent_bundle::archive::DEFAULT_LEVEL)]
    level: i32,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

/// The largest mtime a ustar header holds (11 octal digits; the year 2242).
const MAX_MTIME: u64 = 0o777_7777_7777;

/// `SOURCE_DATE_EPOCH` when set (reproducible-builds.org), else 0. A value a ustar header
/// cannot hold is a usage error here (it would also wrap negative as an instant).
fn mtime() -> anyhow::Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.trim().parse::<u64>().ok().filter(|&t| t <= MAX_MTIME).ok_or_else(|| {
            anyhow::anyhow!("SOURCE_DATE_EPOCH must be a whole number of seconds from 0 to {MAX_MTIME}, not `{v}`")
        }),
        Err(_) => Ok(0),
    }
}

/// The expiry `--expires` or `--expires-in` asks for.
fn expires(args: &Args, global: Global) -> anyhow::Result<Option<Timestamp>> {
    let now = global.now();
    if let Some(text) = &args.expires {
        let at = super::expires_flag(text)?;
        if now >= at {
            // The flag is to blame, not the agent's manifest.toml.
            anyhow::bail!(
                "--expires {text} is past (now {now}): every verifier would reject the bundle; give a later date, or --expires-in SPAN"
            );
        }
        return Ok(Some(at));
    }
    let Some(span) = &args.expires_in else { return Ok(None) };
    let seconds = parse_span(span).map_err(|e| anyhow::anyhow!("--expires-in: {e}"))?;
    let base = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(_) => Timestamp::from_unix(mtime()? as i64, 0),
        // Whole seconds: an expiry is shown and written as `…T12:00:00Z`, not with nanoseconds.
        Err(_) => Timestamp::from_unix(global.now().unix_seconds(), 0),
    };
    base.checked_add_seconds(seconds)
        .map(Some)
        .ok_or_else(|| anyhow::anyhow!("--expires-in {span} reaches beyond the year 9999"))
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let expires = expires(&args, global)?;
    let mut signer = open_signer(&args.key)?;
    let mut dirs = Vec::new();
    for path in &args.agent_dirs {
        // A missing folder is said to be missing (find_agents), not checked for missing files.
        if !path.exists() || (path.is_dir() && !agent::is_agent_folder(path)) {
            dirs.extend(agent::find_agents(path)?);
        } else {
            dirs.push(path.clone());
        }
    }
    let many = dirs.len() > 1;
    let into_folder = args.output.as_deref().filter(|o| many || o.as_os_str().to_string_lossy().ends_with('/'));
    if many {
        pack::refuse_shared_outputs(&dirs, into_folder)?;
    }
    if let Some(out) = into_folder {
        if out.exists() && !out.is_dir() {
            anyhow::bail!(
                "{} is not a folder; with several agents, -o names the folder the bundles go into",
                out.display()
            );
        }
        std::fs::create_dir_all(out).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
    }
    let opts = PackOptions {
        output: args.output.clone(),
        locked: args.locked,
        level: args.level,
        mtime: mtime()?,
        source_date_epoch: std::env::var_os("SOURCE_DATE_EPOCH").map(|_| mtime()).transpose()?,
        now: global.now(),
        expires,
        force: args.force,
        attest: args.attest,
        trusted_root: args.models.load()?.map(std::sync::Arc::new),
    };
    let mut outcome = Outcome::Ok;
    let mut results = Vec::new();
    for dir in &dirs {
        let (this, json) = pack_one(dir, &mut signer, &opts, args.format, global)?;
        outcome = outcome.worst(this);
        results.extend(json);
    }
    if args.format == Format::Json {
        let doc = match results.len() {
            1 if !many => results.remove(0),
            _ => json::value(Results { ok: outcome == Outcome::Ok, results }),
        };
        output::print_json(&doc)?;
    }
    Ok(outcome)
}

/// Packs one agent; prints its human or GitHub report, and returns its JSON document.
fn pack_one(
    dir: &std::path::Path,
    key: &mut agent_bundle::keys::Signer,
    opts: &PackOptions,
    format: Format,
    global: Global,
) -> anyhow::Result<(Outcome, Option<serde_json::Value>)> {
    let bar = super::progress::Bar::new(global);
    match pack::pack(dir, key, opts, &bar) {
        Ok(p) => {
            let json = match format {
                Format::Json => Some(json::value(PackReport {
                    ok: true,
                    bundle: p.path.display().to_string(),
                    agent: AgentJson { name: &p.name, version: &p.version },
                    key_id: &p.key_id,
                    files: p.files,
                    content_bytes: p.content_bytes,
                    bundle_bytes: p.bundle_bytes,
                    relocked: p.relocked,
                    sha256: p.sha256.as_deref().filter(|_| !p.attestations.is_empty()),
                    attestations: p.attestations.iter().map(|a| a.display().to_string()).collect(),
                })),
                Format::Github => {
                    output::notice(
                        Some(&p.path.display().to_string()),
                        "packed",
                        &format!("packed {} {} (signed by {})", p.name, p.version, p.key_id),
                    )?;
                    None
                }
                Format::Human => {
                    output::status(
                        global,
                        &format!(
                            "packed {} {} -> {}{} ({} files, {} bytes, {} compressed; signed by {})",
                            p.name,
                            p.version,
                            p.path.display(),
                            if p.unchanged { " unchanged: it already held these bytes" } else { "" },
                            p.files,
                            p.content_bytes,
                            p.bundle_bytes,
                            p.key_id
                        ),
                    );
                    // As `bundle attest` says it.
                    for file in &p.attestations {
                        output::status(
                            global,
                            &format!(
                                "attested {} {} -> {} (signed by {})",
                                p.name,
                                p.version,
                                file.display(),
                                p.key_id
                            ),
                        );
                    }
                    None
                }
            };
            Ok((Outcome::Ok, json))
        }
        Err(PackFailure::Rejected(report)) => {
            // An unwritable manifest is an I/O failure (exit 2), as in `bundle lock`.
            let outcome = check::outcome(&report);
            if format == Format::Json {
                let agent = FailedAgent { dir: dir.display().to_string(), ok: false };
                return Ok((outcome, Some(check::report_json(&report, &[agent]))));
            }
            check::render_report(&report, format, global, "pack")?;
            Ok((outcome, None))
        }
        Err(PackFailure::Error(e)) => Err(e.into()),
    }
}
