//! Receiving a blob on a thread of its own: the network read and the layer's sha256 run beside
//! the verifier instead of taking turns with it, and (with a second CPU) the copy to the
//! destination's temp file on a third thread. Measured on the 695 MiB bench bundle (loopback
//! registry, 2 vCPU): pull+verify took 1.08× ORAS's plain pull with everything on one thread;
//! with the receiving and the copying on one thread beside the verifier, that thread took
//! 1.21 s of CPU and the pull 1.52 s (median of 6 on the Xeon), with the copy split off 1.36 s.
//!
//! The hand-over is the bounded pipeline of [`crate::read_ahead`] (at most four chunks of
//! 1 MiB, reused), so memory stays flat whatever the blob's size. A chunk reaches the reader
//! only after it was written to the file. An error on the receiving side (a dropped connection, a blob that is not the one its
//! descriptor names, a failed write) reaches the reader as an `io::Error` in its place; a
//! reader that stops early makes the receiver stop at its next chunk.

use std::fs::File;
use std::io::{self, Read, Write};

use crate::atomic::Writeback;
use crate::handoff::second_cpu;
use crate::read_ahead::ReadAhead;

/// Ask for background writeback every this many bytes.
const WRITEBACK_EVERY: u64 = 64 << 20;

/// The reading end: a `BufRead` over the chunks the receiver passed on; `finish` reports
/// whether the receiver (the network read and the copy) succeeded.
pub(crate) type Prefetch = ReadAhead;

/// Starts receiving `source` on a thread, copying every chunk to `copy` (if any) before
/// passing it on.
pub(crate) fn spawn(source: impl Read + Send + 'static, copy: Option<File>) -> io::Result<Prefetch> {
    let Some(file) = copy else { return ReadAhead::spawn("receive", source, io::sink()) };
    let copy = Copy { writeback: Writeback::new(&file), file, unsynced: 0 };
    // The copy on a thread of its own when a second CPU can run it (see `spawn_teeing`).
    if second_cpu() {
        ReadAhead::spawn_teeing("receive", source, copy)
    } else {
        ReadAhead::spawn("receive", source, copy)
    }
}

/// The destination's temp file, with writeback requested as it fills.
struct Copy {
    file: File,
    writeback: Writeback,
    unsynced: u64,
}

impl Write for Copy {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.unsynced += n as u64;
        if self.unsynced >= WRITEBACK_EVERY {
            self.writeback.request();
            self.unsynced = 0;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::CHUNK;

    #[test]
    fn passes_every_byte_on_and_copies_them() {
        let data: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let file = tempfile::tempfile().unwrap();
        let mut p = spawn(std::io::Cursor::new(data.clone()), Some(file.try_clone().unwrap())).unwrap();
        let mut got = Vec::new();
        p.read_to_end(&mut got).unwrap();
        p.finish().unwrap();
        assert_eq!(got, data);
        let mut copied = Vec::new();
        let mut f = file;
        std::io::Seek::rewind(&mut f).unwrap();
        f.read_to_end(&mut copied).unwrap();
        assert_eq!(copied, data);
    }

    #[test]
    fn an_error_of_the_source_reaches_the_reader() {
        struct Broken(usize);
        impl Read for Broken {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::new(io::ErrorKind::ConnectionReset, "reset"));
                }
                let n = buf.len().min(self.0);
                self.0 -= n;
                Ok(n)
            }
        }
        let mut p = spawn(Broken(10), None).unwrap();
        let mut got = Vec::new();
        assert_eq!(p.read_to_end(&mut got).unwrap_err().kind(), io::ErrorKind::ConnectionReset);
        assert!(p.finish().is_err());
    }
}
