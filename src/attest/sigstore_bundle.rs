//! The Sigstore bundle v0.3 (sigstore/protobuf-specs, `dev.sigstore.bundle.v1.Bundle`, in the
//! protobuf JSON mapping): the envelope plus what verifies it. Ours are signed by a key, not a
//! certificate, so the verification material is a `publicKey` whose `hint` is the signer's
//! key id (the key itself comes from the verifier's trusted keys, never from the bundle), with
//! no transparency-log entries (`tlogEntries: []`, which sigstore-models requires present).
//!
//! With co-signatures, the envelope holds several signatures; the hint names the first signer
//! and each signature names its own key in `keyid`.

use serde::{Deserialize, Serialize};

use super::dsse::{Envelope, PAYLOAD_TYPE_IN_TOTO};
use super::statement::Statement;
use super::{FormatError, parse_json};

/// The media type of a Sigstore bundle v0.3.
pub const MEDIA_TYPE_V03: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// A key-signed Sigstore bundle with a DSSE envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SigstoreBundle {
    pub media_type: String,
    pub verification_material: VerificationMaterial,
    pub dsse_envelope: Envelope,
}

/// `verificationMaterial` of a key-signed bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerificationMaterial {
    pub public_key: PublicKeyIdentifier,
    /// Always empty in what we write; entries in what we read are not used (no log is trusted).
    #[serde(default)]
    pub tlog_entries: Vec<serde_json::Value>,
}

/// `publicKey`: which key to verify with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicKeyIdentifier {
    pub hint: String,
}

impl SigstoreBundle {
    /// A bundle around `statement`, signed by `key_id` with `sign` (Ed25519 over the PAE).
    pub fn sign_statement<E>(
        statement: &Statement,
        key_id: &str,
        sign: impl FnOnce(&[u8]) -> Result<[u8; 64], E>,
    ) -> Result<Self, E> {
        let mut envelope = Envelope::new(PAYLOAD_TYPE_IN_TOTO, statement.to_payload());
        envelope.sign(key_id, sign)?;
        Ok(SigstoreBundle {
            media_type: MEDIA_TYPE_V03.to_owned(),
            verification_material: VerificationMaterial {
                public_key: PublicKeyIdentifier { hint: key_id.to_owned() },
                tlog_entries: Vec::new(),
            },
            dsse_envelope: envelope,
        })
    }

    /// A bundle around `statement`, signed by a P-256 key (ECDSA with SHA-256, DER, over the
    /// PAE); the hint and the signature's `keyid` are the SHA-256 (hex) of the public key's PEM,
    /// as OpenSSF model signing names keys.
    pub fn sign_statement_p256(
        statement: &Statement,
        key: &mut crate::keys::P256Signer,
    ) -> Result<Self, crate::keys::SignerError> {
        use sha2::Digest as _;
        let pem = crate::keys::p256_key::public_pem(&key.verifying_key());
        let hint: String = sha2::Sha256::digest(pem.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        let mut envelope = Envelope::new(PAYLOAD_TYPE_IN_TOTO, statement.to_payload());
        let sig = key.sign(&envelope.pae())?;
        envelope.signatures.push(super::dsse::EnvelopeSignature { keyid: hint.clone(), sig });
        Ok(SigstoreBundle {
            media_type: MEDIA_TYPE_V03.to_owned(),
            verification_material: VerificationMaterial {
                public_key: PublicKeyIdentifier { hint },
                tlog_entries: Vec::new(),
            },
            dsse_envelope: envelope,
        })
    }

    /// The file bytes: compact JSON and a newline, the same bytes for the same bundle.
    pub fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).expect("a Sigstore bundle always serialises");
        bytes.push(b'\n');
        bytes
    }

    /// Parses a Sigstore bundle file within the attestation caps: media type v0.3, a DSSE
    /// envelope with 1 to [`super::MAX_SIGNATURES`] signatures. Signatures are not checked here.
    pub fn from_json(bytes: &[u8]) -> Result<Self, FormatError> {
        let bundle: SigstoreBundle = parse_json(bytes, "the Sigstore bundle")?;
        if bundle.media_type != MEDIA_TYPE_V03 {
            return Err(FormatError::MediaType { found: bundle.media_type, expected: MEDIA_TYPE_V03 });
        }
        bundle.dsse_envelope.check_shape()?;
        Ok(bundle)
    }

    /// The envelope's in-toto Statement v1 (payload type checked first).
    pub fn statement(&self) -> Result<Statement, FormatError> {
        if self.dsse_envelope.payload_type != PAYLOAD_TYPE_IN_TOTO {
            return Err(FormatError::PayloadType {
                found: self.dsse_envelope.payload_type.clone(),
                expected: PAYLOAD_TYPE_IN_TOTO,
            });
        }
        Statement::from_payload(&self.dsse_envelope.payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attest::Subject;
    use crate::minisign::SecretKey;

    #[test]
    fn round_trips_and_is_byte_identical_for_the_same_inputs() {
        let key = SecretKey::from_seed(&[5; 32], [5; 8]);
        let statement = Statement::new(vec![Subject::sha256("a", &[1; 32])], "p", serde_json::json!({}));
        let make = || {
            SigstoreBundle::sign_statement(&statement, &key.key_id_hex(), |m| Ok::<_, ()>(key.sign_ed25519(m))).unwrap()
        };
        let (one, two) = (make().to_json(), make().to_json());
        assert_eq!(one, two);
        let text = String::from_utf8(one.clone()).unwrap();
        assert!(text.starts_with(&format!(
            r#"{{"mediaType":"{MEDIA_TYPE_V03}","verificationMaterial":{{"publicKey":{{"hint":"{}"}},"tlogEntries":[]}},"dsseEnvelope":{{"payload":"#,
            key.key_id_hex()
        )), "{text}");
        let parsed = SigstoreBundle::from_json(&one).unwrap();
        assert_eq!(parsed.statement().unwrap(), statement);
        assert_eq!(parsed.dsse_envelope.verified_key_ids(&[key.public_key()]), vec![key.key_id_hex()]);
    }

    #[test]
    fn other_media_types_and_unsigned_envelopes_are_refused() {
        let key = SecretKey::from_seed(&[5; 32], [5; 8]);
        let statement = Statement::new(vec![Subject::sha256("a", &[1; 32])], "p", serde_json::json!({}));
        let mut bundle = SigstoreBundle::sign_statement(&statement, "X", |m| Ok::<_, ()>(key.sign_ed25519(m))).unwrap();
        bundle.media_type = "application/vnd.dev.sigstore.bundle+json;version=0.1".into();
        assert!(matches!(SigstoreBundle::from_json(&bundle.to_json()), Err(FormatError::MediaType { .. })));
        bundle.media_type = MEDIA_TYPE_V03.into();
        bundle.dsse_envelope.signatures.clear();
        assert_eq!(SigstoreBundle::from_json(&bundle.to_json()).unwrap_err().code(), "attestation_malformed");
        bundle.dsse_envelope.payload_type = "application/json".into();
        assert_eq!(bundle.statement().unwrap_err().code(), "attestation_payload_type");
    }
}
