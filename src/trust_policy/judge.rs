//! Judging a bundle's signatures under a trust policy: which signer made each one, whether it
//! counts and why not, and whether every rule for the agent is met.
//!
//! Two steps, because the manifest may be believed only once a trusted key signed it:
//! [`authenticate`] checks each signature cryptographically over the manifest's bytes (no
//! agent name needed); [`judge`] then applies what depends on the agent: the trusted comment,
//! revocation, validity windows, agent patterns, distinct signers, and the rules.
//!
//! Windows are judged at the verifier's clock: a minisign signature carries no trusted time,
//! so "inside its window" means "the key is valid now", as for an X.509 certificate checked
//! without a timestamp. Identity signers' windows are judged the same way, so that the two
//! kinds of signer mean the same thing by them.
//!
//! Keyless signatures (a Sigstore bundle over the bundle file) are verified before the file
//! is read, over the SHA-256 they say they sign ([`crate::keyless::verify_claimed`]), so that
//! a CI identity can authenticate the manifest like a key; once the file has been read,
//! [`bind_file`] withdraws any that signs another file and tallies the rules again.

use serde::Serialize;

use super::format::TrustPolicy;
use crate::keyless::Claimed;
use crate::minisign::Signature;
use crate::rejection::{Reason, Rejection};
use crate::timestamp::Timestamp;

crate::codes::stable_codes! {
    /// What became of one signature under a trust policy. The string forms are stable.
    pub enum SignatureStatus;
    Counted => "counted": "The signature verifies, by a signer of the policy that may sign this agent now; it counts.",
    UnknownKey => "unknown_key": "No signer of the policy has the signature's key id.",
    BadSignature => "bad_signature": "The signature does not verify with the policy's key of that id.",
    CommentMismatch => "comment_mismatch": "The signature verifies but its trusted comment names another agent or version.",
    Revoked => "revoked": "The signer (key or certificate identity) is revoked in the policy; its signatures never count.",
    OutsideWindow => "outside_window": "The verifier's clock is before the signer's not_before or after its not_after.",
    NotForAgent => "not_for_agent": "The signer may sign only agents matching other patterns.",
    DuplicateKey => "duplicate_key": "Another signature by the same signer was already counted; a signer counts once.",
    UnknownIdentity => "unknown_identity": "A keyless signature verifies under the policy's trusted root, but no certificate-identity signer of the policy matches its identity, issuer and workflow claims.",
    KeylessInvalid => "keyless_invalid": "A keyless signature does not verify under the policy's trusted root; `code` is the keyless_* reason.",
    SubjectMismatch => "subject_mismatch": "A keyless signature verifies, but over another file: the bundle file's sha256 is not the one it signs.",
}

/// One signature, as the verdict reports it.
#[derive(Debug, Clone, Serialize)]
pub struct SignatureVerdict {
    /// Where it was found: `manifest.toml.minisig` (the pack signature), `cosig:N`, or a
    /// Sigstore bundle file (a keyless signature).
    pub source: String,
    /// The minisign key id (empty for a keyless signature).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key_id: String,
    /// A keyless signature's certificate identity (SAN) and OIDC issuer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// A keyless signature's verified signing time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_at: Option<String>,
    /// The policy's name for the signer, when the policy knows it.
    pub signer: Option<String>,
    pub roles: Vec<String>,
    pub status: SignatureStatus,
    /// With `keyless_invalid`: the reason the keyless signature failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<Reason>,
    pub counted: bool,
    /// Why it does not count, in words (empty when counted).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// The signers it verifies as (a key: one; a certificate may match several identities).
    #[serde(skip)]
    candidates: Vec<usize>,
    /// The signer it counted as.
    #[serde(skip)]
    signer_index: Option<usize>,
    /// A keyless signature's signed SHA-256 digests (empty for a minisign signature).
    #[serde(skip)]
    subjects: Vec<[u8; 32]>,
    /// A minisign signature's trusted comment (`None` for a keyless signature, which covers the
    /// whole file and so the manifest's name and version).
    #[serde(skip)]
    comment: Option<String>,
}

impl SignatureVerdict {
    fn new(source: &str, status: SignatureStatus, why: String) -> Self {
        SignatureVerdict {
            source: source.to_owned(),
            key_id: String::new(),
            identity: None,
            issuer: None,
            signed_at: None,
            signer: None,
            roles: Vec::new(),
            status,
            code: None,
            counted: false,
            why,
            candidates: Vec::new(),
            signer_index: None,
            subjects: Vec::new(),
            comment: None,
        }
    }

    /// Whether this is a keyless (Sigstore) signature.
    pub fn is_keyless(&self) -> bool {
        self.key_id.is_empty()
    }
}

/// One rule's tally.
#[derive(Debug, Clone, Serialize)]
pub struct RuleVerdict {
    pub rule: String,
    pub needed: usize,
    pub counted: usize,
    /// Per role: (role, needed, counted).
    pub roles: Vec<RoleTally>,
    pub met: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RoleTally {
    pub role: String,
    pub needed: usize,
    pub counted: usize,
}

/// The policy's judgement of a bundle's signatures.
#[derive(Debug, Clone, Serialize)]
pub struct SignersVerdict {
    pub policy: String,
    pub policy_version: u64,
    pub signatures: Vec<SignatureVerdict>,
    pub rules: Vec<RuleVerdict>,
    pub accepted: bool,
}

/// Signatures checked over the manifest's bytes (and keyless ones over the digest they name),
/// before the manifest is believed.
#[derive(Debug)]
pub struct Authenticated {
    verdicts: Vec<SignatureVerdict>,
}

impl Authenticated {
    /// Whether at least one signature verifies as a signer of the policy: only then may the
    /// manifest be parsed and believed.
    pub fn any_verified(&self) -> bool {
        self.verdicts.iter().any(|v| !v.candidates.is_empty())
    }

    /// The verdicts so far (for a refusal before [`judge`]).
    pub fn verdicts(&self) -> &[SignatureVerdict] {
        &self.verdicts
    }
}

/// A keyless signature offered to the policy: where it came from, and its verification over
/// the digest it names (or why it failed).
#[derive(Debug, Clone)]
pub struct KeylessOffer {
    pub source: String,
    pub result: Result<Claimed, Rejection>,
}

/// Step 1: each minisign signature against the policy's keys of its id, each keyless one
/// against its identity signers.
pub fn authenticate(
    policy: &TrustPolicy,
    signatures: &[(String, &Signature)],
    data: &[u8],
    keyless: &[KeylessOffer],
) -> Authenticated {
    let mut verdicts = Vec::with_capacity(signatures.len() + keyless.len());
    for (source, sig) in signatures {
        let mut candidates = policy.with_key_id(sig.key_id()).peekable();
        let (status, found, why) = if candidates.peek().is_none() {
            (SignatureStatus::UnknownKey, None, "no signer of the policy has this key id".to_owned())
        } else {
            match candidates.find(|(_, s)| s.id.key().is_some_and(|k| sig.verify(k, data).is_ok())) {
                Some((i, _)) => (SignatureStatus::Counted, Some(i), String::new()),
                None => (SignatureStatus::BadSignature, None, "the signature does not verify".to_owned()),
            }
        };
        let mut v = SignatureVerdict::new(source, status, why);
        v.key_id = sig.key_id_hex();
        v.candidates = found.into_iter().collect();
        v.comment = Some(sig.trusted_comment().to_owned());
        name_signer(policy, &mut v, found);
        verdicts.push(v);
    }
    for offer in keyless {
        verdicts.push(keyless_verdict(policy, offer));
    }
    Authenticated { verdicts }
}

fn keyless_verdict(policy: &TrustPolicy, offer: &KeylessOffer) -> SignatureVerdict {
    let claimed = match &offer.result {
        Ok(c) => c,
        Err(r) => {
            let mut v = SignatureVerdict::new(&offer.source, SignatureStatus::KeylessInvalid, r.message.clone());
            v.code = Some(r.reason);
            return v;
        }
    };
    let k = &claimed.signer;
    let candidates = policy.identities_matching(&k.identity, &k.issuer, &claimed.claims);
    let (status, why) = if candidates.is_empty() {
        let why = format!(
            "no certificate-identity signer of the policy matches identity `{}` from issuer `{}` (and its workflow claims)",
            k.identity, k.issuer
        );
        (SignatureStatus::UnknownIdentity, why)
    } else {
        (SignatureStatus::Counted, String::new())
    };
    let mut v = SignatureVerdict::new(&offer.source, status, why);
    if candidates.is_empty() {
        v.code = Some(Reason::KeylessIdentityMismatch);
    }
    v.identity = Some(k.identity.clone());
    v.issuer = Some(k.issuer.clone());
    v.signed_at = k.signed_at.clone();
    v.subjects = claimed.subjects.clone();
    name_signer(policy, &mut v, candidates.first().copied());
    v.candidates = candidates;
    v
}

fn name_signer(policy: &TrustPolicy, v: &mut SignatureVerdict, signer: Option<usize>) {
    let s = signer.map(|i| &policy.signers[i]);
    v.signer = s.map(|s| s.name.clone());
    v.roles = s.map(|s| s.roles.clone()).unwrap_or_default();
}

/// Why signer `i` may not count this signature for `agent` now (`None`: it may).
fn refusal_for(
    policy: &TrustPolicy,
    i: usize,
    comment: Option<&str>,
    expected_comment: &str,
    agent: &str,
    now: Timestamp,
    counted: &[usize],
) -> Option<(SignatureStatus, String)> {
    let s = &policy.signers[i];
    let what = if s.id.key().is_some() { "key" } else { "identity" };
    if let Some(comment) = comment.filter(|c| *c != expected_comment) {
        Some((SignatureStatus::CommentMismatch, format!("its trusted comment is `{comment}`")))
    } else if s.revoked {
        Some((SignatureStatus::Revoked, format!("{what} `{}` is revoked", s.name)))
    } else if !s.in_window(now) {
        let from = s.not_before.map_or("any time".to_owned(), |t| t.to_string());
        let to = s.not_after.map_or("any time".to_owned(), |t| t.to_string());
        Some((
            SignatureStatus::OutsideWindow,
            format!("{what} `{}` is valid from {from} to {to}, not at {now}", s.name),
        ))
    } else if !s.may_sign(agent) {
        Some((SignatureStatus::NotForAgent, format!("{what} `{}` may sign only {}", s.name, s.agents.join(", "))))
    } else if counted.contains(&i) {
        Some((SignatureStatus::DuplicateKey, format!("{what} `{}` already counted once", s.name)))
    } else {
        None
    }
}

/// Step 2: what counts for `agent` with this trusted comment, and the rules' tallies.
///
/// A certificate may match several identity signers: if any of them is revoked it does not
/// count (a revocation cannot be side-stepped by a broader pattern); otherwise it counts once,
/// as the first of them (in file order) that may sign the agent now.
pub fn judge(
    policy: &TrustPolicy,
    auth: Authenticated,
    agent: &str,
    expected_comment: &str,
    now: Timestamp,
) -> SignersVerdict {
    let Authenticated { mut verdicts } = auth;
    let counted_signers = count(policy, &mut verdicts, agent, expected_comment, now);
    let rules = tally(policy, &counted_signers, agent);
    // No rule for the agent: nothing says who may release it, so nobody may (fail closed).
    let accepted = !rules.is_empty() && rules.iter().all(|r| r.met);
    SignersVerdict { policy: policy.id.clone(), policy_version: policy.version, signatures: verdicts, rules, accepted }
}

/// Counts each authenticated signature (one with candidate signers) as the first signer that
/// may count it; returns the signers counted. The others' statuses say why they do not count.
fn count(
    policy: &TrustPolicy,
    verdicts: &mut [SignatureVerdict],
    agent: &str,
    expected_comment: &str,
    now: Timestamp,
) -> Vec<usize> {
    let mut counted_signers: Vec<usize> = Vec::new();
    for v in verdicts.iter_mut() {
        if v.candidates.is_empty() {
            continue;
        }
        let refusals: Vec<Option<(SignatureStatus, String)>> = v
            .candidates
            .iter()
            .map(|&i| refusal_for(policy, i, v.comment.as_deref(), expected_comment, agent, now, &counted_signers))
            .collect();
        let revoked = refusals.iter().position(|r| r.as_ref().is_some_and(|r| r.0 == SignatureStatus::Revoked));
        let chosen = match revoked {
            Some(at) => Err(at),
            None => refusals.iter().position(Option::is_none).ok_or(0),
        };
        match chosen {
            Ok(at) => {
                let i = v.candidates[at];
                name_signer(policy, v, Some(i));
                v.status = SignatureStatus::Counted;
                v.counted = true;
                v.signer_index = Some(i);
                counted_signers.push(i);
            }
            Err(at) => {
                name_signer(policy, v, Some(v.candidates[at]));
                let (status, why) = refusals[at].clone().unwrap_or((SignatureStatus::DuplicateKey, String::new()));
                v.status = status;
                v.why = why;
            }
        }
    }
    counted_signers
}

/// Each rule for `agent` against the signers counted.
fn tally(policy: &TrustPolicy, counted_signers: &[usize], agent: &str) -> Vec<RuleVerdict> {
    policy
        .rules_for(agent)
        .map(|r| {
            let roles: Vec<RoleTally> = r
                .roles
                .iter()
                .map(|(role, &needed)| RoleTally {
                    role: role.clone(),
                    needed,
                    counted: counted_signers.iter().filter(|&&i| policy.signers[i].has_role(role)).count(),
                })
                .collect();
            let met = counted_signers.len() >= r.threshold && roles.iter().all(|t| t.counted >= t.needed);
            RuleVerdict { rule: r.describe(), needed: r.threshold, counted: counted_signers.len(), roles, met }
        })
        .collect()
}

/// Step 3, once the bundle file has been read: a keyless signature that does not sign this
/// file (its SHA-256 is `sha256`) is bound to nothing and no longer a candidate, and every
/// signature is counted again, so that what counts does not depend on the order the
/// signatures came in (a signature over another file cannot take the place of the one over
/// this file and leave it a duplicate).
pub fn bind_file(
    policy: &TrustPolicy,
    verdict: &mut SignersVerdict,
    agent: &str,
    sha256: &[u8; 32],
    expected_comment: &str,
    now: Timestamp,
) {
    for v in verdict.signatures.iter_mut().filter(|v| v.is_keyless() && !v.candidates.is_empty()) {
        if !v.subjects.contains(sha256) {
            v.candidates.clear();
            v.status = SignatureStatus::SubjectMismatch;
            v.code = Some(Reason::KeylessSubjectMismatch);
            v.why = format!("it signs another file: the bundle's sha256 is {}", hex::encode(sha256));
        }
    }
    for v in verdict.signatures.iter_mut().filter(|v| !v.candidates.is_empty()) {
        v.counted = false;
        v.signer_index = None;
        v.status = SignatureStatus::Counted;
        v.why.clear();
    }
    for v in verdict.signatures.iter_mut().filter(|v| v.candidates.is_empty()) {
        v.counted = false;
        v.signer_index = None;
    }
    let counted = count(policy, &mut verdict.signatures, agent, expected_comment, now);
    verdict.rules = tally(policy, &counted, agent);
    verdict.accepted = !verdict.rules.is_empty() && verdict.rules.iter().all(|r| r.met);
}

impl SignersVerdict {
    /// Whether a signature still verifies as a signer of the policy once the file is bound
    /// (a keyless signature over another file no longer does).
    pub fn any_authenticated(&self) -> bool {
        self.signatures.iter().any(|v| !v.candidates.is_empty())
    }

    /// Why the signatures do not suffice, most specific first: a signature that would have
    /// counted but for revocation, its window or its agent patterns names the cause, then a
    /// keyless signature over another file, one that does not verify, one of an identity the
    /// policy does not know; else the rule's tally. `None` when accepted.
    pub fn refusal(&self) -> Option<(Refusal, String)> {
        if self.accepted {
            return None;
        }
        if self.rules.is_empty() {
            return Some((Refusal::NoRule, format!("no rule of trust policy `{}` applies to this agent", self.policy)));
        }
        let unmet: Vec<String> = self
            .rules
            .iter()
            .filter(|r| !r.met)
            .map(|r| {
                let roles: Vec<String> =
                    r.roles.iter().map(|t| format!(", {} of {} of role {}", t.counted, t.needed, t.role)).collect();
                format!("rule `{}`: {} of {} distinct signers{}", r.rule, r.counted, r.needed, roles.concat())
            })
            .collect();
        let tally = unmet.join("; ");
        for (status, refusal) in [
            (SignatureStatus::Revoked, Refusal::RevokedKey),
            (SignatureStatus::OutsideWindow, Refusal::OutsideWindow),
            (SignatureStatus::NotForAgent, Refusal::NotForAgent),
            (SignatureStatus::SubjectMismatch, Refusal::Keyless(Reason::KeylessSubjectMismatch)),
            (SignatureStatus::KeylessInvalid, Refusal::Keyless(Reason::KeylessMalformed)),
            (SignatureStatus::UnknownIdentity, Refusal::Keyless(Reason::KeylessIdentityMismatch)),
        ] {
            if let Some(v) = self.signatures.iter().find(|v| v.status == status) {
                let refusal = match (refusal, v.code) {
                    (Refusal::Keyless(_), Some(code)) => Refusal::Keyless(code),
                    _ => refusal,
                };
                return Some((refusal, format!("{} ({}); {tally}", v.why, v.source)));
            }
        }
        Some((Refusal::ThresholdNotMet, tally))
    }
}

/// The kinds of refusal a signers verdict gives (mapped onto the gate's reason codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    ThresholdNotMet,
    RevokedKey,
    OutsideWindow,
    NotForAgent,
    NoRule,
    /// A keyless signature did not count, for this `keyless_*` reason.
    Keyless(Reason),
}
