//! `bundle verify <BUNDLE>`: the gate before deployment.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use anyhow::Context;

use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::verify::{self, Discard, Expect, Reason, Rejection, Trust, Verified};
use agent_bundle::state::StateFile;

use super::keys::{TrustArgs, load_trust};
use super::{Format, Global, Outcome, output};

/// Verify a bundle in one streaming pass: trusted signature, versions, expiry (and rollback with
/// --state), every digest, nothing missing, nothing extra, nothing unsafe.
///
/// Exit status: 0 accepted, 1 rejected (with a stable reason code), 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle verify mailer-1.4.0.agent.bundle --key release.pub\n  bundle verify mailer-1.4.0.agent.bundle --trusted-keys trusted-keys.txt --name mailer --state /var/lib/agents/bundle-state.json\n  bundle verify x.agent.bundle --key release.pub --format json | jq -r .code"
)]
pub struct Args {
    /// The bundle file.
    bundle: PathBuf,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    gate: GateArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// What a deployment gate requires beyond a trusted signature (verify and unpack).
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// Also require the bundle to be this agent.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Reject a bundle older than one accepted before (`rollback`): FILE records the highest
    /// version accepted per agent and signing key, and is updated atomically on success.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Reject a bundle whose version is lower than this (`rollback`).
    #[arg(long, value_name = "VERSION", value_parser = semver::Version::parse)]
    pub min_version: Option<semver::Version>,
}

impl GateArgs {
    /// Opens (and locks) the state file, if any; the lock lasts until the result is recorded.
    pub fn open_state(&self) -> anyhow::Result<Option<StateFile>> {
        self.state.as_deref().map(StateFile::open).transpose().map_err(anyhow::Error::from)
    }

    pub fn expect<'a>(&'a self, state: Option<&'a StateFile>, global: Global) -> Expect<'a> {
        Expect {
            name: self.name.as_deref(),
            now: Some(global.now()),
            state: state.map(|s| &s.state),
            min_version: self.min_version.as_ref(),
        }
    }
}

/// Records an accepted bundle in the state file. A gate that cannot record what it let
/// through fails (exit 2) rather than pass silently.
pub fn record(state: Option<&mut StateFile>, v: &Verified) -> anyhow::Result<()> {
    if let Some(state) = state {
        state
            .record(&v.manifest.name, &v.key_id, &v.manifest.version, &v.manifest_blake3)
            .context("the bundle verified, but the state file could not be updated")?;
    }
    Ok(())
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let keys = load_trust(&args.trust)?;
    let mut state = args.gate.open_state()?;
    let file = File::open(&args.bundle).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", args.bundle.display()))?;
    let expect = args.gate.expect(state.as_ref(), global);
    let result = verify::verify(BufReader::with_capacity(1 << 20, file), Trust::Keys(&keys), &expect, &mut Discard);
    if let Ok(v) = &result {
        record(state.as_mut(), v)?;
    }
    report(&args.bundle, result, args.format, global)
}

pub fn report(
    bundle: &std::path::Path,
    result: Result<Verified, Rejection>,
    format: Format,
    global: Global,
) -> anyhow::Result<Outcome> {
    match result {
        Ok(v) => {
            let bytes: u64 = v.files.iter().map(|f| f.size).sum();
            match format {
                Format::Json => output::print_json(&serde_json::json!({
                    "ok": true,
                    "code": null,
                    "path": null,
                    "message": null,
                    "agent": {"name": v.manifest.name, "version": v.manifest.version.to_string()},
                    "key_id": v.key_id,
                    "files": v.files.len(),
                    "bytes": bytes,
                }))?,
                Format::Github => println!(
                    "::notice title=verified::{} {} verified (key {})",
                    v.manifest.name, v.manifest.version, v.key_id
                ),
                Format::Human => output::status(
                    global,
                    &format!(
                        "verified {}: {} {}, signed by {}, {} files, {bytes} bytes",
                        bundle.display(),
                        v.manifest.name,
                        v.manifest.version,
                        v.key_id,
                        v.files.len()
                    ),
                ),
            }
            Ok(Outcome::Ok)
        }
        Err(r) => {
            let failed = r.reason == Reason::IoError;
            match format {
                Format::Json => output::print_json(&rejection_json(&r))?,
                Format::Github => println!(
                    "::error file={},title={}::{}",
                    bundle.display(),
                    r.reason.as_str(),
                    sanitize(&r.message).replace('\n', "%0A")
                ),
                Format::Human => {
                    let at = r.path.as_deref().map(|p| format!("\n  entry: {}", sanitize(p))).unwrap_or_default();
                    output::print_error_line(
                        global,
                        &format!("rejected {}: {} [{}]{at}", bundle.display(), sanitize(&r.message), r.reason.as_str()),
                    );
                }
            }
            Ok(if failed { Outcome::Failed } else { Outcome::Rejected })
        }
    }
}

pub fn rejection_json(r: &Rejection) -> serde_json::Value {
    serde_json::json!({
        "ok": false,
        "code": r.reason,
        "path": r.path.as_deref().map(sanitize),
        "message": sanitize(&r.message),
        "agent": r.agent.as_ref().map(|(n, v)| serde_json::json!({"name": sanitize(n), "version": sanitize(v)})),
        "key_id": r.key_id,
    })
}
