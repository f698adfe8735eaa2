//! `bundle pull`: download a bundle artifact's layer and run the deployment gate over its
//! bytes as they arrive; the destination file appears only if the gate accepted them.
//!
//! The bytes flow registry → [`oci::CheckedReader`] (sha256 and size against the manifest's
//! descriptor) → a temp file beside the destination → the gate, in one pass and bounded
//! memory; the first two on a receiving thread ([`prefetch`]), the gate on this one. The temp
//! file is renamed over the destination only after the gate returned an accepting verdict and
//! the layer's digest matched; on any other outcome it is removed, so nothing unverified is
//! ever left on disk under the destination's name.

use std::io::BufRead;
use std::path::Path;

use crate::atomic;
use crate::bundle::verify::{Reason, Rejection};
use crate::error::Error;
use crate::oci::artifact::BlobMismatch;
use crate::oci::{self, OciError, Reference, Refusal, prefetch};

/// What was pulled.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub manifest_digest: String,
}

/// The rejection that reports a registry failure: `unsupported_artifact` and `blob_mismatch`
/// (exit 1), `auth_failed`, `tls_error` and `io_error` (exit 2).
pub fn rejection(e: &OciError) -> Rejection {
    let reason = match e {
        OciError::Rejected(Refusal::UnsupportedArtifact, _) => Reason::UnsupportedArtifact,
        OciError::Rejected(Refusal::BlobMismatch, _) => Reason::BlobMismatch,
        OciError::Rejected(Refusal::AttestationMalformed, _) => Reason::AttestationMalformed,
        OciError::Auth(_) => Reason::AuthFailed,
        OciError::Tls(_) => Reason::TlsError,
        OciError::Transient(_) | OciError::Io(_) | OciError::Usage(_) => Reason::IoError,
    };
    Rejection::new(reason, None, e.to_string())
}

/// The rejection for a fault of the layer stream: `blob_mismatch`, or `io_error` for a
/// transfer that failed.
pub fn rejection_for(reference: &Reference, fault: &BlobMismatch) -> Rejection {
    let reason = if fault.transport { Reason::IoError } else { Reason::BlobMismatch };
    Rejection::new(reason, None, format!("{reference}: {}", fault.message))
}

/// Runs `judge` (the deployment gate) over the layer `reference` names while the bytes stream
/// into a temp file beside `dest`; renames it to `dest` only if `judge` accepted and the
/// layer matched its descriptor. `judge` must read its input to the end before accepting.
/// `before` judges the bundle's attestations (its referrers) before the layer is requested.
pub fn pull<T, E: From<Error>>(
    reference: &Reference,
    options: &oci::Options,
    dest: &Path,
    before: impl FnOnce(&str, Vec<(String, Vec<u8>)>) -> Result<(), Rejection>,
    judge: impl FnOnce(&mut dyn BufRead) -> Result<Result<T, Rejection>, E>,
) -> Result<Result<(Pulled, T), Rejection>, E> {
    if dest.is_dir() {
        return Err(Error::Usage(format!("{} is a folder; -o takes the bundle file to write", dest.display())).into());
    }
    let layer = match oci::open_layer_judged(reference, options, &crate::evidence::files::ARTIFACT_TYPES, before) {
        Ok(Ok(l)) => l,
        Ok(Err(refused)) => return Ok(Err(refused)),
        Err(e) => return Ok(Err(rejection(&e))),
    };
    let temp = atomic::temp_beside(dest).map_err(|e| Error::io(dest, e))?;
    let mismatch = layer.reader.mismatch();
    let pulled = Pulled { manifest_digest: layer.manifest_digest };
    let copy = temp.as_file().try_clone().map_err(|e| Error::io(dest, e))?;
    let mut input = prefetch::spawn(layer.reader, Some(copy)).map_err(|e| Error::io(dest, e))?;
    let verdict = judge(&mut input)?;
    let received = input.finish();
    let recorded = mismatch.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let verdict = match (verdict, recorded, received) {
        (_, Some(m), _) => Err(rejection_for(reference, &m)),
        (Ok(t), None, Ok(())) => Ok(t),
        (Ok(_), None, Err(e)) => Err(Rejection::new(Reason::IoError, None, format!("{reference}: {e}"))),
        // A failed transfer explains whatever the gate made of the bytes before it.
        (Err(_), None, Err(e)) => Err(Rejection::new(Reason::IoError, None, format!("{reference}: {e}"))),
        (Err(r), None, Ok(())) => Err(r),
    };
    let t = match verdict {
        Ok(t) => t,
        // Dropping the temp file removes it.
        Err(r) => return Ok(Err(r)),
    };
    atomic::commit(temp, dest, true).map_err(|e| Error::io(dest, e))?;
    Ok(Ok((pulled, t)))
}
