//! Reading a container that may be hostile: streaming, bounded memory,
//! every header validated before its entry is handed out.
//!
//! Why this file exists: `bundle verify` is a deployment gate. It must
//! reject anything that is not exactly the shape `write.rs` produces
//! (symlinks, devices, PAX/GNU extensions, odd modes, traversal paths,
//! decompression bombs, data hidden after the archive) without ever
//! buffering an entry or trusting a size it has not bounded first.
//!
//! Design decisions:
//! - The 512-byte ustar headers are parsed by hand rather than with
//!   `tar::Archive`. The parser is small, and it gives full control: `tar`
//!   accepts GNU headers, base-256 numbers, lone zero blocks and (unless
//!   `raw`) folds PAX/GNU long-name records into the next entry, and it only
//!   reports fields lazily; here every field we rely on is checked in one
//!   place, in a fixed order, with our own error codes. It also keeps the
//!   writer (which uses `tar::Header`) and the reader independent, so the
//!   round-trip tests check one implementation against the other.
//! - The zstd frames are walked and decoded by [`decode`](super::decode),
//!   which checks each frame header by hand before decoding it (content
//!   checksum flag required, so the checksum is always verified; an
//!   oversized window is `LimitExceeded` before zstd allocates it;
//!   `window_log_max` is still set on the decoder as a second line of
//!   defence), and serves one byte stream whatever the number of threads.
//! - Memory: what [`decode`](super::decode) holds (one zstd window of at most
//!   `2^max_window_log` bytes, 16 MiB by default, per decoding thread, and
//!   the frames in flight), one 512-byte header, one 64 KiB scratch buffer
//!   and the current path (<= 256 bytes). Nothing grows with the input.
//! - The bundle is only verified once [`ArchiveReader::finish`] returns
//!   `Ok`: a frame's content checksum sits at its very end, and the seek
//!   table after the last frame, so entries handed out earlier may still
//!   belong to a corrupt bundle.

use std::io::{self, BufRead, Read, Write};

use super::bundle_read::BundleRead;
use super::decode::{Decoding, FrameStream};
use super::frames::Fault;
use super::write::padding_for;
use super::{ArchiveError, BLOCK, MODE_EXECUTABLE, MODE_FILE, PathProblem, check_path, field};
use crate::blake3_tree::{Prehash, Rest};

/// Zero bytes tolerated after the two end-of-archive blocks (one default
/// tar record, so archives padded like GNU tar or bsdtar pad still verify).
pub use crate::limits::MAX_TRAILING_ZEROS;

const SCRATCH: usize = 64 * 1024;

/// Resource bounds for [`ArchiveReader`]. Exceeding any of them is
/// [`ArchiveError::LimitExceeded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest zstd window accepted, as a power of two (10..=31). Default 24
    /// (16 MiB); the writer's levels 1..=19 use at most 8 MiB.
    pub max_window_log: u32,
    /// Largest size of a single entry, in bytes. Default 1 GiB.
    pub max_entry_size: u64,
    /// Largest decompressed tar stream (headers, data, padding, end marker
    /// and trailing zeros), in bytes. Default 4 GiB.
    pub max_total_size: u64,
    /// Largest number of entries. Default 100 000.
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_window_log: crate::limits::MAX_ZSTD_WINDOW_BYTES.trailing_zeros(),
            max_entry_size: crate::limits::MAX_ENTRY_BYTES,
            max_total_size: crate::limits::MAX_BUNDLE_CONTENT_BYTES,
            max_entries: crate::limits::MAX_ENTRIES,
        }
    }
}

/// A validated header.
pub(crate) struct Header {
    pub path: String,
    pub size: u64,
    pub executable: bool,
}

/// Streams the entries of an `agent.bundle` container, validating as it
/// goes. See the module docs for what is checked and the memory bounds.
///
/// Usage: call [`next_entry`](Self::next_entry) until it returns `None`,
/// reading (or not) each entry, then [`finish`](Self::finish). Only `Ok`
/// from `finish` means the whole container is valid. After any error the
/// reader is unusable: every later call fails.
pub struct ArchiveReader<R: Read> {
    stream: FrameStream<R>,
    limits: Limits,
    /// Decompressed bytes accounted so far (see `account`).
    total: u64,
    entries: u64,
    /// Unread data bytes of the current entry, and the padding after them.
    remaining: u64,
    padding: usize,
    /// Path of the current entry, for error messages.
    current: Option<String>,
    /// The end-of-archive marker has been read.
    ended: bool,
    /// An error happened; nothing more can be trusted.
    poisoned: bool,
    scratch: Vec<u8>,
}

/// One regular file in the archive; reads yield exactly `size` bytes.
///
/// Unread data is skipped (and still decompressed and checked) when the
/// next entry is requested. Read errors carry an [`ArchiveError`] inside
/// the `io::Error`; `ArchiveError::from` recovers it.
pub struct Entry<'a, R: Read> {
    /// Validated path (see [`check_path`](super::check_path)).
    pub path: String,
    /// Size of the data in bytes.
    pub size: u64,
    /// Mode was 0o755 (otherwise it was 0o644).
    pub executable: bool,
    reader: &'a mut ArchiveReader<R>,
}

impl<R: BundleRead> ArchiveReader<R> {
    /// Reads and checks the zstd frame header and sets up decompression.
    ///
    /// Fails with `Malformed` if the input does not start with a zstd frame
    /// that has a content checksum and no dictionary, and with
    /// `LimitExceeded` if the frame's window is larger than
    /// `2^limits.max_window_log`.
    ///
    /// The frames of a seekable bundle are decoded on one thread per usable CPU (at most four)
    /// when there is more than one (the module `archive::decode`), giving the same entries and
    /// errors.
    pub fn new(input: R, limits: Limits) -> Result<Self, ArchiveError> {
        let decoding = if super::decode::threads() > 1 { Decoding::Parallel } else { Decoding::ThisThread };
        Self::with_decoding(input, limits, decoding)
    }

    /// [`new`](Self::new), taking the frames as `decoding` says: the same bytes and errors
    /// every way (see [`decode`](super::decode)).
    pub(crate) fn with_decoding(input: R, limits: Limits, decoding: Decoding) -> Result<Self, ArchiveError> {
        if !(10..=31).contains(&limits.max_window_log) {
            return Err(ArchiveError::invalid_argument(format!(
                "max_window_log {} is outside 10..=31",
                limits.max_window_log
            )));
        }
        let stream = FrameStream::new(input, limits.max_window_log, decoding)?;
        Ok(ArchiveReader {
            stream,
            limits,
            total: 0,
            entries: 0,
            remaining: 0,
            padding: 0,
            current: None,
            ended: false,
            poisoned: false,
            scratch: vec![0; SCRATCH],
        })
    }

    /// Next entry, or `None` at the tar end marker (and on every later
    /// call). Validates the header before returning it, in this order:
    /// header checksum; typeflag (`'0'` or NUL, else
    /// `UnsupportedEntryType`); ustar magic and version; name and prefix
    /// NUL-padded; path UTF-8 and [`check_path`](super::check_path)
    /// (`UnsafePath`); mode exactly 0o644 or 0o755 (`UnsafeMode`); size
    /// octal (`Malformed` otherwise); entry count, entry size and running
    /// total against the limits (`LimitExceeded`).
    pub fn next_entry(&mut self) -> Result<Option<Entry<'_, R>>, ArchiveError> {
        match self.advance() {
            Ok(Some(h)) => Ok(Some(Entry { path: h.path, size: h.size, executable: h.executable, reader: self })),
            Ok(None) => Ok(None),
            Err(e) => {
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// Completes verification. Reads any remaining entries (validating
    /// them as `next_entry` does), then requires: only zero bytes, at most
    /// [`MAX_TRAILING_ZEROS`], after the end marker; the zstd frame ending
    /// there with a matching content checksum; and no further input bytes
    /// at all (`TrailingData` for a second frame, a skippable frame or
    /// garbage).
    pub fn finish(mut self) -> Result<(), ArchiveError> {
        while self.next_entry()?.is_some() {}
        self.check_end()
    }

    fn check_end(mut self) -> Result<(), ArchiveError> {
        let mut zeros = 0u64;
        let mut scratch = std::mem::take(&mut self.scratch);
        loop {
            let n = self.decode(&mut scratch)?;
            if n == 0 {
                break;
            }
            if scratch[..n].iter().any(|&b| b != 0) {
                return Err(ArchiveError::TrailingData {
                    reason: "non-zero bytes after the end-of-archive marker".into(),
                });
            }
            zeros += n as u64;
            if zeros > MAX_TRAILING_ZEROS {
                return Err(ArchiveError::TrailingData {
                    reason: format!("more than {MAX_TRAILING_ZEROS} zero bytes after the end-of-archive marker"),
                });
            }
            self.account(n as u64, None)?;
        }
        // Every frame is complete and its checksum verified; then the seek table, if any.
        let ArchiveReader { stream, .. } = self;
        stream.finish()
    }

    fn advance(&mut self) -> Result<Option<Header>, ArchiveError> {
        if self.poisoned {
            return Err(ArchiveError::malformed(None, "reading stopped at an earlier error"));
        }
        if self.ended {
            return Ok(None);
        }
        self.skip_current()?;
        self.current = None;

        let mut block = [0u8; BLOCK];
        if !self.read_block(&mut block)? {
            return Err(ArchiveError::malformed(None, "the archive ends without the end-of-archive marker"));
        }
        self.account(BLOCK as u64, None)?;
        if block.iter().all(|&b| b == 0) {
            if !self.read_block(&mut block)? {
                return Err(ArchiveError::malformed(
                    None,
                    "the end-of-archive marker is truncated (a single zero block)",
                ));
            }
            self.account(BLOCK as u64, None)?;
            if block.iter().any(|&b| b != 0) {
                return Err(ArchiveError::TrailingData {
                    reason: "data after a zero block (the end-of-archive marker is two zero blocks)".into(),
                });
            }
            self.ended = true;
            return Ok(None);
        }

        let header = parse_header(&block)?;
        let path = Some(header.path.clone());
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(ArchiveError::LimitExceeded {
                path,
                what: "number of entries",
                value: self.entries,
                limit: self.limits.max_entries,
            });
        }
        if header.size > self.limits.max_entry_size {
            return Err(ArchiveError::LimitExceeded {
                path,
                what: "entry size in bytes",
                value: header.size,
                limit: self.limits.max_entry_size,
            });
        }
        let padding = padding_for(header.size);
        // Account for the data before reading any of it.
        self.account(header.size + padding as u64, path.as_deref())?;
        self.stream.entry_starts(header.size);
        self.remaining = header.size;
        self.padding = padding;
        self.current = path;
        Ok(Some(header))
    }

    /// Adds `n` decompressed bytes to the running total, enforcing the limit.
    fn account(&mut self, n: u64, path: Option<&str>) -> Result<(), ArchiveError> {
        self.total = self.total.saturating_add(n);
        if self.total > self.limits.max_total_size {
            return Err(ArchiveError::LimitExceeded {
                path: path.map(str::to_owned),
                what: "decompressed archive size in bytes",
                value: self.total,
                limit: self.limits.max_total_size,
            });
        }
        Ok(())
    }

    /// Discards the unread data of the current entry and checks its padding.
    fn skip_current(&mut self) -> Result<(), ArchiveError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let result = self.skip_with(&mut scratch);
        self.scratch = scratch;
        result
    }

    fn skip_with(&mut self, _scratch: &mut [u8]) -> Result<(), ArchiveError> {
        while self.remaining > 0 {
            let n = self.fill_data()?.len();
            self.consume_data(n);
        }
        let padding = std::mem::take(&mut self.padding);
        let mut pad = [0u8; BLOCK];
        self.read_exact_or(&mut pad[..padding], "the archive ends inside entry padding")?;
        if pad.iter().any(|&b| b != 0) {
            return Err(ArchiveError::malformed(
                self.current.as_deref(),
                "non-zero bytes in the padding after the entry data",
            ));
        }
        Ok(())
    }

    /// Reads up to `buf.len()` bytes of the current entry's data.
    fn read_data(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        if self.poisoned {
            return Err(ArchiveError::malformed(self.current.as_deref(), "reading stopped at an earlier error"));
        }
        if self.remaining == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let result = match self.decode(&mut buf[..want]) {
            Ok(0) => Err(ArchiveError::malformed(self.current.as_deref(), "the archive ends inside the entry data")),
            other => other,
        };
        match result {
            Ok(n) => {
                self.remaining -= n as u64;
                Ok(n)
            }
            Err(e) => {
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// The current entry's data decoded and not read yet, without copying it: at most its
    /// remaining bytes, empty only at its end; the same errors as [`read_data`](Self::read_data).
    fn fill_data(&mut self) -> Result<&[u8], ArchiveError> {
        if self.poisoned {
            return Err(ArchiveError::malformed(self.current.as_deref(), "reading stopped at an earlier error"));
        }
        if self.remaining == 0 {
            return Ok(&[]);
        }
        let available = match self.stream.fill_buf() {
            Ok(bytes) => bytes.len(),
            Err(f) => {
                self.poisoned = true;
                return Err(self.fault_error(f));
            }
        };
        if available == 0 {
            self.poisoned = true;
            return Err(ArchiveError::malformed(self.current.as_deref(), "the archive ends inside the entry data"));
        }
        let n = available.min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        Ok(&self.stream.buffered()[..n])
    }

    /// Marks `n` bytes of what [`fill_data`](Self::fill_data) gave as read.
    fn consume_data(&mut self, n: usize) {
        let n = n.min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        self.stream.consume(n);
        self.remaining -= n as u64;
    }

    /// Reads one 512-byte block: `Ok(false)` if the stream ends before it,
    /// `Malformed` if it ends inside it.
    fn read_block(&mut self, block: &mut [u8; BLOCK]) -> Result<bool, ArchiveError> {
        let n = self.decode(block)?;
        if n == 0 {
            return Ok(false);
        }
        self.read_exact_or(&mut block[n..], "the archive ends inside a header block")?;
        Ok(true)
    }

    fn read_exact_or(&mut self, mut buf: &mut [u8], truncated: &str) -> Result<(), ArchiveError> {
        while !buf.is_empty() {
            match self.decode(buf)? {
                0 => return Err(ArchiveError::malformed(self.current.as_deref(), truncated)),
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }

    /// From here on, frames decoded on other threads also have their entries hashed there, for
    /// [`Entry::hash_ahead`] (a reader that hashes every entry: `bundle verify`).
    pub(crate) fn prehash_entries(&mut self) {
        self.stream.prehash();
    }

    /// Whether frames are being decoded on other threads, so that this one has time to spare
    /// (when not, this thread is the decoder).
    pub(crate) fn decodes_elsewhere(&self) -> bool {
        self.stream.decodes_elsewhere()
    }

    /// Reads decompressed bytes; `Ok(0)` only at the verified end of the
    /// frame (or for an empty `buf`).
    fn decode(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        self.stream.read(buf).map_err(|f| self.fault_error(f))
    }

    /// The error for a fault of the frames, in the entry being read.
    fn fault_error(&self, fault: Fault) -> ArchiveError {
        fault.into_error(self.current.clone(), self.limits.max_window_log)
    }
}

impl<R: BundleRead> Entry<'_, R> {
    /// Reads the rest of the entry into `out` and returns the BLAKE3 hash of
    /// the bytes this call read (all of them, on a fresh entry).
    /// The decoded bytes are hashed and written where they are, without a copy.
    pub fn copy_to(&mut self, out: &mut dyn Write) -> Result<blake3::Hash, ArchiveError> {
        let mut hasher = blake3::Hasher::new();
        loop {
            let data = self.reader.fill_data()?;
            if data.is_empty() {
                return Ok(hasher.finalize());
            }
            hasher.update(data);
            let n = data.len();
            out.write_all(data).map_err(|source| ArchiveError::Io { path: Some(self.path.clone()), source })?;
            self.reader.consume_data(n);
        }
    }

    /// The hash of this entry's data computed ahead on the thread that decoded it, if there is
    /// one ([`ArchiveReader::prehash_entries`]); only for an entry not read yet. Makes the
    /// entry's first bytes ready, so it fails as reading them would.
    fn prehashed(&mut self) -> Result<Option<Prehash>, ArchiveError> {
        if self.size == 0 || self.reader.remaining != self.size {
            return Ok(None);
        }
        self.reader.fill_data()?;
        Ok(self.reader.stream.prehashed(self.size))
    }

    /// Reads the entry to its end, giving every piece to `each`, and returns its BLAKE3 hash,
    /// using what the decoding threads hashed ahead ([`ArchiveReader::prehash_entries`]: the
    /// entry's hash or its first chunks, and the whole chunks of each later frame that starts
    /// inside it): only the rest is hashed here, frame by frame. Errors as [`BufRead`]'s: an
    /// [`ArchiveError`] inside the `io::Error`, or `each`'s.
    pub(crate) fn hash_ahead(&mut self, mut each: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<blake3::Hash> {
        let ahead = self.prehashed().map_err(io::Error::other)?;
        enum Hashing {
            Done(blake3::Hash),
            Segments(Box<Rest>),
            Plain(Box<blake3::Hasher>),
        }
        let size = self.size;
        let mut hashing = match ahead {
            Some(Prehash::Whole(hash)) => Hashing::Done(hash),
            Some(Prehash::Head(head)) => Hashing::Segments(Box::new(Rest::after(&head, size))),
            None if size > blake3::CHUNK_LEN as u64 => Hashing::Segments(Box::new(Rest::new(size))),
            None => Hashing::Plain(Box::default()),
        };
        let mut pos = 0u64;
        loop {
            let len = self.reader.fill_data().map_err(io::Error::other)?.len();
            if len == 0 {
                break;
            }
            let next = match &hashing {
                Hashing::Segments(rest) if rest.pos() == pos => self.reader.stream.chunks_at(pos, size),
                _ => None,
            };
            let piece = &self.reader.stream.buffered()[..len];
            match &mut hashing {
                Hashing::Segments(rest) => {
                    let from = usize::try_from(rest.pos().saturating_sub(pos)).unwrap_or(usize::MAX).min(len);
                    if from < len {
                        rest.segment(&piece[from..], next.as_ref());
                    }
                }
                Hashing::Plain(hasher) => {
                    hasher.update(piece);
                }
                Hashing::Done(_) => {}
            }
            for part in piece.chunks(128 << 10) {
                each(part)?;
            }
            self.reader.consume_data(len);
            pos += len as u64;
        }
        let ended_early = || io::Error::other(ArchiveError::malformed(Some(&self.path), "the entry ended early"));
        match hashing {
            Hashing::Done(hash) if pos == size => Ok(hash),
            Hashing::Segments(rest) => rest.finalize().ok_or_else(ended_early),
            Hashing::Plain(hasher) if pos == size => Ok(hasher.finalize()),
            _ => Err(ended_early()),
        }
    }

    /// BLAKE3 hash of the rest of the entry (all of it, on a fresh entry).
    pub fn hash(&mut self) -> Result<blake3::Hash, ArchiveError> {
        self.copy_to(&mut io::sink())
    }
}

impl<R: BundleRead> Read for Entry<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read_data(buf).map_err(io::Error::other)
    }
}

/// The entry's data where it was decoded: a reader that hashes or writes it needs no copy.
impl<R: BundleRead> BufRead for Entry<'_, R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.reader.fill_data().map_err(io::Error::other)
    }

    fn consume(&mut self, amt: usize) {
        self.reader.consume_data(amt);
    }
}

/// Validates one non-zero header block (see [`ArchiveReader::next_entry`]).
pub(crate) fn parse_header(block: &[u8; BLOCK]) -> Result<Header, ArchiveError> {
    // 1. Header checksum: unsigned sum of all bytes, the checksum field
    //    counted as eight spaces.
    let stored = parse_octal(&block[field::CHKSUM])
        .ok_or_else(|| ArchiveError::malformed(None, "the header checksum field is not an octal number"))?;
    let computed: u64 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| if field::CHKSUM.contains(&i) { u64::from(b' ') } else { u64::from(b) })
        .sum();
    if stored != computed {
        return Err(ArchiveError::malformed(
            None,
            format!("header checksum mismatch (stored {stored:o}, computed {computed:o})"),
        ));
    }

    let name = until_nul(&block[field::NAME]);
    let prefix = until_nul(&block[field::PREFIX]);
    let mut raw_path = Vec::with_capacity(prefix.len() + 1 + name.len());
    if !prefix.is_empty() {
        raw_path.extend_from_slice(prefix);
        raw_path.push(b'/');
    }
    raw_path.extend_from_slice(name);
    let lossy = String::from_utf8_lossy(&raw_path).into_owned();

    // 2. Only regular files. Checked before the magic so GNU headers
    //    (magic "ustar  \0") with 'L'/'K'/'S' report their type.
    let typeflag = block[field::TYPEFLAG];
    if typeflag != b'0' && typeflag != 0 {
        return Err(ArchiveError::UnsupportedEntryType { path: lossy, typeflag });
    }

    // 3. POSIX ustar only.
    if block[field::MAGIC] != *b"ustar\0" || block[field::VERSION] != *b"00" {
        return Err(ArchiveError::malformed(
            Some(&lossy),
            "not a POSIX ustar header (magic must be \"ustar\\0\" and version \"00\")",
        ));
    }

    // 4. Path fields are NUL-terminated and NUL-padded, nothing hidden after.
    let clean = |f: &[u8], used: usize| f[used..].iter().all(|&b| b == 0);
    if !clean(&block[field::NAME], name.len()) || !clean(&block[field::PREFIX], prefix.len()) {
        return Err(ArchiveError::malformed(
            Some(&lossy),
            "bytes after the NUL terminator of the name or prefix field",
        ));
    }
    let path = String::from_utf8(raw_path)
        .map_err(|_| ArchiveError::UnsafePath { path: lossy, problem: PathProblem::NotUtf8 })?;
    check_path(&path).map_err(|problem| ArchiveError::UnsafePath { path: path.clone(), problem })?;

    // 5. Mode: exactly 0o644 or 0o755.
    let mode = parse_octal(&block[field::MODE])
        .ok_or_else(|| ArchiveError::malformed(Some(&path), "the mode field is not an octal number"))?;
    if mode != u64::from(MODE_FILE) && mode != u64::from(MODE_EXECUTABLE) {
        return Err(ArchiveError::UnsafeMode { path, mode });
    }

    // 6. Size: octal digits only (base-256 is a GNU extension).
    let size = parse_octal(&block[field::SIZE]).ok_or_else(|| {
        ArchiveError::malformed(
            Some(&path),
            "the size field is not an octal number (base-256 and other encodings are not allowed)",
        )
    })?;

    Ok(Header { path, size, executable: mode == u64::from(MODE_EXECUTABLE) })
}

/// The bytes of a string field up to its first NUL (or the whole field).
fn until_nul(f: &[u8]) -> &[u8] {
    let end = f.iter().position(|&b| b == 0).unwrap_or(f.len());
    &f[..end]
}

/// Parses a ustar numeric field: optional leading spaces, at least one
/// octal digit, then only NUL or space to the end of the field.
pub(super) fn parse_octal(f: &[u8]) -> Option<u64> {
    let start = f.iter().position(|&b| b != b' ')?;
    let digits = f[start..].iter().take_while(|b| (b'0'..=b'7').contains(*b)).count();
    if digits == 0 {
        return None;
    }
    let end = start + digits;
    if !f[end..].iter().all(|&b| b == 0 || b == b' ') {
        return None;
    }
    f[start..end].iter().try_fold(0u64, |acc, &d| acc.checked_mul(8)?.checked_add(u64::from(d - b'0')))
}

#[cfg(test)]
mod tests;
