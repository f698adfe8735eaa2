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

use std::path::Path;

use crate::atomic;
use crate::bundle::verify::Discard;
use crate::error::Error;
use crate::ops::gate::{Gate, GateError, Verdict};
use crate::ops::input::{BundleSource, InputError};
use crate::progress::Silent;

/// What was pulled.
#[derive(Debug, Clone, Default)]
pub struct Pulled {
    /// The manifest's digest (empty when the artifact was refused before it was read).
    pub manifest_digest: String,
}

/// Runs the deployment `gate` over the bundle `source` names while the bytes stream into a
/// temp file beside `dest`; renames it to `dest` only if the gate accepted them and the layer
/// matched its descriptor. What the registry holds about the bundle (its attestations and
/// co-signatures, the referrers of its manifest) is judged before the layer is requested.
pub fn pull(source: &BundleSource, dest: &Path, gate: Gate) -> Result<(Pulled, Verdict), GateError> {
    if !matches!(source, BundleSource::Registry { .. }) {
        return Err(InputError::Usage(format!(
            "{}: pull takes a registry reference (oci://…)",
            source.label().display()
        ))
        .into());
    }
    let output = atomic::Output::new(dest, "-o").map_err(Error::from)?;
    let mut input = match source.open(&Silent, &gate.wanted())? {
        Ok(input) => input,
        Err(rejection) => return Ok((Pulled::default(), Verdict::refused(rejection))),
    };
    let pulled = Pulled { manifest_digest: input.manifest_digest().unwrap_or_default().to_owned() };
    let temp = output.temp().map_err(Error::from)?;
    input.copy_into(temp.as_file().try_clone().map_err(|e| Error::io(dest, e))?)?;
    let verdict = gate.judge(input, &mut Discard)?;
    if matches!(verdict, Verdict::Passed { .. }) {
        output.commit(temp).map_err(Error::from)?;
    }
    // Otherwise dropping the temp file removes it.
    Ok((pulled, verdict))
}
