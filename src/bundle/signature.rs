//! The signature half of the verifier: the pack signature checked against trusted keys, or,
//! under a trust policy, every signature over the manifest authenticated before the manifest is
//! believed and counted after; then the trusted comment held to the manifest it signs.

use super::SIGNATURE_ENTRY;
use super::verify::{Expect, PolicyTrust, Refused};
use crate::manifest::Manifest;
use crate::minisign::{Signature, SignatureError};
use crate::rejection::{Reason, Rejection};
use crate::trust::{self, TrustedKey, TrustedKeys};
use crate::trust_policy::{self, Authenticated, FileDigest, Refusal, SignersVerdict};

/// With a trust policy: the pack signature and the co-signatures over the manifest's bytes.
/// At least one must verify with a key of the policy before the manifest is believed.
pub(super) fn authenticate(
    p: &PolicyTrust<'_>,
    pack: &Signature,
    manifest_bytes: &[u8],
) -> Result<Authenticated, Rejection> {
    let mut all = vec![(SIGNATURE_ENTRY.to_owned(), pack)];
    all.extend(p.cosignatures.iter().enumerate().map(|(i, s)| (format!("cosig:{}", i + 1), s)));
    let auth = trust_policy::authenticate::authenticate(p.policy, &all, manifest_bytes, p.keyless);
    if auth.any_verified() {
        return Ok(auth);
    }
    let ids = auth.claimed_signers();
    Err(Rejection::new(
        if auth.any_bad_signature() { Reason::BadSignature } else { Reason::UntrustedKey },
        Some(SIGNATURE_ENTRY),
        format!(
            "no signature verifies as a signer of trust policy `{}` version {} (signed by {})",
            p.policy.id,
            p.policy.version,
            ids.join(", ")
        ),
    ))
}

/// With a trust policy: the signatures bound to the file (when its SHA-256 is known before
/// it is read), what counts for this agent, and (when enforced) the rules met. The
/// authenticated signatures are returned too when a keyless one still waits for the file's
/// SHA-256: the caller binds and counts them again once the file is read.
pub(super) fn judge_signers(
    p: &PolicyTrust<'_>,
    auth: Authenticated,
    m: &Manifest,
) -> Result<(SignersVerdict, Option<Authenticated>), Refused> {
    let file = p.file_sha256.map_or(FileDigest::Unread, FileDigest::Known);
    let verdict = count_for(p.policy, &auth.bind(file), m, p.now);
    let unbound = (p.file_sha256.is_none() && auth.has_keyless()).then_some(auth);
    let Some((refusal, message)) = verdict.refusal().filter(|_| p.enforce) else { return Ok((verdict, unbound)) };
    Err(policy_rejection(refusal, message, verdict))
}

/// What counts of `bound` for the manifest's agent and version, at `now`.
pub fn count_for(
    policy: &trust_policy::TrustPolicy,
    bound: &trust_policy::Bound,
    m: &Manifest,
    now: crate::timestamp::Timestamp,
) -> SignersVerdict {
    let comment = trust::trusted_comment(&m.name, &m.version.to_string());
    trust_policy::judge::count(policy, bound, &m.name, &comment, now)
}

/// The gate's refusal of a bundle whose signatures do not meet the trust policy.
pub fn policy_rejection(refusal: Refusal, message: String, verdict: SignersVerdict) -> Refused {
    Refused { rejection: Rejection::new(reason_of(refusal), None, message), signers: Some(Box::new(verdict)) }
}

/// The reason code of a trust policy's refusal.
pub fn reason_of(refusal: Refusal) -> Reason {
    match refusal {
        Refusal::ThresholdNotMet => Reason::ThresholdNotMet,
        Refusal::RevokedKey => Reason::RevokedKey,
        Refusal::OutsideWindow => Reason::KeyOutsideWindow,
        Refusal::NotForAgent => Reason::UntrustedKey,
        Refusal::NoRule => Reason::NoPolicyRule,
        Refusal::Keyless(reason) => reason,
    }
}

pub(super) fn parse_signature(text: &[u8]) -> Result<Signature, Rejection> {
    std::str::from_utf8(text)
        .map_err(|_| "the signature file is not UTF-8".to_owned())
        .and_then(|t| Signature::from_text(t).map_err(|e| e.to_string()))
        .map_err(|why| {
            Rejection::new(Reason::BadSignature, Some(SIGNATURE_ENTRY), format!("malformed signature: {why}"))
        })
}

/// The trusted keys that verify the signature. A key may appear on several lines of a
/// trusted-keys file (with different scopes): every line that verifies is kept.
pub(super) fn check_signature<'k>(
    keys: &'k TrustedKeys,
    signature: &Signature,
    manifest_bytes: &[u8],
) -> Result<Vec<&'k TrustedKey>, Rejection> {
    let candidates: Vec<_> = keys.with_id(signature.key_id()).collect();
    if candidates.is_empty() {
        return Err(Rejection::new(
            Reason::UntrustedKey,
            Some(SIGNATURE_ENTRY),
            format!("signed by key {}, which is not among the trusted keys", signature.key_id_hex()),
        ));
    }
    let mut good = Vec::new();
    let mut failure = None;
    for k in candidates {
        match signature.verify(&k.key, manifest_bytes) {
            Ok(()) => good.push(k),
            Err(e) => failure = Some(e),
        }
    }
    if good.is_empty() {
        let what = match failure {
            Some(SignatureError::BadTrustedComment) => {
                "the trusted comment was altered (its signature does not verify)".to_owned()
            }
            Some(other) => format!("the manifest's signature does not verify: {other}"),
            None => "the manifest's signature does not verify".to_owned(),
        };
        return Err(Rejection::new(Reason::BadSignature, Some(SIGNATURE_ENTRY), what));
    }
    Ok(good)
}

/// The signature is for this agent and version, by a key trusted for this agent name, and the
/// agent is the one the caller expects.
pub(super) fn check_signed_for(
    signature: &Signature,
    verified_by: Option<&[&TrustedKey]>,
    manifest: &Manifest,
    expect: &Expect<'_>,
) -> Result<(), Rejection> {
    let expected_comment = trust::trusted_comment(&manifest.name, &manifest.version.to_string());
    // FORMAT §5.2: the two fields in either order, each exactly once, values byte for byte.
    let signed_for = trust::parse_trusted_comment(signature.trusted_comment());
    let matches = signed_for.as_ref().is_ok_and(|(n, v)| *n == manifest.name && *v == manifest.version.to_string());
    if !matches {
        let signed_for = match signed_for {
            Ok((n, v)) => format!("the signature is for {n} {v}"),
            Err(why) => why,
        };
        return Err(Rejection::new(
            Reason::NameMismatch,
            Some(SIGNATURE_ENTRY),
            format!(
                "{signed_for}; the manifest says {} {} (expected the trusted comment `{expected_comment}`)",
                manifest.name, manifest.version
            ),
        ));
    }
    if let Some(lines) = verified_by
        && !lines.iter().any(|k| k.may_sign(&manifest.name))
    {
        let scopes: Vec<String> = lines.iter().flat_map(|k| k.scopes.iter().cloned()).collect();
        return Err(Rejection::new(
            Reason::UntrustedKey,
            Some(SIGNATURE_ENTRY),
            format!(
                "key {} is trusted only for agents matching {}, not `{}`",
                signature.key_id_hex(),
                scopes.join(", "),
                manifest.name
            ),
        ));
    }
    if let Some(want) = expect.name
        && want != manifest.name
    {
        return Err(Rejection::new(
            Reason::NameMismatch,
            None,
            format!("the bundle is agent `{}`, expected `{want}`", manifest.name),
        ));
    }
    Ok(())
}
