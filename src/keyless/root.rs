//! The trusted root: which Fulcio CAs, CT logs, transparency logs and timestamp authorities a
//! keyless signature may rest on. It is the operator's configuration, so a missing, unreadable
//! or unusable one stops the gate (exit 2); it is never downloaded.

use std::path::{Path, PathBuf};

use crate::regular_file::{Links, read_to_string};

pub use crate::limits::MAX_TRUSTED_ROOT_BYTES;

/// A trusted root that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("{}: cannot read the trusted root: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error(
        "{}: not a usable Sigstore trusted root: {message}; give the trusted_root.json of your Sigstore instance (`gh attestation trusted-root`, or the one in sigstore's TUF repository)",
        path.display()
    )]
    Invalid { path: PathBuf, message: String },
    #[error(
        "{}: this is not the trusted root the trust policy names: its sha256 is {found}, the policy says {expected}; import the root again (`bundle trust import-root`) and sign the policy",
        path.display()
    )]
    NotPinned { path: PathBuf, expected: String, found: String },
}

impl crate::error::Coded for RootError {
    fn code(&self) -> crate::error::ErrorCode {
        match self {
            RootError::Read { .. } => crate::error::ErrorCode::IoError,
            RootError::Invalid { .. } | RootError::NotPinned { .. } => crate::error::ErrorCode::TrustedRootError,
        }
    }
}

/// A parsed trusted root with its verifier prepared (keys and anchors decoded once).
pub struct TrustedRoot {
    path: PathBuf,
    root: sigstore_verify::trust_root::TrustedRoot,
    verifier: sigstore_verify::Verifier,
}

impl std::fmt::Debug for TrustedRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedRoot").field("path", &self.path).finish_non_exhaustive()
    }
}

impl TrustedRoot {
    /// Reads and prepares `path`.
    pub fn read(path: &Path) -> Result<TrustedRoot, RootError> {
        let text = read_to_string(path, MAX_TRUSTED_ROOT_BYTES, Links::Follow)
            .map_err(|e| RootError::Read { path: path.to_owned(), source: e.into_io() })?;
        Self::parse(path, &text)
    }

    /// Reads `path`, which must have the SHA-256 `expected` (lowercase hex): the trusted root a
    /// signed trust policy names.
    pub fn read_pinned(path: &Path, expected: &str) -> Result<TrustedRoot, RootError> {
        use sha2::Digest as _;
        let text = read_to_string(path, MAX_TRUSTED_ROOT_BYTES, Links::Follow)
            .map_err(|e| RootError::Read { path: path.to_owned(), source: e.into_io() })?;
        let found = hex::encode(sha2::Sha256::digest(text.as_bytes()));
        if found != expected {
            return Err(RootError::NotPinned { path: path.to_owned(), expected: expected.to_owned(), found });
        }
        Self::parse(path, &text)
    }

    /// Parses the text of a trusted root read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<TrustedRoot, RootError> {
        let invalid = |message: String| RootError::Invalid { path: path.to_owned(), message };
        super::crypto::install();
        if let Some(key) = crate::signed_json::repeated_key(text.as_bytes()) {
            return Err(invalid(format!("the key {key} appears twice (a trusted root has one value per key)")));
        }
        let root = sigstore_verify::trust_root::TrustedRoot::from_json(text).map_err(|e| invalid(e.to_string()))?;
        let verifier = sigstore_verify::Verifier::new(&root).map_err(|e| invalid(e.to_string()))?;
        Ok(TrustedRoot { path: path.to_owned(), root, verifier })
    }

    pub(crate) fn verifier(&self) -> &sigstore_verify::Verifier {
        &self.verifier
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many CAs, Rekor logs, CT logs and timestamp authorities it holds.
    pub fn counts(&self) -> [usize; 4] {
        let r = &self.root;
        [r.certificate_authorities.len(), r.tlogs.len(), r.ctlogs.len(), r.timestamp_authorities.len()]
    }

    /// The newest start of validity among its authorities and logs: a root whose newest key
    /// is old may miss a rotation (the age `bundle trust` reports).
    pub fn newest_key_start(&self) -> Option<String> {
        let r = &self.root;
        let starts = r
            .tlogs
            .iter()
            .map(|l| l.public_key.valid_for.map(|v| v.start))
            .chain(r.ctlogs.iter().map(|l| l.public_key.valid_for.map(|v| v.start)))
            .chain(r.certificate_authorities.iter().map(|c| c.valid_for.map(|v| v.start)))
            .chain(r.timestamp_authorities.iter().map(|c| c.valid_for.map(|v| v.start)));
        starts.flatten().max().map(|t| t.to_string())
    }
}
