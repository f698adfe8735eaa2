//! Errors that stop a command before it can judge anything: bad usage, unreadable files,
//! failed writes, a registry that cannot be reached. They map to exit code 2; problems *found*
//! in an agent or bundle are diagnostics or rejections instead (exit code 1).
//!
//! Every exit-2 error has a stable [`ErrorCode`] (the `code` of the `--format json` error
//! document, `crate::error_code`). Each error type of the library says its own with
//! [`Coded`], an exhaustive `match` the compiler checks, beside its definition; the command
//! line keeps the one list of those types that it walks an error's chain with.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Usage(String),
    #[error("{message}")]
    Key { message: String },
    /// An ssh-agent or PKCS#11 key could not sign; [`crate::keys::SignerError::code`] says why.
    #[error(transparent)]
    Signer(#[from] crate::keys::SignerError),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use crate::error_code::{Coded, ErrorCode};

impl Coded for Error {
    fn code(&self) -> ErrorCode {
        match self {
            Error::Io { .. } => ErrorCode::IoError,
            Error::Usage(_) => ErrorCode::Usage,
            Error::Key { .. } => ErrorCode::KeyError,
            Error::Signer(e) => e.code(),
        }
    }
}
