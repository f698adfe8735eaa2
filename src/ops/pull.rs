//! `bundle pull`: download a bundle artifact's layer and run the deployment gate over its
//! bytes as they arrive; the destination file appears only if the gate accepted them.
//!
//! The bytes flow registry → [`CheckedReader`] (sha256 and size against the manifest's
//! descriptor) → a temp file beside the destination → the gate, in one pass and bounded
//! memory. The temp file is renamed over the destination only after the gate returned an
//! accepting verdict and the layer's digest matched; on any other outcome it is removed, so
//! nothing unverified is ever left on disk under the destination's name.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

use crate::atomic;
use crate::bundle::verify::{Reason, Rejection};
use crate::error::Error;
use crate::oci::{self, Artifact, CheckedReader, OciError, Reference, Refusal};

/// What was pulled.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub manifest_digest: String,
    pub artifact: Artifact,
}

/// The rejection that reports a registry failure: `unsupported_artifact` and `blob_mismatch`
/// (exit 1), `auth_failed` and `io_error` (exit 2).
pub fn rejection(e: &OciError) -> Rejection {
    let reason = match e {
        OciError::Rejected(Refusal::UnsupportedArtifact, _) => Reason::UnsupportedArtifact,
        OciError::Rejected(Refusal::BlobMismatch, _) => Reason::BlobMismatch,
        OciError::Auth(_) => Reason::AuthFailed,
        OciError::Tls(_) | OciError::Transient(_) | OciError::Io(_) | OciError::Usage(_) => Reason::IoError,
    };
    Rejection::new(reason, None, e.to_string())
}

/// Runs `judge` (the deployment gate) over the layer `reference` names while the bytes stream
/// into a temp file beside `dest`; renames it to `dest` only if `judge` accepted and the
/// layer matched its descriptor. `judge` must read its input to the end before accepting.
pub fn pull<T, E: From<Error>>(
    reference: &Reference,
    options: &oci::Options,
    dest: &Path,
    judge: impl FnOnce(&mut dyn BufRead) -> Result<Result<T, Rejection>, E>,
) -> Result<Result<(Pulled, T), Rejection>, E> {
    if dest.is_dir() {
        return Err(Error::Usage(format!("{} is a folder; -o takes the bundle file to write", dest.display())).into());
    }
    let layer = match oci::open_layer(reference, options) {
        Ok(l) => l,
        Err(e) => return Ok(Err(rejection(&e))),
    };
    let temp = atomic::temp_beside(dest).map_err(|e| Error::io(dest, e))?;
    let mismatch = layer.reader.mismatch();
    let pulled = Pulled { manifest_digest: layer.manifest_digest, artifact: layer.artifact };
    let tee = Tee { inner: layer.reader, out: io::BufWriter::with_capacity(1 << 20, temp.as_file()) };
    let mut input = BufReader::with_capacity(1 << 20, tee);
    let verdict = judge(&mut input)?;
    let Tee { inner, out } = input.into_inner();
    let recorded = mismatch.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let verdict = match (verdict, recorded) {
        (_, Some(m)) => Err(Rejection::new(Reason::BlobMismatch, None, format!("{reference}: {}", m.0))),
        (Ok(t), None) => match inner.finish() {
            Ok(()) => Ok(t),
            Err(m) => Err(Rejection::new(Reason::BlobMismatch, None, format!("{reference}: {}", m.0))),
        },
        (Err(r), None) => Err(r),
    };
    let t = match verdict {
        Ok(t) => t,
        // Dropping the temp file removes it.
        Err(r) => return Ok(Err(r)),
    };
    out.into_inner().map_err(|e| Error::io(dest, e.into_error()))?;
    atomic::commit(temp, dest, true).map_err(|e| Error::io(dest, e))?;
    Ok(Ok((pulled, t)))
}

/// Copies every byte read into `out` (the temp file) as it passes.
struct Tee<R, W> {
    inner: R,
    out: W,
}

impl<R: Read, W: Write> Read for Tee<CheckedReader<R>, W> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out.write_all(&buf[..n])?;
        Ok(n)
    }
}
