//! A bundle's bytes as the archive reader takes them: a stream read in order, which may also be
//! a file whose frames the decoding threads read by position themselves ([`FileAt`]).
//!
//! Why this file exists: verify's reading thread read every byte of the bundle, and the decoding
//! threads waited for it. On the 2-vCPU bench machine (`perf` of verify of the 1 GiB bench
//! bundle, 2026-11-28) it took half the samples, and the kernel's copy out of the page cache
//! (`_copy_to_iter`) was 72 % of its own (36 % of all), while the floor of a verifier whose
//! threads each read their own frames was 1.2–1.3 × faster. So when the bundle is a file and
//! nothing else must see its bytes in order (a SHA-256 of the file over the same pass), the
//! reading thread reads only the frame and block headers, passes over the block bodies
//! ([`BundleRead::skip`]), and each decoding thread reads its frame by position (`pread`). The
//! frames' boundaries still come from walking the bytes, the same walk as before
//! (`frames::Walker`); a frame whose walk fails is walked again from its start by reading, so
//! that its bytes and fault are those of the reading path.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;

/// Bytes read at once by [`FileAt`] for what it reads through its buffer; larger reads go
/// straight into the caller's buffer.
const BUFFER: usize = 8 << 10;

/// Reads up to this size (a frame's or a block's header, a checksum: at most 18 bytes) go
/// straight into the caller's buffer too, so that walking a frame's 3-byte block headers does
/// not copy 8 KiB of the block after each (6 % of the bundle, copied twice: in `perf` of verify
/// pinned to one CPU, the kernel's copy took 30 % more samples than the floor's).
const SMALL_READ: usize = 32;

/// A bundle's bytes, read in order; [`file`](Self::file) says when they are also a file that
/// can be read by position. Every method but `file` has the behaviour of a plain stream by
/// default.
pub trait BundleRead: BufRead {
    /// The file these bytes are (from [`position`](Self::position) to where the file ended when
    /// it was opened), when its frames may be read by position instead of through this stream.
    /// `None` for a stream, and for a file whose bytes must all pass through (hashed).
    fn file(&self) -> Option<&Arc<File>> {
        None
    }

    /// Where the next byte of the stream is in [`file`](Self::file).
    fn position(&self) -> u64 {
        0
    }

    /// Passes over up to `n` bytes: how many (at least one, unless the stream is at its end).
    /// A file's are not read.
    fn skip(&mut self, n: usize) -> io::Result<usize> {
        let available = self.fill_buf()?.len().min(n);
        self.consume(available);
        Ok(available)
    }

    /// Goes back to `at` in [`file`](Self::file); only a file's stream can.
    fn rewind(&mut self, at: u64) -> io::Result<()> {
        let _ = at;
        Err(io::Error::new(io::ErrorKind::Unsupported, "a stream cannot go back"))
    }
}

impl BundleRead for &[u8] {}

impl<R: Read> BundleRead for BufReader<R> {}

/// `BundleRead` for a pointer to one: every method passed on.
macro_rules! delegate {
    ($($pointer:ty),*) => {$(
        impl<B: BundleRead + ?Sized> BundleRead for $pointer {
            fn file(&self) -> Option<&Arc<File>> {
                (**self).file()
            }

            fn position(&self) -> u64 {
                (**self).position()
            }

            fn skip(&mut self, n: usize) -> io::Result<usize> {
                (**self).skip(n)
            }

            fn rewind(&mut self, at: u64) -> io::Result<()> {
                (**self).rewind(at)
            }
        }
    )*};
}

delegate!(&mut B, Box<B>);

/// Any stream, read in order.
pub struct InOrder<R>(pub R);

impl<R: Read> Read for InOrder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: BufRead> BufRead for InOrder<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.0.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.0.consume(amt);
    }
}

impl<R: BufRead> BundleRead for InOrder<R> {}

/// A file's bytes from its start to its length when opened, read by position (so that other
/// threads can read the same file by position at the same time): headers through a small
/// buffer, larger reads straight into the caller's buffer, and bodies passed over unread
/// ([`skip`](BundleRead::skip)). A file that grows is read to its length when opened; one that
/// shrinks ends early (its reads come back short).
pub struct FileAt {
    file: Arc<File>,
    /// The file offset of the byte after those in `buf[..filled]`.
    at: u64,
    end: u64,
    buf: Box<[u8]>,
    pos: usize,
    filled: usize,
}

impl FileAt {
    /// `file`, of `len` bytes, from its start.
    pub fn new(file: File, len: u64) -> Self {
        FileAt { file: Arc::new(file), at: 0, end: len, buf: vec![0; BUFFER].into_boxed_slice(), pos: 0, filled: 0 }
    }

    /// A bundle file read by position when its frames are read whole (its first frame declares
    /// at most `decode::MAX_FRAME_CONTENT`: a seekable bundle's) and it is a regular file; else
    /// the file back and its length, to be read in order (a one-frame bundle of an earlier
    /// release, decoded while read; a FIFO).
    pub fn of_bundle(file: File) -> Result<FileAt, (File, u64)> {
        let (regular, len) = file.metadata().map_or((false, 0), |m| (m.is_file(), m.len()));
        if regular && super::decode::frames_read_whole(&file) {
            return Ok(FileAt::new(file, len));
        }
        Err((file, len))
    }

    /// Reads at the file offset `at` into `buf`, within the length: how many bytes (0 at the
    /// end).
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        let want = buf.len().min(usize::try_from(self.end.saturating_sub(at)).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        loop {
            match read_at(&self.file, &mut buf[..want], at) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                got => return got,
            }
        }
    }
}

impl Read for FileAt {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.filled && (buf.len() >= self.buf.len() || buf.len() <= SMALL_READ) {
            let n = self.read_at(buf, self.at)?;
            self.at += n as u64;
            return Ok(n);
        }
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for FileAt {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled {
            let mut buf = std::mem::take(&mut self.buf);
            let got = self.read_at(&mut buf, self.at);
            self.buf = buf;
            let n = got?;
            self.at += n as u64;
            (self.pos, self.filled) = (0, n);
        }
        Ok(&self.buf[self.pos..self.filled])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.filled);
    }
}

impl BundleRead for FileAt {
    fn file(&self) -> Option<&Arc<File>> {
        Some(&self.file)
    }

    fn position(&self) -> u64 {
        self.at - (self.filled - self.pos) as u64
    }

    fn skip(&mut self, n: usize) -> io::Result<usize> {
        let buffered = (self.filled - self.pos).min(n);
        if buffered > 0 {
            self.pos += buffered;
            return Ok(buffered);
        }
        let n = n.min(usize::try_from(self.end.saturating_sub(self.at)).unwrap_or(usize::MAX));
        self.at += n as u64;
        Ok(n)
    }

    fn rewind(&mut self, at: u64) -> io::Result<()> {
        if at > self.end {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a position past the file's end"));
        }
        (self.at, self.pos, self.filled) = (at, 0, 0);
        Ok(())
    }
}

/// Reads `file` at offset `at` into `buf` (one call, possibly short), without moving any cursor
/// another reader depends on.
pub(crate) fn read_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, at)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, at)
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (file, buf, at);
        Err(io::Error::new(io::ErrorKind::Unsupported, "reading a file by position"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("f");
        std::fs::File::create(&path).and_then(|mut f| f.write_all(bytes)).expect("written");
        let file = File::open(&path).expect("opened");
        (dir, file)
    }

    #[test]
    fn a_file_read_by_position_gives_its_bytes_in_order_and_passes_over_what_it_skips() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let (_dir, file) = file_of(&data);
        let mut r = FileAt::new(file, data.len() as u64);
        // A header-sized read takes only its bytes (nothing buffered to pass over).
        let mut head = [0u8; 3];
        r.read_exact(&mut head).expect("read");
        assert_eq!(head, data[..3]);
        assert_eq!(r.position(), 3);
        assert_eq!(r.skip(100).expect("skipped"), 100);
        r.rewind(0).expect("rewound");
        // Through the buffer: a skip passes over the buffered bytes first, then past them.
        assert_eq!(r.fill_buf().expect("read").len(), BUFFER);
        r.consume(3);
        assert_eq!(r.position(), 3);
        let buffered = r.skip(100_000).expect("skipped");
        assert_eq!(buffered, BUFFER - 3);
        assert_eq!(r.skip(50_000).expect("skipped"), 50_000);
        assert_eq!(r.position(), (BUFFER + 50_000) as u64);
        let mut big = vec![0u8; 20_000];
        r.read_exact(&mut big).expect("read");
        assert_eq!(big, data[BUFFER + 50_000..BUFFER + 70_000]);
        let rest = data.len() - (BUFFER + 70_000);
        assert_eq!(r.skip(usize::MAX).expect("skipped"), rest);
        assert_eq!(r.skip(1).expect("at the end"), 0);
        assert_eq!(r.fill_buf().expect("at the end").len(), 0);
        r.rewind(10).expect("rewound");
        assert_eq!(r.fill_buf().expect("read")[..5], data[10..15]);
        assert!(r.rewind(data.len() as u64 + 1).is_err());
    }

    #[test]
    fn a_file_is_read_to_its_length_when_opened() {
        let (_dir, file) = file_of(b"0123456789");
        let mut r = FileAt::new(file, 4);
        let mut all = Vec::new();
        r.read_to_end(&mut all).expect("read");
        assert_eq!(all, b"0123");
        r.rewind(2).expect("rewound");
        assert_eq!(r.skip(10).expect("skipped"), 2);
    }

    #[test]
    fn a_stream_skips_by_reading_and_cannot_go_back() {
        let mut s = InOrder(&b"abcdef"[..]);
        assert!(s.file().is_none());
        assert_eq!(s.skip(4).expect("skipped"), 4);
        assert_eq!(s.fill_buf().expect("read"), b"ef");
        assert!(s.rewind(0).is_err());
    }
}
