//! `bundle pull`: download a bundle artifact's layer and run the deployment gate over its
//! bytes as they arrive; the destination file appears only if the gate accepted them.
//!
//! The bytes flow registry → [`oci::CheckedReader`] (sha256 and size against the manifest's
//! descriptor) → a temp file beside the destination → the gate, in one pass and bounded
//! memory; the first two on a receiving thread ([`oci::prefetch`]), the gate on this one, all
//! through the one way in ([`super::input`]). The temp file is renamed over the destination
//! only after the gate returned an accepting verdict and the layer's digest matched; on any
//! other outcome it is removed, so nothing unverified is ever left on disk under the
//! destination's name.

use std::io::BufRead;
use std::path::Path;

use crate::atomic;
use crate::bundle::verify::Rejection;
use crate::error::Error;
use crate::oci;
use crate::ops::input::{BundleSource, InputError};
use crate::progress::Silent;

/// What was pulled.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub manifest_digest: String,
}

/// Runs `judge` (the deployment gate) over the bundle `source` names while the bytes stream
/// into a temp file beside `dest`; renames it to `dest` only if `judge` accepted and the
/// layer matched its descriptor. `judge` must read its input to the end before accepting.
/// `before` judges the bundle's attestations and co-signatures (its referrers, and its config
/// with `with_config`) before the layer is requested.
pub fn pull<T, E: From<Error> + From<InputError>>(
    source: &BundleSource,
    dest: &Path,
    with_config: bool,
    before: impl FnOnce(oci::BeforeLayer) -> Result<(), Rejection>,
    judge: impl FnOnce(&mut dyn BufRead) -> Result<Result<T, Rejection>, E>,
) -> Result<Result<(Pulled, T), Rejection>, E> {
    if !matches!(source, BundleSource::Registry { .. }) {
        return Err(InputError::Usage(format!(
            "{}: pull takes a registry reference (oci://…)",
            source.label().display()
        ))
        .into());
    }
    let output = atomic::Output::new(dest, "-o").map_err(|e| E::from(Error::from(e)))?;
    let input = match source.open_judged(&Silent, with_config, before)? {
        Ok(input) => input,
        Err(rejection) => return Ok(Err(rejection)),
    };
    let pulled = Pulled { manifest_digest: input.manifest_digest().unwrap_or_default().to_owned() };
    let temp = output.temp().map_err(|e| E::from(Error::from(e)))?;
    let copy = temp.as_file().try_clone().map_err(|e| Error::io(dest, e))?;
    let t = match input.judge_copying(copy, judge)? {
        Ok(t) => t,
        // Dropping the temp file removes it.
        Err(r) => return Ok(Err(r)),
    };
    output.commit(temp).map_err(|e| E::from(Error::from(e)))?;
    Ok(Ok((pulled, t)))
}
