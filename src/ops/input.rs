//! One way in for every bundle: a local file or an `oci://` registry reference, opened as one
//! typed stream that owns its transfer faults. `verify`, `unpack`, `pull`, `inspect` (and any
//! later consumer) read a bundle only through [`BundleSource::open`] and
//! [`BundleInput::judge`], so that none of them can forget to look at what went wrong under
//! the bytes it judged.
//!
//! Two kinds of trouble are kept apart, whatever the source:
//! - the bundle was judged and refused: a [`Rejection`] (exit 1), including a registry's
//!   artifact that is not a bundle (`unsupported_artifact`) or whose bytes are not the ones its
//!   descriptor names (`blob_mismatch`);
//! - the bundle could not be read at all (a missing file, a registry that is down, refused
//!   credentials, TLS, a transfer broken off): an [`InputError`] (exit 2), whatever a consumer
//!   made of the bytes before the fault.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::bundle::verify::{Reason, Rejection};
use crate::error::{Coded, ErrorCode};
use crate::oci::artifact::BlobMismatch;
use crate::oci::{self, Artifact, OciError, Reference, Refusal};
use crate::progress::Progress;
use crate::read_ahead::{self, Sequential};
use crate::trust_policy::signatures;

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
    #[error("cannot read {}: {source}", path.display())]
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

    /// Opens the bundle for one pass; a registry's manifest is fetched and checked first (a
    /// refusal of it is the `Err` inside). `progress` hears of the bytes read from a file.
    pub fn open<'p>(&self, progress: &'p dyn Progress) -> Result<Result<BundleInput<'p>, Rejection>, InputError> {
        match self {
            BundleSource::File(path) => {
                crate::bundle::file::refuse_folder(path).map_err(InputError::Usage)?;
                let file = File::open(path).map_err(|source| InputError::File { path: path.clone(), source })?;
                let size = file.metadata().map_or(0, |m| m.len());
                progress.begin("verifying", size);
                let fault = Fault::default();
                let reader = Recording { inner: file, fault: fault.clone() };
                // A large bundle is read on a thread of its own, beside the decoder.
                let input = read_ahead::sequential(reader, size)
                    .map_err(|source| InputError::File { path: path.clone(), source })?;
                Ok(Ok(BundleInput {
                    stream: Stream::File(Counted { inner: input, progress }),
                    fault,
                    label: path.clone(),
                    progress: Some(progress),
                }))
            }
            BundleSource::Registry { reference, options } => match oci::open_layer(reference, options) {
                Ok(layer) => Ok(Ok(self.layer_input(layer))),
                Err(e) => refusal_or_error(e).map(Err),
            },
        }
    }

    /// [`BundleSource::open`], and for a registry artifact what the registry holds about it
    /// (its attestations and co-signatures, the referrers of the bundle's manifest; its config
    /// with `with_config`) is given to `before` with the layer's SHA-256 BEFORE the layer is
    /// requested: a refusal there stops, and the layer's bytes never move. A file's evidence
    /// lies beside it, where the gate finds it itself.
    pub fn open_judged<'p>(
        &self,
        progress: &'p dyn Progress,
        with_config: bool,
        before: impl FnOnce(oci::BeforeLayer) -> Result<(), Rejection>,
    ) -> Result<Result<BundleInput<'p>, Rejection>, InputError> {
        let BundleSource::Registry { reference, options } = self else { return self.open(progress) };
        let mut wanted = crate::evidence::files::wanted_referrers();
        wanted.push(oci::referrers::Wanted::Typed {
            artifact_type: signatures::COSIGNATURE_ARTIFACT_TYPE,
            media_type: signatures::COSIGNATURE_MEDIA_TYPE,
        });
        match oci::open_layer_judged(reference, options, &wanted, with_config, before) {
            Ok(Ok(layer)) => Ok(Ok(self.layer_input(layer))),
            Ok(Err(rejection)) => Ok(Err(rejection)),
            Err(e) => refusal_or_error(e).map(Err),
        }
    }

    fn layer_input<'p>(&self, layer: oci::Layer) -> BundleInput<'p> {
        let fault = layer.reader.mismatch();
        BundleInput { stream: Stream::Layer(Box::new(layer)), fault, label: self.label(), progress: None }
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
fn refusal_or_error(e: OciError) -> Result<Rejection, InputError> {
    match e {
        OciError::Rejected(Refusal::UnsupportedArtifact, m) => Ok(Rejection::new(Reason::UnsupportedArtifact, None, m)),
        OciError::Rejected(Refusal::BlobMismatch, m) => Ok(Rejection::new(Reason::BlobMismatch, None, m)),
        OciError::Rejected(Refusal::AttestationMalformed, m) => {
            Ok(Rejection::new(Reason::AttestationMalformed, None, m))
        }
        e => Err(InputError::Registry(e)),
    }
}

/// The first fault under a stream: the bytes are not the descriptor's, or reading failed.
type Fault = Arc<Mutex<Option<BlobMismatch>>>;

/// Records the first read error of a file in the fault slot, as a layer's reader does.
struct Recording<R> {
    inner: R,
    fault: Fault,
}

impl<R: Read> Read for Recording<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            let mut slot = self.fault.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert_with(|| BlobMismatch { message: e.to_string(), transport: true });
        })
    }
}

/// A `BufRead` that reports the bytes consumed through it (the reading itself may happen on
/// another thread, which cannot hold the caller's `Progress`).
struct Counted<'p, B> {
    inner: B,
    progress: &'p dyn Progress,
}

impl<B: BufRead> Read for Counted<'_, B> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

impl<B: BufRead> BufRead for Counted<'_, B> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.progress.advance(amt as u64);
        self.inner.consume(amt);
    }
}

enum Stream<'p> {
    File(Counted<'p, Sequential<Recording<File>>>),
    Layer(Box<oci::Layer>),
}

/// A bundle opened for one pass. Read it with [`BundleInput::judge`], which puts the stream's
/// own fault before whatever the consumer made of the bytes.
pub struct BundleInput<'p> {
    stream: Stream<'p>,
    fault: Fault,
    label: PathBuf,
    progress: Option<&'p dyn Progress>,
}

/// A consumer's judgement of a bundle, which a fault of the stream can overturn.
pub trait Judgement: Sized {
    /// The judgement replaced by `rejection` (the bytes were not the ones their descriptor
    /// names), keeping what the consumer learned of the agent and its signer.
    fn refused_for(self, rejection: Rejection) -> Self;

    /// The rejection, if this is one.
    fn rejection(&self) -> Option<&Rejection>;
}

impl<T> Judgement for Result<T, Rejection> {
    fn refused_for(self, mut rejection: Rejection) -> Self {
        if let Err(earlier) = self {
            rejection.agent = earlier.agent;
            rejection.key_id = earlier.key_id;
        }
        Err(rejection)
    }

    fn rejection(&self) -> Option<&Rejection> {
        self.as_ref().err()
    }
}

impl<'p> BundleInput<'p> {
    /// The manifest digest of a registry artifact (`None` for a file).
    pub fn manifest_digest(&self) -> Option<&str> {
        match &self.stream {
            Stream::File(_) => None,
            Stream::Layer(layer) => Some(&layer.manifest_digest),
        }
    }

    /// A registry artifact's manifest digest and checked manifest (`None` for a file).
    pub fn registry_artifact(&self) -> Option<(&str, &Artifact)> {
        match &self.stream {
            Stream::File(_) => None,
            Stream::Layer(layer) => Some((&layer.manifest_digest, &layer.artifact)),
        }
    }

    /// Runs `consume` over the bundle's bytes, then holds the result to the stream's fault: a
    /// read that failed is an [`InputError`] (whatever `consume` made of the bytes before it),
    /// bytes that are not their descriptor's refuse the bundle (`blob_mismatch`).
    ///
    /// `consume` must read to the end before accepting: a layer's digest is checked there.
    pub fn judge<J: Judgement, E: From<InputError>>(
        self,
        consume: impl FnOnce(&mut dyn BufRead) -> Result<J, E>,
    ) -> Result<J, E> {
        let BundleInput { stream, fault, label, progress } = self;
        let (judged, reached) = match stream {
            Stream::File(reader) => watched(reader, consume),
            // Received (and SHA-256 hashed) on a reading thread beside the decoder when large,
            // as a file is read.
            Stream::Layer(layer) => match read_ahead::sequential(layer.reader, layer.artifact.layer_size) {
                Ok(input) => watched(input, consume),
                Err(source) => (Err(InputError::File { path: label.clone(), source }.into()), false),
            },
        };
        if let Some(p) = progress {
            p.end();
        }
        overturn(judged, reached, &fault, &label)
    }

    /// Like [`Self::judge`], while the bytes are also copied into `copy` (a temp file of a
    /// download) on a receiving thread; a file or a copy that cannot be completed is an error.
    pub fn judge_copying<J: Judgement, E: From<InputError>>(
        self,
        copy: File,
        consume: impl FnOnce(&mut dyn BufRead) -> Result<J, E>,
    ) -> Result<J, E> {
        let BundleInput { stream, fault, label, progress } = self;
        let file_error = |source| E::from(InputError::File { path: label.clone(), source });
        let mut input = match stream {
            // A download's copy is of a registry's layer; a file is already on disk.
            Stream::File(_) => {
                return Err(InputError::Usage(format!("{}: not a registry artifact", label.display())).into());
            }
            Stream::Layer(layer) => oci::prefetch::spawn(layer.reader, Some(copy)).map_err(file_error)?,
        };
        let (judged, reached) = watched(&mut input, consume);
        let received = input.finish();
        if let Some(p) = progress {
            p.end();
        }
        let faulted = fault.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        let judged = overturn(judged, reached, &fault, &label)?;
        match received {
            // The stream's own fault explains a receiver that stopped.
            Err(_) if faulted => Ok(judged),
            Ok(()) => Ok(judged),
            Err(source) => Err(file_error(source)),
        }
    }
}

/// `consume` over `input`, and whether it reached the end of `input` or an error of it.
fn watched<B: BufRead, T>(input: B, consume: impl FnOnce(&mut dyn BufRead) -> T) -> (T, bool) {
    let mut watching = Watched { inner: input, reached: false };
    let judged = consume(&mut watching);
    (judged, watching.reached)
}

/// A consumer's view of a stream that remembers whether the consumer was given its end or an
/// error of it. A reading thread may find a fault ahead of a consumer that stopped earlier
/// (a rejection): that fault is not the consumer's, so the result does not depend on how far
/// the thread had got.
struct Watched<B> {
    inner: B,
    reached: bool,
}

impl<B: BufRead> Read for Watched<B> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let got = self.inner.read(buf);
        if buf.is_empty() {
            return got;
        }
        if got.as_ref().map_or(true, |&n| n == 0) {
            self.reached = true;
        }
        got
    }
}

impl<B: BufRead> BufRead for Watched<B> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let Watched { inner, reached } = self;
        let got = inner.fill_buf();
        if got.as_ref().map_or(true, |b| b.is_empty()) {
            *reached = true;
        }
        got
    }

    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt);
    }
}

/// `judged`, unless the stream under it failed where the consumer got to (`reached`: its end
/// or its error) and the consumer did not already refuse the bundle for what its bytes say.
///
/// Both conditions keep the result independent of timing. A reading thread may find a fault
/// ahead of a consumer that a rejection stopped earlier. And the verifier compares a large
/// entry's digest only after reading on (`crate::hasher`), so a damaged entry near the end
/// may be found before or after the stream's own end: its `digest_mismatch` is the result
/// either way, as it was when the verifier compared each digest before reading on.
fn overturn<J: Judgement, E: From<InputError>>(
    judged: Result<J, E>,
    reached: bool,
    fault: &Fault,
    label: &Path,
) -> Result<J, E> {
    let refused_for_its_bytes =
        judged.as_ref().is_ok_and(|j| j.rejection().is_some_and(|r| r.reason != Reason::IoError));
    if !reached || refused_for_its_bytes {
        return judged;
    }
    let Some(fault) = fault.lock().unwrap_or_else(|p| p.into_inner()).clone() else { return judged };
    let origin = label.display();
    if fault.transport {
        let message = format!("{origin}: the transfer broke off: {}", fault.message);
        return Err(match label.to_str().filter(|t| oci::reference::is_reference(t)) {
            Some(_) if fault.message.contains(oci::client::TIMED_OUT) || fault.message.contains("timed out") => {
                InputError::Registry(OciError::Timeout(message))
            }
            Some(_) => InputError::Registry(OciError::Io(message)),
            None => InputError::File { path: label.to_path_buf(), source: io::Error::other(fault.message) },
        }
        .into());
    }
    let rejection = Rejection::new(Reason::BlobMismatch, None, format!("{origin}: {}", fault.message));
    Ok(judged?.refused_for(rejection))
}
