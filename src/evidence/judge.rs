//! The gate's judgement of attestations: each is read within the caps, its envelope's
//! signatures checked against the trusted keys, its subject against the bundle's SHA-256, its
//! predicate against the policy flags (provenance) or the bundle's own tools (contract). Every
//! attestation is judged and listed; the first problem is the rejection.
//!
//! In two steps, so that a registry can refuse a release before its layer moves:
//! [`judge`] needs only the bundle's SHA-256 (a registry manifest names it);
//! [`judge_with_bundle`] needs the verified bundle (its agent name, for key scopes, and its
//! tool contracts).

use serde::Serialize;
use serde_json::Value;
use sha2::Digest as _;

use super::files::Kind;
use super::provenance::split_source_uri;
use crate::attest::{FormatError, SignatureCheck, SigstoreBundle};
use crate::rejection::{Reason, Rejection};
use crate::trust::TrustedKeys;

/// What the gate requires of attestations (each an exact match).
#[derive(Debug, Clone, Default)]
pub struct AttestPolicy {
    /// `--require-provenance`: a trusted SLSA provenance about this bundle must be there.
    pub require_provenance: bool,
    /// `--source-repo`: the provenance's source repository (its `git+` URI without `@ref`).
    pub source_repo: Option<String>,
    /// `--source-ref`: the ref after `@` in the source URI (`refs/heads/main`).
    pub source_ref: Option<String>,
    /// `--builder-id`: `runDetails.builder.id`.
    pub builder_id: Option<String>,
}

impl AttestPolicy {
    /// Whether any provenance is required (any flag implies it).
    pub fn needs_provenance(&self) -> bool {
        self.require_provenance || self.source_repo.is_some() || self.source_ref.is_some() || self.builder_id.is_some()
    }
}

/// One attestation as judged: only a report (listed in JSON verdicts and by `inspect`).
#[derive(Debug, Clone, Serialize)]
pub struct Judged {
    /// The file, or the registry digest, it came from.
    pub source: String,
    pub predicate_type: Option<String>,
    /// Key ids whose signatures verified with a trusted key.
    pub signers: Vec<String>,
    /// Key ids of signatures by keys that are not trusted.
    pub untrusted_signers: Vec<String>,
    pub subject_matches: bool,
    /// Provenance: `runDetails.builder.id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub builder: Option<String>,
    /// Provenance: the first resolved dependency's URI (the source).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_uri: Option<String>,
    /// `ok` (`None`), or the reason code of the first problem found.
    #[serde(serialize_with = "ok_or_code")]
    pub verdict: Option<Reason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn ok_or_code<S: serde::Serializer>(verdict: &Option<Reason>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(verdict.map_or("ok", Reason::as_str))
}

impl Judged {
    fn new(source: &str) -> Self {
        Judged {
            source: source.to_owned(),
            predicate_type: None,
            signers: Vec::new(),
            untrusted_signers: Vec::new(),
            subject_matches: false,
            builder: None,
            source_uri: None,
            verdict: None,
            message: None,
        }
    }

    /// The verdict's code as printed: `ok`, or the reason.
    pub fn verdict_code(&self) -> &'static str {
        self.verdict.map_or("ok", Reason::as_str)
    }

    pub fn is_ok(&self) -> bool {
        self.verdict.is_none()
    }

    pub fn kind(&self) -> Option<Kind> {
        self.predicate_type.as_deref().and_then(Kind::of_predicate_type)
    }
}

/// One attestation being judged: its report so far, and what the judgement still needs.
#[derive(Debug, Clone)]
pub struct Attestation {
    pub report: Judged,
    /// The SHA-256 of its bytes (a verification summary's `inputAttestations`).
    pub sha256: [u8; 32],
    /// A contract's predicate, held until it is compared with the bundle's own tools (a
    /// provenance's statement is dropped once judged, so that hundreds are never held at once).
    contract: Option<Value>,
}

impl Attestation {
    fn refuse(&mut self, reason: Reason, message: String) {
        if self.report.verdict.is_none() {
            self.report.verdict = Some(reason);
            self.report.message = Some(message);
        }
    }

    pub fn is_ok(&self) -> bool {
        self.report.is_ok()
    }

    pub fn kind(&self) -> Option<Kind> {
        self.report.kind()
    }
}

/// The reports of attestations judged (for serialising a verdict's list).
pub fn reports<S: serde::Serializer>(judged: &[Attestation], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(judged.iter().map(|a| &a.report))
}

fn format_reason(e: &FormatError) -> Reason {
    match e {
        FormatError::PayloadType { .. } => Reason::AttestationPayloadType,
        _ => Reason::AttestationMalformed,
    }
}

/// Reads and judges one attestation against the bundle's SHA-256 (lowercase hex).
pub fn judge_one(source: &str, bytes: &[u8], sha256: &str, keys: &TrustedKeys, policy: &AttestPolicy) -> Attestation {
    let mut judged =
        Attestation { report: Judged::new(source), sha256: sha2::Sha256::digest(bytes).into(), contract: None };
    let bundle = match SigstoreBundle::from_json(bytes) {
        Ok(b) => b,
        Err(e) => {
            judged.refuse(format_reason(&e), format!("{source}: {e}"));
            return judged;
        }
    };
    let statement = match bundle.statement() {
        Ok(s) => s,
        Err(e) => {
            judged.refuse(format_reason(&e), format!("{source}: {e}"));
            return judged;
        }
    };
    judged.report.predicate_type = Some(statement.predicate_type.clone());
    let trusted: Vec<_> = keys.keys.iter().map(|k| k.key).collect();
    for check in bundle.dsse_envelope.check_signatures(&trusted) {
        match check {
            SignatureCheck::Verified { key_id } if !judged.report.signers.contains(&key_id) => {
                judged.report.signers.push(key_id)
            }
            SignatureCheck::UntrustedKey { key_id } => judged.report.untrusted_signers.push(key_id),
            _ => {}
        }
    }
    judged.report.subject_matches = statement.has_sha256(sha256);
    if judged.report.signers.is_empty() {
        if judged.report.untrusted_signers.len() == bundle.dsse_envelope.signatures.len() {
            let ids = judged.report.untrusted_signers.join(", ");
            judged
                .refuse(Reason::AttestationUntrusted, format!("{source}: signed by {ids}, not among the trusted keys"));
        } else {
            judged.refuse(
                Reason::AttestationUnsigned,
                format!("{source}: no signature verifies with a trusted key (tampered?)"),
            );
        }
    }
    let Some(kind) = Kind::of_predicate_type(&statement.predicate_type) else {
        judged.refuse(
            Reason::AttestationPredicateType,
            format!(
                "{source}: predicate type {:?} is neither SLSA Provenance v1 nor the agent contract",
                statement.predicate_type
            ),
        );
        return judged;
    };
    if !judged.report.subject_matches {
        let names: Vec<_> = statement.subject.iter().map(|s| s.name.as_str()).collect();
        judged.refuse(
            Reason::AttestationSubjectMismatch,
            format!("{source}: its subject ({}) is not the bundle: no sha256 {sha256}", names.join(", ")),
        );
    }
    if kind == Kind::Provenance {
        judge_provenance(&mut judged, &statement.predicate, policy);
    }
    // Only a contract is judged again once the bundle is read (against its own tools).
    if kind == Kind::Contract {
        judged.contract = Some(statement.predicate);
    }
    judged
}

fn judge_provenance(judged: &mut Attestation, predicate: &Value, policy: &AttestPolicy) {
    let report = &mut judged.report;
    report.builder = predicate.pointer("/runDetails/builder/id").and_then(Value::as_str).map(str::to_owned);
    report.source_uri =
        predicate.pointer("/buildDefinition/resolvedDependencies/0/uri").and_then(Value::as_str).map(str::to_owned);
    let uri = report.source_uri.clone().unwrap_or_default();
    let (repo, reference) = split_source_uri(&uri);
    let builder = report.builder.clone().unwrap_or_default();
    // Named without the command line's flags: the Python package says `builder_id=`.
    let checks = [
        ("source repository", &policy.source_repo, repo),
        ("source ref", &policy.source_ref, reference),
        ("builder id", &policy.builder_id, builder.as_str()),
    ];
    for (what, wanted, found) in checks {
        if let Some(wanted) = wanted
            && found != wanted
        {
            let message =
                format!("{}: the provenance's {what} is {found:?}, not the required {wanted:?}", judged.report.source);
            judged.refuse(Reason::ProvenanceMismatch, message);
            return;
        }
    }
}

/// Judges every attestation; `Err` is the rejection (the first problem, in input order, or a
/// missing provenance the policy requires).
pub fn judge(
    attestations: &[(String, Vec<u8>)],
    sha256: &str,
    keys: &TrustedKeys,
    policy: &AttestPolicy,
) -> (Vec<Attestation>, Option<Rejection>) {
    let judged: Vec<Attestation> = attestations.iter().map(|(s, b)| judge_one(s, b, sha256, keys, policy)).collect();
    let rejection = conclude(&judged, policy);
    (judged, rejection)
}

/// The rejection of attestations judged one by one ([`judge_one`]): the first problem, in
/// input order, or a missing provenance the policy requires.
pub fn conclude(judged: &[Attestation], policy: &AttestPolicy) -> Option<Rejection> {
    first_problem(judged).or_else(|| {
        (policy.needs_provenance() && !judged.iter().any(|j| j.kind() == Some(Kind::Provenance))).then(|| {
            Rejection::new(
                Reason::AttestationMissing,
                None,
                "no SLSA provenance attestation about this bundle, and the gate requires one; pack with --attest, or give it with --attestation",
            )
        })
    })
}

/// The second step, once the bundle is verified: each signer must be trusted for this agent
/// name, and the contract attestation must say exactly `expected_contract`.
pub fn judge_with_bundle(
    judged: &mut [Attestation],
    agent: &str,
    keys: &TrustedKeys,
    expected_contract: Result<&Value, String>,
) -> Option<Rejection> {
    for j in judged.iter_mut().filter(|j| j.is_ok()) {
        let scoped: Vec<String> = j
            .report
            .signers
            .iter()
            .filter(|id| keys.keys.iter().any(|k| &k.key.key_id_hex() == *id && k.may_sign(agent)))
            .cloned()
            .collect();
        if scoped.is_empty() {
            let message = format!(
                "{}: signed by {}, not trusted for agent `{agent}`",
                j.report.source,
                j.report.signers.join(", ")
            );
            j.refuse(Reason::AttestationUntrusted, message);
            continue;
        }
        if j.kind() == Some(Kind::Contract) {
            let said = j.contract.as_ref();
            match &expected_contract {
                Ok(expected) if said == Some(*expected) => {}
                Ok(_) => {
                    let message = format!(
                        "{}: the contract attestation differs from the bundle's tools.json and policy.caps",
                        j.report.source
                    );
                    j.refuse(Reason::AttestationContractMismatch, message);
                }
                Err(e) => {
                    let message = format!("{}: cannot compute the bundle's contracts to compare: {e}", j.report.source);
                    j.refuse(Reason::AttestationContractMismatch, message);
                }
            }
        }
    }
    first_problem(judged)
}

fn first_problem(judged: &[Attestation]) -> Option<Rejection> {
    judged
        .iter()
        .map(|j| &j.report)
        .find_map(|j| j.verdict.map(|reason| Rejection::new(reason, None, j.message.clone().unwrap_or_default())))
}

/// For `inspect`: each attestation judged against the bundle's SHA-256 with `keys` (none: every
/// signer shows as unchecked), without a policy, and — when the bundle was read — its agent
/// and contract.
pub fn describe(
    attestations: &[(String, Vec<u8>)],
    sha256: &str,
    keys: Option<&TrustedKeys>,
    bundle: Option<(&str, Result<&Value, String>)>,
) -> Vec<Judged> {
    let none = TrustedKeys::default();
    let keys = keys.unwrap_or(&none);
    let (mut judged, _) = judge(attestations, sha256, keys, &AttestPolicy::default());
    if let Some((agent, contract)) = bundle
        && !keys.keys.is_empty()
    {
        judge_with_bundle(&mut judged, agent, keys, contract);
    }
    judged.into_iter().map(|a| a.report).collect()
}
