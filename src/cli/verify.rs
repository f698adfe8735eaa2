//! `bundle verify <BUNDLE>`: the gate before deployment.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_bundle::bundle::verify::Rejection;
use agent_bundle::contract::baseline::{Drift, MCP_PREFIX, SKILL_PREFIX};
use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::gate::{BaselineReport, Gate, GateOptions, Verdict};
use agent_bundle::trust_policy::SignersVerdict;

use super::args::{GateArgs, TrustArgs};
use super::json::Results;
use super::keys::load_trust;
use super::{Format, Global, Outcome, output};

/// Verify a bundle in one streaming pass: trusted signature, versions, expiry (and rollback with
/// --state), every digest, nothing missing, nothing extra, nothing unsafe.
///
/// With --baseline, also the release gate: a write-capable, network, secret-using or
/// destructive tool whose contract is not the approved one rejects (contract_drift), and so
/// does a new skill or one whose allowed-tools widened; drift of a read-only tool, or a skill's
/// other changes, is a warning.
///
/// Several bundles are judged one after the other, each reported; --baseline DIR picks each
/// agent's DIR/<agent>.toml.
///
/// Exit status: 0 all accepted, 1 any rejected (with a stable reason code), 2 usage or I/O
/// error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle verify mailer-1.4.0.agent.bundle --key release.pub\n  bundle verify mailer-1.4.0.agent.bundle --trusted-keys trusted-keys.txt \\\n      --name mailer --state /var/lib/agents/bundle-state.json\n  bundle verify mailer-1.5.0.agent.bundle --key release.pub \\\n      --baseline approved.toml   # the release gate\n  bundle verify x.agent.bundle --key release.pub --format json | jq -r .code"
)]
pub struct Args {
    /// The bundle files (or registry artifacts, oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX)): each
    /// is judged by the same gate and reported.
    #[arg(value_name = "BUNDLE", required_unless_present = "agent_card")]
    bundles: Vec<PathBuf>,
    /// Verify this A2A agent card instead (made by `bundle agentcard`, or any card signed with
    /// EdDSA or ES256): its signatures against the trusted keys (--key: minisign public keys,
    /// and P-256 public keys in PEM for ES256; or --trusted-keys, or the key signers of a
    /// --trust-policy), offline (a `jku` is never fetched); with a BUNDLE, also that the card
    /// describes that bundle (which must verify too).
    #[arg(long, value_name = "CARD")]
    agent_card: Option<PathBuf>,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    gate: GateArgs,
    #[command(flatten)]
    registry: super::registry::RegistryArgs,
    // Boxed: a dozen optional strings would make `verify` the largest command variant.
    #[command(flatten)]
    keyless: Box<super::keyless::KeylessArgs>,
    #[command(flatten)]
    vsa: Box<super::vsa::VsaArgs>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    if let Some(card) = &args.agent_card {
        if args.bundles.len() > 1 {
            anyhow::bail!("--agent-card checks one card against at most one bundle");
        }
        let trust = super::agentcard::load_trust(&args.trust)?;
        return super::agentcard::verify(card, args.bundles.first().map(PathBuf::as_path), &trust, args.format, global);
    }
    let keys = load_trust(&args.trust)?;
    let several = args.bundles.len() > 1;
    let mut vsa = args.vsa.emitter(&args.trust, &args.gate, &args.keyless.sigstore, several)?;
    let opts = super::gate_args::options(keys, &args.trust, args.gate, &args.keyless, global)?;
    if let [bundle] = args.bundles.as_slice() {
        let verdict = verify_one(bundle, opts, &args.registry, global, vsa.as_mut())?;
        return render(bundle, &verdict, args.format, global);
    }
    // A missing baseline is said once, not once per bundle.
    crate::ops::gate::preflight(&opts)?;
    let mut outcome = Outcome::Ok;
    let mut results = Vec::new();
    let (mut passed, mut refused) = (0, 0);
    for bundle in &args.bundles {
        let (this, json) = match verify_one(bundle, opts.clone(), &args.registry, global, vsa.as_mut()) {
            Ok(verdict) if args.format == Format::Json => (outcome_of(&verdict), verdict_json(&verdict)?),
            Ok(verdict) => (render(bundle, &verdict, args.format, global)?, serde_json::Value::Null),
            // One bundle that cannot be judged does not stop the others from being judged.
            Err(e) => {
                match args.format {
                    Format::Json => {}
                    Format::Github => output::github_error(&e),
                    Format::Human => output::print_error(global, &e),
                }
                (Outcome::Failed, output::error_json(output::error_code(&e).as_str(), &e.to_string(), &[]))
            }
        };
        match this {
            Outcome::Ok => passed += 1,
            _ => refused += 1,
        }
        outcome = outcome.worst(this);
        if args.format == Format::Json {
            let mut json = json;
            json["bundle"] = bundle.display().to_string().into();
            results.push(json);
        }
    }
    match args.format {
        Format::Json => output::print_json(&Results { ok: outcome == Outcome::Ok, results })?,
        Format::Human if refused > 0 => {
            output::print_error_line(global, &format!("{passed} of {} bundles verified", args.bundles.len()))
        }
        Format::Human => output::status(global, &format!("all {passed} bundles verified")),
        Format::Github => {}
    }
    Ok(outcome)
}

/// Judges one bundle with a gate of its own (the state file is locked for that bundle only),
/// and writes its verification summary when asked.
fn verify_one(
    bundle: &Path,
    opts: GateOptions,
    registry: &super::registry::RegistryArgs,
    global: Global,
    vsa: Option<&mut super::vsa::Emitter>,
) -> anyhow::Result<Verdict> {
    let now = opts.now;
    // A baseline or state file that cannot be read stops the gate before the bundle is judged.
    let gate = Gate::open(opts)?;
    let source = registry.source(bundle)?;
    let bar = super::progress::Bar::new(global);
    let verdict = agent_bundle::ops::verify::verify(&source, gate, &bar)?;
    if let Some(vsa) = vsa {
        vsa.emit(&source, &verdict, now, global)?;
    }
    Ok(verdict)
}

/// What a verdict means for the exit status.
pub fn outcome_of(verdict: &Verdict) -> Outcome {
    match verdict {
        Verdict::Passed { .. } => Outcome::Ok,
        Verdict::Refused { .. } => Outcome::Rejected,
    }
}

/// The JSON document of a verdict, with untrusted text sanitised.
pub fn verdict_json(verdict: &Verdict) -> anyhow::Result<serde_json::Value> {
    Ok(output::sanitize_json(serde_json::to_value(verdict.report())?))
}

/// Prints a bundle rejected before any gate ran (inspect, export) as `verify` would.
pub fn render_rejection(
    bundle: &Path,
    rejection: Rejection,
    format: Format,
    global: Global,
) -> anyhow::Result<Outcome> {
    render(bundle, &Verdict::refused(rejection), format, global)
}

/// Prints the gate's verdict in `format`; returns the outcome it means.
pub fn render(bundle: &Path, verdict: &Verdict, format: Format, global: Global) -> anyhow::Result<Outcome> {
    let (result, baseline) = match verdict {
        Verdict::Passed { verified, baseline, attestations, .. } => {
            (Ok((&**verified, attestations)), baseline.as_ref())
        }
        Verdict::Refused { rejection, baseline, signers, .. } => (Err((rejection, signers)), baseline.as_ref()),
    };
    let outcome = outcome_of(verdict);
    match format {
        Format::Json => output::print_json(&verdict_json(verdict)?)?,
        Format::Github => {
            if let Some(b) = baseline {
                let gate = &b.findings;
                for (level, d) in
                    gate.drift.iter().map(|d| ("error", d)).chain(gate.warnings.iter().map(|d| ("warning", d)))
                {
                    let lines: Vec<String> =
                        d.changes.iter().map(|c| format!("{}: {}", c.impact.as_str(), c.message)).collect();
                    let message = format!("{} ({}): {}", d.tool, d.reason, lines.join("; "));
                    output::print_line(&format!(
                        "::{level} title=contract_drift::{}",
                        output::escape_data(&sanitize(&message))
                    ))?;
                }
            }
            let file = bundle.display().to_string();
            match result {
                Ok((v, _)) => output::print_line(&output::github_annotation(
                    "notice",
                    Some(&file),
                    "verified",
                    &format!("{} {} verified (key {})", v.manifest.name, v.manifest.version, v.key_id),
                ))?,
                Err((r, _)) => {
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
        Format::Human => match result {
            Ok((v, attestations)) => {
                if let Some(s) = &v.signers {
                    for line in signers_lines(s) {
                        output::status(global, &line);
                    }
                }
                if let Some(b) = baseline {
                    gate_human(global, b, bundle, false)?;
                }
                let bytes: u64 = v.files.iter().map(|f| f.size).sum();
                let approved =
                    baseline.map(|b| format!("; tool contracts approved in {}", b.file.display())).unwrap_or_default();
                let approved = approved + &keyless_note(verdict);
                output::status(
                    global,
                    &format!(
                        "verified {}: {} {}, signed by {}, {} files, {bytes} bytes{approved}",
                        bundle.display(),
                        v.manifest.name,
                        v.manifest.version,
                        signed_by(&v.key_id, v.signers.as_ref()),
                        v.files.len()
                    ),
                );
                for a in attestations {
                    output::status(global, &format!("  {}", attestation_line(&a.report)));
                }
            }
            Err((r, signers)) => {
                let at = r.path.as_deref().map(|p| format!("\n  entry: {}", sanitize(p))).unwrap_or_default();
                output::print_error_line(
                    global,
                    &format!("rejected {}: {} [{}]{at}", bundle.display(), sanitize(&r.message), r.reason.as_str()),
                );
                if let Some(s) = signers {
                    for line in signers_lines(s) {
                        output::status(global, &line);
                    }
                }
                if let Some(b) = baseline {
                    gate_human(global, b, bundle, true)?;
                }
            }
        },
    }
    Ok(outcome)
}

/// One attestation as `verify` and `inspect` list it: predicate, signers, subject, and for
/// provenance the builder and source.
pub fn attestation_line(a: &agent_bundle::evidence::judge::Judged) -> String {
    let kind = a.kind().map_or_else(|| a.predicate_type.clone().unwrap_or_default(), |k| k.name().to_owned());
    let mut line = format!("attestation {kind} ({}): ", sanitize(&a.source));
    line += &match a.signers.as_slice() {
        [] => "no trusted signature".to_owned(),
        ids => format!("signed by {}", ids.join(", ")),
    };
    line += if a.subject_matches { ", subject matches" } else { ", subject does NOT match" };
    if let Some(builder) = &a.builder {
        line += &format!(", builder {}", sanitize(builder));
    }
    if let Some(source) = &a.source_uri {
        line += &format!(", source {}", sanitize(source));
    }
    if !a.is_ok() {
        line += &format!(" [{}]", a.verdict_code());
    }
    line
}

/// A trust policy's verdict on a bundle's signatures: one line per signature, one per rule.
pub fn signers_lines(s: &SignersVerdict) -> Vec<String> {
    let mut lines = vec![format!("  trust policy `{}` version {}:", sanitize(&s.policy), s.policy_version)];
    for v in &s.signatures {
        let who = v.signer.as_deref().map(|n| format!(" `{}`", sanitize(n))).unwrap_or_default();
        let roles = if v.roles.is_empty() { String::new() } else { format!(" [{}]", sanitize(&v.roles.join(", "))) };
        let why = if v.why.is_empty() { String::new() } else { format!(": {}", sanitize(&v.why)) };
        let signer = match &v.identity {
            Some(identity) => {
                format!("identity {} ({})", sanitize(identity), sanitize(v.issuer.as_deref().unwrap_or_default()))
            }
            None if v.is_keyless() => "keyless signature".to_owned(),
            None => format!("key {}", v.key_id),
        };
        let code = v.code.map(|c| format!(" [{c}]")).unwrap_or_default();
        lines.push(format!("    {} {signer}{who}{roles}: {}{code}{why}", sanitize(&v.source), v.status));
    }
    for r in &s.rules {
        // "2 counted, 1 needed": never "2 of 1".
        let roles: Vec<String> =
            r.roles.iter().map(|t| format!("; role {} {} counted, {} needed", t.role, t.counted, t.needed)).collect();
        let met = if r.met { "met" } else { "NOT met" };
        lines.push(format!(
            "    rule {}: {} counted, {} needed{}: {met}",
            sanitize(&r.rule),
            r.counted,
            r.needed,
            roles.concat()
        ));
    }
    lines
}

/// Who signed, as the verdict counted it: the pack key, or under a trust policy the signers
/// whose signatures counted (the pack key may be one the policy does not know).
fn signed_by(key_id: &str, signers: Option<&SignersVerdict>) -> String {
    let Some(s) = signers else { return key_id.to_owned() };
    let counted: Vec<String> = s
        .signatures
        .iter()
        .filter(|v| v.counted())
        .map(|v| match (&v.signer, &v.identity) {
            (Some(name), _) => format!("`{}`", sanitize(name)),
            (None, Some(identity)) => sanitize(identity),
            (None, None) => v.key_id.clone(),
        })
        .collect();
    format!("{} (trust policy `{}`)", counted.join(", "), sanitize(&s.policy))
}

/// `; keyless signer IDENTITY (ISSUER)` when a Sigstore bundle verified, else nothing.
fn keyless_note(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Passed { keyless: Some(k), .. } => {
            format!("; keyless signer {} ({})", sanitize(&k.identity), sanitize(&k.issuer))
        }
        _ => String::new(),
    }
}

/// The gate's findings on stderr: rejecting drift (when `rejected`) or warnings, each with what
/// changed since approval.
fn gate_human(global: Global, baseline: &BaselineReport, bundle: &Path, rejected: bool) -> std::io::Result<()> {
    let (path, gate) = (baseline.file.as_path(), &baseline.findings);
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
        let mut ids: Vec<String> = Vec::new();
        for id in gate.drift.iter().map(|d| sanitize(&d.approval_id())) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
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
            let what = if d.is_skill() {
                "a skill"
            } else if d.mcp_server().is_some() {
                "a read-only pinned MCP tool"
            } else {
                "a read-only tool"
            };
            writeln!(out, "warning[contract_drift]: {what} differs from {}", path.display())?;
            write_drift(&mut out, d)?;
        }
        for id in &gate.missing {
            let (what, name) = match (id.strip_prefix(SKILL_PREFIX), id.strip_prefix(MCP_PREFIX)) {
                (Some(n), _) => ("skill", n),
                (_, Some(n)) if n.contains('/') => ("pinned MCP tool", n),
                (_, Some(n)) => ("pinned MCP server", n),
                _ => ("tool", id.as_str()),
            };
            writeln!(out, "note: approved {what} {} is not in the bundle", sanitize(name))?;
        }
    }
    out.flush()
}
