//! The last step of judging a bundle's signatures under a trust policy, and its report: which
//! signer made each signature, whether it counts and why not, and whether every rule for the
//! agent is met.
//!
//! The steps before are in [`super::authenticate`]: authenticate (before the manifest is
//! believed), then bind to the file. [`count`] then applies what depends on the agent: the
//! trusted comment, revocation, validity windows, agent patterns, distinct signers, and the
//! rules. Its [`SignersVerdict`] is only a report: nothing in it is read to judge again.
//!
//! Windows are judged at the verifier's clock: a minisign signature carries no trusted time,
//! so "inside its window" means "the key is valid now", as for an X.509 certificate checked
//! without a timestamp. Identity signers' windows are judged the same way, so that the two
//! kinds of signer mean the same thing by them.

use serde::Serialize;

use super::authenticate::{Bound, Kind, Offer};
use super::format::TrustPolicy;
use crate::rejection::Reason;
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
#[derive(Debug, Clone)]
pub struct SignatureVerdict {
    /// Where it was found: `manifest.toml.minisig` (the pack signature), `cosig:N`, or a
    /// Sigstore bundle file (a keyless signature).
    pub source: String,
    /// The minisign key id (empty for a keyless signature).
    pub key_id: String,
    /// A keyless signature's certificate identity (SAN) and OIDC issuer.
    pub identity: Option<String>,
    pub issuer: Option<String>,
    /// A keyless signature's verified signing time.
    pub signed_at: Option<String>,
    /// The policy's name for the signer, when the policy knows it.
    pub signer: Option<String>,
    pub roles: Vec<String>,
    pub status: SignatureStatus,
    /// With a `keyless_*` status: the reason the keyless signature did not count.
    pub code: Option<Reason>,
    /// Why it does not count, in words (empty when counted).
    pub why: String,
}

impl SignatureVerdict {
    /// Whether this is a keyless (Sigstore) signature.
    pub fn is_keyless(&self) -> bool {
        self.key_id.is_empty()
    }

    /// Whether it counts towards the rules.
    pub fn counted(&self) -> bool {
        self.status == SignatureStatus::Counted
    }
}

/// The JSON form, with `counted` (documented in the format reference and the Python stubs)
/// derived from `status`, so that the two cannot disagree.
impl Serialize for SignatureVerdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            source: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            key_id: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            identity: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            issuer: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            signed_at: Option<&'a str>,
            signer: Option<&'a str>,
            roles: &'a [String],
            status: SignatureStatus,
            #[serde(skip_serializing_if = "Option::is_none")]
            code: Option<Reason>,
            counted: bool,
            #[serde(skip_serializing_if = "str::is_empty")]
            why: &'a str,
        }
        Shown {
            source: &self.source,
            key_id: &self.key_id,
            identity: self.identity.as_deref(),
            issuer: self.issuer.as_deref(),
            signed_at: self.signed_at.as_deref(),
            signer: self.signer.as_deref(),
            roles: &self.roles,
            status: self.status,
            code: self.code,
            counted: self.counted(),
            why: &self.why,
        }
        .serialize(s)
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

/// How the report names an offer: its source, key id or certificate identity, and status.
fn reported(offer: &Offer, status: SignatureStatus, why: String, code: Option<Reason>) -> SignatureVerdict {
    let mut v = SignatureVerdict {
        source: offer.source.clone(),
        key_id: String::new(),
        identity: None,
        issuer: None,
        signed_at: None,
        signer: None,
        roles: Vec::new(),
        status,
        code,
        why,
    };
    match &offer.kind {
        Kind::Key { key_id, .. } => v.key_id = key_id.clone(),
        Kind::Keyless { identity, issuer, signed_at, .. } => {
            v.identity = identity.clone();
            v.issuer = issuer.clone();
            v.signed_at = signed_at.clone();
        }
    }
    v
}

fn name_signer(policy: &TrustPolicy, v: &mut SignatureVerdict, signer: usize) {
    let s = &policy.signers[signer];
    v.signer = Some(s.name.clone());
    v.roles = s.roles.clone();
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

/// Step 3: what counts for `agent` with this trusted comment, and the rules' tallies: the
/// report. Only offers bound to the file ([`Bound`]) are counted.
///
/// A certificate may match several identity signers: if any of them is revoked it does not
/// count (a revocation cannot be side-stepped by a broader pattern); otherwise it counts once,
/// as the first of them (in file order) that may sign the agent now. Windows are judged at
/// `now`.
pub fn count(
    policy: &TrustPolicy,
    bound: &Bound,
    agent: &str,
    expected_comment: &str,
    now: Timestamp,
) -> SignersVerdict {
    let mut counted_signers: Vec<usize> = Vec::new();
    let mut signatures = Vec::with_capacity(bound.offers.len());
    for offer in &bound.offers {
        let candidates = match &offer.signers {
            Ok(candidates) => candidates,
            Err(f) => {
                signatures.push(reported(offer, f.status, f.why.clone(), f.code));
                continue;
            }
        };
        let comment = match &offer.kind {
            Kind::Key { comment, .. } => Some(comment.as_str()),
            // A keyless signature covers the whole file, so the manifest's name and version.
            Kind::Keyless { .. } => None,
        };
        let refusals: Vec<Option<(SignatureStatus, String)>> = candidates
            .iter()
            .map(|&i| refusal_for(policy, i, comment, expected_comment, agent, now, &counted_signers))
            .collect();
        let revoked = refusals.iter().position(|r| r.as_ref().is_some_and(|r| r.0 == SignatureStatus::Revoked));
        let chosen = match revoked {
            Some(at) => Err(at),
            None => refusals.iter().position(Option::is_none).ok_or(0),
        };
        let v = match chosen {
            Ok(at) => {
                counted_signers.push(candidates[at]);
                let mut v = reported(offer, SignatureStatus::Counted, String::new(), None);
                name_signer(policy, &mut v, candidates[at]);
                v
            }
            Err(at) => {
                let (status, why) = refusals[at].clone().unwrap_or((SignatureStatus::DuplicateKey, String::new()));
                let mut v = reported(offer, status, why, None);
                name_signer(policy, &mut v, candidates[at]);
                v
            }
        };
        signatures.push(v);
    }
    let rules = tally(policy, &counted_signers, agent);
    // No rule for the agent: nothing says who may release it, so nobody may (fail closed).
    let accepted = !rules.is_empty() && rules.iter().all(|r| r.met);
    SignersVerdict { policy: policy.id.clone(), policy_version: policy.version, signatures, rules, accepted }
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

impl SignersVerdict {
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
