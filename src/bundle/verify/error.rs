//! What the verifier returns instead of a verified bundle: a refusal (the bundle was judged,
//! exit 1), or an I/O failure (its bytes could not be read, or an entry could not be written to
//! the sink: no verdict on the bundle at all, exit 2 with `io_error`). The two are kept apart in
//! the type so that no caller can mistake a full disk for a bad bundle, nor the other way round.

use std::io;
use std::path::Path;

use super::Refused;
use crate::archive::ArchiveError;
use crate::rejection::Rejection;

/// Why [`verify`](super::verify) returned no verified bundle.
#[derive(Debug)]
pub enum VerifyError {
    /// The bundle was judged and refused.
    Refused(Refused),
    /// The bundle could not be judged: see [`VerifyIoError`].
    Io(VerifyIoError),
}

/// Which way the bytes failed to move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoDirection {
    /// Reading the bundle failed (the file, the stream under it).
    Read,
    /// Writing an entry to the sink failed (a full disk, a read-only folder).
    Write,
}

/// The verifier could not read the bundle or write one of its entries: not a verdict on the
/// bundle. The agent and signer are noted when they were known by then, so that a fault of the
/// stream under the reader (a registry layer whose bytes are not its descriptor's) can still
/// name them when it turns the failure into a refusal.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", self.what())]
pub struct VerifyIoError {
    pub direction: IoDirection,
    /// The entry concerned: always for a write, when the reader knew it for a read.
    pub entry: Option<String>,
    /// The operating system's cause.
    pub source: io::Error,
    pub agent: Option<(String, String)>,
    pub key_id: Option<String>,
}

impl VerifyIoError {
    pub(crate) fn read(entry: Option<String>, source: io::Error) -> Self {
        VerifyIoError { direction: IoDirection::Read, entry, source, agent: None, key_id: None }
    }

    pub(crate) fn write(entry: &str, source: io::Error) -> Self {
        VerifyIoError {
            direction: IoDirection::Write,
            entry: Some(entry.to_owned()),
            source,
            agent: None,
            key_id: None,
        }
    }

    fn what(&self) -> String {
        match (self.direction, &self.entry) {
            (IoDirection::Write, Some(entry)) => format!("cannot write `{entry}`"),
            (IoDirection::Write, None) => "cannot write an entry".to_owned(),
            (IoDirection::Read, Some(entry)) => format!("cannot read the bundle at `{entry}`"),
            (IoDirection::Read, None) => "cannot read the bundle".to_owned(),
        }
    }

    /// `rejection`, naming the agent and signer this failure had learned.
    pub fn refused_as(&self, mut rejection: Rejection) -> Rejection {
        rejection.agent = self.agent.clone();
        rejection.key_id = self.key_id.clone();
        rejection
    }
}

/// A failed read or write is `io_error`, like every other exit-2 I/O failure.
impl crate::error_code::Coded for VerifyIoError {
    fn code(&self) -> crate::error_code::ErrorCode {
        crate::error_code::ErrorCode::IoError
    }
}

impl VerifyError {
    /// Notes the agent and signer known when the verifier stopped.
    pub(crate) fn learned(mut self, agent: Option<(String, String)>, key_id: Option<String>) -> Self {
        match &mut self {
            VerifyError::Refused(r) => (r.agent, r.key_id) = (agent, key_id),
            VerifyError::Io(e) => (e.agent, e.key_id) = (agent, key_id),
        }
        self
    }

    /// The rejection of a refused bundle, or the I/O failure as an error naming the file that
    /// failed (`bundle` for a read): for a caller that reports only the reason of a refusal.
    pub fn rejection(self, bundle: &Path) -> Result<Rejection, crate::Error> {
        self.refusal(bundle).map(Refused::into_rejection)
    }

    /// The refusal, or the I/O failure as an error (see [`Self::rejection`]).
    pub fn refusal(self, bundle: &Path) -> Result<Refused, crate::Error> {
        match self {
            VerifyError::Refused(r) => Ok(r),
            VerifyError::Io(e) => Err(e.into_error(bundle)),
        }
    }

    /// The refusal, if this is one.
    pub fn refused(&self) -> Option<&Refused> {
        match self {
            VerifyError::Refused(r) => Some(r),
            VerifyError::Io(_) => None,
        }
    }
}

impl VerifyIoError {
    /// As the crate's I/O error: the bundle file for a read, the entry for a write.
    pub fn into_error(self, bundle: &Path) -> crate::Error {
        match (self.direction, self.entry) {
            (IoDirection::Write, Some(entry)) => crate::Error::io(entry, self.source),
            _ => crate::Error::io(bundle, self.source),
        }
    }
}

impl From<Refused> for VerifyError {
    fn from(r: Refused) -> Self {
        VerifyError::Refused(r)
    }
}

impl From<Rejection> for VerifyError {
    fn from(r: Rejection) -> Self {
        VerifyError::Refused(r.into())
    }
}

impl From<VerifyIoError> for VerifyError {
    fn from(e: VerifyIoError) -> Self {
        VerifyError::Io(e)
    }
}

/// The archive reader's I/O errors are failures to read; every other archive error refuses.
impl From<ArchiveError> for VerifyError {
    fn from(e: ArchiveError) -> Self {
        match Rejection::try_from(e) {
            Ok(rejection) => rejection.into(),
            Err((entry, source)) => VerifyIoError::read(entry, source).into(),
        }
    }
}
