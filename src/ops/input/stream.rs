//! A bundle's bytes for one pass, and the faults under them: a file's read errors, a registry
//! layer's bytes that are not its descriptor's. A consumer's verdict stands only where the
//! stream under it did not fail ([`overturn`]).

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Evidence, InputError};
use crate::archive::{BundleRead, FileAt, InOrder};
use crate::bundle::verify::VerifyError;
use crate::oci::artifact::BlobMismatch;
use crate::oci::{self, Artifact, OciError};
use crate::progress::Progress;
use crate::read_ahead::{self, Sequential};
use crate::rejection::{Reason, Rejection};

/// The first fault under a stream: the bytes are not the descriptor's, or reading failed.
pub(super) type Fault = Arc<Mutex<Option<BlobMismatch>>>;

/// Records the first read error of a file in the fault slot, as a layer's reader does.
pub(super) struct Recording<R> {
    pub(super) inner: R,
    pub(super) fault: Fault,
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
pub(super) struct Counted<'p, B> {
    pub(super) inner: B,
    pub(super) progress: &'p dyn Progress,
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

/// Bytes passed over count as read: a decoding thread reads them by position.
impl<B: BundleRead> BundleRead for Counted<'_, B> {
    fn file(&self) -> Option<&Arc<File>> {
        self.inner.file()
    }

    fn position(&self) -> u64 {
        self.inner.position()
    }

    fn skip(&mut self, n: usize) -> io::Result<usize> {
        let n = self.inner.skip(n)?;
        self.progress.advance(n as u64);
        Ok(n)
    }

    fn rewind(&mut self, at: u64) -> io::Result<()> {
        self.inner.rewind(at)
    }
}

/// A bundle file: read in order (through a reading thread when large), or, when its frames are
/// read whole, by position ([`FileAt`]).
pub(super) enum FileInput {
    InOrder(Sequential<Recording<File>>),
    ByPosition(FileAt),
}

impl Read for FileInput {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            FileInput::InOrder(r) => r.read(buf),
            FileInput::ByPosition(r) => r.read(buf),
        }
    }
}

impl BufRead for FileInput {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        match self {
            FileInput::InOrder(r) => r.fill_buf(),
            FileInput::ByPosition(r) => r.fill_buf(),
        }
    }

    fn consume(&mut self, amt: usize) {
        match self {
            FileInput::InOrder(r) => r.consume(amt),
            FileInput::ByPosition(r) => r.consume(amt),
        }
    }
}

impl BundleRead for FileInput {
    fn file(&self) -> Option<&Arc<File>> {
        match self {
            FileInput::InOrder(_) => None,
            FileInput::ByPosition(r) => r.file(),
        }
    }

    fn position(&self) -> u64 {
        match self {
            FileInput::InOrder(_) => 0,
            FileInput::ByPosition(r) => r.position(),
        }
    }

    fn skip(&mut self, n: usize) -> io::Result<usize> {
        match self {
            FileInput::InOrder(r) => InOrder(r).skip(n),
            FileInput::ByPosition(r) => r.skip(n),
        }
    }

    fn rewind(&mut self, at: u64) -> io::Result<()> {
        match self {
            FileInput::InOrder(r) => InOrder(r).rewind(at),
            FileInput::ByPosition(r) => r.rewind(at),
        }
    }
}

pub(super) enum Stream<'p> {
    File(Counted<'p, FileInput>),
    /// A registry artifact whose layer is requested when the bundle is read.
    Pending(Box<oci::Pending>),
    /// A stream of the library's caller (nothing lies beside it).
    Reader(Box<dyn BundleRead + 'p>),
}

/// A bundle opened for one pass, with its evidence. Read it with [`BundleInput::judge`], which
/// puts the stream's own fault before whatever the consumer made of the bytes.
pub struct BundleInput<'p> {
    stream: Stream<'p>,
    fault: Fault,
    evidence: Evidence,
    label: PathBuf,
    progress: Option<&'p dyn Progress>,
    /// Where a registry layer's bytes are copied as they are received (a download's temp file).
    copy: Option<File>,
}

/// A consumer's judgement of a bundle, which a fault of the stream can overturn.
pub trait Judgement: Sized {
    /// A refusal before the consumer saw any byte (a registry's layer refused when requested).
    fn refused(rejection: Rejection) -> Self;

    /// The judgement replaced by `rejection` (the bytes were not the ones their descriptor
    /// names), keeping what the consumer learned of the agent and its signer.
    fn refused_for(self, rejection: Rejection) -> Self;

    /// The rejection, if this is one.
    fn rejection(&self) -> Option<&Rejection>;
}

/// The verifier's own result: a bundle that could not be read ([`VerifyError::Io`]) is no
/// judgement of its bytes, so a fault of the stream under it stands instead.
impl<T> Judgement for Result<T, VerifyError> {
    fn refused(rejection: Rejection) -> Self {
        Err(rejection.into())
    }

    fn refused_for(self, rejection: Rejection) -> Self {
        Err(match self {
            Err(VerifyError::Io(failed)) => failed.refused_as(rejection).into(),
            Err(VerifyError::Refused(earlier)) => {
                Rejection { agent: earlier.rejection.agent, key_id: earlier.rejection.key_id, ..rejection }.into()
            }
            Ok(_) => rejection.into(),
        })
    }

    fn rejection(&self) -> Option<&Rejection> {
        self.as_ref().err().and_then(VerifyError::refused).map(|r| &r.rejection)
    }
}

impl<'p> BundleInput<'p> {
    pub(super) fn new(
        stream: Stream<'p>,
        fault: Fault,
        evidence: Evidence,
        label: &Path,
        progress: &'p dyn Progress,
    ) -> Self {
        let progress = matches!(stream, Stream::File(_)).then_some(progress);
        BundleInput { stream, fault, evidence, label: label.to_path_buf(), progress, copy: None }
    }

    /// A bundle read from a stream the caller opened, named `label` in messages, with the
    /// evidence gathered for it ([`Evidence::gather`] with no file).
    pub fn from_reader(reader: impl BufRead + 'p, label: &Path, evidence: Evidence) -> Self {
        Self::from_bundle_read(InOrder(reader), label, evidence)
    }

    /// [`from_reader`](Self::from_reader), from bytes that may be a file read by position
    /// ([`FileAt`]).
    pub fn from_bundle_read(reader: impl BundleRead + 'p, label: &Path, evidence: Evidence) -> Self {
        BundleInput {
            stream: Stream::Reader(Box::new(reader)),
            fault: Fault::default(),
            evidence,
            label: label.to_path_buf(),
            progress: None,
            copy: None,
        }
    }

    /// The bundle's name in messages: its path, or its reference.
    pub fn label(&self) -> &Path {
        &self.label
    }

    /// What vouches for the bundle besides its signature.
    pub fn evidence(&self) -> &Evidence {
        &self.evidence
    }

    /// Fetches one of a registry's attestation referrers the evidence lists
    /// ([`Evidence::referred`]); `Err` inside: the registry's referrer is refused.
    pub fn fetch_referred(
        &mut self,
        listed: &oci::referrers::Listed,
    ) -> Result<Result<super::Piece, Rejection>, InputError> {
        let Stream::Pending(pending) = &mut self.stream else {
            return Err(InputError::Usage(format!("{}: not a registry artifact", self.label.display())));
        };
        match pending.fetch_referrer(listed) {
            Ok(found) => Ok(Ok(super::Piece { source: found.source, bytes: found.bytes })),
            Err(e) => super::refusal_or_error(e).map(Err),
        }
    }

    /// The evidence, taken out to be judged (the input keeps an empty one).
    pub fn take_evidence(&mut self) -> Evidence {
        std::mem::take(&mut self.evidence)
    }

    /// A registry artifact's manifest digest and checked manifest (`None` for a file).
    pub fn registry_artifact(&self) -> Option<(&str, &Artifact)> {
        match &self.stream {
            Stream::Pending(p) => Some((&p.manifest_digest, &p.artifact)),
            Stream::File(_) | Stream::Reader(_) => None,
        }
    }

    /// The manifest digest of a registry artifact (`None` for a file).
    pub fn manifest_digest(&self) -> Option<&str> {
        self.registry_artifact().map(|(digest, _)| digest)
    }

    /// Copies a registry layer's bytes into `copy` (a download's temp file) as they are
    /// received, on a receiving thread; a copy that cannot be completed is an error of
    /// [`Self::judge`]. Only a registry artifact is downloaded.
    pub fn copy_into(&mut self, copy: File) -> Result<(), InputError> {
        if !matches!(self.stream, Stream::Pending(_)) {
            return Err(InputError::Usage(format!("{}: not a registry artifact", self.label.display())));
        }
        self.copy = Some(copy);
        Ok(())
    }

    /// Runs `consume` over the bundle's bytes, then holds the result to the stream's fault: a
    /// read that failed is an [`InputError`] (whatever `consume` made of the bytes before it),
    /// bytes that are not their descriptor's refuse the bundle (`blob_mismatch`). A registry's
    /// layer is requested here.
    ///
    /// `consume` must read to the end before accepting: a layer's digest is checked there.
    pub fn judge<J: Judgement, E: From<InputError>>(
        self,
        consume: impl FnOnce(&mut dyn BundleRead) -> Result<J, E>,
    ) -> Result<J, E> {
        let BundleInput { stream, mut fault, label, progress, copy, .. } = self;
        let file_error = |source| E::from(InputError::File { path: label.clone(), source });
        let (judged, reached) = match stream {
            Stream::File(reader) => watched(reader, consume),
            Stream::Reader(reader) => watched(reader, consume),
            Stream::Pending(pending) => {
                let layer = match pending.open_layer() {
                    Ok(layer) => layer,
                    Err(e) => {
                        return match super::refusal_or_error(e) {
                            Ok(rejection) => Ok(J::refused(rejection)),
                            Err(e) => Err(e.into()),
                        };
                    }
                };
                fault = layer.reader.mismatch();
                match copy {
                    Some(copy) => {
                        let mut input = oci::prefetch::spawn(layer.reader, Some(copy)).map_err(file_error)?;
                        let (judged, reached) = watched(InOrder(&mut input), consume);
                        let received = input.finish();
                        let faulted = fault.lock().unwrap_or_else(|p| p.into_inner()).is_some();
                        let judged = overturn(judged, reached, &fault, &label)?;
                        return match received {
                            // The stream's own fault explains a receiver that stopped.
                            Err(_) if faulted => Ok(judged),
                            Ok(()) => Ok(judged),
                            Err(source) => Err(file_error(source)),
                        };
                    }
                    // Received (and SHA-256 hashed) on a reading thread beside the decoder when
                    // large, as a file is read.
                    None => match read_ahead::sequential(layer.reader, layer.artifact.layer_size) {
                        Ok(input) => watched(InOrder(input), consume),
                        Err(source) => (Err(file_error(source)), false),
                    },
                }
            }
        };
        if let Some(p) = progress {
            p.end();
        }
        overturn(judged, reached, &fault, &label)
    }
}

/// `consume` over `input`, and whether it reached the end of `input` or an error of it.
fn watched<B: BundleRead, T>(input: B, consume: impl FnOnce(&mut dyn BundleRead) -> T) -> (T, bool) {
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

/// Passing over the end is reaching it.
impl<B: BundleRead> BundleRead for Watched<B> {
    fn file(&self) -> Option<&Arc<File>> {
        self.inner.file()
    }

    fn position(&self) -> u64 {
        self.inner.position()
    }

    fn skip(&mut self, n: usize) -> io::Result<usize> {
        let got = self.inner.skip(n);
        if n > 0 && got.as_ref().map_or(true, |&n| n == 0) {
            self.reached = true;
        }
        got
    }

    fn rewind(&mut self, at: u64) -> io::Result<()> {
        self.inner.rewind(at)
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
    let refused_for_its_bytes = judged.as_ref().is_ok_and(|j| j.rejection().is_some());
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
