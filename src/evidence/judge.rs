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

use super::files::Kind;
use super::provenance::split_source_uri;
use crate::attest::{FormatError, SignatureCheck, SigstoreBundle, Statement};
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

/// One attestation as judged (listed in JSON verdicts and by `inspect`).
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
    /// `ok`, or the reason code.
    pub verdict: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip)]
    statement: Option<Statement>,
    #[serde(skip)]
    reason: Option<Reason>,
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
            verdict: "ok".into(),
            message: None,
            statement: None,
            reason: None,
        }
    }

    fn refuse(&mut self, reason: Reason, message: String) {
        if self.reason.is_none() {
            self.verdict = reason.as_str().to_owned();
            self.message = Some(message);
            self.reason = Some(reason);
        }
    }

    pub fn is_ok(&self) -> bool {
        self.reason.is_none()
    }

    pub fn kind(&self) -> Option<Kind> {
        self.predicate_type.as_deref().and_then(Kind::of_predicate_type)
    }
}

fn format_reason(e: &FormatError) -> Reason {
    match e {
        FormatError::PayloadType { .. } => Reason::AttestationPayloadType,
        _ => Reason::AttestationMalformed,
    }
}

/// Reads and judges one attestation against the bundle's SHA-256 (lowercase hex).
pub fn judge_one(source: &str, bytes: &[u8], sha256: &str, keys: &TrustedKeys, policy: &AttestPolicy) -> Judged {
    let mut judged = Judged::new(source);
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
    judged.predicate_type = Some(statement.predicate_type.clone());
    let trusted: Vec<_> = keys.keys.iter().map(|k| k.key).collect();
    for check in bundle.dsse_envelope.check_signatures(&trusted) {
        match check {
            SignatureCheck::Verified { key_id } if !judged.signers.contains(&key_id) => judged.signers.push(key_id),
            SignatureCheck::UntrustedKey { key_id } => judged.untrusted_signers.push(key_id),
            _ => {}
        }
    }
    judged.subject_matches = statement.has_sha256(sha256);
    if judged.signers.is_empty() {
        if judged.untrusted_signers.len() == bundle.dsse_envelope.signatures.len() {
            let ids = judged.untrusted_signers.join(", ");
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
    if !judged.subject_matches {
        let names: Vec<_> = statement.subject.iter().map(|s| s.name.as_str()).collect();
        judged.refuse(
            Reason::AttestationSubjectMismatch,
            format!("{source}: its subject ({}) is not the bundle: no sha256 {sha256}", names.join(", ")),
        );
    }
    if kind == Kind::Provenance {
        judge_provenance(&mut judged, &statement.predicate, policy);
    }
    judged.statement = Some(statement);
    judged
}

fn judge_provenance(judged: &mut Judged, predicate: &Value, policy: &AttestPolicy) {
    judged.builder = predicate.pointer("/runDetails/builder/id").and_then(Value::as_str).map(str::to_owned);
    judged.source_uri =
        predicate.pointer("/buildDefinition/resolvedDependencies/0/uri").and_then(Value::as_str).map(str::to_owned);
    let uri = judged.source_uri.clone().unwrap_or_default();
    let (repo, reference) = split_source_uri(&uri);
    let builder = judged.builder.clone().unwrap_or_default();
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
                format!("{}: the provenance's {what} is {found:?}, not the required {wanted:?}", judged.source);
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
) -> (Vec<Judged>, Option<Rejection>) {
    let judged: Vec<Judged> = attestations.iter().map(|(s, b)| judge_one(s, b, sha256, keys, policy)).collect();
    let rejection = first_problem(&judged).or_else(|| {
        (policy.needs_provenance() && !judged.iter().any(|j| j.kind() == Some(Kind::Provenance))).then(|| {
            Rejection::new(
                Reason::AttestationMissing,
                None,
                "no SLSA provenance attestation about this bundle, and the gate requires one; pack with --attest, or give it with --attestation",
            )
        })
    });
    (judged, rejection)
}

/// The second step, once the bundle is verified: each signer must be trusted for this agent
/// name, and the contract attestation must say exactly `expected_contract`.
pub fn judge_with_bundle(
    judged: &mut [Judged],
    agent: &str,
    keys: &TrustedKeys,
    expected_contract: Result<&Value, String>,
) -> Option<Rejection> {
    for j in judged.iter_mut().filter(|j| j.is_ok()) {
        let scoped: Vec<String> = j
            .signers
            .iter()
            .filter(|id| keys.keys.iter().any(|k| &k.key.key_id_hex() == *id && k.may_sign(agent)))
            .cloned()
            .collect();
        if scoped.is_empty() {
            let message = format!("{}: signed by {}, not trusted for agent `{agent}`", j.source, j.signers.join(", "));
            j.refuse(Reason::AttestationUntrusted, message);
            continue;
        }
        if j.kind() == Some(Kind::Contract) {
            let said = j.statement.as_ref().map(|s| &s.predicate);
            match &expected_contract {
                Ok(expected) if said == Some(*expected) => {}
                Ok(_) => {
                    let message = format!(
                        "{}: the contract attestation differs from the bundle's tools.json and policy.caps",
                        j.source
                    );
                    j.refuse(Reason::AttestationContractMismatch, message);
                }
                Err(e) => {
                    let message = format!("{}: cannot compute the bundle's contracts to compare: {e}", j.source);
                    j.refuse(Reason::AttestationContractMismatch, message);
                }
            }
        }
    }
    first_problem(judged)
}

fn first_problem(judged: &[Judged]) -> Option<Rejection> {
    judged
        .iter()
        .find_map(|j| j.reason.map(|reason| Rejection::new(reason, None, j.message.clone().unwrap_or_default())))
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
    judged
}
