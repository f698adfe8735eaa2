//! `bundle verify <BUNDLE>`: the gate before deployment.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::verify::{self, Discard, Reason, Rejection, Trust, Verified};
use agent_bundle::progress::{Progress, ProgressRead};

use super::keys::{TrustArgs, load_trust};
use super::{Format, Global, Outcome, output};

/// Verify a bundle in one streaming pass: trusted signature, versions, every digest, nothing
/// missing, nothing extra, nothing unsafe.
///
/// Exit status: 0 accepted, 1 rejected (with a stable reason code), 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle verify mailer-1.4.0.agent.bundle --key release.pub\n  bundle verify mailer-1.4.0.agent.bundle --trusted-keys trusted-keys.txt --name mailer\n  bundle verify x.agent.bundle --key release.pub --format json | jq -r .code"
)]
pub struct Args {
    /// The bundle file.
    bundle: PathBuf,
    #[command(flatten)]
    trust: TrustArgs,
    /// Also require the bundle to be this agent.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let keys = load_trust(&args.trust)?;
    let file = File::open(&args.bundle).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", args.bundle.display()))?;
    let bar = super::progress::Bar::new(global);
    bar.begin("verifying", file.metadata().map_or(0, |m| m.len()));
    let input = BufReader::with_capacity(1 << 20, ProgressRead { inner: file, progress: &bar });
    let result = verify::verify(input, Trust::Keys(&keys), args.name.as_deref(), &mut Discard);
    bar.end();
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
                Format::Github => output::print_line(&output::github_annotation(
                    "notice",
                    Some(&bundle.display().to_string()),
                    "verified",
                    &format!("{} {} verified (key {})", v.manifest.name, v.manifest.version, v.key_id),
                ))?,
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
                Format::Github => {
                    let at = r.path.as_deref().map(|p| format!(" (entry {p})")).unwrap_or_default();
                    output::print_line(&output::github_annotation(
                        "error",
                        Some(&bundle.display().to_string()),
                        r.reason.as_str(),
                        &format!("{}{at}", r.message),
                    ))?
                }
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
