//! What vouches for a bundle besides its own signature, gathered with the bundle through the
//! one way in: co-signatures, keyless (Sigstore) signatures offered to a trust policy, and
//! attestations. The same value, however it was found: files named on the command line, the
//! documented files beside a bundle file (`<BUNDLE>.cosig`, `<BUNDLE>.sigstore.json`,
//! `<BUNDLE>.{provenance,contract}.sigstore.json`), or a registry artifact's referrers.
//!
//! Nothing here is trusted or judged: each piece is read within its cap and kept with where it
//! came from; the gate authenticates, binds each to the file and counts.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::InputError;
use crate::evidence::files;
use crate::keyless::SigstoreBundle;
use crate::oci::{self, referrers};
use crate::regular_file::{self, Links};
use crate::rejection::{Reason, Rejection};
use crate::trust_policy::signatures;

/// One piece of evidence as found: where it came from (a file, `referrer sha256:…`) and its
/// bytes, read no further than one byte over its cap (the judgement refuses a larger one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub source: String,
    pub bytes: Vec<u8>,
}

/// Which evidence a consumer wants gathered with a bundle (the gate's options say).
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    /// Attestation files named (`--attestation`).
    pub attestations: Vec<PathBuf>,
    /// Whether to look beside a bundle file for its attestations when none are named.
    pub discover_attestations: bool,
    /// Co-signature files named (`--cosignatures`); `None`: co-signatures are not read (no
    /// trust policy). Named none: `<BUNDLE>.cosig` beside a file, or a registry's referrers.
    pub cosignatures: Option<Vec<PathBuf>>,
    /// Keyless signature files named (`--sigstore` under a policy); `None`: not read. Named
    /// none: `<BUNDLE>.sigstore.json` beside a file.
    pub keyless: Option<Vec<PathBuf>>,
    /// Whether a registry artifact's config is wanted (to pick the policy's rules before the
    /// layer moves).
    pub config: bool,
}

/// The evidence of one bundle.
#[derive(Debug, Default)]
pub struct Evidence {
    /// Co-signature lists (minisign signatures over manifest.toml), each as text.
    pub cosignatures: Vec<Piece>,
    /// Keyless signatures (Sigstore bundles over the bundle file) offered to a trust policy.
    pub keyless: Vec<SigstoreBundle>,
    /// Whether the keyless signatures were named rather than found beside the bundle.
    pub keyless_named: bool,
    /// Attestations (Sigstore bundles holding in-toto statements about the file).
    pub attestations: Vec<Piece>,
    /// A registry's attestation referrers, listed but not fetched: the judge fetches each with
    /// [`super::BundleInput::fetch_referred`] and keeps only what its verdict needs, so that
    /// hundreds of them never sit in memory together.
    pub referred: Vec<oci::referrers::Listed>,
    /// The SHA-256 the bytes are bound to before they are read: a registry layer's descriptor
    /// digest (the stream fails unless its bytes have it). `None` for a file: its SHA-256 is
    /// computed in the pass that judges it.
    pub sha256: Option<[u8; 32]>,
    /// A registry artifact's config (unsigned claims), when wanted.
    pub config: Option<oci::artifact::Config>,
}

impl Evidence {
    /// The evidence of a bundle file at `bundle` (`None` for a stream: nothing lies beside
    /// it), from the files named and the documented names beside it.
    pub fn gather(bundle: Option<&Path>, wanted: &Wanted) -> Result<Evidence, InputError> {
        let beside = |path: PathBuf| bundle.is_some().then_some(path).filter(|p| p.is_file());
        let mut attestations = read_all(&wanted.attestations, crate::attest::MAX_ATTESTATION_BYTES)?;
        if wanted.attestations.is_empty()
            && wanted.discover_attestations
            && let Some(bundle) = bundle.filter(|b| b.is_file())
        {
            attestations = read_all(&files::discover(bundle), crate::attest::MAX_ATTESTATION_BYTES)?;
        }
        let cosignatures = match &wanted.cosignatures {
            None => Vec::new(),
            Some(named) if named.is_empty() => {
                let found = bundle.and_then(|b| beside(signatures::cosig_path(b)));
                read_all(found.as_slice(), signatures::MAX_SIGNATURES_BYTES)?
            }
            Some(named) => read_all(named, signatures::MAX_SIGNATURES_BYTES)?,
        };
        let (keyless, keyless_named) = match &wanted.keyless {
            None => (Vec::new(), false),
            Some(named) if named.is_empty() => {
                let found = bundle.and_then(|b| beside(keyless_path(b)));
                (read_keyless(found.as_slice())?, false)
            }
            Some(named) => (read_keyless(named)?, true),
        };
        Ok(Evidence {
            cosignatures,
            keyless,
            keyless_named,
            attestations,
            referred: Vec::new(),
            sha256: None,
            config: None,
        })
    }

    /// The evidence of a registry artifact: its referrers (attestations, listed to be fetched
    /// one at a time; co-signatures, fetched now, when wanted) and config, then the files named
    /// (nothing lies beside a reference). `Err` inside: a referrer is refused.
    pub fn of_artifact(pending: &mut oci::Pending, wanted: &Wanted) -> Result<Result<Evidence, Rejection>, InputError> {
        let mut evidence = Evidence::gather(None, wanted)?;
        let mut cosignatures = Vec::new();
        for listed in std::mem::take(&mut pending.referrers) {
            if listed.artifact_type == signatures::COSIGNATURE_ARTIFACT_TYPE {
                match pending.fetch_referrer(&listed) {
                    Ok(found) => cosignatures.push(Piece { source: found.source, bytes: found.bytes }),
                    // Named as a co-signature file over its cap is.
                    Err(oci::OciError::Rejected(oci::Refusal::TooLarge, m)) => {
                        return Ok(Err(Rejection::new(Reason::LimitExceeded, None, m)));
                    }
                    Err(e) => return super::refusal_or_error(e).map(Err),
                }
            } else {
                evidence.referred.push(listed);
            }
        }
        // The registry's co-signatures first, then the files named.
        cosignatures.append(&mut evidence.cosignatures);
        evidence.cosignatures = cosignatures;
        evidence.sha256 = pending.layer_sha256();
        evidence.config = pending.config.take();
        Ok(Ok(evidence))
    }

    /// The referrers a registry is asked for: attestations always (they are judged whenever
    /// present; in cosign's layout and in that of earlier releases), co-signatures when wanted.
    pub fn referrer_types(wanted: &Wanted) -> Vec<referrers::Wanted<'static>> {
        let mut types = files::wanted_referrers();
        if wanted.cosignatures.is_some() {
            types.push(referrers::Wanted::Typed {
                artifact_type: signatures::COSIGNATURE_ARTIFACT_TYPE,
                media_type: signatures::COSIGNATURE_MEDIA_TYPE,
            });
        }
        types
    }
}

/// Where a keyless signature of a bundle file is looked for: `<bundle>.sigstore.json` beside it
/// (the name `sigstore sign` gives it).
pub fn keyless_path(bundle: &Path) -> PathBuf {
    let mut name = bundle.as_os_str().to_owned();
    name.push(".sigstore.json");
    name.into()
}

/// Each file, read no further than one byte over `cap`; only a regular file (a FIFO or device
/// named as evidence is refused unread).
fn read_all(paths: &[PathBuf], cap: u64) -> Result<Vec<Piece>, InputError> {
    paths
        .iter()
        .map(|path| {
            let error = |source| InputError::File { path: path.clone(), source };
            let file = regular_file::open(path, Links::Follow).map_err(|e| error(e.into_io()))?;
            let mut bytes = Vec::new();
            file.take(cap + 1).read_to_end(&mut bytes).map_err(error)?;
            Ok(Piece { source: path.display().to_string(), bytes })
        })
        .collect()
}

fn read_keyless(paths: &[PathBuf]) -> Result<Vec<SigstoreBundle>, InputError> {
    paths
        .iter()
        .map(|path| {
            SigstoreBundle::read(path).map_err(|e| {
                let source = match e {
                    crate::Error::Io { source, .. } => source,
                    other => std::io::Error::other(other.to_string()),
                };
                InputError::File { path: path.clone(), source }
            })
        })
        .collect()
}
