//! Judging a bundle's signatures under a trust policy: which signer made each one, whether it
//! counts and why not, and whether every rule for the agent is met.
//!
//! Two steps, because the manifest may be believed only once a trusted key signed it:
//! [`authenticate`] checks each signature cryptographically over the manifest's bytes (no
//! agent name needed); [`judge`] then applies what depends on the agent: the trusted comment,
//! revocation, validity windows, agent patterns, distinct keys, and the rules.
//!
//! Windows are judged at the verifier's clock: a minisign signature carries no trusted time,
//! so "inside its window" means "the key is valid now", as for an X.509 certificate checked
//! without a timestamp.

use serde::Serialize;

use super::format::TrustPolicy;
use crate::minisign::Signature;
use crate::timestamp::Timestamp;

crate::codes::stable_codes! {
    /// What became of one signature under a trust policy. The string forms are stable.
    pub enum SignatureStatus;
    Counted => "counted": "The signature verifies, by a key of the policy that may sign this agent now; it counts.",
    UnknownKey => "unknown_key": "No signer of the policy has the signature's key id.",
    BadSignature => "bad_signature": "The signature does not verify with the policy's key of that id.",
    CommentMismatch => "comment_mismatch": "The signature verifies but its trusted comment names another agent or version.",
    Revoked => "revoked": "The key is revoked in the policy; its signatures never count.",
    OutsideWindow => "outside_window": "The verifier's clock is before the key's not_before or after its not_after.",
    NotForAgent => "not_for_agent": "The key may sign only agents matching other patterns.",
    DuplicateKey => "duplicate_key": "Another signature by the same key was already counted; a key counts once.",
}

/// One signature, as the verdict reports it.
#[derive(Debug, Clone, Serialize)]
pub struct SignatureVerdict {
    /// Where it was found: `manifest.toml.minisig` (the pack signature) or `cosig:N`.
    pub source: String,
    pub key_id: String,
    /// The policy's name for the key, when the policy knows it.
    pub signer: Option<String>,
    pub roles: Vec<String>,
    pub status: SignatureStatus,
    pub counted: bool,
    /// Why it does not count, in words (empty when counted).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
    #[serde(skip)]
    signer_index: Option<usize>,
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

/// Signatures checked over the manifest's bytes, before the manifest is believed.
#[derive(Debug)]
pub struct Authenticated {
    verdicts: Vec<SignatureVerdict>,
    comments: Vec<String>,
}

impl Authenticated {
    /// Whether at least one signature verifies with a key of the policy: only then may the
    /// manifest be parsed and believed.
    pub fn any_verified(&self) -> bool {
        self.verdicts.iter().any(|v| v.signer_index.is_some())
    }

    /// The verdicts so far (for a refusal before [`judge`]).
    pub fn verdicts(&self) -> &[SignatureVerdict] {
        &self.verdicts
    }
}

/// Step 1: each signature against the policy's keys of its id.
pub fn authenticate(policy: &TrustPolicy, signatures: &[(String, &Signature)], data: &[u8]) -> Authenticated {
    let mut verdicts = Vec::with_capacity(signatures.len());
    let mut comments = Vec::with_capacity(signatures.len());
    for (source, sig) in signatures {
        let mut candidates = policy.with_key_id(sig.key_id()).peekable();
        let (status, signer_index, why) = if candidates.peek().is_none() {
            (Some(SignatureStatus::UnknownKey), None, "no signer of the policy has this key id".to_owned())
        } else {
            match candidates.find(|(_, s)| match &s.id {
                super::format::SignerId::Key(k) => sig.verify(k, data).is_ok(),
            }) {
                Some((i, _)) => (None, Some(i), String::new()),
                None => (Some(SignatureStatus::BadSignature), None, "the signature does not verify".to_owned()),
            }
        };
        let signer = signer_index.map(|i| &policy.signers[i]);
        verdicts.push(SignatureVerdict {
            source: source.clone(),
            key_id: sig.key_id_hex(),
            signer: signer.map(|s| s.name.clone()),
            roles: signer.map(|s| s.roles.clone()).unwrap_or_default(),
            status: status.unwrap_or(SignatureStatus::Counted),
            counted: false,
            why,
            signer_index,
        });
        comments.push(sig.trusted_comment().to_owned());
    }
    Authenticated { verdicts, comments }
}

/// Step 2: what counts for `agent` with this trusted comment, and the rules' tallies.
pub fn judge(
    policy: &TrustPolicy,
    auth: Authenticated,
    agent: &str,
    expected_comment: &str,
    now: Timestamp,
) -> SignersVerdict {
    let Authenticated { mut verdicts, comments } = auth;
    let mut counted_signers: Vec<usize> = Vec::new();
    for (v, comment) in verdicts.iter_mut().zip(&comments) {
        let Some(i) = v.signer_index else { continue };
        let s = &policy.signers[i];
        let refusal = if comment != expected_comment {
            Some((SignatureStatus::CommentMismatch, format!("its trusted comment is `{comment}`")))
        } else if s.revoked {
            Some((SignatureStatus::Revoked, format!("key `{}` is revoked", s.name)))
        } else if !s.in_window(now) {
            let from = s.not_before.map_or("any time".to_owned(), |t| t.to_string());
            let to = s.not_after.map_or("any time".to_owned(), |t| t.to_string());
            Some((
                SignatureStatus::OutsideWindow,
                format!("key `{}` is valid from {from} to {to}, not at {now}", s.name),
            ))
        } else if !s.may_sign(agent) {
            Some((SignatureStatus::NotForAgent, format!("key `{}` may sign only {}", s.name, s.agents.join(", "))))
        } else if counted_signers.contains(&i) {
            Some((SignatureStatus::DuplicateKey, format!("key `{}` already counted once", s.name)))
        } else {
            None
        };
        match refusal {
            Some((status, why)) => {
                v.status = status;
                v.why = why;
            }
            None => {
                v.counted = true;
                counted_signers.push(i);
            }
        }
    }
    let rules: Vec<RuleVerdict> = policy
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
        .collect();
    // No rule for the agent: nothing says who may release it, so nobody may (fail closed).
    let accepted = !rules.is_empty() && rules.iter().all(|r| r.met);
    SignersVerdict { policy: policy.id.clone(), policy_version: policy.version, signatures: verdicts, rules, accepted }
}

impl SignersVerdict {
    /// Why the signatures do not suffice, most specific first: a signature that would have
    /// counted but for revocation, its window or its agent patterns names the cause; else the
    /// rule's tally. `None` when accepted.
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
                format!("rule `{}`: {} of {} distinct keys{}", r.rule, r.counted, r.needed, roles.concat())
            })
            .collect();
        let tally = unmet.join("; ");
        for (status, refusal) in [
            (SignatureStatus::Revoked, Refusal::RevokedKey),
            (SignatureStatus::OutsideWindow, Refusal::OutsideWindow),
            (SignatureStatus::NotForAgent, Refusal::NotForAgent),
        ] {
            if let Some(v) = self.signatures.iter().find(|v| v.status == status) {
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
}
