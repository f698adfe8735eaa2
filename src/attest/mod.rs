//! The supply chain's evidence formats: DSSE envelopes ([`dsse`]) holding in-toto Statements
//! v1 ([`statement`]), carried in Sigstore bundles v0.3 JSON ([`sigstore_bundle`]). What other
//! signers of files write (cosign, GitHub artifact attestations, OpenSSF model-signing, npm and
//! PyPI provenance) and what policy engines and admission controllers read.
//!
//! This module only knows the formats and the one signature scheme we make (Ed25519 over the
//! DSSE pre-authentication encoding). What the statements say about a bundle (SLSA provenance,
//! the agent contract) and how the gate judges them live above it, in `ops`.
//!
//! Why the types are our own and not a crate's: `sigstore-types` (sigstore-rust) models a
//! Sigstore bundle's DSSE envelope with exactly one signature, as keyless signing needs, so it
//! cannot carry the co-signatures of a two-person release; `in-toto` (in-toto-rs) pulls in its
//! own key and metadata stack for a struct of four fields. The wire formats are small, their
//! field names are pinned by tests against the specifications' own examples, and every envelope
//! and bundle we write is checked by independent verifiers (securesystemslib, sigstore-models,
//! in-toto-attestation) in `tests/cli/attest.rs`. The PAE is one line ([`dsse::pae`]).

pub mod dsse;
pub mod model_resources;
pub mod model_signing;
pub mod model_verify;
pub mod sigstore_bundle;
pub mod statement;

pub use dsse::{Envelope, EnvelopeSignature, SignatureCheck, pae};
pub use sigstore_bundle::SigstoreBundle;
pub use statement::{Statement, Subject};

pub use crate::limits::{MAX_ATTESTATION_BYTES, MAX_ATTESTATION_DEPTH, MAX_ATTESTATION_SIGNATURES as MAX_SIGNATURES};

/// Why an attestation cannot be read. Each has a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("it is {size} bytes, over the cap of {MAX_ATTESTATION_BYTES}")]
    TooLarge { size: u64 },
    #[error("it nests arrays and objects deeper than {MAX_ATTESTATION_DEPTH} levels")]
    TooDeep,
    #[error("{0}")]
    Malformed(String),
    #[error("its media type is {found:?}, expected {expected:?}")]
    MediaType { found: String, expected: &'static str },
    #[error("its DSSE payload type is {found:?}, expected {expected:?}")]
    PayloadType { found: String, expected: &'static str },
    #[error("its statement type is {found:?}, expected {expected:?}")]
    StatementType { found: String, expected: &'static str },
}

impl FormatError {
    /// A stable code for scripts.
    pub fn code(&self) -> &'static str {
        match self {
            FormatError::TooLarge { .. } => "attestation_too_large",
            FormatError::TooDeep => "attestation_too_deep",
            FormatError::Malformed(_) => "attestation_malformed",
            FormatError::MediaType { .. } => "attestation_media_type",
            FormatError::PayloadType { .. } => "attestation_payload_type",
            FormatError::StatementType { .. } => "attestation_statement_type",
        }
    }
}

/// Parses `bytes` as JSON into `T` within the caps: size, then nesting depth (a scan of the
/// bytes that skips strings), then serde_json.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, FormatError> {
    if bytes.len() as u64 > MAX_ATTESTATION_BYTES {
        return Err(FormatError::TooLarge { size: bytes.len() as u64 });
    }
    if nesting_depth(bytes) > MAX_ATTESTATION_DEPTH {
        return Err(FormatError::TooDeep);
    }
    crate::signed_json::from_slice(bytes).map_err(|e| FormatError::Malformed(format!("{what}: {e}")))
}

/// The deepest nesting of `[` and `{` outside JSON strings.
fn nesting_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Standard base64 with padding, as DSSE and the protobuf JSON mapping write bytes.
pub(crate) mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text.as_bytes()).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_skips_brackets_inside_strings() {
        assert_eq!(nesting_depth(br#"{"a":"[[[[{{{{\"[[["}"#), 1);
        assert_eq!(nesting_depth(br#"[[[]]]"#), 3);
        let deep = format!("{}{}", "[".repeat(MAX_ATTESTATION_DEPTH + 1), "]".repeat(MAX_ATTESTATION_DEPTH + 1));
        assert_eq!(parse_json::<serde_json::Value>(deep.as_bytes(), "x"), Err(FormatError::TooDeep));
    }

    #[test]
    fn oversized_input_is_refused_before_parsing() {
        let big = vec![b' '; MAX_ATTESTATION_BYTES as usize + 1];
        assert!(matches!(parse_json::<serde_json::Value>(&big, "x"), Err(FormatError::TooLarge { .. })));
    }
}
