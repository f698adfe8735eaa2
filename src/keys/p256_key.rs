//! P-256 (secp256r1) keys, for the signatures that need an elliptic-curve key: OpenSSF model
//! signing (`attest --model-signing`) takes only EC keys or Sigstore identities. Minisign
//! signatures stay Ed25519.
//!
//! The files are what OpenSSL and `model_signing` read and write: the secret key as PKCS#8 PEM
//! (`-----BEGIN PRIVATE KEY-----`; SEC1 `EC PRIVATE KEY` files from `openssl ecparam -genkey` are
//! read too), the public key as SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`, 64-column
//! lines, LF). Signatures are ECDSA with SHA-256, DER-encoded, deterministic (RFC 6979): the same
//! key and message give the same bytes.

use std::path::Path;

use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{DerSignature, Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use zeroize::Zeroizing;

use crate::regular_file::{self, Links};

use crate::limits::MAX_P256_KEY_FILE_BYTES as MAX_KEY_FILE;

/// Why a P-256 key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum P256Error {
    #[error("{path}: {why}")]
    Read { path: String, why: String },
    #[error("{path}: not a P-256 {what} in PEM ({why}); make one with `bundle keygen --kind p256`")]
    Format { path: String, what: &'static str, why: String },
    #[error("no randomness for a new key: {0}")]
    Random(String),
}

/// A new random key.
pub fn generate() -> Result<SigningKey, P256Error> {
    // A uniformly random scalar below the group order: 32 random bytes are one with
    // overwhelming probability; try again on the rare miss.
    loop {
        let mut bytes = Zeroizing::new([0u8; 32]);
        getrandom::fill(bytes.as_mut()).map_err(|e| P256Error::Random(e.to_string()))?;
        if let Ok(key) = SigningKey::from_slice(bytes.as_ref()) {
            return Ok(key);
        }
    }
}

/// The secret key file's text (PKCS#8 PEM).
pub fn secret_pem(key: &SigningKey) -> Zeroizing<String> {
    key.to_pkcs8_pem(LineEnding::LF).expect("a P-256 key encodes as PKCS#8")
}

/// The public key file's text (SubjectPublicKeyInfo PEM), byte for byte what OpenSSL and
/// Python's `cryptography` write for it.
pub fn public_pem(key: &VerifyingKey) -> String {
    key.to_public_key_pem(LineEnding::LF).expect("a P-256 key encodes as SPKI")
}

/// Reads a secret key file: PKCS#8 PEM, or SEC1 PEM.
pub fn read_secret(path: &Path) -> Result<SigningKey, P256Error> {
    let text = read(path)?;
    SigningKey::from_pkcs8_pem(&text)
        .or_else(|e| p256::SecretKey::from_sec1_pem(&text).map(SigningKey::from).map_err(|_| e))
        .map_err(|e| P256Error::Format { path: path.display().to_string(), what: "secret key", why: e.to_string() })
}

/// Reads a public key file (SubjectPublicKeyInfo PEM).
pub fn read_public(path: &Path) -> Result<VerifyingKey, P256Error> {
    let text = read(path)?;
    VerifyingKey::from_public_key_pem(&text).map_err(|e| P256Error::Format {
        path: path.display().to_string(),
        what: "public key",
        why: e.to_string(),
    })
}

/// ECDSA P-256 with SHA-256 over `message`, DER-encoded.
pub fn sign(key: &SigningKey, message: &[u8]) -> Vec<u8> {
    let signature: DerSignature = key.sign(message);
    signature.as_bytes().to_vec()
}

/// ECDSA P-256 with SHA-256 over `message` in the fixed-size form JWS `ES256` uses (RFC 7518
/// §3.4): the 32-byte big-endian `r` then `s`.
pub fn sign_raw(key: &SigningKey, message: &[u8]) -> [u8; 64] {
    let signature: Signature = key.sign(message);
    signature.to_bytes().into()
}

/// Whether `signature` (`r || s`, 64 bytes, as JWS `ES256` carries it) is `key`'s over
/// `message`. A high `s` is accepted, as JOSE libraries make it (only the value matters).
pub fn verify_raw(key: &VerifyingKey, message: &[u8], signature: &[u8]) -> bool {
    Signature::from_slice(signature).is_ok_and(|s| key.verify(message, &s).is_ok())
}

/// The key's RFC 7638 JWK thumbprint: base64url (no padding) of the SHA-256 of
/// `{"crv":"P-256","kty":"EC","x":...,"y":...}`. It depends on the key alone (not on how a
/// PEM file wraps it), so any JOSE library finds the same id for the same key.
pub fn jwk_thumbprint(key: &VerifyingKey) -> String {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use sha2::{Digest as _, Sha256};
    let point = key.to_encoded_point(false);
    let (x, y) = (point.x().expect("an uncompressed point"), point.y().expect("an uncompressed point"));
    let jwk = format!(
        r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
        URL_SAFE_NO_PAD.encode(x),
        URL_SAFE_NO_PAD.encode(y)
    );
    URL_SAFE_NO_PAD.encode(Sha256::digest(jwk.as_bytes()))
}

/// Whether a key file's text is PEM (a P-256 key here) rather than a minisign key box.
pub fn is_pem(text: &str) -> bool {
    text.trim_start().starts_with("-----BEGIN ")
}

fn read(path: &Path) -> Result<Zeroizing<String>, P256Error> {
    let bytes = regular_file::read(path, MAX_KEY_FILE, Links::Follow)
        .map_err(|e| P256Error::Read { path: path.display().to_string(), why: e.into_io().to_string() })?;
    String::from_utf8(bytes).map(Zeroizing::new).map_err(|_| P256Error::Format {
        path: path.display().to_string(),
        what: "key",
        why: "not UTF-8 text".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_pem_and_signatures_are_deterministic() {
        let key = generate().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k.pem"), secret_pem(&key).as_bytes()).unwrap();
        std::fs::write(dir.path().join("k.pub"), public_pem(key.verifying_key())).unwrap();
        let read = read_secret(&dir.path().join("k.pem")).unwrap();
        let public = read_public(&dir.path().join("k.pub")).unwrap();
        assert_eq!(read.verifying_key(), &public);
        assert!(public_pem(&public).starts_with("-----BEGIN PUBLIC KEY-----\n"));
        let (one, two) = (sign(&read, b"m"), sign(&key, b"m"));
        assert_eq!(one, two);
        let parsed = p256::ecdsa::Signature::from_der(&one).unwrap();
        assert!(public.verify(b"m", &parsed).is_ok());
        assert!(public.verify(b"n", &parsed).is_err());
        assert!(read_public(&dir.path().join("k.pem")).is_err());
    }

    #[test]
    fn raw_signatures_verify_and_the_thumbprint_is_rfc_7638s() {
        let key = generate().unwrap();
        let raw = sign_raw(&key, b"m");
        assert!(verify_raw(key.verifying_key(), b"m", &raw));
        assert!(!verify_raw(key.verifying_key(), b"n", &raw));
        assert!(!verify_raw(key.verifying_key(), b"m", &raw[..63]));
        // RFC 7638 §3.1 hashes the members in this order, without whitespace: a thumbprint
        // is 43 base64url characters (32 bytes).
        let thumbprint = jwk_thumbprint(key.verifying_key());
        assert_eq!(thumbprint.len(), 43);
        assert_ne!(thumbprint, jwk_thumbprint(generate().unwrap().verifying_key()));
    }
}
