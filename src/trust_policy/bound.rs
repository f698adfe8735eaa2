//! Judging a registry's co-signatures before the bundle's layer is fetched. The minisign
//! co-signatures are over manifest.toml, which is inside the layer, so they cannot be verified
//! yet; but they bound what can count: at most one distinct key per policy signer named by a
//! co-signature (by key id, not revoked, inside its window, allowed this agent, its trusted
//! comment naming this agent), plus the pack signature's key: the signer the artifact's config
//! names (`key_id`, as `bundle push` writes it), or any one key when it names none. When even
//! that bound misses a rule, the release is refused without moving its bytes. The config is
//! unsigned: a false one can only refuse (a release whose config lies was not pushed as made)
//! or let the layer be fetched. Anything the bound lets through is
//! judged in full once the layer is read ([`super::judge`]), so a claim that is false only
//! costs the download.

use std::collections::BTreeSet;

use super::format::{SignerId, TrustPolicy};
use super::judge::Refusal;
use crate::minisign::Signature;
use crate::timestamp::Timestamp;

/// What the artifact's config claims of the bundle in its layer.
#[derive(Debug, Clone, Copy)]
pub struct Claimed<'a> {
    pub agent: &'a str,
    pub version: Option<&'a str>,
    /// The pack signature's key id (hex, as minisign prints it).
    pub pack_key_id: Option<&'a str>,
    /// Whether keyless signatures (`--sigstore` files) are offered: each may be by any
    /// certificate-identity signer of the policy, which is known only once it is verified.
    pub keyless: bool,
}

/// `Some` when no set of signatures that could be in the layer meets every rule for the
/// agent the config names, given the co-signatures found beside it in the registry.
pub fn shortfall(
    policy: &TrustPolicy,
    claimed: Claimed<'_>,
    cosignatures: &[Signature],
    now: Timestamp,
) -> Option<(Refusal, String)> {
    let Claimed { agent, version, pack_key_id, keyless } = claimed;
    let exact = version.map(|v| crate::trust::trusted_comment(agent, v));
    let prefix = format!("{} name={agent} ", crate::trust::COMMENT_PREFIX);
    let mut possible = BTreeSet::new();
    for sig in cosignatures {
        let comment = sig.trusted_comment();
        if !exact.as_deref().map_or_else(|| comment.starts_with(&prefix), |e| comment == e) {
            continue;
        }
        for (i, s) in policy.with_key_id(sig.key_id()) {
            if !s.revoked && s.in_window(now) && s.may_sign(agent) {
                possible.insert(i);
            }
        }
    }
    let cosigners = possible.len();
    if keyless {
        for (i, s) in policy.signers.iter().enumerate() {
            if matches!(s.id, SignerId::Identity(_)) && !s.revoked && s.in_window(now) && s.may_sign(agent) {
                possible.insert(i);
            }
        }
    }
    if let Some(id) = pack_key_id {
        for (i, s) in policy.signers.iter().enumerate() {
            let SignerId::Key(key) = &s.id else { continue };
            if key.key_id_hex() == id && !s.revoked && s.in_window(now) && s.may_sign(agent) {
                possible.insert(i);
            }
        }
    }
    // Without a claimed pack signer, its key may be one more distinct key, of any role.
    let wildcard = usize::from(pack_key_id.is_none());
    let mut rules = policy.rules_for(agent).peekable();
    if rules.peek().is_none() {
        return Some((Refusal::NoRule, format!("no rule of trust policy `{}` applies to agent `{agent}`", policy.id)));
    }
    let bound = possible.len() + wildcard;
    let short: Vec<String> = rules
        .filter_map(|r| {
            let roles: Vec<String> = r
                .roles
                .iter()
                .filter_map(|(role, &needed)| {
                    let can = possible.iter().filter(|&&i| policy.signers[i].has_role(role)).count() + wildcard;
                    (can < needed).then(|| format!(", at most {can} of {needed} of role {role}"))
                })
                .collect();
            (bound < r.threshold || !roles.is_empty()).then(|| {
                format!(
                    "rule `{}`: at most {} of {} distinct keys{}",
                    r.describe(),
                    bound.min(r.threshold),
                    r.threshold,
                    roles.concat()
                )
            })
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    Some((
        Refusal::ThresholdNotMet,
        format!(
            "{}; the registry holds {cosigners} co-signature(s) by keys of the policy that may sign `{agent}`, and the bundle one pack signature{} (judged before its layer was fetched; `bundle cosign oci://…` adds one)",
            short.join("; "),
            pack_key_id.map(|id| format!(" by key {id}, as its config says")).unwrap_or_default(),
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minisign::SecretKey;
    use crate::trust::trusted_comment;

    fn policy(alice: &SecretKey, bob: &SecretKey, bob_extra: &str) -> TrustPolicy {
        let text = format!(
            "format = 1\nid = \"t\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n[root]\nthreshold = 1\nsigners = [\"alice\"]\n\
             [[signer]]\nname = \"alice\"\npublic_key = \"{}\"\nroles = [\"release\"]\n\
             [[signer]]\nname = \"bob\"\npublic_key = \"{}\"\nroles = [\"security\"]\n{bob_extra}\n\
             [[signer]]\nname = \"carol\"\npublic_key = \"{}\"\nroles = [\"security\"]\n\
             [[rule]]\nagents = [\"pay*\"]\nthreshold = 2\nroles = {{ security = 1 }}\n",
            alice.public_key().to_base64(),
            bob.public_key().to_base64(),
            SecretKey::generate().public_key().to_base64(),
        );
        TrustPolicy::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn now() -> Timestamp {
        Timestamp::parse("2030-01-01T00:00:00Z").unwrap()
    }

    #[test]
    fn the_bound_counts_named_valid_cosigners_and_the_claimed_pack_signer() {
        let (alice, bob) = (SecretKey::generate(), SecretKey::generate());
        let alice_id = alice.key_id_hex();
        let claimed =
            Claimed { agent: "payments", version: Some("1.0.0"), pack_key_id: Some(&alice_id), keyless: false };
        let by_bob = |comment: &str| vec![bob.sign(b"m", comment, "u").unwrap()];
        let ok = by_bob(&trusted_comment("payments", "1.0.0"));

        let p = policy(&alice, &bob, "");
        // alice alone: short of keys and of the security role.
        let (refusal, why) = shortfall(&p, claimed, &[], now()).unwrap();
        assert_eq!(refusal, Refusal::ThresholdNotMet);
        assert!(why.contains("at most 1 of 2 distinct keys, at most 0 of 1 of role security"), "{why}");
        // bob's co-signature could complete it: the layer is worth reading.
        assert!(shortfall(&p, claimed, &ok, now()).is_none());
        // Not for this version, for another agent: it cannot count.
        assert!(shortfall(&p, claimed, &by_bob(&trusted_comment("payments", "0.9.0")), now()).is_some());
        assert!(shortfall(&p, claimed, &by_bob(&trusted_comment("mailer", "1.0.0")), now()).is_some());
        // Without a claimed version, any version of this agent may be the one in the layer.
        let unversioned = Claimed { version: None, ..claimed };
        assert!(shortfall(&p, unversioned, &by_bob(&trusted_comment("payments", "0.9.0")), now()).is_none());
        // Without a claimed pack signer, it may be any one key of any role.
        let anyone = Claimed { pack_key_id: None, ..claimed };
        assert!(shortfall(&p, anyone, &[], now()).is_some(), "one key is still short of two");
        assert!(shortfall(&p, anyone, &by_bob(&trusted_comment("payments", "1.0.0")), now()).is_none());
        // bob revoked, out of his window, or not for payments agents: refused unread.
        for extra in ["revoked = true", "not_after = 2029-01-01T00:00:00Z", "agents = [\"kb-*\"]"] {
            assert!(shortfall(&policy(&alice, &bob, extra), claimed, &ok, now()).is_some(), "{extra}");
        }
        // No rule for the agent.
        let other = Claimed { agent: "mailer", ..claimed };
        assert_eq!(shortfall(&p, other, &ok, now()).unwrap().0, Refusal::NoRule);
    }
}
