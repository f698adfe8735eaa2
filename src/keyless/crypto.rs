//! The cryptography under `sigstore-verify`: a verification-only `CryptoProvider` on *ring*
//! (which rustls already links for the registry and RAP clients) and RustCrypto's P-256 and
//! P-384 for the one operation *ring* has no API for, ECDSA over a digest the caller computed
//! (the gate hashes a bundle file while it streams it and hands the library the SHA-256).
//!
//! sigstore-rust's default provider is aws-lc-rs, which would link a second C cryptography
//! library (1.35 MiB of the release binary) beside *ring*; the library's own
//! `CryptoProvider` trait is the documented way to bring another one.
//!
//! What it verifies is exactly what the library asks for; what it cannot verify fails closed
//! with the library's `UnsupportedAlgorithm` (a keyless signature then is refused with a code):
//! ML-DSA keys, and an RSA key's signature over a digest (Fulcio certificates are ECDSA; RSA
//! appears only as a CA or timestamp authority, whose signatures are over whole messages). It
//! never signs or makes keys.

use std::sync::Once;

use ring::signature::{self as ring_sig, UnparsedPublicKey, VerificationAlgorithm};
use sigstore_verify::crypto::{CryptoProvider, Error, HashContext, Result, SigningScheme, install_default_provider};
use sigstore_verify::types::HashAlgorithm;

/// Makes this provider the process's `sigstore-crypto` provider (once; an application that
/// embeds the library and installed its own first keeps that one). Called where a trusted root
/// is parsed: nothing is verified without one.
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = install_default_provider(&RING_PROVIDER);
    });
}

static RING_PROVIDER: RingProvider = RingProvider;

#[derive(Debug)]
struct RingProvider;

struct RingHash(ring::digest::Context);

impl HashContext for RingHash {
    fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    fn finalize(self: Box<Self>) -> Vec<u8> {
        self.0.finish().as_ref().to_vec()
    }
}

fn digest_algorithm(algorithm: HashAlgorithm) -> Result<&'static ring::digest::Algorithm> {
    match algorithm {
        HashAlgorithm::Sha2256 => Ok(&ring::digest::SHA256),
        HashAlgorithm::Sha2384 => Ok(&ring::digest::SHA384),
        HashAlgorithm::Sha2512 => Ok(&ring::digest::SHA512),
        other => Err(Error::UnsupportedAlgorithm(format!("cannot compute {other} digests"))),
    }
}

fn verification_algorithm(scheme: SigningScheme) -> Result<&'static dyn VerificationAlgorithm> {
    Ok(match scheme {
        SigningScheme::EcdsaP256Sha256 => &ring_sig::ECDSA_P256_SHA256_ASN1,
        SigningScheme::EcdsaP256Sha384 => &ring_sig::ECDSA_P256_SHA384_ASN1,
        SigningScheme::EcdsaP384Sha256 => &ring_sig::ECDSA_P384_SHA256_ASN1,
        SigningScheme::EcdsaP384Sha384 => &ring_sig::ECDSA_P384_SHA384_ASN1,
        SigningScheme::Ed25519 => &ring_sig::ED25519,
        SigningScheme::RsaPssSha256 => &ring_sig::RSA_PSS_2048_8192_SHA256,
        SigningScheme::RsaPssSha384 => &ring_sig::RSA_PSS_2048_8192_SHA384,
        SigningScheme::RsaPssSha512 => &ring_sig::RSA_PSS_2048_8192_SHA512,
        SigningScheme::RsaPkcs1Sha256 => &ring_sig::RSA_PKCS1_2048_8192_SHA256,
        SigningScheme::RsaPkcs1Sha384 => &ring_sig::RSA_PKCS1_2048_8192_SHA384,
        SigningScheme::RsaPkcs1Sha512 => &ring_sig::RSA_PKCS1_2048_8192_SHA512,
        other => return Err(unsupported(other)),
    })
}

fn unsupported(scheme: SigningScheme) -> Error {
    Error::UnsupportedAlgorithm(format!("{} signatures are not supported by this build", scheme.name()))
}

fn invalid(scheme: SigningScheme) -> Error {
    Error::Verification(format!("{} signature invalid", scheme.name()))
}

impl CryptoProvider for RingProvider {
    fn hash(&self, algorithm: HashAlgorithm) -> Result<Box<dyn HashContext>> {
        Ok(Box::new(RingHash(ring::digest::Context::new(digest_algorithm(algorithm)?))))
    }

    fn sha256(&self, data: &[u8]) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, data).as_ref());
        out
    }

    fn sha384(&self, data: &[u8]) -> [u8; 48] {
        let mut out = [0u8; 48];
        out.copy_from_slice(ring::digest::digest(&ring::digest::SHA384, data).as_ref());
        out
    }

    fn sha512(&self, data: &[u8]) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(ring::digest::digest(&ring::digest::SHA512, data).as_ref());
        out
    }

    fn verify_raw(&self, scheme: SigningScheme, key: &[u8], data: &[u8], signature: &[u8]) -> Result<()> {
        UnparsedPublicKey::new(verification_algorithm(scheme)?, key)
            .verify(data, signature)
            .map_err(|_| invalid(scheme))
    }

    fn verify_prehashed(&self, scheme: SigningScheme, key: &[u8], digest: &[u8], signature: &[u8]) -> Result<()> {
        use p256::ecdsa::signature::hazmat::PrehashVerifier;
        // The library passes a digest of the scheme's hash length; checked again here so that
        // a short one can never be taken for a truncated one.
        let expected = scheme.hash_algorithm().map(|h| digest_algorithm(h).map(|a| a.output_len()));
        if !matches!(expected, Some(Ok(n)) if n == digest.len()) {
            return Err(Error::Verification(format!("a {}-byte digest for {}", digest.len(), scheme.name())));
        }
        match scheme {
            SigningScheme::EcdsaP256Sha256 | SigningScheme::EcdsaP256Sha384 => {
                let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(key).map_err(|_| invalid(scheme))?;
                let signature = p256::ecdsa::Signature::from_der(signature).map_err(|_| invalid(scheme))?;
                key.verify_prehash(digest, &signature).map_err(|_| invalid(scheme))
            }
            SigningScheme::EcdsaP384Sha256 | SigningScheme::EcdsaP384Sha384 => {
                let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(key).map_err(|_| invalid(scheme))?;
                let signature = p384::ecdsa::Signature::from_der(signature).map_err(|_| invalid(scheme))?;
                key.verify_prehash(digest, &signature).map_err(|_| invalid(scheme))
            }
            other => Err(unsupported(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Signatures made here with RustCrypto's signing half (and *ring*'s Ed25519), checked by
    //! the provider: every scheme a Fulcio certificate, CT log or Rekor key uses, over raw
    //! messages and over digests, and a wrong message, key or digest length refused.
    use super::*;
    use p256::ecdsa::signature::{Signer as _, hazmat::PrehashSigner as _};

    const MESSAGE: &[u8] = b"the bytes of an agent bundle";

    fn p256_key() -> p256::ecdsa::SigningKey {
        p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap()
    }

    fn p384_key() -> p384::ecdsa::SigningKey {
        p384::ecdsa::SigningKey::from_slice(&[9u8; 48]).unwrap()
    }

    fn sec1_p256(key: &p256::ecdsa::SigningKey) -> Vec<u8> {
        key.verifying_key().to_encoded_point(false).as_bytes().to_vec()
    }

    fn sec1_p384(key: &p384::ecdsa::SigningKey) -> Vec<u8> {
        key.verifying_key().to_encoded_point(false).as_bytes().to_vec()
    }

    #[test]
    fn ecdsa_over_messages_and_digests() {
        let p = &RING_PROVIDER;
        let k256 = p256_key();
        let sig: p256::ecdsa::Signature = k256.sign(MESSAGE);
        let der = sig.to_der();
        let public = sec1_p256(&k256);
        p.verify_raw(SigningScheme::EcdsaP256Sha256, &public, MESSAGE, der.as_bytes()).unwrap();
        assert!(p.verify_raw(SigningScheme::EcdsaP256Sha256, &public, b"other", der.as_bytes()).is_err());
        let digest = p.sha256(MESSAGE);
        p.verify_prehashed(SigningScheme::EcdsaP256Sha256, &public, &digest, der.as_bytes()).unwrap();
        let other = p.sha256(b"other");
        assert!(p.verify_prehashed(SigningScheme::EcdsaP256Sha256, &public, &other, der.as_bytes()).is_err());
        assert!(p.verify_prehashed(SigningScheme::EcdsaP256Sha256, &public, &digest[..31], der.as_bytes()).is_err());

        // P-256 with SHA-384, signed over the digest (the library's leftmost-bits rule).
        let d384 = p.sha384(MESSAGE);
        let sig: p256::ecdsa::Signature = k256.sign_prehash(&d384).unwrap();
        p.verify_prehashed(SigningScheme::EcdsaP256Sha384, &public, &d384, sig.to_der().as_bytes()).unwrap();
        p.verify_raw(SigningScheme::EcdsaP256Sha384, &public, MESSAGE, sig.to_der().as_bytes()).unwrap();

        let k384 = p384_key();
        let public = sec1_p384(&k384);
        let sig: p384::ecdsa::Signature = k384.sign(MESSAGE);
        p.verify_raw(SigningScheme::EcdsaP384Sha384, &public, MESSAGE, sig.to_der().as_bytes()).unwrap();
        p.verify_prehashed(SigningScheme::EcdsaP384Sha384, &public, &d384, sig.to_der().as_bytes()).unwrap();
        // The right signature under the wrong curve's key is refused, not a panic.
        assert!(p.verify_prehashed(SigningScheme::EcdsaP256Sha384, &public, &d384, sig.to_der().as_bytes()).is_err());
    }

    #[test]
    fn ed25519_over_messages_only() {
        use ring::signature::KeyPair as _;
        let p = &RING_PROVIDER;
        let key = ring::signature::Ed25519KeyPair::from_seed_unchecked(&[3u8; 32]).unwrap();
        let sig = key.sign(MESSAGE);
        let public = key.public_key().as_ref();
        p.verify_raw(SigningScheme::Ed25519, public, MESSAGE, sig.as_ref()).unwrap();
        assert!(p.verify_raw(SigningScheme::Ed25519, public, b"other", sig.as_ref()).is_err());
        let digest = p.sha512(MESSAGE);
        assert!(matches!(
            p.verify_prehashed(SigningScheme::Ed25519, public, &digest, sig.as_ref()),
            Err(Error::Verification(_) | Error::UnsupportedAlgorithm(_))
        ));
    }

    #[test]
    fn hashes_agree_with_one_shot_and_streaming() {
        let p = &RING_PROVIDER;
        for (algorithm, expected) in [
            (HashAlgorithm::Sha2256, p.sha256(MESSAGE).to_vec()),
            (HashAlgorithm::Sha2384, p.sha384(MESSAGE).to_vec()),
            (HashAlgorithm::Sha2512, p.sha512(MESSAGE).to_vec()),
        ] {
            let mut ctx = p.hash(algorithm).unwrap();
            ctx.update(&MESSAGE[..5]);
            ctx.update(&MESSAGE[5..]);
            assert_eq!(ctx.finalize(), expected);
        }
        use sha2::Digest as _;
        assert_eq!(p.sha256(MESSAGE).as_slice(), sha2::Sha256::digest(MESSAGE).as_slice());
    }

    #[test]
    fn what_it_cannot_verify_fails_closed() {
        let p = &RING_PROVIDER;
        assert!(matches!(
            p.verify_raw(SigningScheme::MlDsa44, &[0; 1312], MESSAGE, &[0; 2420]),
            Err(Error::UnsupportedAlgorithm(_))
        ));
        assert!(matches!(
            p.verify_prehashed(SigningScheme::RsaPkcs1Sha256, &[0; 270], &[0; 32], &[0; 256]),
            Err(Error::UnsupportedAlgorithm(_))
        ));
    }
}
