//! Rotation: which version of a trust policy the gate may follow. As TUF does for its root
//! metadata, a deployment pins one version (the first it was given, out of band) and follows
//! newer ones only along a chain: version N+1 is accepted only if signed by a threshold of
//! version N's root signers and by a threshold of its own. The newest version must not have
//! expired; versions on the way may have (they are only links). A state file remembers the
//! highest version followed, so that an old policy cannot be offered again.
//!
//! Root signatures are minisign signatures over the policy file's bytes whose trusted comment
//! is `agent-bundle-policy/1 id=<id> version=<N>` (so a signature over one version is not one
//! over another). A revoked root signer's signature does not count; validity windows apply to
//! bundle signatures, not to root signatures.

use std::collections::BTreeSet;

use serde::Serialize;

use super::format::TrustPolicy;
use crate::minisign::Signature;
use crate::timestamp::Timestamp;

/// One version of a policy as read: its text's bytes, the checked policy, its signatures.
#[derive(Debug, Clone)]
pub struct SignedPolicy {
    /// Where it came from (a file name), for messages.
    pub origin: String,
    pub bytes: Vec<u8>,
    pub policy: TrustPolicy,
    pub signatures: Vec<Signature>,
}

/// Why a chain of policies cannot be followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainFault {
    /// Too few root signatures (of its own, or of the previous version's roots).
    Untrusted,
    /// Older than a version followed before.
    Rollback,
    /// The newest version has expired.
    Expired,
    /// The versions do not follow one another (a gap, a repeat, another policy id).
    Broken,
}

/// The tally of one version's root signatures against one set of roots.
#[derive(Debug, Clone, Serialize)]
pub struct RootTally {
    /// Whose roots: `own` or `v<N>` (the previous version).
    pub by: String,
    pub needed: usize,
    pub counted: usize,
    /// The root signers whose signatures counted.
    pub signers: Vec<String>,
}

/// One version followed.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub origin: String,
    pub version: u64,
    pub tallies: Vec<RootTally>,
}

/// The chain followed, version by version, and the result.
#[derive(Debug, Clone, Serialize)]
pub struct ChainReport {
    pub id: String,
    pub steps: Vec<StepReport>,
    /// The version the gate now follows (when the chain holds).
    pub version: Option<u64>,
    pub expires: Option<String>,
}

/// A chain that cannot be followed: why, in words, and how far it got.
#[derive(Debug, Clone)]
pub struct ChainError {
    pub fault: ChainFault,
    pub message: String,
    pub report: ChainReport,
}

/// The distinct root signers of `roots` whose signature over `candidate` verifies with the
/// candidate's trusted comment.
fn tally(roots: &TrustPolicy, candidate: &SignedPolicy, by: String) -> RootTally {
    let comment = candidate.policy.signed_comment();
    let mut counted = BTreeSet::new();
    for sig in &candidate.signatures {
        if sig.trusted_comment() != comment {
            continue;
        }
        for (i, s) in roots.with_key_id(sig.key_id()) {
            let Some(k) = s.id.key() else { continue };
            if roots.is_root(i) && !s.revoked && sig.verify(k, &candidate.bytes).is_ok() {
                counted.insert(i);
            }
        }
    }
    RootTally {
        by,
        needed: roots.root.threshold,
        counted: counted.len(),
        signers: counted.iter().map(|&i| roots.signers[i].name.clone()).collect(),
    }
}

/// Follows `updates` (any order) from the pinned version `pin`, at `now`, given the highest
/// version followed before (`seen`). Returns the policy to judge bundles by.
pub fn follow(
    pin: SignedPolicy,
    mut updates: Vec<SignedPolicy>,
    now: Timestamp,
    seen: Option<u64>,
) -> Result<(TrustPolicy, ChainReport), ChainError> {
    let mut report = ChainReport { id: pin.policy.id.clone(), steps: Vec::new(), version: None, expires: None };
    let fail =
        |fault, message: String, report: &ChainReport| Err(ChainError { fault, message, report: report.clone() });
    let own = tally(&pin.policy, &pin, "own".to_owned());
    let pinned_ok = own.counted >= own.needed;
    report.steps.push(StepReport { origin: pin.origin.clone(), version: pin.policy.version, tallies: vec![own] });
    if !pinned_ok {
        return fail(
            ChainFault::Untrusted,
            format!(
                "{} (version {}) is signed by {} of the {} root signatures it needs",
                pin.origin, pin.policy.version, report.steps[0].tallies[0].counted, pin.policy.root.threshold
            ),
            &report,
        );
    }
    updates.sort_by_key(|u| u.policy.version);
    let mut current = pin;
    for next in updates {
        if next.policy.id != current.policy.id {
            return fail(
                ChainFault::Broken,
                format!("{} is policy `{}`, not `{}`", next.origin, next.policy.id, current.policy.id),
                &report,
            );
        }
        if next.policy.version != current.policy.version + 1 {
            return fail(
                ChainFault::Broken,
                format!(
                    "{} is version {}, but the next after version {} must be {}",
                    next.origin,
                    next.policy.version,
                    current.policy.version,
                    current.policy.version + 1
                ),
                &report,
            );
        }
        let by_previous = tally(&current.policy, &next, format!("v{}", current.policy.version));
        let by_own = tally(&next.policy, &next, "own".to_owned());
        let short = [&by_previous, &by_own].into_iter().find(|t| t.counted < t.needed).cloned();
        report.steps.push(StepReport {
            origin: next.origin.clone(),
            version: next.policy.version,
            tallies: vec![by_previous, by_own],
        });
        if let Some(t) = short {
            let whose =
                if t.by == "own" { "its own".to_owned() } else { format!("version {}'s", current.policy.version) };
            return fail(
                ChainFault::Untrusted,
                format!(
                    "{} (version {}) is signed by {} of {whose} root signers; it needs {}",
                    next.origin, next.policy.version, t.counted, t.needed
                ),
                &report,
            );
        }
        current = next;
    }
    let policy = current.policy;
    if let Some(seen) = seen
        && policy.version < seen
    {
        return fail(
            ChainFault::Rollback,
            format!(
                "trust policy `{}` version {} is older than version {seen}, followed before; give the newer versions too",
                policy.id, policy.version
            ),
            &report,
        );
    }
    if now > policy.expires {
        return fail(
            ChainFault::Expired,
            format!(
                "trust policy `{}` version {} expired at {}; sign a new version (`bundle trust rotate`)",
                policy.id, policy.version, policy.expires
            ),
            &report,
        );
    }
    report.version = Some(policy.version);
    report.expires = Some(policy.expires.to_string());
    Ok((policy, report))
}
