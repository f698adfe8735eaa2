//! The first two steps of judging a bundle's signatures under a trust policy, each its own
//! type, so that a step cannot be skipped or run out of order:
//!
//! 1. [`authenticate`]: each minisign signature checked over the manifest's bytes against
//!    every key of the policy with its key id, each keyless signature (already verified over
//!    the digest it names, [`crate::keyless::verify_claimed`]) matched against the policy's
//!    certificate-identity signers. The result, [`Authenticated`], says whether any signature
//!    verifies as a signer of the policy: only then may the manifest be believed.
//! 2. [`Authenticated::bind`]: each offer bound to the bundle file. A keyless signature signs
//!    a file by its SHA-256; one whose subject is not this file is dropped (it stays in the
//!    report as `subject_mismatch`). A minisign signature is over the manifest, which is inside
//!    the file, so it is bound already.
//!
//! Counting ([`super::judge::count`]) takes only a [`Bound`] set, so that no offer over
//! another file can be counted, whatever the order the offers came in.

use super::format::TrustPolicy;
use super::judge::SignatureStatus;
use crate::keyless::Claimed;
use crate::minisign::Signature;
use crate::rejection::{Reason, Rejection};

/// A keyless signature offered to the policy: where it came from, and its verification over
/// the digest it names (or why it failed).
#[derive(Debug, Clone)]
pub struct KeylessOffer {
    pub source: String,
    pub result: Result<Claimed, Rejection>,
}

/// What an offer is: a minisign signature over the manifest, or a keyless one over a file.
#[derive(Debug, Clone)]
pub(super) enum Kind {
    Key {
        key_id: String,
        /// The trusted comment (names the agent and version it signs).
        comment: String,
    },
    Keyless {
        /// The certificate's identity and issuer, and the verified signing time (all `None`
        /// when the signature did not verify).
        identity: Option<String>,
        issuer: Option<String>,
        signed_at: Option<String>,
        /// The SHA-256 digests it signs.
        subjects: Vec<[u8; 32]>,
    },
}

/// Why an offer is not a signature by a signer of the policy.
#[derive(Debug, Clone)]
pub(super) struct Failed {
    pub status: SignatureStatus,
    pub why: String,
    /// The `keyless_*` reason, for a keyless signature.
    pub code: Option<Reason>,
}

/// One signature offered to the policy, with the signers it verifies as (a key: one; a
/// certificate may match several identity signers), or why none.
#[derive(Debug, Clone)]
pub(super) struct Offer {
    pub source: String,
    pub kind: Kind,
    /// Never an empty list: an offer with no signer is `Err`.
    pub signers: Result<Vec<usize>, Failed>,
}

impl Offer {
    fn failed(source: &str, kind: Kind, status: SignatureStatus, why: String, code: Option<Reason>) -> Self {
        Offer { source: source.to_owned(), kind, signers: Err(Failed { status, why, code }) }
    }

    fn verified(&self) -> bool {
        self.signers.is_ok()
    }
}

/// Step 1: signatures checked over the manifest's bytes (and keyless ones over the digest they
/// name), before the manifest is believed.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub(super) offers: Vec<Offer>,
}

/// Step 2: the offers bound to the bundle file; what may be counted.
#[derive(Debug, Clone)]
pub struct Bound {
    pub(super) offers: Vec<Offer>,
}

/// The bundle file an offer is bound to.
#[derive(Debug, Clone, Copy)]
pub enum FileDigest<'a> {
    /// The file's SHA-256: a keyless signature over another file is dropped.
    Known(&'a [u8; 32]),
    /// Not read yet: keyless signatures are taken at their word that they sign it. Only for
    /// refusing early (binding can only drop offers, so what falls short now falls short
    /// then); the caller binds again once the file is read.
    Unread,
}

/// Each minisign signature against every key of the policy with its key id (the first that
/// verifies names the signer), each keyless one against the identity signers.
pub fn authenticate(
    policy: &TrustPolicy,
    signatures: &[(String, &Signature)],
    data: &[u8],
    keyless: &[KeylessOffer],
) -> Authenticated {
    let mut offers: Vec<Offer> = signatures.iter().map(|(source, sig)| key_offer(policy, source, sig, data)).collect();
    offers.extend(keyless.iter().map(|offer| keyless_offer(policy, offer)));
    Authenticated { offers }
}

fn key_offer(policy: &TrustPolicy, source: &str, sig: &Signature, data: &[u8]) -> Offer {
    let kind = Kind::Key { key_id: sig.key_id_hex(), comment: sig.trusted_comment().to_owned() };
    let mut with_id = policy.with_key_id(sig.key_id()).peekable();
    if with_id.peek().is_none() {
        let why = "no signer of the policy has this key id".to_owned();
        return Offer::failed(source, kind, SignatureStatus::UnknownKey, why, None);
    }
    match with_id.find(|(_, s)| s.id.key().is_some_and(|k| sig.verify(k, data).is_ok())) {
        Some((i, _)) => Offer { source: source.to_owned(), kind, signers: Ok(vec![i]) },
        None => {
            let why = "the signature does not verify".to_owned();
            Offer::failed(source, kind, SignatureStatus::BadSignature, why, None)
        }
    }
}

fn keyless_offer(policy: &TrustPolicy, offer: &KeylessOffer) -> Offer {
    let claimed = match &offer.result {
        Ok(c) => c,
        Err(r) => {
            let kind = Kind::Keyless { identity: None, issuer: None, signed_at: None, subjects: Vec::new() };
            return Offer::failed(
                &offer.source,
                kind,
                SignatureStatus::KeylessInvalid,
                r.message.clone(),
                Some(r.reason),
            );
        }
    };
    let k = &claimed.signer;
    let kind = Kind::Keyless {
        identity: Some(k.identity.clone()),
        issuer: Some(k.issuer.clone()),
        signed_at: k.signed_at.clone(),
        subjects: claimed.subjects.clone(),
    };
    let signers = policy.identities_matching(&k.identity, &k.issuer, &claimed.claims);
    if signers.is_empty() {
        let why = format!(
            "no certificate-identity signer of the policy matches identity `{}` from issuer `{}` (and its workflow claims)",
            k.identity, k.issuer
        );
        return Offer::failed(
            &offer.source,
            kind,
            SignatureStatus::UnknownIdentity,
            why,
            Some(Reason::KeylessIdentityMismatch),
        );
    }
    Offer { source: offer.source.clone(), kind, signers: Ok(signers) }
}

impl Authenticated {
    /// Whether at least one signature verifies as a signer of the policy: only then may the
    /// manifest be parsed and believed.
    pub fn any_verified(&self) -> bool {
        self.offers.iter().any(Offer::verified)
    }

    /// Whether a signature by a key of the policy failed to verify (a tampered manifest,
    /// rather than a stranger's key).
    pub fn any_bad_signature(&self) -> bool {
        self.offers.iter().any(|o| matches!(&o.signers, Err(f) if f.status == SignatureStatus::BadSignature))
    }

    /// Who signed, as each offer says (key ids, keyless identities), for a refusal.
    pub fn claimed_signers(&self) -> Vec<String> {
        self.offers
            .iter()
            .map(|o| match &o.kind {
                Kind::Key { key_id, .. } => key_id.clone(),
                Kind::Keyless { identity, .. } => identity.clone().unwrap_or_default(),
            })
            .collect()
    }

    /// Whether a keyless signature was offered (its binding waits for the file's SHA-256).
    pub fn has_keyless(&self) -> bool {
        self.offers.iter().any(|o| matches!(o.kind, Kind::Keyless { .. }))
    }

    /// Step 2: each offer bound to the bundle file. A keyless signature whose subjects do not
    /// include the file's SHA-256 is dropped (reported `subject_mismatch`).
    pub fn bind(&self, file: FileDigest<'_>) -> Bound {
        let FileDigest::Known(sha256) = file else { return Bound { offers: self.offers.clone() } };
        let offers = self
            .offers
            .iter()
            .map(|o| match &o.kind {
                Kind::Keyless { subjects, .. } if o.verified() && !subjects.contains(sha256) => Offer::failed(
                    &o.source,
                    o.kind.clone(),
                    SignatureStatus::SubjectMismatch,
                    format!("it signs another file: the bundle's sha256 is {}", hex::encode(sha256)),
                    Some(Reason::KeylessSubjectMismatch),
                ),
                _ => o.clone(),
            })
            .collect();
        Bound { offers }
    }
}

impl Bound {
    /// Whether a signature still verifies as a signer of the policy once bound (a keyless
    /// signature over another file no longer does).
    pub fn any_verified(&self) -> bool {
        self.offers.iter().any(Offer::verified)
    }
}
