//! One stable reason code per way a keyless signature fails, from `sigstore-verify`'s typed
//! error categories. An error this mapping does not know is refused as a malformed bundle: a
//! new category in the library fails closed, never open.
//!
//! Two failures reach us untyped, and each is mapped in one function here, with a test per
//! code: a bundle whose `mediaType` is unknown fails `Bundle::from_json` as a JSON error (the
//! library's typed `InvalidMediaType` is lost inside serde), so the media type is judged again
//! with the library's own parser ([`parse_reason`]); and a trusted root without the CT log key
//! an SCT needs is an `InvalidTrustRoot` whose only detail is its message
//! ([`trust_root_reason`]).

use std::str::FromStr;

use sigstore_verify::CertificateError;
use sigstore_verify::Error;
use sigstore_verify::bundle::Error as BundleError;
use sigstore_verify::types::{Error as TypesError, MediaType};

use crate::rejection::Reason;

/// The reason a Sigstore bundle whose text `Bundle::from_json` refused is refused: a media
/// type the library's parser does not know is a version this verifier does not support,
/// anything else a malformed bundle.
pub(crate) fn parse_reason(text: &str) -> Reason {
    let value: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let media_type = value.as_ref().and_then(|v| v.get("mediaType")).and_then(serde_json::Value::as_str);
    match media_type.map(MediaType::from_str) {
        Some(Err(TypesError::InvalidMediaType(_))) => Reason::KeylessUnsupportedVersion,
        _ => Reason::KeylessMalformed,
    }
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
        Error::UnsupportedBundle(_) | Error::Types(TypesError::InvalidMediaType(_)) => {
            Reason::KeylessUnsupportedVersion
        }
        Error::InvalidTrustRoot(message) => trust_root_reason(message),
        _ => Reason::KeylessMalformed,
    }
}

/// An unusable trusted root, found only while verifying: the library says which part only in
/// words. No CT log key for the SCT's scheme means the SCT cannot be verified; anything else
/// means the certificate cannot be chained to the root.
fn trust_root_reason(message: &str) -> Reason {
    // sigstore-verify 0.15, verify_impl/sct.rs: "no CT log keys in trusted root".
    if message.contains("CT log") { Reason::KeylessSctInvalid } else { Reason::KeylessUntrustedChain }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_media_type_is_an_unsupported_version_and_other_parse_failures_are_malformed() {
        let v03 = r#"{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "verificationMaterial": 1}"#;
        for (text, reason) in [
            (r#"{"mediaType": "application/vnd.dev.sigstore.bundle.v0.9+json"}"#, Reason::KeylessUnsupportedVersion),
            (r#"{"mediaType": 3}"#, Reason::KeylessMalformed),
            ("{}", Reason::KeylessMalformed),
            ("not json", Reason::KeylessMalformed),
            (v03, Reason::KeylessMalformed),
        ] {
            assert_eq!(parse_reason(text), reason, "{text}");
        }
        // The library's typed error, where it keeps its type, means the same.
        let typed = Error::Types(TypesError::InvalidMediaType("x".into()));
        assert_eq!(reason_of(&typed), Reason::KeylessUnsupportedVersion);
    }

    #[test]
    fn an_unusable_trusted_root_is_an_sct_failure_only_for_a_missing_ct_log_key() {
        // The message sigstore-verify gives when the root has no CT log key for the SCT.
        let no_ct = Error::InvalidTrustRoot("no CT log keys in trusted root".into());
        assert_eq!(reason_of(&no_ct), Reason::KeylessSctInvalid);
        for other in ["trusted authority has an empty certificate chain", "duplicate trusted log ID: ab"] {
            assert_eq!(reason_of(&Error::InvalidTrustRoot(other.into())), Reason::KeylessUntrustedChain, "{other}");
        }
    }

    #[test]
    fn each_typed_failure_has_its_code() {
        for (error, reason) in [
            (Error::SignatureInvalid("x".into()), Reason::KeylessSignatureInvalid),
            (Error::ArtifactMismatch("x".into()), Reason::KeylessSubjectMismatch),
            (Error::UnsupportedBundle("x".into()), Reason::KeylessUnsupportedVersion),
            (Error::Certificate(CertificateError::Sct("x".into())), Reason::KeylessSctInvalid),
            (Error::Certificate(CertificateError::ChainInvalid("x".into())), Reason::KeylessUntrustedChain),
            (Error::InvalidBundle("x".into()), Reason::KeylessMalformed),
        ] {
            assert_eq!(reason_of(&error), reason, "{error}");
        }
    }
}
