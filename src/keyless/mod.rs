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

mod crypto;
mod policy;
mod root;
mod verdict;

pub use policy::{ClaimMatch, Field, Given, IdentityPolicy, IdentityPolicyError, Matcher, PatternError};
pub use root::{MAX_TRUSTED_ROOT_BYTES, RootError, TrustedRoot};
pub use verdict::reason_of;

use sigstore_verify::crypto::FulcioCiClaims;

use crate::rejection::{Reason, Rejection};

pub use crate::limits::MAX_SIGSTORE_BUNDLE_BYTES;

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

    /// A Sigstore bundle already read (within its caller's cap), named `file` in messages.
    pub fn from_bytes(file: &str, bytes: &[u8]) -> Self {
        let text = String::from_utf8(bytes.to_vec()).unwrap_or_default();
        SigstoreBundle { file: file.to_owned(), text }
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
        let file = &self.bundle.file;
        let bundle = parse(&self.bundle)?;
        let (signer, claims) = verify_parsed(&self.root, file, &bundle, sha256, &self.policy.to_library())?;
        self.policy
            .check(&signer.identity, &signer.issuer, &claims)
            .map_err(|e| Rejection::new(Reason::KeylessIdentityMismatch, None, format!("{file}: {e}")))?;
        Ok(signer)
    }
}

/// A keyless signature verified against the digests it says it signs, before the file it is
/// offered for has been read: who signed, with the certificate's claims for an identity
/// policy to match. The file's own SHA-256 must then be one of `subjects`.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub signer: KeylessSigner,
    pub claims: FulcioCiClaims,
    /// The SHA-256 digests signed: the message digest, or the in-toto statement's subjects.
    pub subjects: Vec<[u8; 32]>,
}

/// Verifies a Sigstore bundle under `root` over the digest it names (any identity: the trust
/// policy matches the signer afterwards). A message signature without a message digest cannot
/// be judged before the file is read and is refused as malformed.
pub fn verify_claimed(root: &TrustedRoot, bundle: &SigstoreBundle) -> Result<Claimed, Rejection> {
    let file = &bundle.file;
    let parsed = parse(bundle)?;
    let subjects = claimed_subjects(&parsed);
    let Some(first) = subjects.first() else {
        let why =
            "it names no SHA-256 digest of what it signs (no message digest, or no in-toto subject with a sha256)";
        return Err(Rejection::new(Reason::KeylessMalformed, None, format!("{file}: {why}")));
    };
    let any = sigstore_verify::VerificationPolicy::any_identity();
    let (signer, claims) = verify_parsed(root, file, &parsed, *first, &any)?;
    Ok(Claimed { signer, claims, subjects })
}

fn parse(bundle: &SigstoreBundle) -> Result<sigstore_verify::types::Bundle, Rejection> {
    let file = &bundle.file;
    if let Some(path) = crate::signed_json::repeated_key(bundle.text.as_bytes()) {
        let why = format!("the key {path} appears twice (signed JSON has one value per key)");
        return Err(Rejection::new(Reason::KeylessMalformed, None, format!("{file}: {why}")));
    }
    let parsed = sigstore_verify::types::Bundle::from_json(&bundle.text)
        .map_err(|e| Rejection::new(verdict::parse_reason(&bundle.text), None, format!("{file}: {e}")))?;
    if parsed.verification_material.tlog_entries.is_empty() {
        let why = "it has no transparency-log entry: a keyless signature must be logged (Rekor)";
        return Err(Rejection::new(Reason::KeylessLogEntryMissing, None, format!("{file}: {why}")));
    }
    Ok(parsed)
}

/// The SHA-256 digests a Sigstore bundle says it signs.
fn claimed_subjects(bundle: &sigstore_verify::types::Bundle) -> Vec<[u8; 32]> {
    use sigstore_verify::types::{HashAlgorithm, SignatureContent};
    match &bundle.content {
        SignatureContent::MessageSignature(m) => m
            .message_digest
            .iter()
            .filter(|d| d.algorithm == HashAlgorithm::Sha2256)
            .filter_map(|d| <[u8; 32]>::try_from(d.digest.as_bytes()).ok())
            .collect(),
        SignatureContent::DsseEnvelope(e) => {
            #[derive(serde::Deserialize)]
            struct Statement {
                #[serde(default)]
                subject: Vec<Subject>,
            }
            #[derive(serde::Deserialize)]
            struct Subject {
                #[serde(default)]
                digest: std::collections::BTreeMap<String, String>,
            }
            // A statement that repeats a key names nothing (and is refused as malformed).
            let statement: Option<Statement> = crate::signed_json::from_slice(e.payload.as_bytes()).ok();
            statement
                .into_iter()
                .flat_map(|s| s.subject)
                .filter_map(|s| sha256_of_hex(s.digest.get("sha256")?))
                .collect()
        }
        // Content of a kind this build does not know names nothing it can check.
        _ => Vec::new(),
    }
}

/// The library's verification of a parsed bundle over `sha256` under `policy`.
fn verify_parsed(
    root: &TrustedRoot,
    file: &str,
    bundle: &sigstore_verify::types::Bundle,
    sha256: [u8; 32],
    policy: &sigstore_verify::VerificationPolicy,
) -> Result<(KeylessSigner, FulcioCiClaims), Rejection> {
    let kind = match bundle.content {
        sigstore_verify::types::SignatureContent::DsseEnvelope(_) => "dsse",
        _ => "message_signature",
    };
    let digest = sigstore_verify::types::Sha256Hash::new(sha256);
    let result = root
        .verifier()
        .verify(digest, bundle, policy)
        .map_err(|e| Rejection::new(verdict::reason_of(&e), None, format!("{file}: {e}")))?;
    let identity = result.identity().map(|i| i.as_str().to_owned()).unwrap_or_default();
    let issuer = result.issuer().unwrap_or_default().to_owned();
    let claims = result.certificate().map(|c| c.ci_claims.clone()).unwrap_or_default();
    let signed_at = result.verified_timestamps().iter().min().map(|t| t.to_string());
    Ok((KeylessSigner { file: file.to_owned(), identity, issuer, signed_at, kind }, claims))
}

/// 64 hex digits as a SHA-256 digest.
fn sha256_of_hex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}
