//! Who signs: a minisign secret key from a file, a key held by an ssh-agent, or a key on a
//! PKCS#11 token. Release keys that never touch the disk sign the same minisign signatures as
//! file keys (an "ED" signature is plain Ed25519 over the BLAKE2b-512 prehash), so every
//! bundle verifies with `bundle verify` and stock `minisign -V` whoever signed it.
//!
//! [`reference`](mod@reference) reads what `--key` names; [`ssh_agent`] and [`pkcs11`] are the mechanisms;
//! [`Signer`] is what `pack` signs with.
//!
//! Key ids of external keys: an ssh-agent or a token holds a bare Ed25519 key, with no
//! minisign key id. Its id is [`derived_key_id`]: the first 8 bytes of BLAKE2b-512 of the
//! 32-byte public key, so the same key has the same id on every machine and in every run.

pub mod p256_key;
pub mod pkcs11;
pub mod pkcs11_p256;
pub mod reference;
pub mod ssh_agent;
pub mod ssh_agent_p256;

use std::path::PathBuf;

use blake2::{Blake2b512, Digest as _};

use crate::error_code::ErrorCode;
use crate::minisign::{PublicKey, SecretKey, Signature, SignatureError};
pub use reference::{KeyRef, Pkcs11Uri};

/// The minisign key id of a key that has none of its own (one in an ssh-agent or on a
/// token): the first 8 bytes of BLAKE2b-512(Ed25519 public key), in file order. With
/// `b2sum`: the first 16 hex digits of `b2sum` over the raw 32-byte key are these 8 bytes.
pub fn derived_key_id(public_key: &[u8; 32]) -> [u8; 8] {
    let digest = Blake2b512::digest(public_key);
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    id
}

/// Something that makes minisign signatures.
#[derive(Debug)]
pub enum Signer {
    File(SecretKey),
    SshAgent(ssh_agent::AgentKey),
    Pkcs11(pkcs11::TokenKey),
}

impl Signer {
    /// The minisign public key that verifies this signer's signatures.
    pub fn public_key(&self) -> PublicKey {
        match self {
            Signer::File(key) => key.public_key(),
            Signer::SshAgent(agent) => agent.public_key(),
            Signer::Pkcs11(token) => token.public_key(),
        }
    }

    /// Signs `data` as minisign does. A signature from an agent or token is verified with
    /// the public key before it is returned, so a device that signs wrongly (or with another
    /// key) stops the command instead of producing a bundle nobody can verify.
    pub fn sign(
        &mut self,
        data: &[u8],
        trusted_comment: &str,
        untrusted_comment: &str,
    ) -> Result<Signature, SignerError> {
        let public = self.public_key();
        let signature = match self {
            Signer::File(key) => return Ok(key.sign(data, trusted_comment, untrusted_comment)?),
            Signer::SshAgent(agent) => {
                Signature::create(public.key_id(), data, trusted_comment, untrusted_comment, |m| agent.sign(m))?
            }
            Signer::Pkcs11(token) => {
                Signature::create(public.key_id(), data, trusted_comment, untrusted_comment, |m| token.sign(m))?
            }
        };
        signature.verify(&public, data).map_err(|e| SignerError::Mismatch(e.to_string()))?;
        Ok(signature)
    }

    /// A plain Ed25519 signature of `message` (a DSSE pre-authentication encoding), by the
    /// same key as [`Signer::sign`]. As there, a signature from an agent or token is checked
    /// with the public key before it is returned.
    pub fn sign_ed25519(&mut self, message: &[u8]) -> Result<[u8; 64], SignerError> {
        let signature = match self {
            Signer::File(key) => return Ok(key.sign_ed25519(message)),
            Signer::SshAgent(agent) => agent.sign(message)?,
            Signer::Pkcs11(token) => token.sign(message)?,
        };
        if !self.public_key().verify_ed25519(message, &signature) {
            return Err(SignerError::Mismatch("an Ed25519 signature over a DSSE envelope".to_owned()));
        }
        Ok(signature)
    }
}

/// Something that makes ECDSA P-256 signatures (OpenSSF model signing): a PEM key file, an
/// ssh-agent's `ecdsa-sha2-nistp256` key, or a P-256 key on a PKCS#11 token.
#[derive(Debug)]
pub enum P256Signer {
    File(p256::ecdsa::SigningKey),
    SshAgent(ssh_agent_p256::AgentP256),
    Pkcs11(pkcs11_p256::TokenP256),
}

impl P256Signer {
    pub fn verifying_key(&self) -> p256::ecdsa::VerifyingKey {
        match self {
            P256Signer::File(key) => *key.verifying_key(),
            P256Signer::SshAgent(agent) => *agent.verifying_key(),
            P256Signer::Pkcs11(token) => *token.verifying_key(),
        }
    }

    /// ECDSA P-256 with SHA-256 over `message`, DER-encoded. A signature from an agent or
    /// token is verified with the public key before it is returned.
    pub fn sign(&mut self, message: &[u8]) -> Result<Vec<u8>, SignerError> {
        use p256::ecdsa::signature::Verifier as _;
        let signature = match self {
            P256Signer::File(key) => return Ok(p256_key::sign(key, message)),
            P256Signer::SshAgent(agent) => agent.sign(message)?,
            P256Signer::Pkcs11(token) => token.sign(message)?,
        };
        if self.verifying_key().verify(message, &signature).is_err() {
            return Err(SignerError::Mismatch("an ECDSA P-256 signature".to_owned()));
        }
        Ok(signature.to_der().as_bytes().to_vec())
    }
}

/// Why an external key cannot be used. Each message says what to fix; none ever holds a PIN.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// A malformed `ssh-agent:` or `pkcs11:` reference.
    #[error("{0}")]
    Reference(String),
    #[error(
        "no ssh-agent: {reason}; start one (`eval \"$(ssh-agent)\"`) and load the key with `ssh-add`, or point SSH_AUTH_SOCK at the running agent"
    )]
    AgentUnavailable { reason: String },
    #[error(
        "the ssh-agent holds no ssh-ed25519 key{}; load one with `ssh-add` (make it with `ssh-keygen -t ed25519`)",
        listed(available)
    )]
    AgentNoEd25519 { available: Vec<String> },
    #[error("the ssh-agent holds several Ed25519 keys ({}); choose one with --key ssh-agent:SHA256:...", fingerprints.join(", "))]
    AgentAmbiguous { fingerprints: Vec<String> },
    #[error("the ssh-agent holds no key {fingerprint}{}; check `ssh-add -l -E sha256`", listed(available))]
    AgentKeyNotFound { fingerprint: String, available: Vec<String> },
    #[error(
        "the ssh-agent refused to sign with {fingerprint} (a confirmation declined, or a hardware key not touched); try again"
    )]
    AgentRefused { fingerprint: String },
    #[error("ssh-agent: {0}; check that SSH_AUTH_SOCK points at a working ssh-agent")]
    Protocol(String),
    #[error("{what} is {found}, not Ed25519; minisign signatures need an Ed25519 key")]
    NotEd25519 { what: String, found: String },
    #[error("{what} is {found}, not P-256; model signatures need a P-256 (secp256r1) key")]
    NotP256 { what: String, found: String },
    #[error(
        "the ssh-agent holds no ecdsa-sha2-nistp256 key{}; load one with `ssh-add` (make it with `ssh-keygen -t ecdsa -b 256`)",
        listed(available)
    )]
    AgentNoP256 { available: Vec<String> },
    #[error("{reason}")]
    ModuleMissing { reason: String },
    #[error("no PKCS#11 token matches {wanted}{}; fix token= (or serial=, slot-id=) in the URI", listed(available))]
    TokenNotFound { wanted: String, available: Vec<String> },
    #[error("several {what} match ({}); {fix}", found.join(", "))]
    Ambiguous { what: String, found: Vec<String>, fix: String },
    #[error("no private key {wanted} on token \"{token}\"; {hint}")]
    KeyNotFound { wanted: String, token: String, hint: String },
    #[error(
        "token \"{token}\" needs its user PIN: add pin-source=FILE to the URI, or name a variable holding it with --password-env"
    )]
    PinRequired { token: String },
    #[error("wrong PIN for token \"{token}\"; check the PIN (repeated failures lock the token)")]
    PinIncorrect { token: String },
    #[error(
        "the user PIN of token \"{token}\" is locked after too many wrong PINs; unlock it with the SO PIN (e.g. `softhsm2-util` or the vendor's tool)"
    )]
    PinLocked { token: String },
    #[error("cannot read the PIN from pin-source {}: {reason}", path.display())]
    PinSource { path: PathBuf, reason: String },
    #[error("PKCS#11: {0}")]
    Pkcs11(String),
    #[error("the signature from the agent or token does not verify with its own public key ({0}); nothing was written")]
    Mismatch(String),
    #[error("cannot sign: {0}")]
    Signature(#[from] SignatureError),
}

impl crate::error_code::Coded for SignerError {
    fn code(&self) -> ErrorCode {
        SignerError::code(self)
    }
}

impl SignerError {
    /// Every code [`SignerError::code`] returns (the book's table takes their meanings from
    /// [`ErrorCode::describe`]).
    pub const CODES: &[ErrorCode] = &[
        ErrorCode::KeyReference,
        ErrorCode::SshAgentUnavailable,
        ErrorCode::SshAgentProtocol,
        ErrorCode::KeyNotFound,
        ErrorCode::AmbiguousKey,
        ErrorCode::UnsupportedKey,
        ErrorCode::SignRefused,
        ErrorCode::Pkcs11Module,
        ErrorCode::TokenNotFound,
        ErrorCode::PinRequired,
        ErrorCode::PinIncorrect,
        ErrorCode::PinLocked,
        ErrorCode::PinSource,
        ErrorCode::Pkcs11Error,
        ErrorCode::SignerMismatch,
        ErrorCode::Signature,
    ];

    /// A stable code for scripts (`--format json`).
    pub fn code(&self) -> ErrorCode {
        match self {
            SignerError::Reference(_) => ErrorCode::KeyReference,
            SignerError::AgentUnavailable { .. } => ErrorCode::SshAgentUnavailable,
            SignerError::AgentNoEd25519 { .. } | SignerError::AgentKeyNotFound { .. } => ErrorCode::KeyNotFound,
            SignerError::AgentNoP256 { .. } => ErrorCode::KeyNotFound,
            SignerError::KeyNotFound { .. } => ErrorCode::KeyNotFound,
            SignerError::AgentAmbiguous { .. } | SignerError::Ambiguous { .. } => ErrorCode::AmbiguousKey,
            SignerError::AgentRefused { .. } => ErrorCode::SignRefused,
            SignerError::Protocol(_) => ErrorCode::SshAgentProtocol,
            SignerError::NotEd25519 { .. } | SignerError::NotP256 { .. } => ErrorCode::UnsupportedKey,
            SignerError::ModuleMissing { .. } => ErrorCode::Pkcs11Module,
            SignerError::TokenNotFound { .. } => ErrorCode::TokenNotFound,
            SignerError::PinRequired { .. } => ErrorCode::PinRequired,
            SignerError::PinIncorrect { .. } => ErrorCode::PinIncorrect,
            SignerError::PinLocked { .. } => ErrorCode::PinLocked,
            SignerError::PinSource { .. } => ErrorCode::PinSource,
            SignerError::Pkcs11(_) => ErrorCode::Pkcs11Error,
            SignerError::Mismatch(_) => ErrorCode::SignerMismatch,
            SignerError::Signature(_) => ErrorCode::Signature,
        }
    }
}

fn listed(items: &[String]) -> String {
    if items.is_empty() { String::new() } else { format!(" (it has: {})", items.join(", ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_key_ids_are_blake2b_prefixes_of_the_public_key() {
        let key = SecretKey::from_seed(&[9u8; 32], [0; 8]);
        let raw = key.public_key().ed25519_bytes();
        let id = derived_key_id(&raw);
        assert_eq!(id, derived_key_id(&raw), "deterministic");
        let full = Blake2b512::digest(raw);
        assert_eq!(id[..], full[..8]);
        assert_ne!(id, derived_key_id(&SecretKey::from_seed(&[8u8; 32], [0; 8]).public_key().ed25519_bytes()));
    }

    #[test]
    fn every_code_is_listed_with_its_meaning() {
        let errors = [
            SignerError::Reference(String::new()),
            SignerError::AgentUnavailable { reason: String::new() },
            SignerError::AgentNoEd25519 { available: vec![] },
            SignerError::AgentAmbiguous { fingerprints: vec![] },
            SignerError::AgentKeyNotFound { fingerprint: String::new(), available: vec![] },
            SignerError::AgentRefused { fingerprint: String::new() },
            SignerError::Protocol(String::new()),
            SignerError::NotEd25519 { what: String::new(), found: String::new() },
            SignerError::ModuleMissing { reason: String::new() },
            SignerError::TokenNotFound { wanted: String::new(), available: vec![] },
            SignerError::Ambiguous { what: String::new(), found: vec![], fix: String::new() },
            SignerError::KeyNotFound { wanted: String::new(), token: String::new(), hint: String::new() },
            SignerError::PinRequired { token: String::new() },
            SignerError::PinIncorrect { token: String::new() },
            SignerError::PinLocked { token: String::new() },
            SignerError::PinSource { path: PathBuf::new(), reason: String::new() },
            SignerError::Pkcs11(String::new()),
            SignerError::Mismatch(String::new()),
            SignerError::Signature(SignatureError::InvalidComment(String::new())),
        ];
        let listed = SignerError::CODES;
        for e in &errors {
            assert!(listed.contains(&e.code()), "{} is not in SignerError::CODES", e.code());
        }
        for code in listed {
            assert!(errors.iter().any(|e| e.code() == *code), "{code} is listed but never returned");
        }
    }

    #[test]
    fn every_error_names_a_fix_and_has_a_code() {
        // Each message, after what went wrong, says what to do (the part after `; `).
        let errors = [
            (
                SignerError::AgentUnavailable { reason: "SSH_AUTH_SOCK is not set".into() },
                "start one (`eval \"$(ssh-agent)\"`) and load the key with `ssh-add`, or point SSH_AUTH_SOCK at the running agent",
            ),
            (
                SignerError::AgentNoEd25519 { available: vec!["SHA256:x (ssh-rsa)".into()] },
                "load one with `ssh-add` (make it with `ssh-keygen -t ed25519`)",
            ),
            (
                SignerError::AgentAmbiguous { fingerprints: vec!["SHA256:a".into(), "SHA256:b".into()] },
                "choose one with --key ssh-agent:SHA256:...",
            ),
            (SignerError::PinIncorrect { token: "t".into() }, "check the PIN (repeated failures lock the token)"),
            (
                SignerError::PinLocked { token: "t".into() },
                "unlock it with the SO PIN (e.g. `softhsm2-util` or the vendor's tool)",
            ),
            (
                SignerError::TokenNotFound { wanted: "token=x".into(), available: vec![] },
                "fix token= (or serial=, slot-id=) in the URI",
            ),
        ];
        for (e, fix) in errors {
            let message = e.to_string();
            let (_, said) = message.rsplit_once("; ").unwrap_or_else(|| panic!("no fix after `; `: {message}"));
            assert_eq!(said, fix, "{}", e.code());
            assert!(SignerError::CODES.contains(&e.code()), "{}", e.code());
        }
    }
}
