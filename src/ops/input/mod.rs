//! One way in for every bundle: a local file or an `oci://` registry reference, opened as one
//! typed input that owns its transfer faults and carries the bundle's [`Evidence`] (what
//! vouches for it besides its signature, gathered the same way from beside a file or from a
//! registry's referrers). `verify`, `unpack`, `pull`, `inspect` and `cosign` read a bundle
//! only through [`BundleSource::open`] and [`BundleInput::judge`] (the gate's
//! `Gate::judge`), so that none of them can forget to look at what went wrong under the bytes
//! it judged, or judge evidence gathered some other way.
//!
//! Two kinds of trouble are kept apart, whatever the source:
//! - the bundle was judged and refused: a [`Rejection`] (exit 1), including a registry's
//!   artifact that is not a bundle (`unsupported_artifact`) or whose bytes are not the ones its
//!   descriptor names (`blob_mismatch`);
//! - the bundle could not be read at all (a missing file, a registry that is down, refused
//!   credentials, TLS, a transfer broken off): an [`InputError`] (exit 2), whatever a consumer
//!   made of the bytes before the fault.

mod evidence;
mod stream;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

pub use evidence::{Evidence, Piece, Wanted, keyless_path};
pub use stream::{BundleInput, Judgement};
use stream::{Counted, Fault, FileInput, Recording, Stream};

use crate::archive::FileAt;
use crate::error::{Coded, ErrorCode};
use crate::oci::{self, Artifact, OciError, Reference, Refusal};
use crate::progress::Progress;
use crate::read_ahead;
use crate::rejection::{Reason, Rejection};

/// Where a bundle comes from.
#[derive(Debug, Clone)]
pub enum BundleSource {
    /// A bundle file.
    File(PathBuf),
    /// A registry artifact, and how to reach its registry.
    Registry { reference: Reference, options: oci::Options },
}

/// Why a bundle could not be read (exit 2): it was never judged.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A bad reference, or registry options given for a file.
    #[error("{0}")]
    Usage(String),
    /// The file cannot be opened or read.
    #[error("cannot read {}", path.display())]
    File { path: PathBuf, source: io::Error },
    /// The registry failed: unreachable, credentials, TLS, a timeout, a transfer broken off.
    #[error("{0}")]
    Registry(OciError),
}

impl Coded for InputError {
    fn code(&self) -> ErrorCode {
        match self {
            InputError::Usage(_) => ErrorCode::Usage,
            InputError::File { .. } => ErrorCode::IoError,
            InputError::Registry(e) => e.code(),
        }
    }
}

impl BundleSource {
    /// The source `input` names: an `oci://` reference (reached with `options`) or a file (for
    /// which registry options are a usage error).
    pub fn new(input: &Path, options: oci::Options) -> Result<Self, InputError> {
        if let Some(text) = input.to_str().filter(|t| oci::reference::is_reference(t)) {
            let reference = Reference::parse(text).map_err(InputError::Usage)?;
            if options.plain_http && !options.ca_certs.is_empty() {
                return Err(InputError::Usage(format!(
                    "--plain-http and --ca-cert exclude each other: a plain-http registry has no certificate ({reference})"
                )));
            }
            return Ok(BundleSource::Registry { reference, options });
        }
        if options.plain_http || !options.ca_certs.is_empty() {
            return Err(InputError::Usage(format!(
                "--plain-http and --ca-cert apply to registry references (oci://…), not to the file {}",
                input.display()
            )));
        }
        Ok(BundleSource::File(input.to_path_buf()))
    }

    /// The bundle's name in messages: the path, or the reference.
    pub fn label(&self) -> PathBuf {
        match self {
            BundleSource::File(path) => path.clone(),
            BundleSource::Registry { reference, .. } => PathBuf::from(reference.to_string()),
        }
    }

    /// Opens the bundle for one pass, with the evidence `wanted` gathered beside it: a file's
    /// from the files named and beside it, a registry artifact's from its referrers (and its
    /// config) — fetched and checked before the layer, which is requested only when the bundle
    /// is read ([`BundleInput::judge`]). A refusal of the registry's artifact is the `Err`
    /// inside. `progress` hears of the bytes read from a file.
    pub fn open<'p>(
        &self,
        progress: &'p dyn Progress,
        wanted: &Wanted,
    ) -> Result<Result<BundleInput<'p>, Rejection>, InputError> {
        match self {
            BundleSource::File(path) => {
                crate::bundle::file::refuse_folder(path).map_err(InputError::Usage)?;
                let file = File::open(path).map_err(|source| InputError::File { path: path.clone(), source })?;
                let evidence = Evidence::gather(Some(path), wanted)?;
                let size = file.metadata().map_or(0, |m| m.len());
                progress.begin("verifying", size);
                let fault = Fault::default();
                // A bundle whose frames are read whole is read by position, its frames by the
                // decoding threads themselves (`archive::FileAt`); a large one of an earlier
                // release (one frame) on a reading thread of its own, beside the decoder.
                let input = match FileAt::of_bundle(file) {
                    Ok(by_position) => FileInput::ByPosition(by_position),
                    Err((file, size)) => {
                        let reader = Recording { inner: file, fault: fault.clone() };
                        let input = read_ahead::sequential(reader, size)
                            .map_err(|source| InputError::File { path: path.clone(), source })?;
                        FileInput::InOrder(input)
                    }
                };
                Ok(Ok(BundleInput::new(
                    Stream::File(Counted { inner: input, progress }),
                    fault,
                    evidence,
                    path,
                    progress,
                )))
            }
            BundleSource::Registry { reference, options } => {
                let types = Evidence::referrer_types(wanted);
                let mut pending = match oci::open_artifact(reference, options, &types, wanted.config) {
                    Ok(pending) => pending,
                    Err(e) => return refusal_or_error(e).map(Err),
                };
                let evidence = match Evidence::of_artifact(&mut pending, wanted)? {
                    Ok(evidence) => evidence,
                    Err(rejection) => return Ok(Err(rejection)),
                };
                let label = self.label();
                Ok(Ok(BundleInput::new(
                    Stream::Pending(Box::new(pending)),
                    Fault::default(),
                    evidence,
                    &label,
                    progress,
                )))
            }
        }
    }

    /// A registry artifact's manifest and (unsigned, informational) config, without the
    /// bundle: `Err` inside when the registry's artifact is refused.
    pub fn config(&self) -> Result<Result<RegistryConfig, Rejection>, InputError> {
        let BundleSource::Registry { reference, options } = self else {
            return Err(InputError::Usage("only a registry artifact has a config".into()));
        };
        match oci::fetch_config(reference, options) {
            Ok((digest, artifact, config)) => Ok(Ok(RegistryConfig { digest, artifact, config })),
            Err(e) => refusal_or_error(e).map(Err),
        }
    }
}

/// What a registry says of an artifact before its bundle is read.
#[derive(Debug)]
pub struct RegistryConfig {
    /// The manifest's digest.
    pub digest: String,
    pub artifact: Artifact,
    pub config: oci::artifact::Config,
}

/// A registry failure: a refusal of the artifact (exit 1) or an error (exit 2).
pub(crate) fn refusal_or_error(e: OciError) -> Result<Rejection, InputError> {
    match e {
        OciError::Rejected(Refusal::UnsupportedArtifact, m) => Ok(Rejection::new(Reason::UnsupportedArtifact, None, m)),
        OciError::Rejected(Refusal::BlobMismatch, m) => Ok(Rejection::new(Reason::BlobMismatch, None, m)),
        // An attestation referrer over the cap is named as the same file over it is.
        OciError::Rejected(Refusal::AttestationMalformed | Refusal::TooLarge, m) => {
            Ok(Rejection::new(Reason::AttestationMalformed, None, m))
        }
        e => Err(InputError::Registry(e)),
    }
}
