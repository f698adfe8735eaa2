//! Errors that stop a command before it can judge anything: bad usage, unreadable files,
//! failed writes. They map to exit code 2; problems *found* in an agent or bundle are
//! diagnostics or rejections instead (exit code 1).

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
