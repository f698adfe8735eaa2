//! One stable reason code per way a keyless signature fails, from `sigstore-verify`'s error
//! categories. An error this mapping does not know is refused as a malformed bundle: a new
//! category in the library fails closed, never open.

use sigstore_verify::CertificateError;
use sigstore_verify::Error;
use sigstore_verify::bundle::Error as BundleError;

use crate::rejection::Reason;

/// The reason a Sigstore bundle that could not be parsed is refused: an unknown media type is
/// a version this verifier does not support, anything else a malformed bundle.
pub(crate) fn parse_reason(message: &str) -> Reason {
    if message.contains("Invalid media type") { Reason::KeylessUnsupportedVersion } else { Reason::KeylessMalformed }
}

/// The reason code of a verification failure.
pub fn reason_of(error: &Error) -> Reason {
    match error {
        Error::IdentityMismatch { .. } | Error::IssuerMismatch { .. } => Reason::KeylessIdentityMismatch,
        Error::SignatureInvalid(_) => Reason::KeylessSignatureInvalid,
        Error::ArtifactMismatch(_) => Reason::KeylessSubjectMismatch,
        Error::Certificate(CertificateError::Sct(_)) => Reason::KeylessSctInvalid,
        Error::Certificate(_) => Reason::KeylessUntrustedChain,
        // A log the trusted root does not know is judged like a log entry that does not verify.
        Error::TransparencyLog(_) => Reason::KeylessLogEntryInvalid,
        Error::Timestamp(_) => Reason::KeylessTimestampInvalid,
        Error::Bundle(e) => bundle_reason(e),
        Error::UnsupportedBundle(_) => Reason::KeylessUnsupportedVersion,
        // Found only while verifying: the root has no key of the kind this signature needs.
        Error::InvalidTrustRoot(m) if m.contains("CT log") => Reason::KeylessSctInvalid,
        Error::InvalidTrustRoot(_) => Reason::KeylessUntrustedChain,
        _ => Reason::KeylessMalformed,
    }
}

fn bundle_reason(error: &BundleError) -> Reason {
    match error {
        BundleError::UnsupportedMediaType(_) => Reason::KeylessUnsupportedVersion,
        BundleError::MissingSigningTimeEvidence | BundleError::MissingTimestamp => Reason::KeylessTimestampInvalid,
        BundleError::MissingInclusionPromise(_)
        | BundleError::MissingInclusionProof(_)
        | BundleError::MissingCheckpoint
        | BundleError::LogIndexOutOfRange { .. }
        | BundleError::CheckpointRootMismatch => Reason::KeylessLogEntryInvalid,
        _ => Reason::KeylessMalformed,
    }
}
