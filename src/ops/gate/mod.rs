//! The deployment gate: everything `bundle verify` judges before a bundle may be deployed, as
//! one operation that `verify`, `unpack` and any later consumer (a registry pull) share, so
//! that none of them can skip a check the others make.
//!
//! In order: the baseline file is read and the state file opened and locked ([`Gate::open`]);
//! then, in one streaming pass over the bundle, the signature, versions, expiry, rollback and
//! every entry ([`crate::bundle::verify`]); then the release gate against the approved baseline
//! (failing closed when the tool contracts cannot be computed); then the sink is committed and
//! the acceptance recorded in the state file ([`Gate::run`]). A registry artifact's referrers
//! (attestations, co-signatures) are judged before its layer is fetched ([`Gate::before_layer`]).

mod verdict;

use std::io::BufRead;
use std::path::{Path, PathBuf};

pub use verdict::{AgentId, BaselineReport, Verdict, VerdictReport};

use crate::bundle::verify::{self, Expect, PolicyTrust, Reason, Refused, Rejection, Sink, Trust, Verified};
use crate::contract::baseline::{self, Baseline, BaselineError};
use crate::contract::release;
use crate::evidence::{
    self,
    judge::{self, AttestPolicy, Judged},
};
use crate::keyless::KeylessSigner;
use crate::minisign::Signature;
use crate::oci::BeforeLayer;
use crate::regular_file::{self, Links};
use crate::sha256_read::Sha256Read;
use crate::state::{StateError, StateFile};
use crate::timestamp::Timestamp;
use crate::trust::TrustedKeys;
use crate::trust_policy::chain::{self, ChainError, ChainFault, ChainReport, SignedPolicy};
use crate::trust_policy::judge::KeylessOffer;
use crate::trust_policy::{self, TrustPolicy, bound, signatures};

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
}

impl crate::error::Coded for GateError {
    fn code(&self) -> crate::error::ErrorCode {
        match self {
            GateError::Baseline(e) => e.code(),
            GateError::State(e) | GateError::Record(e) => e.code(),
            GateError::Other(e) => e.code(),
            GateError::Input(e) => e.code(),
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
        }
    }
}

/// A gate ready to judge one bundle: the baseline read, the state file (if any) locked until
/// the gate is dropped.
#[derive(Debug)]
pub struct Gate {
    opts: GateOptions,
    baseline: Option<Baseline>,
    state: Option<StateFile>,
    /// The attestations to judge, with where each came from.
    attestations: Vec<(String, Vec<u8>)>,
    /// Judged before the bundle was read (a registry's referrers, [`Gate::judge_before`]).
    judged: Option<Vec<Judged>>,
    policy: Option<Followed>,
    /// Whose signatures an attestation may carry: `opts.keys` and, under a trust policy, the
    /// policy's keys valid now.
    attest_keys: TrustedKeys,
    /// The co-signatures a registry holds (its referrers), read before the layer; `None` for
    /// a bundle file (its co-signatures lie beside it).
    registry_cosignatures: Option<Vec<Signature>>,
    /// A registry layer's SHA-256 (its descriptor's digest), known before its bytes: the
    /// layer's stream fails before its end unless its bytes have that digest, so a bundle that
    /// passes has it and is not hashed a second time on the decoding thread (that took 0.35 s
    /// of CPU per 728 MB on the pull with attestations).
    layer_sha256: Option<[u8; 32]>,
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
        let state = opts.state.as_deref().map(StateFile::open).transpose()?;
        let attestations = opts.attest.files.iter().map(|p| read_attestation(p)).collect::<Result<_, _>>()?;
        // The policy chain is followed once, under the state file's lock.
        let policy = opts.policy.as_ref().map(|p| {
            let seen = state.as_ref().and_then(|s| s.state.policy_version(&p.pin.policy.id));
            chain::follow(p.pin.clone(), p.updates.clone(), opts.now, seen)
        });
        let attest_keys = match &policy {
            Some(Ok((p, _))) => crate::trust_policy::keys::with_policy(&opts.keys, p, opts.now),
            _ => opts.keys.clone(),
        };
        Ok(Gate {
            opts,
            baseline,
            state,
            attestations,
            judged: None,
            policy,
            attest_keys,
            registry_cosignatures: None,
            layer_sha256: None,
        })
    }

    /// Judges attestations fetched from a registry against the bundle's SHA-256 (the layer
    /// digest its manifest names), before the layer is downloaded: `Some` is the refusal.
    /// [`Gate::run`] then finishes the judgement (key scopes, the contract) on the bundle.
    pub fn judge_before(&mut self, fetched: Vec<(String, Vec<u8>)>, sha256: &str) -> Option<Rejection> {
        self.attestations.extend(fetched);
        if self.attestations.is_empty() && !self.opts.attest.policy.needs_provenance() {
            return None;
        }
        let (judged, rejection) = judge::judge(&self.attestations, sha256, &self.attest_keys, &self.opts.attest.policy);
        self.judged = Some(judged);
        rejection
    }

    /// The verdict on a registry artifact refused before its layer was fetched, with the
    /// attestations judged by then.
    pub fn refused_before(&mut self, rejection: Rejection) -> Verdict {
        let mut verdict = Verdict::refused(rejection);
        if let Verdict::Refused { attestations, .. } = &mut verdict {
            *attestations = self.judged.take().unwrap_or_default();
        }
        verdict
    }

    /// What the registry holds about a bundle, judged before its layer is fetched (the
    /// registry client's hook, `crate::oci::open_layer_judged`): the co-signatures, which
    /// under a trust policy must be able to meet its rules (see
    /// [`crate::trust_policy::bound`]), then the attestations ([`Gate::judge_before`]).
    pub fn before_layer(&mut self, before: BeforeLayer) -> Result<(), Rejection> {
        let mut digest = [0u8; 32];
        self.layer_sha256 = hex::decode_to_slice(&before.sha256, &mut digest).ok().map(|()| digest);
        let (mut attestations, mut cosignatures) = (Vec::new(), Vec::new());
        for found in before.referrers {
            if found.artifact_type == signatures::COSIGNATURE_ARTIFACT_TYPE {
                // Without a trust policy co-signatures are not read, as beside a file.
                if self.opts.policy.is_none() {
                    continue;
                }
                let text = String::from_utf8_lossy(&found.bytes);
                let parsed = signatures::parse(&text).map_err(|why| {
                    Rejection::new(Reason::BadSignature, Some(&found.source), format!("{}: {why}", found.source))
                })?;
                cosignatures.extend(parsed);
            } else {
                attestations.push((found.source, found.bytes));
            }
        }
        if let (Some(Ok((policy, _))), Some(config)) = (&self.policy, &before.config)
            && let Some(agent) = &config.name
            && self.needs_config()
            && let Some((refusal, message)) = bound::shortfall(
                policy,
                bound::Claimed {
                    agent,
                    version: config.version.as_deref(),
                    pack_key_id: config.key_id.as_deref(),
                    keyless: self.opts.policy.as_ref().is_some_and(|p| !p.sigstore.is_empty()),
                },
                &cosignatures,
                self.opts.now,
            )
        {
            let mut r = Rejection::new(verify::reason_of(refusal), None, message);
            r.agent = Some((agent.clone(), config.version.clone().unwrap_or_default()));
            return Err(r);
        }
        self.registry_cosignatures = Some(cosignatures);
        self.judge_before(attestations, &before.sha256).map_or(Ok(()), Err)
    }

    /// Whether [`Gate::before_layer`] needs the registry artifact's config: under a trust
    /// policy whose rules are enforced, the agent it names picks the rules the registry's
    /// co-signatures are held to before the layer is fetched.
    pub fn needs_config(&self) -> bool {
        matches!(self.policy, Some(Ok(_))) && self.opts.policy.as_ref().is_some_and(|p| p.require_threshold)
    }

    /// Whether this gate judges attestations for a bundle at `origin`: files given, found
    /// beside it, or required by the policy. Discovered files are read here.
    fn collect_attestations(&mut self, origin: &Path) -> Result<bool, GateError> {
        if self.opts.attest.discover && self.opts.attest.files.is_empty() && self.judged.is_none() && origin.is_file() {
            for path in evidence::files::discover(origin) {
                self.attestations.push(read_attestation(&path)?);
            }
        }
        Ok(self.judged.is_some() || !self.attestations.is_empty() || self.opts.attest.policy.needs_provenance())
    }

    /// The chain of policy versions followed (with `--trust-policy`), or why it broke.
    pub fn policy_chain(&self) -> Option<&ChainReport> {
        self.policy.as_ref().map(|f| match f {
            Ok((_, report)) => report,
            Err(e) => &e.report,
        })
    }

    /// The co-signatures of the bundle at `origin`: the files given, or `<origin>.cosig` when
    /// it exists. A file that is not a list of minisign signatures refuses the bundle.
    fn cosignatures(&self, origin: &Path) -> Result<Vec<Signature>, Rejection> {
        let Some(p) = &self.opts.policy else { return Ok(Vec::new()) };
        let beside = signatures::cosig_path(origin);
        let files: Vec<PathBuf> = if self.registry_cosignatures.is_some() {
            p.cosignatures.clone()
        } else if p.cosignatures.is_empty() {
            beside.is_file().then_some(beside).into_iter().collect()
        } else {
            p.cosignatures.clone()
        };
        let mut all = self.registry_cosignatures.clone().unwrap_or_default();
        for file in files {
            let shown = file.display().to_string();
            let text =
                regular_file::read_to_string(&file, signatures::MAX_SIGNATURES_BYTES, Links::Follow).map_err(|e| {
                    Rejection::new(Reason::IoError, Some(&shown), format!("cannot read {shown}: {}", e.into_io()))
                })?;
            let found = signatures::parse(&text)
                .map_err(|why| Rejection::new(Reason::BadSignature, Some(&shown), format!("{shown}: {why}")))?;
            all.extend(found);
        }
        Ok(all)
    }

    /// The keyless signatures offered to the trust policy's identity signers for the bundle at
    /// `origin`, each verified over the digest it names under the policy's trusted root: the
    /// files given, or `<origin>.sigstore.json` when it exists. A file that cannot be read
    /// refuses the bundle; one that does not verify is an offer that will not count.
    fn keyless_offers(
        &self,
        policy: &TrustPolicy,
        origin: &Path,
    ) -> Result<Result<Vec<KeylessOffer>, Rejection>, GateError> {
        let Some(p) = &self.opts.policy else { return Ok(Ok(Vec::new())) };
        let beside = keyless_path(origin);
        let files: Vec<PathBuf> = if p.sigstore.is_empty() {
            beside.is_file().then_some(beside).into_iter().collect()
        } else {
            p.sigstore.clone()
        };
        if files.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let Some(root) = &policy.trusted_root else {
            if p.sigstore.is_empty() {
                // Found beside the bundle, but no identity may sign: nothing could count.
                return Ok(Ok(Vec::new()));
            }
            return Err(crate::Error::Usage(format!(
                "--sigstore: trust policy `{}` version {} names no trusted root and no certificate-identity signer; add them ([sigstore], `bundle trust import-root`) or drop --sigstore",
                policy.id, policy.version
            ))
            .into());
        };
        let mut offers = Vec::with_capacity(files.len());
        for file in files {
            let shown = file.display().to_string();
            let bundle = match crate::keyless::SigstoreBundle::read(&file) {
                Ok(b) => b,
                Err(e) => {
                    let message = format!("cannot read {shown}: {e}");
                    return Ok(Err(Rejection::new(Reason::IoError, Some(&shown), message)));
                }
            };
            offers.push(KeylessOffer { source: shown, result: crate::keyless::verify_claimed(root, &bundle) });
        }
        Ok(Ok(offers))
    }

    /// Judges the bundle read from `input`, streaming its entries into `sink`. `origin` names
    /// the bundle in messages (a path, or a registry reference).
    ///
    /// Contract: `input` is read once, front to back, and not necessarily to its end (a
    /// rejection stops reading). Nothing written to `sink` may be used unless the verdict is
    /// [`Verdict::Passed`]; the gate calls [`Sink::commit`] only then, and only after the
    /// baseline check, then records the bundle in the state file. A commit or record failure
    /// is a [`GateError`]. A caller that buffers `input` elsewhere (a temp file of a download)
    /// may use that copy only after `Passed`.
    pub fn run(mut self, input: impl BufRead, origin: &Path, sink: &mut dyn Sink) -> Result<Verdict, GateError> {
        let attesting = self.collect_attestations(origin)?;
        let expect = Expect {
            name: self.opts.name.as_deref(),
            now: Some(self.opts.now),
            state: self.state.as_ref().map(|s| &s.state),
            min_version: self.opts.min_version.as_ref(),
        };
        let cosignatures = match self.cosignatures(origin) {
            Ok(c) => c,
            Err(rejection) => return Ok(Verdict::refused(rejection)),
        };
        let offers = match &self.policy {
            Some(Ok((policy, _))) => match self.keyless_offers(policy, origin)? {
                Ok(offers) => offers,
                Err(rejection) => return Ok(Verdict::refused(rejection)),
            },
            _ => Vec::new(),
        };
        let enforce = self.opts.policy.as_ref().is_none_or(|p| p.require_threshold);
        let trust = match &self.policy {
            None => Trust::Keys(&self.opts.keys),
            Some(Ok((policy, _))) => Trust::Policy(PolicyTrust {
                policy,
                cosignatures: &cosignatures,
                now: self.opts.now,
                enforce,
                keyless: &offers,
            }),
            // No version of the policy can be followed: nothing is trusted.
            Some(Err(e)) => return Ok(Verdict::refused(chain_rejection(e))),
        };
        // The file's SHA-256, in the same pass, when attestations or a keyless signature name it
        // (a registry layer's is known already).
        let hash = self.layer_sha256.is_none() && (attesting || self.opts.keyless.is_some() || !offers.is_empty());
        let mut input = Sha256Read::new(input, hash);
        let mut verified = match verify::verify(&mut input, trust, &expect, sink) {
            Ok(v) => v,
            Err(refused) => return Ok(Verdict::refused(refused)),
        };
        let sha256 = input.finish().map_err(|e| crate::Error::io(origin, e))?.or(self.layer_sha256);
        if let (Some(Ok((policy, _))), Some(sha256)) = (&self.policy, &sha256)
            && !offers.is_empty()
            && let Err(refused) = bind_keyless(policy, &mut verified, sha256, enforce)
        {
            return Ok(Verdict::refused(refused));
        }
        let mut attestations = Vec::new();
        if attesting && let Some(sha256) = &sha256 {
            match self.judge_attestations(&verified, origin, &evidence::hex(sha256)) {
                Ok(judged) => attestations = judged,
                Err(refused) => return Ok(refused),
            }
        }
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
            if let Some(Ok((policy, _))) = &self.policy {
                state.record_policy(&policy.id, policy.version).map_err(GateError::Record)?;
            }
        }
        sink.commit()?;
        Ok(Verdict::Passed { verified: Box::new(verified), baseline: report, keyless, attestations, sha256 })
    }

    /// With `--sigstore`: the keyless signature over the whole file, whose SHA-256 the gate
    /// computed while verifying it.
    fn judge_keyless(&self, sha256: Option<[u8; 32]>, v: &Verified) -> Result<Option<KeylessSigner>, Rejection> {
        let (Some(required), Some(sha256)) = (&self.opts.keyless, sha256) else { return Ok(None) };
        required.judge(sha256).map(Some).map_err(|mut r| {
            r.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            r.key_id = Some(v.key_id.clone());
            r
        })
    }

    /// Both steps of the attestation judgement on a verified bundle whose file has `sha256`.
    fn judge_attestations(&mut self, v: &Verified, origin: &Path, sha256: &str) -> Result<Vec<Judged>, Verdict> {
        let (mut judged, early) = match self.judged.take() {
            Some(judged) => (judged, None),
            None => judge::judge(&self.attestations, sha256, &self.attest_keys, &self.opts.attest.policy),
        };
        let refuse = |mut r: Rejection, judged: Vec<Judged>| {
            r.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            r.key_id = Some(v.key_id.clone());
            Verdict::Refused { rejection: r, baseline: None, signers: None, attestations: judged }
        };
        if let Some(r) = early {
            return Err(refuse(r, judged));
        }
        let contracts = release::from_verified(v, origin).map_err(|e| e.to_string());
        let expected = contracts.map(|c| evidence::contract::predicate(&c, &v.manifest_blake3));
        match judge::judge_with_bundle(
            &mut judged,
            &v.manifest.name,
            &self.attest_keys,
            expected.as_ref().map_err(Clone::clone),
        ) {
            Some(r) => Err(refuse(r, judged)),
            None => Ok(judged),
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
        let findings = baseline::judge(approved, &agent, path)?;
        let rejection = findings.rejection(path);
        let report = BaselineReport { file: path.clone(), findings };
        Ok(match rejection {
            Some(r) => Err(refuse(r, Some(report))),
            None => Ok(Some(report)),
        })
    }
}

/// Where a keyless signature of a bundle file is looked for: `<bundle>.sigstore.json` beside it
/// (the name `sigstore sign` gives it).
pub fn keyless_path(bundle: &Path) -> PathBuf {
    let mut name = bundle.as_os_str().to_owned();
    name.push(".sigstore.json");
    name.into()
}

/// Once the file is read: keyless signatures that do not sign this file no longer count, and
/// the rules are judged again (refused when they are no longer met and `enforce`).
fn bind_keyless(policy: &TrustPolicy, v: &mut Verified, sha256: &[u8; 32], enforce: bool) -> Result<(), Refused> {
    let Some(signers) = v.signers.as_mut() else { return Ok(()) };
    trust_policy::judge::bind_file(policy, signers, &v.manifest.name, sha256);
    // Even unenforced (`bundle cosign`), the manifest was believed on a signature that must
    // still stand.
    let enforce = enforce || !signers.any_authenticated();
    let Some((refusal, message)) = signers.refusal().filter(|_| enforce) else { return Ok(()) };
    let mut r = verify::policy_rejection(refusal, message, signers.clone());
    r.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
    r.key_id = Some(v.key_id.clone());
    Err(r)
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

/// Reads one attestation file within the cap (a larger one is read no further and refused by
/// the judgement as too large).
fn read_attestation(path: &Path) -> Result<(String, Vec<u8>), GateError> {
    use std::io::Read as _;
    // Only a regular file: a FIFO or device named as an attestation is refused unread.
    let file = crate::regular_file::open(path, crate::regular_file::Links::Follow)
        .map_err(|e| crate::Error::io(path, e.into_io()))?;
    let mut bytes = Vec::new();
    file.take(crate::attest::MAX_ATTESTATION_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| crate::Error::io(path, e))?;
    Ok((path.display().to_string(), bytes))
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

/// Opens a gate and judges one bundle with it: [`Gate::open`] then [`Gate::run`].
pub fn gate(input: impl BufRead, origin: &Path, opts: GateOptions, sink: &mut dyn Sink) -> Result<Verdict, GateError> {
    Gate::open(opts)?.run(input, origin, sink)
}

#[cfg(test)]
mod tests;
