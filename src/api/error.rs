//! Why the API could not give an answer: a bundle that was judged and refused ([`Error::Refused`],
//! when the caller asked for a verified agent), or a judgement that could not be made
//! ([`Error::Failed`]: an unreadable file, an invalid baseline, a locked state file...).

use std::fmt;

use super::verdict::{ReasonCode, Verdict};
use crate::error::ErrorCode;
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
        /// Why, as a stable code.
        code: FailureCode,
        /// What went wrong, naming the file concerned.
        message: String,
    },
}

/// Why no judgement could be made, as a stable code (its [`as_str`](FailureCode::as_str) is
/// what `bundle verify --format json` prints for the same failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureCode {
    /// A code the command line stops with (exit 2): `io_error`, `usage` (also an invalid
    /// baseline file, as the command line reports it), `key_error`, `state_error`,
    /// `policy_error` (a trust policy that is not one), `trusted_root_error` (a Sigstore
    /// trusted root that is not usable), `mcp_not_pinned`, ...
    Error(ErrorCode),
    /// A tool definition that is not a tools.json tool ([`crate::api::contract_fingerprint`]):
    /// `invalid_tool`.
    InvalidTool,
    /// A release [`crate::api::diff`] cannot read: the bundle's reason code
    /// (`digest_mismatch`, ...).
    Unreadable(ReasonCode),
}

impl FailureCode {
    /// The stable string form, e.g. `io_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::Error(code) => code.as_str(),
            FailureCode::InvalidTool => "invalid_tool",
            FailureCode::Unreadable(reason) => reason.as_str(),
        }
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorCode> for FailureCode {
    fn from(code: ErrorCode) -> Self {
        FailureCode::Error(code)
    }
}

impl Error {
    /// The stable code: the reason code of a refusal, or the code of a failure.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Refused(v) => v.code().map_or("refused", |c| c.as_str()),
            Error::Failed { code, .. } => code.as_str(),
        }
    }

    /// The verdict of a refused bundle.
    pub fn verdict(&self) -> Option<&Verdict> {
        match self {
            Error::Refused(v) => Some(v),
            Error::Failed { .. } => None,
        }
    }

    /// The failure's code (`None` for a refusal).
    pub fn failure_code(&self) -> Option<FailureCode> {
        match self {
            Error::Refused(_) => None,
            Error::Failed { code, .. } => Some(*code),
        }
    }

    pub(crate) fn failed(code: impl Into<FailureCode>, message: impl Into<String>) -> Error {
        Error::Failed { code: code.into(), message: message.into() }
    }

    /// A library error, with the code `bundle verify --format json` gives it.
    pub(crate) fn coded(e: &(impl crate::error::Coded + fmt::Display)) -> Error {
        Error::failed(e.code(), e.to_string())
    }

    pub(crate) fn from_gate(e: GateError) -> Error {
        Error::failed(crate::error::Coded::code(&e), e.to_string())
    }
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
