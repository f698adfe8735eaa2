//! `bundle verify <BUNDLE>`: the gate before deployment.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use agent_bundle::bundle::verify::{self, Discard, Expect, Reason, Rejection, Trust, Verified};
use agent_bundle::contract::release;
use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::baseline::{self, Drift, Gate};
use agent_bundle::progress::{Progress, ProgressRead};
use agent_bundle::state::StateFile;

use super::keys::{TrustArgs, load_trust};
use super::{Format, Global, Outcome, output};

/// Verify a bundle in one streaming pass: trusted signature, versions, expiry (and rollback with
/// --state), every digest, nothing missing, nothing extra, nothing unsafe.
///
/// With --baseline, also the release gate: a write-capable, network, secret-using or
/// destructive tool whose contract is not the approved one rejects (contract_drift); drift of a
/// read-only tool is a warning.
///
/// Exit status: 0 accepted, 1 rejected (with a stable reason code), 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle verify mailer-1.4.0.agent.bundle --key release.pub\n  bundle verify mailer-1.4.0.agent.bundle --trusted-keys trusted-keys.txt --name mailer --state /var/lib/agents/bundle-state.json\n  bundle verify mailer-1.5.0.agent.bundle --key release.pub --baseline approved.toml   # release gate\n  bundle verify x.agent.bundle --key release.pub --format json | jq -r .code"
)]
pub struct Args {
    /// The bundle file.
    bundle: PathBuf,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    gate: GateArgs,
    /// Also require every tool contract to match this approved baseline (see `bundle
    /// baseline`).
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
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
    // A baseline or state file that cannot be read stops the run before the bundle is judged.
    let approved = args.baseline.as_deref().map(|p| baseline::read(p).map(|b| (p, b))).transpose()?;
    let mut state = args.gate.open_state()?;
    let file = File::open(&args.bundle).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", args.bundle.display()))?;
    let expect = args.gate.expect(state.as_ref(), global);
    let bar = super::progress::Bar::new(global);
    let size = file.metadata().map_or(0, |m| m.len());
    bar.begin("verifying", size);
    // The buffer is zeroed before its first use; a small bundle gets a small one.
    let capacity = usize::try_from(size).unwrap_or(usize::MAX).clamp(8 << 10, 1 << 20);
    let input = BufReader::with_capacity(capacity, ProgressRead { inner: file, progress: &bar });
    let result = verify::verify(input, Trust::Keys(&keys), &expect, &mut Discard);
    bar.end();
    let (Some((path, approved)), Ok(v)) = (approved, &result) else {
        if let Ok(v) = &result {
            record(state.as_mut(), v)?;
        }
        return report(&args.bundle, result, args.format, global);
    };
    let gate = match release::from_verified(v, &args.bundle) {
        Ok(agent) => baseline::gate(&approved, &agent, path)?,
        Err(e) => {
            // Contracts that cannot be computed cannot be approved: fail closed.
            let mut r = Rejection::new(
                Reason::ContractDrift,
                Some(agent_bundle::tools::FILE_NAME),
                format!("cannot compute the tool contracts: {e}"),
            );
            r.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            r.key_id = Some(v.key_id.clone());
            return report(&args.bundle, Err(r), args.format, global);
        }
    };
    let result = match gate.rejection(path) {
        Some(mut r) => {
            r.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            r.key_id = Some(v.key_id.clone());
            Err(r)
        }
        None => {
            // Only a bundle that passed the gate too is recorded as accepted.
            record(state.as_mut(), v)?;
            result
        }
    };
    report_gated(&args.bundle, result, Some((path, &gate)), args.format, global)
}

pub fn report(
    bundle: &Path,
    result: Result<Verified, Rejection>,
    format: Format,
    global: Global,
) -> anyhow::Result<Outcome> {
    report_gated(bundle, result, None, format, global)
}

/// The verdict, with the release gate's findings when a baseline was given.
fn report_gated(
    bundle: &Path,
    result: Result<Verified, Rejection>,
    gate: Option<(&Path, &Gate)>,
    format: Format,
    global: Global,
) -> anyhow::Result<Outcome> {
    let outcome = match &result {
        Ok(_) => Outcome::Ok,
        Err(r) if r.reason == Reason::IoError => Outcome::Failed,
        Err(_) => Outcome::Rejected,
    };
    match format {
        Format::Json => {
            let mut doc = match &result {
                Ok(v) => serde_json::json!({
                    "ok": true,
                    "code": null,
                    "path": null,
                    "message": null,
                    "agent": {"name": v.manifest.name, "version": v.manifest.version.to_string()},
                    "key_id": v.key_id,
                    "files": v.files.len(),
                    "bytes": v.files.iter().map(|f| f.size).sum::<u64>(),
                }),
                Err(r) => rejection_json(r),
            };
            if let Some((path, gate)) = gate {
                doc["baseline"] = output::sanitize_json(serde_json::json!({
                    "file": path.display().to_string(),
                    "drift": gate.drift,
                    "warnings": gate.warnings,
                    "missing": gate.missing,
                }));
            }
            output::print_json(&doc)?;
        }
        Format::Github => {
            if let Some((_, gate)) = gate {
                for (level, d) in
                    gate.drift.iter().map(|d| ("error", d)).chain(gate.warnings.iter().map(|d| ("warning", d)))
                {
                    let lines: Vec<String> =
                        d.changes.iter().map(|c| format!("{}: {}", c.impact.as_str(), c.message)).collect();
                    let message = format!("{} ({}): {}", d.tool, d.reason, lines.join("; "));
                    println!("::{level} title=contract_drift::{}", output::escape_data(&sanitize(&message)));
                }
            }
            let file = bundle.display().to_string();
            match &result {
                Ok(v) => output::print_line(&output::github_annotation(
                    "notice",
                    Some(&file),
                    "verified",
                    &format!("{} {} verified (key {})", v.manifest.name, v.manifest.version, v.key_id),
                ))?,
                Err(r) => {
                    let at = r.path.as_deref().map(|p| format!(" (entry {p})")).unwrap_or_default();
                    output::print_line(&output::github_annotation(
                        "error",
                        Some(&file),
                        r.reason.as_str(),
                        &format!("{}{at}", r.message),
                    ))?
                }
            }
        }
        Format::Human => match &result {
            Ok(v) => {
                if let Some((path, gate)) = gate {
                    gate_human(global, path, gate, bundle, false)?;
                }
                let bytes: u64 = v.files.iter().map(|f| f.size).sum();
                let approved =
                    gate.map(|(p, _)| format!("; tool contracts approved in {}", p.display())).unwrap_or_default();
                output::status(
                    global,
                    &format!(
                        "verified {}: {} {}, signed by {}, {} files, {bytes} bytes{approved}",
                        bundle.display(),
                        v.manifest.name,
                        v.manifest.version,
                        v.key_id,
                        v.files.len()
                    ),
                );
            }
            Err(r) => {
                let at = r.path.as_deref().map(|p| format!("\n  entry: {}", sanitize(p))).unwrap_or_default();
                output::print_error_line(
                    global,
                    &format!("rejected {}: {} [{}]{at}", bundle.display(), sanitize(&r.message), r.reason.as_str()),
                );
                if let Some((path, gate)) = gate {
                    gate_human(global, path, gate, bundle, true)?;
                }
            }
        },
    }
    Ok(outcome)
}

/// The gate's findings on stderr: rejecting drift (when `rejected`) or warnings, each with what
/// changed since approval.
fn gate_human(global: Global, path: &Path, gate: &Gate, bundle: &Path, rejected: bool) -> std::io::Result<()> {
    let stream = output::stderr(global);
    let mut out = stream.lock();
    let short = |f: Option<&str>| f.map_or("none", |f| &f[..f.len().min(16)]).to_owned();
    let write_drift = |out: &mut dyn codespan_reporting::term::termcolor::WriteColor, d: &Drift| {
        writeln!(
            out,
            "  {} ({}): approved {}, now {}",
            sanitize(&d.tool),
            d.reason,
            short(d.approved.as_deref()),
            short(Some(&d.fingerprint))
        )?;
        output::write_changes(out, &d.changes.iter().collect::<Vec<_>>(), "    ")
    };
    if rejected {
        for d in &gate.drift {
            write_drift(&mut out, d)?;
        }
        let ids: Vec<String> = gate.drift.iter().map(|d| sanitize(&d.tool)).collect();
        writeln!(
            out,
            "  help: review the changes with `bundle diff`; to approve them: bundle baseline approve {} --from {} {}",
            path.display(),
            bundle.display(),
            ids.join(" ")
        )?;
    }
    if !global.quiet {
        for d in &gate.warnings {
            writeln!(out, "warning[contract_drift]: a read-only tool differs from {}", path.display())?;
            write_drift(&mut out, d)?;
        }
        for id in &gate.missing {
            writeln!(out, "note: approved tool {} is not in the bundle", sanitize(id))?;
        }
    }
    out.flush()
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
