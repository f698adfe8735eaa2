//! Progress of long operations, reported through a trait so that the library never prints:
//! the CLI shows a bar on a terminal, everything else passes [`Silent`].

use std::io::{self, Read};

pub trait Progress: Sync {
    /// A phase starts; `total` bytes will be processed.
    fn begin(&self, _what: &str, _total: u64) {}
    /// `bytes` more were processed.
    fn advance(&self, _bytes: u64) {}
    /// The phase is over.
    fn end(&self) {}
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {}

/// A reader that reports the bytes read through it.
pub struct ProgressRead<'a, R> {
    pub inner: R,
    pub progress: &'a dyn Progress,
}

impl<R: Read> Read for ProgressRead<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}
