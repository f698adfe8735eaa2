//! The policy's signers as plain trusted keys, for the judgements that have no thresholds: an
//! attestation under `--trust-policy` must be signed by a key of the policy that may sign the
//! agent now (not revoked, inside its window, its agent patterns as the key's scopes).

use super::format::{SignerId, TrustPolicy};
use crate::timestamp::Timestamp;
use crate::trust::{TrustedKey, TrustedKeys};

/// The keys of `policy`'s signers valid at `now`, each scoped to its agent patterns.
pub fn valid_keys(policy: &TrustPolicy, now: Timestamp) -> Vec<TrustedKey> {
    policy
        .signers
        .iter()
        .filter(|s| !s.revoked && s.in_window(now))
        .filter_map(|s| {
            // Only keys sign attestations (a later kind of signer would not).
            #[allow(irrefutable_let_patterns)]
            let SignerId::Key(key) = &s.id else { return None };
            Some(TrustedKey { key: *key, scopes: s.agents.clone() })
        })
        .collect()
}

/// `keys` (from `--key`/`--trusted-keys`, if any) and the policy's valid keys.
pub fn with_policy(keys: &TrustedKeys, policy: &TrustPolicy, now: Timestamp) -> TrustedKeys {
    let mut all = keys.clone();
    all.keys.extend(valid_keys(policy, now));
    all
}
