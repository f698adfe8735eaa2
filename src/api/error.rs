//! Why the API could not give an answer: a bundle that was judged and refused ([`Error::Refused`],
//! when the caller asked for a verified agent), or a judgement that could not be made
//! ([`Error::Failed`]: an unreadable file, an invalid baseline, a locked state file...).

use std::fmt;

use super::verdict::Verdict;
use crate::ops::gate::GateError;

/// The error of every fallible call in [`crate::api`]. Its [`code`](Error::code) is stable.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The bundle was judged and refused: the verdict says why (its code is a reason code such
    /// as `digest_mismatch`). Only calls that return a verified agent refuse this way;
    /// [`crate::api::Bundle::verify`] returns refusals as a [`Verdict`].
    Refused(Box<Verdict>),
    /// No judgement could be made: see [`Error::code`] and the message.
    Failed {
        /// The stable code: `io_error`, `usage` (also an invalid baseline file, as the
        /// command line reports it), `key_error`, `state_error`, `policy_error` (a trust
        /// policy that is not one), `trusted_root_error` (a Sigstore trusted root that is not
        /// usable) or `invalid_tool`.
        code: &'static str,
        /// What went wrong, naming the file concerned.
        message: String,
    },
}

impl Error {
    /// The stable code: the reason code of a refusal, or the code of a failure.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Refused(v) => v.code().map_or("refused", |c| c.as_str()),
            Error::Failed { code, .. } => code,
        }
    }

    /// The verdict of a refused bundle.
    pub fn verdict(&self) -> Option<&Verdict> {
        match self {
            Error::Refused(v) => Some(v),
            Error::Failed { .. } => None,
        }
    }

    pub(crate) fn failed(code: &'static str, message: impl Into<String>) -> Error {
        Error::Failed { code, message: message.into() }
    }

    /// A library error, with the code `bundle verify --format json` gives it.
    pub(crate) fn coded(e: &(impl crate::error::Coded + fmt::Display)) -> Error {
        Error::failed(e.code().as_str(), e.to_string())
    }

    pub(crate) fn from_gate(e: GateError) -> Error {
        let code = gate_error_code(&e);
        Error::failed(code, e.to_string())
    }
}

/// The code `bundle verify --format json` gives the same error.
fn gate_error_code(e: &GateError) -> &'static str {
    crate::error::Coded::code(e).as_str()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Refused(v) => match v.reasons().first() {
                Some(r) => write!(f, "bundle refused: {} [{}]", r.message, r.code),
                None => f.write_str("bundle refused"),
            },
            Error::Failed { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}
