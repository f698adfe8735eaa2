//! The deployment gate: everything `bundle verify` judges before a bundle may be deployed, as
//! one operation that `verify`, `unpack`, `pull`, `cosign` and the library API share, so that
//! none of them can skip a check the others make.
//!
//! In order: the baseline file is read, the state file opened and locked and the trust policy
//! chain followed ([`Gate::open`]); the bundle is opened through the one way in with the
//! evidence the gate wants ([`Gate::wanted`], [`crate::ops::input`]); then [`Gate::judge`]:
//! the evidence that can be judged before the bytes move (a registry's co-signatures against
//! the policy's rules, its attestations against the layer's digest), then in one streaming
//! pass the signature, versions, expiry, rollback and every entry
//! ([`crate::bundle::verify`]); then the evidence bound to the file's SHA-256 (keyless
//! signatures, attestations), the release gate against the approved baseline (failing closed
//! when the tool contracts cannot be computed); then the state is recorded and the sink
//! committed.

mod evidence;
#[cfg(test)]
mod tests;
mod verdict;

use std::io::BufRead;

use crate::archive::BundleRead;
use std::path::{Path, PathBuf};

pub use verdict::{AgentId, BaselineReport, CosignatureOrigin, Verdict, VerdictReport};

use self::evidence::Gathered;
use crate::bundle::verify::{
    self, Expect, PolicyTrust, Reason, Rejection, Sink, Trust, Verified, VerifyError, VerifyIoError,
};
use crate::contract::baseline::{self, Baseline, BaselineError};
use crate::contract::release;
use crate::evidence::judge::AttestPolicy;
use crate::ops::input::{BundleInput, Evidence, Wanted};
use crate::sha256_read::Sha256Read;
use crate::state::{StateError, StateFile};
use crate::timestamp::Timestamp;
use crate::trust::TrustedKeys;
use crate::trust_policy::TrustPolicy;
use crate::trust_policy::chain::{self, ChainError, ChainFault, ChainReport, SignedPolicy};

/// What the gate requires of a bundle.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// The keys a bundle must be signed by (each possibly limited to some agent names).
    pub keys: TrustedKeys,
    /// The agent name the bundle must have (`--name`).
    pub name: Option<String>,
    /// The lowest version accepted (`--min-version`).
    pub min_version: Option<semver::Version>,
    /// The time `[bundle] expires` is judged against.
    pub now: Timestamp,
    /// The rollback state file (`--state`): read and locked by [`Gate::open`], updated when a
    /// bundle passes.
    pub state: Option<PathBuf>,
    /// The approved baseline (`--baseline`): risky tools must have their approved contracts.
    /// A folder holds one baseline per agent, `<agent name>.toml` (as `bundle baseline
    /// snapshot` writes them), picked once the bundle's agent is known.
    pub baseline: Option<PathBuf>,
    /// A trust policy (`--trust-policy`): when set, it decides whose signatures count, and
    /// `keys` is not used.
    pub policy: Option<PolicyOptions>,
    /// Attestations to judge (`--attestation`, and those beside the bundle) and what they must say.
    pub attest: AttestOptions,
    /// A keyless (Sigstore) signature the bundle file must carry (`--sigstore`), judged over
    /// the file's SHA-256 after the bundle itself verified.
    pub keyless: Option<std::sync::Arc<crate::keyless::Requirement>>,
    /// The Sigstore trusted root a `[[models]]` identity of the bundle is judged against
    /// (`--trusted-root`); under a trust policy, the policy's `[sigstore] trusted_root` is.
    pub model_root: Option<std::sync::Arc<crate::keyless::TrustedRoot>>,
}

/// The attestation part of the gate (docs/book/src/guides/attestations.md).
#[derive(Debug, Clone, Default)]
pub struct AttestOptions {
    /// `--attestation FILE...`: Sigstore bundles to judge, read by [`Gate::open`].
    pub files: Vec<PathBuf>,
    /// Whether to look beside a bundle file for `<BUNDLE>.{provenance,contract}.sigstore.json`
    /// (on unless `--no-discover-attestations`; off when files are named).
    pub discover: bool,
    pub policy: AttestPolicy,
}

/// A trust policy as given: the pinned version, the newer versions to follow, and where the
/// co-signatures are.
#[derive(Debug, Clone)]
pub struct PolicyOptions {
    pub pin: SignedPolicy,
    pub updates: Vec<SignedPolicy>,
    /// Co-signature files (`--cosignatures`); when empty, `<bundle>.cosig` beside a bundle
    /// file is read if it exists.
    pub cosignatures: Vec<PathBuf>,
    /// Refuse a bundle whose signatures do not meet the rules (always, but for `bundle
    /// cosign`, which judges a bundle that still lacks the signature it adds).
    pub require_threshold: bool,
    /// Keyless signatures (Sigstore bundles over the bundle file) offered to the policy's
    /// identity signers (`--sigstore`); when empty, `<bundle>.sigstore.json` beside a bundle
    /// file is read if it exists.
    pub sigstore: Vec<PathBuf>,
}

/// The policy the gate follows, or why no version can be followed (every bundle is refused).
type Followed = Result<(TrustPolicy, ChainReport), ChainError>;

/// Why the gate could not judge a bundle, or could not record that it passed (exit 2). A
/// bundle that was judged and refused is a [`Verdict::Refused`], not an error.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Baseline(#[from] BaselineError),
    #[error(transparent)]
    State(#[from] StateError),
    /// The bundle passed, but the gate could not record it: it fails rather than pass silently.
    #[error("the bundle verified, but the state file could not be updated")]
    Record(#[source] StateError),
    #[error(transparent)]
    Other(#[from] crate::Error),
    /// The bundle could not be read (a missing file, a registry failure).
    #[error(transparent)]
    Input(#[from] crate::ops::input::InputError),
    /// The verifier could not read the bundle, or the sink could not take an entry (a full
    /// disk under `unpack`): no verdict on the bundle.
    #[error(transparent)]
    Verify(VerifyIoError),
}

impl crate::error::Coded for GateError {
    fn code(&self) -> crate::error::ErrorCode {
        match self {
            GateError::Baseline(e) => e.code(),
            GateError::State(e) | GateError::Record(e) => e.code(),
            GateError::Other(e) => e.code(),
            GateError::Input(e) => e.code(),
            GateError::Verify(e) => e.code(),
        }
    }
}

impl GateError {
    /// The error this one wraps (for telling kinds of errors apart; the message is the same).
    pub fn wrapped(&self) -> &(dyn std::error::Error + 'static) {
        match self {
            GateError::Baseline(e) => e,
            GateError::State(e) => e,
            GateError::Record(e) => e,
            GateError::Other(e) => e,
            GateError::Input(e) => e,
            GateError::Verify(e) => e,
        }
    }
}

/// A gate ready to judge one bundle: the baseline read, the state file (if any) locked until
/// the gate is dropped, the trust policy chain followed.
#[derive(Debug)]
pub struct Gate {
    opts: GateOptions,
    baseline: Option<Baseline>,
    state: Option<StateFile>,
    policy: Option<Followed>,
    /// Whose signatures an attestation may carry: `opts.keys` and, under a trust policy, the
    /// policy's keys valid now.
    attest_keys: TrustedKeys,
    /// Whether the verdict must name the file's SHA-256 even when no evidence does (`cosign`).
    digest: bool,
}

impl Gate {
    /// Reads the baseline and opens (waiting for its lock) the state file, so that a gate that
    /// cannot judge stops before the bundle is read.
    pub fn open(opts: GateOptions) -> Result<Gate, GateError> {
        preflight(&opts)?;
        // A folder of baselines is read once the agent is known; it must exist now.
        let baseline = match opts.baseline.as_deref() {
            Some(dir) if dir.is_dir() => None,
            other => other.map(baseline::read).transpose()?,
        };
        let mut state = opts.state.as_deref().map(StateFile::open).transpose()?;
        // The policy chain is followed once, under the state file's lock.
        let policy = opts.policy.as_ref().map(|p| {
            let seen = state.as_ref().and_then(|s| s.state.policy_version(&p.pin.policy.id));
            chain::follow(p.pin.clone(), p.updates.clone(), opts.now, seen)
        });
        // A version whose chain verifies is recorded at once, whatever becomes of the bundle
        // (python-tuf persists every root it accepts): a host that followed v2, which revokes
        // a stolen key, must not be offered v1 again and believe it, though it refused the
        // release that taught it v2.
        if let (Some(Ok((policy, _))), Some(state)) = (&policy, state.as_mut()) {
            state.record_policy(&policy.id, policy.version)?;
        }
        let attest_keys = match &policy {
            Some(Ok((p, _))) => crate::trust_policy::keys::with_policy(&opts.keys, p, opts.now),
            _ => opts.keys.clone(),
        };
        Ok(Gate { opts, baseline, state, policy, attest_keys, digest: false })
    }

    /// The gate whose verdict names the file's SHA-256 in every case (for `cosign`, whose
    /// approval statement must be about the bytes that were judged).
    pub fn with_digest(mut self) -> Self {
        self.digest = true;
        self
    }

    /// The evidence this gate judges, for [`crate::ops::input::BundleSource::open`] to gather
    /// with the bundle: attestations always, co-signatures and keyless signatures under a
    /// trust policy, a registry artifact's config when its rules are enforced before the layer.
    pub fn wanted(&self) -> Wanted {
        Wanted {
            attestations: self.opts.attest.files.clone(),
            discover_attestations: self.opts.attest.discover,
            cosignatures: self.opts.policy.as_ref().map(|p| p.cosignatures.clone()),
            keyless: self.opts.policy.as_ref().map(|p| p.sigstore.clone()),
            config: matches!(self.policy, Some(Ok(_)))
                && self.opts.policy.as_ref().is_some_and(|p| p.require_threshold),
        }
    }

    /// The trust policy version the gate follows (with `--trust-policy`), when one could be.
    pub fn followed_policy(&self) -> Option<&TrustPolicy> {
        self.followed()
    }

    /// The chain of policy versions followed (with `--trust-policy`), or why it broke.
    pub fn policy_chain(&self) -> Option<&ChainReport> {
        self.policy.as_ref().map(|f| match f {
            Ok((_, report)) => report,
            Err(e) => &e.report,
        })
    }

    /// Judges the bundle `input` holds with its evidence, streaming its entries into `sink`:
    /// the one entry of the gate.
    ///
    /// What can be judged before the bytes is judged first (a registry's layer is read only as
    /// far as its signature when that evidence refuses, so that a wrong key is named first).
    /// The input is read once, front to back, and not necessarily to its end
    /// (a rejection stops reading). Nothing written to `sink` may be used unless the verdict is
    /// [`Verdict::Passed`]; the gate calls [`Sink::commit`] only then, after the baseline check
    /// and the state record. A commit or record failure is a [`GateError`]. A caller that copies
    /// the input elsewhere (a download's temp file) may use that copy only after `Passed`.
    pub fn judge(self, mut input: BundleInput<'_>, sink: &mut dyn Sink) -> Result<Verdict, GateError> {
        let label = input.label().to_path_buf();
        let evidence: Evidence = input.take_evidence();
        let gathered = match self.gather(evidence, &mut input)? {
            Ok(gathered) => gathered,
            Err(refused) => return Ok(refused),
        };
        // A bundle that could not be read or written is handed to the input as such, so that
        // a fault of the stream under it can still explain it.
        let judged = input.judge(|bytes| match self.judge_stream(bytes, &label, gathered, sink) {
            Err(GateError::Verify(failed)) => Ok(Err(failed)),
            judged => judged.map(Ok),
        })?;
        judged.map_err(GateError::Verify)
    }

    /// The streaming pass over the bundle and everything judged after it.
    fn judge_stream(
        mut self,
        input: &mut dyn BundleRead,
        origin: &Path,
        mut gathered: Gathered,
        sink: &mut dyn Sink,
    ) -> Result<Verdict, GateError> {
        let referred = std::mem::take(&mut gathered.kept);
        let refused_evidence = gathered.refused.take();
        let origins = std::mem::take(&mut gathered.cosignature_origins);
        let expect = Expect {
            name: self.opts.name.as_deref(),
            now: Some(self.opts.now),
            state: self.state.as_ref().map(|s| &s.state),
            min_version: self.opts.min_version.as_ref(),
            refuse_after_signature: refused_evidence.as_ref().and_then(Verdict::rejection),
            model_root: match &self.policy {
                Some(Ok((policy, _))) => policy.trusted_root.as_deref(),
                _ => self.opts.model_root.as_deref(),
            },
        };
        let enforce = self.enforce();
        let trust = match &self.policy {
            None => Trust::Keys(&self.opts.keys),
            Some(Ok((policy, _))) => Trust::Policy(PolicyTrust {
                policy,
                cosignatures: &gathered.cosignatures,
                now: self.opts.now,
                enforce,
                keyless: &gathered.offers,
                file_sha256: gathered.sha256.as_ref(),
            }),
            // No version of the policy can be followed: nothing is trusted.
            Some(Err(e)) => return Ok(Verdict::refused(chain_rejection(e))),
        };
        let attesting = gathered.attesting(&self.opts.attest.policy);
        // The file's SHA-256, in the same pass, when something names it (a registry layer's is
        // known already: its stream fails unless its bytes have it, so it is not hashed twice).
        let hash = gathered.sha256.is_none()
            && (attesting || self.opts.keyless.is_some() || !gathered.offers.is_empty() || self.digest);
        let mut input = Sha256Read::new(input, hash);
        let mut verified = match verify::verify(&mut input, trust, &expect, sink) {
            Ok(v) => v,
            // The evidence's own refusal, now that the signature stands: with its judgements,
            // and the agent and key the signature authenticated.
            Err(VerifyError::Refused(refused))
                if refused_evidence.as_ref().and_then(Verdict::rejection).is_some_and(|r| r.same_as(&refused)) =>
            {
                let mut verdict = refused_evidence.expect("matched above");
                if let Verdict::Refused { rejection, .. } = &mut verdict {
                    *rejection = refused.rejection;
                }
                return Ok(verdict);
            }
            Err(VerifyError::Refused(refused)) => return Ok(Verdict::refused(refused)),
            Err(VerifyError::Io(failed)) => return Err(GateError::Verify(failed)),
        };
        let sha256 = input.finish().map_err(|e| crate::Error::io(origin, e))?.or(gathered.sha256);
        if let Err(refused) = self.bind_keyless(&mut verified, sha256.as_ref()) {
            return Ok(refused);
        }
        let attestations = match self.judge_attestations(&verified, origin, sha256.as_ref(), gathered) {
            Ok(judged) => judged,
            Err(refused) => return Ok(refused),
        };
        let keyless = match self.judge_keyless(sha256, &verified) {
            Ok(signer) => signer,
            Err(rejection) => return Ok(Verdict::refused(rejection)),
        };
        self.pick_baseline(&verified)?;
        let report = match self.judge_contracts(&verified, origin)? {
            Ok(report) => report,
            Err(refused) => return Ok(refused),
        };
        // Recorded before the sink is committed: a state that cannot be written stops the gate
        // while the deployed folder is still untouched (a non-zero exit never follows a swap).
        // A commit that fails after the record leaves a state that accepts this very bundle
        // again, which a retry needs anyway.
        if let Some(state) = self.state.as_mut() {
            let m = &verified.manifest;
            state
                .record(&m.name, &verified.key_id, &m.version, &verified.manifest_blake3)
                .map_err(GateError::Record)?;
        }
        sink.commit()?;
        let cosignatures = counted_cosignatures(&verified, &origins);
        Ok(Verdict::Passed {
            verified: Box::new(verified),
            baseline: report,
            keyless,
            attestations,
            sha256,
            referred,
            cosignatures,
        })
    }

    /// Whether the policy's rules refuse a bundle that does not meet them (all but `cosign`).
    fn enforce(&self) -> bool {
        self.opts.policy.as_ref().is_none_or(|p| p.require_threshold)
    }

    /// The policy followed, if a version of it could be.
    fn followed(&self) -> Option<&TrustPolicy> {
        match &self.policy {
            Some(Ok((policy, _))) => Some(policy),
            _ => None,
        }
    }

    /// With a folder of baselines, reads the verified agent's: `DIR/<agent>.toml`. A missing
    /// one stops the gate (exit 2) naming the file it looked for.
    fn pick_baseline(&mut self, v: &Verified) -> Result<(), GateError> {
        let Some(dir) = self.opts.baseline.as_ref().filter(|_| self.baseline.is_none()) else { return Ok(()) };
        let name = &v.manifest.name;
        crate::manifest::check_agent_name(name).map_err(crate::Error::Usage)?;
        let file = dir.join(format!("{name}.toml"));
        if !file.is_file() {
            let why = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "no baseline for agent `{name}` in {}; approve its tools first with `bundle baseline snapshot`",
                    dir.display()
                ),
            );
            return Err(crate::Error::io(&file, why).into());
        }
        self.baseline = Some(baseline::read(&file)?);
        self.opts.baseline = Some(file);
        Ok(())
    }

    /// The release gate against the baseline, if one was given: `Err` holds the refusal.
    fn judge_contracts(
        &self,
        v: &Verified,
        origin: &Path,
    ) -> Result<Result<Option<BaselineReport>, Verdict>, GateError> {
        let (Some(approved), Some(path)) = (&self.baseline, &self.opts.baseline) else { return Ok(Ok(None)) };
        let refuse = |mut rejection: Rejection, baseline| {
            rejection.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            rejection.key_id = Some(v.key_id.clone());
            Verdict::Refused { rejection, baseline, signers: None, attestations: Vec::new() }
        };
        let agent = match release::from_verified(v, origin) {
            Ok(agent) => agent,
            Err(e) => {
                // Contracts that cannot be computed cannot be approved: fail closed.
                let r = Rejection::new(
                    Reason::ContractDrift,
                    Some(crate::tools::FILE_NAME),
                    format!("cannot compute the tool contracts: {e}"),
                );
                return Ok(Err(refuse(r, None)));
            }
        };
        let mut agent = agent;
        match crate::agent::pins::mcp::pins_of(v) {
            Ok(pins) => agent.pins = pins,
            Err(e) => {
                // Pins that cannot be read cannot be approved: fail closed.
                let r = Rejection::new(
                    Reason::ContractDrift,
                    Some(crate::formats::mcp_pin::DIR),
                    format!("cannot read the pinned MCP servers: {e}"),
                );
                return Ok(Err(refuse(r, None)));
            }
        }
        let findings = baseline::judge_release(approved, &agent, path)?;
        let rejection = findings.rejection(path);
        let report = BaselineReport { file: path.clone(), findings };
        Ok(match rejection {
            Some(r) => Err(refuse(r, Some(report))),
            None => Ok(Some(report)),
        })
    }
}

/// What can be known wrong before any bundle is read, so that a run over many bundles says it
/// once: a `--baseline` that does not exist, with how to make one.
pub fn preflight(opts: &GateOptions) -> Result<(), GateError> {
    let Some(path) = opts.baseline.as_deref() else { return Ok(()) };
    if path.exists() {
        return Ok(());
    }
    let shown = path.display();
    let folder = shown.to_string().ends_with('/') || path.extension().is_none();
    let make = if folder && path.components().eq(Path::new(crate::ops::baseline::DEFAULT_DIR).components()) {
        "`bundle baseline snapshot agents/` writes one <agent>.toml per agent into baselines/".to_string()
    } else if folder {
        format!("`bundle baseline snapshot agents/ -o {shown}` writes one <agent>.toml per agent into it")
    } else {
        format!("`bundle baseline snapshot BUNDLE|AGENT_DIR -o {shown}` writes it")
    };
    Err(BaselineError::Usage(format!(
        "--baseline {shown}: no such file or folder; record the approved tool contracts first: {make}"
    ))
    .into())
}

/// The refusal of every bundle when the policy chain cannot be followed.
pub fn chain_rejection(e: &ChainError) -> Rejection {
    let reason = match e.fault {
        ChainFault::Untrusted => Reason::PolicyUntrusted,
        ChainFault::Rollback => Reason::PolicyRollback,
        ChainFault::Expired => Reason::PolicyExpired,
        ChainFault::Broken => Reason::PolicyChainBroken,
    };
    Rejection::new(reason, None, e.message.clone())
}

/// Opens a gate and judges one bundle read from `input` with it, the evidence gathered beside a
/// file named `origin` when there is one: [`Gate::open`] then [`Gate::judge`].
pub fn gate(input: impl BufRead, origin: &Path, opts: GateOptions, sink: &mut dyn Sink) -> Result<Verdict, GateError> {
    let gate = Gate::open(opts)?;
    let evidence = Evidence::gather(Some(origin).filter(|p| p.is_file()), &gate.wanted())?;
    gate.judge(BundleInput::from_reader(input, origin, evidence), sink)
}

/// Where the co-signatures that counted came from (`cosig:N` is the N-th of `origins`), each
/// piece once, in the order the signatures were judged.
fn counted_cosignatures(
    verified: &Verified,
    origins: &[verdict::CosignatureOrigin],
) -> Vec<verdict::CosignatureOrigin> {
    let mut out: Vec<verdict::CosignatureOrigin> = Vec::new();
    let Some(signers) = &verified.signers else { return out };
    for v in signers.signatures.iter().filter(|v| v.status == crate::trust_policy::SignatureStatus::Counted) {
        let index = v.source.strip_prefix("cosig:").and_then(|n| n.parse::<usize>().ok());
        if let Some(origin) = index.and_then(|n| origins.get(n.wrapping_sub(1)))
            && !out.contains(origin)
        {
            out.push(origin.clone());
        }
    }
    out
}
