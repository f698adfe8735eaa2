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

use std::path::{Path, PathBuf};

use crate::atomic;
use crate::bundle::verify::Discard;
use crate::error::Error;
use crate::evidence::files::{self, Kind};
use crate::evidence::judge::Attestation;
use crate::minisign::Signature;
use crate::ops::gate::{Gate, GateError, Verdict};
use crate::ops::input::{BundleSource, InputError, Piece};
use crate::progress::Silent;
use crate::trust_policy::signatures;

/// What was pulled.
#[derive(Debug, Clone, Default)]
pub struct Pulled {
    /// The manifest's digest (empty when the artifact was refused before it was read).
    pub manifest_digest: String,
    /// The evidence kept beside the file (`<FILE>.cosig`, `<FILE>.{provenance,contract}.sigstore.json`).
    pub evidence: Vec<PathBuf>,
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
    let wanted = gate.wanted();
    let wanted_cosignatures = wanted.cosignatures.is_some();
    let mut input = match source.open(&Silent, &wanted)? {
        Ok(input) => input,
        Err(rejection) => return Ok((Pulled::default(), Verdict::refused(rejection))),
    };
    let mut pulled =
        Pulled { manifest_digest: input.manifest_digest().unwrap_or_default().to_owned(), evidence: Vec::new() };
    // What vouched for the bytes, kept to be written beside them if they pass.
    let cosignatures = wanted_cosignatures.then(|| input.evidence().cosignatures.clone());
    let attestations = input.evidence().attestations.clone();
    let temp = output.temp().map_err(Error::from)?;
    input.copy_into(temp.as_file().try_clone().map_err(|e| Error::io(dest, e))?)?;
    let verdict = gate.judge(input, &mut Discard)?;
    if let Verdict::Passed { attestations: judged, referred, .. } = &verdict {
        output.commit(temp).map_err(Error::from)?;
        let all: Vec<Piece> = attestations.into_iter().chain(referred.iter().cloned()).collect();
        pulled.evidence = keep_beside(dest, cosignatures.as_deref(), &all, judged)?;
    }
    // Otherwise dropping the temp file removes it.
    Ok((pulled, verdict))
}

/// Writes what vouched for a pulled release beside it, by the names `verify` and `unpack` look
/// for (each atomically): the co-signatures the gate counted from (when a trust policy wanted
/// them) in `<FILE>.cosig`, and of each attestation kind the first one the gate accepted. A
/// file of those names that is not replaced described an earlier file of that name and is
/// removed. Returns the files written.
fn keep_beside(
    dest: &Path,
    cosignatures: Option<&[Piece]>,
    attestations: &[Piece],
    judged: &[Attestation],
) -> Result<Vec<PathBuf>, Error> {
    let mut written = Vec::new();
    let mut put = |path: PathBuf, bytes: Option<Vec<u8>>| -> Result<(), Error> {
        match bytes {
            Some(bytes) => {
                atomic::write(&path, &bytes, true).map_err(|e| Error::io(&path, e))?;
                written.push(path);
            }
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(&path, e)),
                _ => {}
            },
        }
        Ok(())
    };
    if let Some(pieces) = cosignatures {
        // The gate parsed every list before it passed the bundle; each signature once.
        let mut all: Vec<Signature> = Vec::new();
        for piece in pieces {
            for s in signatures::parse(&String::from_utf8_lossy(&piece.bytes)).unwrap_or_default() {
                if !all.iter().any(|a| a.to_text() == s.to_text()) {
                    all.push(s);
                }
            }
        }
        let text = (!all.is_empty()).then(|| signatures::to_text(&all).into_bytes());
        put(signatures::cosig_path(dest), text)?;
    }
    for kind in Kind::ALL {
        let accepted = judged.iter().find(|j| j.is_ok() && j.kind() == Some(kind));
        let bytes =
            accepted.and_then(|j| attestations.iter().find(|p| p.source == j.report.source)).map(|p| p.bytes.clone());
        put(files::beside(dest, kind), bytes)?;
    }
    Ok(written)
}
