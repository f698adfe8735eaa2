//! Signing with a P-256 (secp256r1) private key on a PKCS#11 token, for the signatures that need
//! an elliptic-curve key (OpenSSF model signing). The token finds, logs in and chooses as for
//! Ed25519 keys ([`super::pkcs11`]); the mechanism is `CKM_ECDSA` over a SHA-256 digest computed
//! here (every token has it; `CKM_ECDSA_SHA256` is optional), and the token's `r || s` is
//! encoded as DER, which is what ECDSA-with-SHA-256 verifiers read.

use std::path::PathBuf;

use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::Session;
use p256::ecdsa::{Signature, VerifyingKey};
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

use super::SignerError;
use super::pkcs11::{ck, describe, open_session, public_key_candidates};
use super::reference::Pkcs11Uri;

/// DER of the OID 1.2.840.10045.3.1.7 (prime256v1, secp256r1): CKA_EC_PARAMS of a P-256 key.
const PRIME256V1_OID: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// A P-256 private key on a token, with a logged-in session to sign with.
pub struct TokenP256 {
    session: Session,
    key: ObjectHandle,
    public: VerifyingKey,
    description: String,
}

impl std::fmt::Debug for TokenP256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenP256").field("key", &self.description).finish()
    }
}

impl TokenP256 {
    /// Loads the module, finds the token and the P-256 key `uri` names, and logs in (as
    /// [`super::pkcs11::TokenKey::open`]).
    pub fn open(
        uri: &Pkcs11Uri,
        module_env: Option<PathBuf>,
        pin_fallback: &dyn Fn(&str) -> Option<Zeroizing<String>>,
    ) -> Result<TokenP256, SignerError> {
        let (session, label) = open_session(uri, module_env, pin_fallback)?;
        let key = find_key(&session, uri, &label)?;
        let public = public_key(&session, key, &label)?;
        Ok(TokenP256 { session, key, public, description: format!("{uri} on token \"{label}\"") })
    }

    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.public
    }

    /// Which key this is, for messages (never with a PIN).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// ECDSA P-256 with SHA-256 over `message`, by the token.
    pub fn sign(&mut self, message: &[u8]) -> Result<Signature, SignerError> {
        raw_sign(&self.session, self.key, message)
    }
}

fn raw_sign(session: &Session, key: ObjectHandle, message: &[u8]) -> Result<Signature, SignerError> {
    let digest = Sha256::digest(message);
    let raw = session.sign(&Mechanism::Ecdsa, key, &digest).map_err(|e| ck("signing", e))?;
    Signature::from_slice(&raw)
        .map_err(|_| SignerError::Pkcs11("the token's ECDSA signature is not 64 bytes of r and s".to_owned()))
}

/// The one P-256 private key the URI names (by `object=` label and/or `id=`), or the token's
/// only EC private key.
fn find_key(session: &Session, uri: &Pkcs11Uri, token: &str) -> Result<ObjectHandle, SignerError> {
    let mut template = vec![Attribute::Class(ObjectClass::PRIVATE_KEY), Attribute::KeyType(KeyType::EC)];
    if let Some(label) = &uri.object {
        template.push(Attribute::Label(label.as_bytes().to_vec()));
    }
    if let Some(id) = &uri.id {
        template.push(Attribute::Id(id.clone()));
    }
    let mut found = session.find_objects(&template).map_err(|e| ck("searching the token", e))?;
    match found.len() {
        0 => Err(SignerError::KeyNotFound {
            wanted: uri.to_string(),
            token: token.to_owned(),
            hint: "the token holds no such EC private key; make one (pkcs11-tool --keypairgen --key-type EC:prime256v1) or check object= and id= with `pkcs11-tool --list-objects --login`".to_owned(),
        }),
        1 => {
            let key = found.remove(0);
            let params = session
                .get_attributes(key, &[AttributeType::EcParams])
                .map_err(|e| ck("reading the key's curve", e))?;
            match params.first() {
                Some(Attribute::EcParams(p)) if p == PRIME256V1_OID => Ok(key),
                _ => Err(SignerError::NotP256 {
                    what: format!("the key {} on token \"{token}\"", describe(session, key)),
                    found: "an EC key on another curve".to_owned(),
                }),
            }
        }
        _ => Err(SignerError::Ambiguous {
            what: format!("EC private keys on token \"{token}\""),
            found: found.iter().map(|&k| describe(session, k)).collect(),
            fix: "name one with object= or id=".to_owned(),
        }),
    }
}

/// The public key: CKA_EC_POINT of the public key object with the private key's id (else its
/// label) that verifies a signature the private key makes.
fn public_key(session: &Session, key: ObjectHandle, token: &str) -> Result<VerifyingKey, SignerError> {
    let candidates = public_key_candidates(session, key, KeyType::EC)?;
    let probe = b"agent-bundle: which public key belongs to this P-256 private key";
    let signature = raw_sign(session, key, probe)?;
    for object in candidates {
        let Ok(attrs) = session.get_attributes(object, &[AttributeType::EcPoint]) else { continue };
        if let Some(Attribute::EcPoint(point)) = attrs.into_iter().next()
            && let Some(public) = ec_point(&point)
            && p256::ecdsa::signature::Verifier::verify(&public, probe, &signature).is_ok()
        {
            return Ok(public);
        }
    }
    Err(SignerError::KeyNotFound {
        wanted: "its public key".to_owned(),
        token: token.to_owned(),
        hint: "the token has no P-256 public key object (with the private key's id or label) that verifies its signatures; store the public key beside it with the same id".to_owned(),
    })
}

/// CKA_EC_POINT of a P-256 key: a DER OCTET STRING holding the uncompressed point (PKCS#11),
/// or the bare point (some modules).
fn ec_point(point: &[u8]) -> Option<VerifyingKey> {
    let bare = match point {
        [0x04, 0x41, rest @ ..] if rest.len() == 65 => rest,
        other => other,
    };
    VerifyingKey::from_sec1_bytes(bare).ok()
}
