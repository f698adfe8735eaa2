//! DSSE, the Dead Simple Signing Envelope (secure-systems-lab/dsse, protocol v1.0.2): a payload,
//! its type, and signatures over the pre-authentication encoding (PAE) of both, so that a
//! signature can never be replayed under another payload type.
//!
//! An envelope carries any number of signatures, each named by a `keyid` (our minisign key id,
//! 16 uppercase hex digits): co-signing adds one without touching the payload. We sign and
//! verify Ed25519 only; a signature by an unknown key, or in another scheme, is not counted.

use serde::{Deserialize, Serialize};

use super::{FormatError, MAX_SIGNATURES, base64_bytes};
use crate::minisign::PublicKey;

/// The payload type of an in-toto Statement.
pub const PAYLOAD_TYPE_IN_TOTO: &str = "application/vnd.in-toto+json";

/// The pre-authentication encoding:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths as ASCII decimals.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    [format!("DSSEv1 {} {payload_type} {} ", payload_type.len(), payload.len()).as_bytes(), payload].concat()
}

/// A DSSE envelope (JSON: `payload`, `payloadType`, `signatures`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    #[serde(with = "base64_bytes")]
    pub payload: Vec<u8>,
    pub payload_type: String,
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    /// Which key made it: the signer's minisign key id (uppercase hex); a hint, never trusted
    /// on its own (the signature is checked with the trusted key of that id).
    #[serde(default)]
    pub keyid: String,
    #[serde(with = "base64_bytes")]
    pub sig: Vec<u8>,
}

/// What one signature of an envelope turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureCheck {
    /// Made by this trusted key, over this envelope's PAE.
    Verified { key_id: String },
    /// Names a key that is not among the trusted ones (it was not checked).
    UntrustedKey { key_id: String },
    /// Names a trusted key, but does not verify with it (tampered, or another scheme).
    Invalid { key_id: String },
}

impl SignatureCheck {
    pub fn key_id(&self) -> &str {
        match self {
            SignatureCheck::Verified { key_id }
            | SignatureCheck::UntrustedKey { key_id }
            | SignatureCheck::Invalid { key_id } => key_id,
        }
    }
}

impl Envelope {
    /// An unsigned envelope.
    pub fn new(payload_type: &str, payload: Vec<u8>) -> Self {
        Envelope { payload, payload_type: payload_type.to_owned(), signatures: Vec::new() }
    }

    /// The bytes every signature is over.
    pub fn pae(&self) -> Vec<u8> {
        pae(&self.payload_type, &self.payload)
    }

    /// Adds a signature by `key_id`, made by `sign` over the PAE. A second signature by the
    /// same key id replaces the first (it cannot count twice), so signing is idempotent.
    pub fn sign<E>(&mut self, key_id: &str, sign: impl FnOnce(&[u8]) -> Result<[u8; 64], E>) -> Result<(), E> {
        let sig = sign(&self.pae())?.to_vec();
        let signature = EnvelopeSignature { keyid: key_id.to_owned(), sig };
        match self.signatures.iter_mut().find(|s| s.keyid == key_id) {
            Some(existing) => *existing = signature,
            None => self.signatures.push(signature),
        }
        Ok(())
    }

    /// Checks every signature against the trusted keys (matched by key id, then verified with
    /// strict Ed25519 over the PAE); one result per signature, in envelope order. Minisign key
    /// ids are 8 bytes, so two trusted keys may share one: a signature is tried against every
    /// trusted key with its id (as securesystemslib does), and is invalid only if none made it.
    pub fn check_signatures(&self, trusted: &[PublicKey]) -> Vec<SignatureCheck> {
        let pae = self.pae();
        self.signatures
            .iter()
            .map(|signature| {
                let key_id = signature.keyid.clone();
                let mut keys = trusted.iter().filter(|k| k.key_id_hex() == signature.keyid).peekable();
                if keys.peek().is_none() {
                    return SignatureCheck::UntrustedKey { key_id };
                }
                let sig = <&[u8; 64]>::try_from(signature.sig.as_slice()).ok();
                match sig.filter(|sig| keys.any(|k| k.verify_ed25519(&pae, sig))) {
                    Some(_) => SignatureCheck::Verified { key_id },
                    None => SignatureCheck::Invalid { key_id },
                }
            })
            .collect()
    }

    /// The key ids whose signatures verify with a trusted key, each once.
    pub fn verified_key_ids(&self, trusted: &[PublicKey]) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for check in self.check_signatures(trusted) {
            if let SignatureCheck::Verified { key_id } = check
                && !ids.contains(&key_id)
            {
                ids.push(key_id);
            }
        }
        ids
    }

    /// Shape checks that serde cannot express: at least one and at most [`MAX_SIGNATURES`]
    /// signatures.
    pub(crate) fn check_shape(&self) -> Result<(), FormatError> {
        match self.signatures.len() {
            0 => Err(FormatError::Malformed("the DSSE envelope has no signatures".into())),
            n if n > MAX_SIGNATURES => Err(FormatError::Malformed(format!(
                "the DSSE envelope has {n} signatures, over the cap of {MAX_SIGNATURES}"
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minisign::SecretKey;

    #[test]
    fn pae_matches_the_specification_example() {
        // protocol.md of secure-systems-lab/dsse: "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ");
    }

    #[test]
    fn json_field_names_follow_the_specification() {
        let mut envelope = Envelope::new("t", b"hi".to_vec());
        envelope.sign("AB", |_| Ok::<_, ()>([1u8; 64])).unwrap();
        let json = serde_json::to_string(&envelope).unwrap();
        assert!(
            json.starts_with(r#"{"payload":"aGk=","payloadType":"t","signatures":[{"keyid":"AB","sig":"AQEB"#),
            "{json}"
        );
    }

    #[test]
    fn signatures_are_checked_per_key_and_counted_once() {
        let a = SecretKey::from_seed(&[1; 32], [1; 8]);
        let b = SecretKey::from_seed(&[2; 32], [2; 8]);
        let stranger = SecretKey::from_seed(&[3; 32], [3; 8]);
        let mut envelope = Envelope::new(PAYLOAD_TYPE_IN_TOTO, b"{}".to_vec());
        for key in [&a, &b, &stranger, &a] {
            envelope.sign(&key.key_id_hex(), |m| Ok::<_, ()>(key.sign_ed25519(m))).unwrap();
        }
        assert_eq!(envelope.signatures.len(), 3, "re-signing by the same key replaces its signature");
        let trusted = [a.public_key(), b.public_key()];
        assert_eq!(envelope.verified_key_ids(&trusted), vec![a.key_id_hex(), b.key_id_hex()]);
        assert_eq!(
            envelope.check_signatures(&trusted)[2],
            SignatureCheck::UntrustedKey { key_id: stranger.key_id_hex() }
        );
        let mut tampered = envelope.clone();
        tampered.payload_type = "application/json".into();
        assert!(tampered.check_signatures(&trusted).iter().all(|c| !matches!(c, SignatureCheck::Verified { .. })));
        let mut lying = envelope.clone();
        lying.signatures[2].keyid = a.key_id_hex();
        assert_eq!(lying.check_signatures(&trusted)[2], SignatureCheck::Invalid { key_id: a.key_id_hex() });
    }

    /// Issue 35, defect 5: two trusted keys may share an 8-byte minisign key id; a signature
    /// by the second is tried against it too (securesystemslib tries every key with the id).
    #[test]
    fn a_signature_is_tried_against_every_trusted_key_with_its_key_id() {
        let first = SecretKey::from_seed(&[1; 32], [9; 8]);
        let second = SecretKey::from_seed(&[2; 32], [9; 8]);
        let mut envelope = Envelope::new(PAYLOAD_TYPE_IN_TOTO, b"{}".to_vec());
        envelope.sign(&second.key_id_hex(), |m| Ok::<_, ()>(second.sign_ed25519(m))).unwrap();
        let trusted = [first.public_key(), second.public_key()];
        assert_eq!(envelope.check_signatures(&trusted), [SignatureCheck::Verified { key_id: second.key_id_hex() }]);
        // Neither key made it: invalid, whichever key is listed first.
        let mut forged = envelope.clone();
        forged.signatures[0].sig = vec![7; 64];
        assert_eq!(forged.check_signatures(&trusted), [SignatureCheck::Invalid { key_id: second.key_id_hex() }]);
    }
}
