//! Keyless signers: a Sigstore bundle (`cosign sign-blob --bundle`, `sigstore sign`, GitHub
//! artifact attestations) over a bundle file, judged offline against a `trusted_root.json`.
//!
//! The cryptography is sigstore-rust's `sigstore-verify` (certificate chain to a Fulcio CA
//! valid at the signing time, the embedded SCT against the CT log keys, the transparency-log
//! entry against the Rekor keys, RFC 3161 timestamps, the signature, and the log entry's
//! consistency with the rest of the bundle). This module adds what the gate needs around it:
//! reading the inputs within caps, the identity policy (exact or anchored patterns, GitHub
//! workflow claims), and one stable reason code per way a signature fails (`verdict.rs`).
//!
//! Nothing here opens a socket: the trusted root is a file the operator gives, never fetched.

mod policy;
mod root;
mod verdict;

pub use policy::{ClaimMatch, IdentityPolicy, Matcher, PolicyError};
pub use root::{RootError, TrustedRoot};
pub use verdict::reason_of;

use crate::bundle::verify::{Reason, Rejection};

/// The largest Sigstore bundle read (a real one is 2-12 KiB; a DSSE one carries its statement).
pub const MAX_SIGSTORE_BUNDLE_BYTES: u64 = 4 << 20;

/// A Sigstore bundle's text, read but not yet trusted: it is parsed when judged, so that a
/// malformed one is a refusal with a code, not an error.
#[derive(Debug, Clone)]
pub struct SigstoreBundle {
    /// Where it was read from (for messages).
    pub file: String,
    text: String,
}

impl SigstoreBundle {
    /// Reads a Sigstore bundle file (at most [`MAX_SIGSTORE_BUNDLE_BYTES`]).
    pub fn read(path: &std::path::Path) -> crate::Result<Self> {
        use crate::regular_file::{Links, read};
        let bytes =
            read(path, MAX_SIGSTORE_BUNDLE_BYTES, Links::Follow).map_err(|e| crate::Error::io(path, e.into_io()))?;
        // Not UTF-8 is not JSON: judged (and refused) like any other malformed bundle.
        let text = String::from_utf8(bytes).unwrap_or_default();
        Ok(SigstoreBundle { file: path.display().to_string(), text })
    }
}

/// What the gate requires of a keyless signature: a Sigstore bundle whose signer satisfies
/// `policy` under `root`.
#[derive(Debug)]
pub struct Requirement {
    pub root: TrustedRoot,
    pub bundle: SigstoreBundle,
    pub policy: IdentityPolicy,
}

/// A keyless signature that verified: who signed, as the certificate says.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeylessSigner {
    /// The Sigstore bundle file.
    pub file: String,
    /// The certificate's subject alternative name (email or URI).
    pub identity: String,
    /// The OIDC issuer of the certificate.
    pub issuer: String,
    /// The signing time the verification relied on (RFC 3339), when the log or a TSA gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_at: Option<String>,
    /// `message_signature` (over the file) or `dsse` (an in-toto statement naming the file).
    pub kind: &'static str,
}

impl Requirement {
    /// Judges the keyless signature over an artifact whose SHA-256 is `sha256`.
    pub fn judge(&self, sha256: [u8; 32]) -> Result<KeylessSigner, Rejection> {
        let refuse = |reason: Reason, message: String| Rejection::new(reason, None, message);
        let file = &self.bundle.file;
        let bundle = sigstore_verify::types::Bundle::from_json(&self.bundle.text)
            .map_err(|e| refuse(verdict::parse_reason(&e.to_string()), format!("{file}: {e}")))?;
        if bundle.verification_material.tlog_entries.is_empty() {
            let why = "it has no transparency-log entry: a keyless signature must be logged (Rekor)";
            return Err(refuse(Reason::KeylessLogEntryMissing, format!("{file}: {why}")));
        }
        let kind = match bundle.content {
            sigstore_verify::types::SignatureContent::DsseEnvelope(_) => "dsse",
            _ => "message_signature",
        };
        let digest = sigstore_verify::types::Sha256Hash::new(sha256);
        let result = self
            .root
            .verifier()
            .verify(digest, &bundle, &self.policy.to_library())
            .map_err(|e| refuse(verdict::reason_of(&e), format!("{file}: {e}")))?;
        let identity = result.identity().map(|i| i.as_str().to_owned()).unwrap_or_default();
        let issuer = result.issuer().unwrap_or_default().to_owned();
        let claims = result.certificate().map(|c| c.ci_claims.clone()).unwrap_or_default();
        self.policy
            .check(&identity, &issuer, &claims)
            .map_err(|e| refuse(Reason::KeylessIdentityMismatch, format!("{file}: {e}")))?;
        let signed_at = result.verified_timestamps().iter().min().map(|t| t.to_string());
        Ok(KeylessSigner { file: file.clone(), identity, issuer, signed_at, kind })
    }
}
