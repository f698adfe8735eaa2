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
//! - The zstd frame header is parsed by hand too, before decoding starts:
//!   to require the content-checksum flag (so the checksum is always
//!   verified) and to reject an oversized window with `LimitExceeded`
//!   before zstd allocates it. `window_log_max` is still set on the decoder
//!   as a second line of defence.
//! - Memory: the zstd window (at most `2^max_window_log` bytes, 16 MiB by
//!   default) plus zstd's fixed block buffers, one 512-byte header, one
//!   64 KiB scratch buffer and the current path (<= 256 bytes). Nothing
//!   grows with the input.
//! - The bundle is only verified once [`ArchiveReader::finish`] returns
//!   `Ok`: the content checksum sits at the very end of the frame, so
//!   entries handed out earlier may still belong to a corrupt bundle.

use std::io::{self, BufRead, Read, Write};

use super::write::padding_for;
use super::{ArchiveError, BLOCK, MODE_EXECUTABLE, MODE_FILE, PathProblem, check_path, field};

/// zstd frame magic number (little-endian on the wire: 28 B5 2F FD).
const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// Skippable frames use magic numbers 0x184D2A50..=0x184D2A5F.
const SKIPPABLE_MAGIC_MASK: u32 = 0xFFFF_FFF0;
const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
/// Largest zstd frame header: magic 4 + descriptor 1 + window 1 + dict id 4
/// + content size 8.
const MAX_FRAME_HEADER: usize = 18;
/// libzstd's message for `ZSTD_error_frameParameter_windowTooLarge`
/// (`lib/common/error_private.c`); the `zstd` crate only passes on the text.
const WINDOW_TOO_LARGE: &str = "Frame requires too much memory for decoding";
/// Zero bytes tolerated after the two end-of-archive blocks (one default
/// tar record, so archives padded like GNU tar or bsdtar pad still verify).
pub const MAX_TRAILING_ZEROS: u64 = 10240;

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
        Limits { max_window_log: 24, max_entry_size: 1 << 30, max_total_size: 4 << 30, max_entries: 100_000 }
    }
}

/// The compressed input: first the frame header bytes we already read and
/// checked, then the rest of the caller's reader. Remembers whether the
/// caller's reader failed, to tell I/O errors from zstd decoding errors.
struct Input<R> {
    header: [u8; MAX_FRAME_HEADER],
    header_len: usize,
    header_pos: usize,
    inner: R,
    failed: bool,
}

impl<R: BufRead> BufRead for Input<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.header_pos < self.header_len {
            return Ok(&self.header[self.header_pos..self.header_len]);
        }
        // Retry interruptions here: the zstd crate passes them on as errors.
        loop {
            match self.inner.fill_buf().map(|_| ()) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.failed = true;
                    return Err(e);
                }
            }
        }
        match self.inner.fill_buf() {
            Ok(buf) => Ok(buf),
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    fn consume(&mut self, amt: usize) {
        let from_header = amt.min(self.header_len - self.header_pos);
        self.header_pos += from_header;
        self.inner.consume(amt - from_header);
    }
}

impl<R: BufRead> Read for Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// A validated header.
struct Header {
    path: String,
    size: u64,
    executable: bool,
}

/// Streams the entries of an `agent.bundle` container, validating as it
/// goes. See the module docs for what is checked and the memory bounds.
///
/// Usage: call [`next_entry`](Self::next_entry) until it returns `None`,
/// reading (or not) each entry, then [`finish`](Self::finish). Only `Ok`
/// from `finish` means the whole container is valid. After any error the
/// reader is unusable: every later call fails.
pub struct ArchiveReader<R: Read> {
    decoder: zstd::stream::read::Decoder<'static, Input<R>>,
    limits: Limits,
    /// Window size declared by the frame header, for error messages.
    window_size: u64,
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

impl<R: BufRead> ArchiveReader<R> {
    /// Reads and checks the zstd frame header and sets up decompression.
    ///
    /// Fails with `Malformed` if the input does not start with a zstd frame
    /// that has a content checksum and no dictionary, and with
    /// `LimitExceeded` if the frame's window is larger than
    /// `2^limits.max_window_log`.
    pub fn new(mut input: R, limits: Limits) -> Result<Self, ArchiveError> {
        if !(10..=31).contains(&limits.max_window_log) {
            return Err(ArchiveError::invalid_argument(format!(
                "max_window_log {} is outside 10..=31",
                limits.max_window_log
            )));
        }
        let (header, header_len, window_size) = read_frame_header(&mut input)?;
        let max_window = 1u64 << limits.max_window_log;
        if window_size > max_window {
            return Err(ArchiveError::LimitExceeded {
                path: None,
                what: "zstd window size in bytes",
                value: window_size,
                limit: max_window,
            });
        }
        let input = Input { header, header_len, header_pos: 0, inner: input, failed: false };
        let io_err = |source| ArchiveError::Io { path: None, source };
        let mut decoder = zstd::stream::read::Decoder::with_buffer(input).map_err(io_err)?.single_frame();
        decoder.window_log_max(limits.max_window_log).map_err(io_err)?;
        Ok(ArchiveReader {
            decoder,
            limits,
            window_size,
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
        // The frame is complete and its checksum verified (the decoder only
        // reports the end after both); zstd consumed exactly the frame.
        let mut input = self.decoder.into_inner();
        let rest = input.fill_buf().map_err(|source| ArchiveError::Io { path: None, source })?;
        if !rest.is_empty() {
            return Err(ArchiveError::TrailingData { reason: describe_trailing(rest) });
        }
        Ok(())
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

    fn skip_with(&mut self, scratch: &mut [u8]) -> Result<(), ArchiveError> {
        while self.remaining > 0 {
            self.read_data(scratch)?;
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

    /// Reads decompressed bytes; `Ok(0)` only at the verified end of the
    /// frame (or for an empty `buf`).
    fn decode(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        self.decoder.read(buf).map_err(|e| self.decode_error(e))
    }

    /// Classifies an error from the zstd decoder.
    fn decode_error(&self, e: io::Error) -> ArchiveError {
        let path = self.current.clone();
        if self.decoder.get_ref().failed {
            return ArchiveError::Io { path, source: e };
        }
        if e.kind() == io::ErrorKind::UnexpectedEof {
            return ArchiveError::Malformed { path, reason: "the zstd frame is truncated".into() };
        }
        if e.to_string() == WINDOW_TOO_LARGE {
            // Normally caught from the frame header in `new`.
            return ArchiveError::LimitExceeded {
                path,
                what: "zstd window size in bytes",
                value: self.window_size,
                limit: 1u64 << self.limits.max_window_log,
            };
        }
        ArchiveError::Malformed { path, reason: format!("zstd decoding failed: {e}") }
    }
}

impl<R: BufRead> Entry<'_, R> {
    /// Reads the rest of the entry into `out` and returns the BLAKE3 hash of
    /// the bytes this call read (all of them, on a fresh entry).
    pub fn copy_to(&mut self, out: &mut dyn Write) -> Result<blake3::Hash, ArchiveError> {
        let mut scratch = std::mem::take(&mut self.reader.scratch);
        let result = self.copy_with(out, &mut scratch);
        self.reader.scratch = scratch;
        result
    }

    /// BLAKE3 hash of the rest of the entry (all of it, on a fresh entry).
    pub fn hash(&mut self) -> Result<blake3::Hash, ArchiveError> {
        self.copy_to(&mut io::sink())
    }

    fn copy_with(&mut self, out: &mut dyn Write, scratch: &mut [u8]) -> Result<blake3::Hash, ArchiveError> {
        let mut hasher = blake3::Hasher::new();
        loop {
            let n = self.reader.read_data(scratch)?;
            if n == 0 {
                return Ok(hasher.finalize());
            }
            hasher.update(&scratch[..n]);
            out.write_all(&scratch[..n])
                .map_err(|source| ArchiveError::Io { path: Some(self.path.clone()), source })?;
        }
    }
}

impl<R: BufRead> Read for Entry<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read_data(buf).map_err(io::Error::other)
    }
}

/// Reads the zstd frame header: magic, descriptor, window descriptor,
/// dictionary id, content size. Returns the raw bytes, their length and
/// the window size the frame declares.
fn read_frame_header<R: Read>(input: &mut R) -> Result<([u8; MAX_FRAME_HEADER], usize, u64), ArchiveError> {
    let mut header = [0u8; MAX_FRAME_HEADER];
    let short = "the input is too short for a zstd frame header";
    read_exact(input, &mut header[..5], short)?;
    let magic = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    if magic != ZSTD_MAGIC {
        let what = if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC {
            "the input starts with a zstd skippable frame, not a data frame"
        } else {
            "the input is not a zstd frame (bad magic number)"
        };
        return Err(ArchiveError::malformed(None, what));
    }
    let descriptor = header[4];
    let fcs_flag = descriptor >> 6;
    let single_segment = descriptor & 0x20 != 0;
    let reserved = descriptor & 0x08 != 0;
    let checksum = descriptor & 0x04 != 0;
    let dict_flag = descriptor & 0x03;
    if reserved {
        return Err(ArchiveError::malformed(None, "the zstd frame header sets the reserved bit"));
    }
    if !checksum {
        return Err(ArchiveError::malformed(None, "the zstd frame has no content checksum"));
    }
    if dict_flag != 0 {
        return Err(ArchiveError::malformed(None, "the zstd frame names a dictionary"));
    }
    let window_len = usize::from(!single_segment);
    let fcs_len = match fcs_flag {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let len = 5 + window_len + fcs_len;
    read_exact(input, &mut header[5..len], short)?;

    let window_size = if single_segment {
        // The window is the whole content.
        let mut le = [0u8; 8];
        le[..fcs_len].copy_from_slice(&header[5..5 + fcs_len]);
        let size = u64::from_le_bytes(le);
        if fcs_len == 2 { size + 256 } else { size }
    } else {
        let descriptor = header[5];
        let log = 10 + u32::from(descriptor >> 3);
        let base = 1u64 << log;
        base + (base / 8) * u64::from(descriptor & 0x07)
    };
    Ok((header, len, window_size))
}

fn read_exact<R: Read>(input: &mut R, buf: &mut [u8], short: &str) -> Result<(), ArchiveError> {
    input.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ArchiveError::malformed(None, short)
        } else {
            ArchiveError::Io { path: None, source: e }
        }
    })
}

fn describe_trailing(rest: &[u8]) -> String {
    if let Some(magic) = rest.get(..4) {
        let magic = u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]);
        if magic == ZSTD_MAGIC {
            return "a second zstd frame follows the archive frame".into();
        }
        if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC {
            return "a zstd skippable frame follows the archive frame".into();
        }
    }
    "unexpected bytes follow the zstd frame".into()
}

/// Validates one non-zero header block (see [`ArchiveReader::next_entry`]).
fn parse_header(block: &[u8; BLOCK]) -> Result<Header, ArchiveError> {
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
fn parse_octal(f: &[u8]) -> Option<u64> {
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
mod tests {
    use super::*;
    use crate::archive::ArchiveWriter;
    use crate::archive::write::tests::{samples, write_samples};

    type Entries = Vec<(String, Vec<u8>, bool, blake3::Hash)>;

    fn read_all_with(bundle: &[u8], limits: Limits) -> Result<Entries, ArchiveError> {
        let mut r = ArchiveReader::new(bundle, limits)?;
        let mut out = Vec::new();
        while let Some(mut e) = r.next_entry()? {
            let mut data = Vec::new();
            let hash = e.copy_to(&mut data)?;
            assert_eq!(data.len() as u64, e.size);
            out.push((e.path.clone(), data, e.executable, hash));
        }
        r.finish()?;
        Ok(out)
    }

    fn read_all(bundle: &[u8]) -> Result<Entries, ArchiveError> {
        read_all_with(bundle, Limits::default())
    }

    #[track_caller]
    fn assert_code(result: Result<impl std::fmt::Debug, ArchiveError>, code: &str) -> ArchiveError {
        match result {
            Ok(v) => panic!("expected {code}, got Ok({v:?})"),
            Err(e) => {
                assert_eq!(e.code(), code, "wrong code for: {e}");
                e
            }
        }
    }

    // ---- hand-made archives -------------------------------------------

    /// A valid ustar header for a regular file, editable before `seal`.
    struct Raw([u8; BLOCK]);

    impl Raw {
        fn file(path: &str, size: u64) -> Raw {
            let mut b = [0u8; BLOCK];
            b[..path.len()].copy_from_slice(path.as_bytes());
            b[field::MODE].copy_from_slice(b"0000644\0");
            b[108..116].copy_from_slice(b"0000000\0");
            b[116..124].copy_from_slice(b"0000000\0");
            b[field::SIZE].copy_from_slice(format!("{size:011o}\0").as_bytes());
            b[136..148].copy_from_slice(b"00000000000\0");
            b[field::TYPEFLAG] = b'0';
            b[field::MAGIC].copy_from_slice(b"ustar\0");
            b[field::VERSION].copy_from_slice(b"00");
            Raw(b)
        }
        fn typeflag(mut self, t: u8) -> Raw {
            self.0[field::TYPEFLAG] = t;
            self
        }
        fn mode(mut self, m: &[u8; 8]) -> Raw {
            self.0[field::MODE].copy_from_slice(m);
            self
        }
        fn size_field(mut self, s: &[u8; 12]) -> Raw {
            self.0[field::SIZE].copy_from_slice(s);
            self
        }
        fn magic(mut self, m: &[u8; 8]) -> Raw {
            self.0[257..265].copy_from_slice(m);
            self
        }
        fn raw_name(mut self, n: &[u8]) -> Raw {
            self.0[field::NAME].fill(0);
            self.0[..n.len()].copy_from_slice(n);
            self
        }
        /// Sets the checksum; returns the header block.
        fn seal(mut self) -> Vec<u8> {
            self.0[field::CHKSUM].copy_from_slice(b"        ");
            let sum: u32 = self.0.iter().map(|&b| u32::from(b)).sum();
            self.0[field::CHKSUM].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
            self.0.to_vec()
        }
    }

    fn data_blocks(data: &[u8]) -> Vec<u8> {
        let mut v = data.to_vec();
        v.resize(data.len() + padding_for(data.len() as u64), 0);
        v
    }

    fn end() -> Vec<u8> {
        vec![0; 1024]
    }

    /// A one-file tar around `header`.
    fn tar_with(header: Vec<u8>, data: &[u8]) -> Vec<u8> {
        [header, data_blocks(data), end()].concat()
    }

    /// Compresses like the writer does (checksum on), single-threaded.
    fn zst(tar: &[u8]) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        e.include_checksum(true).unwrap();
        e.write_all(tar).unwrap();
        e.finish().unwrap()
    }

    fn valid_tar() -> Vec<u8> {
        tar_with(Raw::file("ok.txt", 5).seal(), b"hello")
    }

    // ---- round trip ----------------------------------------------------

    #[test]
    fn round_trip() {
        let (bundle, hashes) = write_samples();
        let got = read_all(&bundle).unwrap();
        let want = samples();
        assert_eq!(got.len(), want.len());
        for ((path, data, exec, hash), (s, h)) in got.iter().zip(want.iter().zip(&hashes)) {
            assert_eq!(path, &s.path);
            assert_eq!(data, &s.data, "{path}");
            assert_eq!(*exec, s.executable, "{path}");
            assert_eq!(hash, h, "{path}");
        }
    }

    #[test]
    fn skipping_unread_entries() {
        let (bundle, _) = write_samples();
        let mut r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
        let mut paths = Vec::new();
        let mut i = 0;
        while let Some(mut e) = r.next_entry().unwrap() {
            // Read nothing, a few bytes, or everything, in turn.
            match i % 3 {
                0 => {}
                1 => {
                    let mut b = [0u8; 7];
                    let _ = e.read(&mut b).unwrap();
                }
                _ => {
                    let mut v = Vec::new();
                    e.read_to_end(&mut v).unwrap();
                    assert_eq!(v.len() as u64, e.size);
                }
            }
            paths.push(e.path.clone());
            i += 1;
        }
        assert!(r.next_entry().unwrap().is_none());
        r.finish().unwrap();
        let want: Vec<_> = samples().into_iter().map(|s| s.path).collect();
        assert_eq!(paths, want);
    }

    #[test]
    fn finish_early_validates_the_rest() {
        let (bundle, _) = write_samples();
        let mut r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
        r.next_entry().unwrap().unwrap();
        r.finish().unwrap();

        // ... and catches a bad entry further on.
        let tar = [valid_tar()[..1024].to_vec(), tar_with(Raw::file("x", 0).typeflag(b'2').seal(), b"")].concat();
        let bundle = zst(&tar);
        let r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
        assert_code(r.finish(), "unsupported_entry_type");
    }

    #[test]
    fn accepts_hand_made_and_record_padded_archives() {
        assert_eq!(read_all(&zst(&valid_tar())).unwrap()[0].1, b"hello");
        // GNU tar pads to 10240-byte records; that is tolerated.
        let mut tar = valid_tar();
        tar.resize(10240, 0);
        read_all(&zst(&tar)).unwrap();
        // Typeflag NUL (old-style regular file), prefix split, 755.
        let mut h = Raw::file("name.sh", 2).typeflag(0).mode(b"0000755\0");
        h.0[field::PREFIX][..3].copy_from_slice(b"dir");
        let got = read_all(&zst(&tar_with(h.seal(), b"hi"))).unwrap();
        assert_eq!((got[0].0.as_str(), got[0].2), ("dir/name.sh", true));
    }

    #[test]
    fn entry_read_errors_keep_their_code() {
        // Truncate the frame in the middle of a large entry's data.
        let data = crate::archive::write::tests::pseudo_random(400_000, 9);
        let mut w = ArchiveWriter::new(Vec::new(), 3, 0).unwrap();
        w.append("big", data.len() as u64, false, &mut &data[..]).unwrap();
        let bundle = w.finish().unwrap();
        let cut = &bundle[..bundle.len() / 2];
        let mut r = ArchiveReader::new(cut, Limits::default()).unwrap();
        let mut e = r.next_entry().unwrap().unwrap();
        let err = io::copy(&mut e, &mut io::sink()).unwrap_err();
        let err = ArchiveError::from(err);
        assert_eq!(err.code(), "malformed_archive", "{err}");
        assert!(err.to_string().contains("\"big\""), "{err}");
        // The reader is poisoned afterwards.
        assert_code(r.next_entry().map(|_| ()), "malformed_archive");
    }

    // ---- hostile archives ----------------------------------------------

    #[test]
    fn traversal_path() {
        let tar = tar_with(Raw::file("../x", 1).seal(), b"x");
        let e = assert_code(read_all(&zst(&tar)), "unsafe_path");
        assert!(matches!(e, ArchiveError::UnsafePath { problem: PathProblem::DotDotComponent, .. }));
    }

    #[test]
    fn traversal_via_prefix() {
        let mut h = Raw::file("x", 1);
        h.0[field::PREFIX][..2].copy_from_slice(b"..");
        assert_code(read_all(&zst(&tar_with(h.seal(), b"x"))), "unsafe_path");
    }

    #[test]
    fn absolute_path() {
        let tar = tar_with(Raw::file("/etc/x", 1).seal(), b"x");
        let e = assert_code(read_all(&zst(&tar)), "unsafe_path");
        assert!(matches!(e, ArchiveError::UnsafePath { problem: PathProblem::Absolute, .. }));
    }

    #[test]
    fn other_unsafe_paths() {
        for name in [&b"a\\b"[..], b"a//b", b"./a", b"a/", b"a\x1bb", b"\xff\xfe"] {
            let tar = tar_with(Raw::file("x", 0).raw_name(name).seal(), b"");
            assert_code(read_all(&zst(&tar)), "unsafe_path");
        }
        // An empty name.
        let tar = tar_with(Raw::file("x", 0).raw_name(b"").seal(), b"");
        assert_code(read_all(&zst(&tar)), "unsafe_path");
    }

    #[test]
    fn bytes_hidden_after_name_nul() {
        let tar = tar_with(Raw::file("x", 0).raw_name(b"a\0hidden").seal(), b"");
        assert_code(read_all(&zst(&tar)), "malformed_archive");
    }

    #[test]
    fn non_regular_entry_types() {
        for flag in [b'1', b'2', b'3', b'4', b'5', b'6', b'7', b'x', b'g', b'L', b'K', b'S', b'D', b'V', b'Z', 0xff] {
            let tar = tar_with(Raw::file("thing", 0).typeflag(flag).seal(), b"");
            let e = assert_code(read_all(&zst(&tar)), "unsupported_entry_type");
            assert!(matches!(e, ArchiveError::UnsupportedEntryType { typeflag, .. } if typeflag == flag));
        }
    }

    #[test]
    fn symlink_hardlink_directory_fifo_chardev() {
        let cases: [(&str, u8); 5] = [("link", b'2'), ("hard", b'1'), ("dir", b'5'), ("fifo", b'6'), ("tty", b'3')];
        for (name, flag) in cases {
            let mut h = Raw::file(name, 0).typeflag(flag);
            if flag == b'1' || flag == b'2' {
                h.0[157..168].copy_from_slice(b"/etc/passwd");
            }
            let tar = tar_with(h.seal(), b"");
            let e = assert_code(read_all(&zst(&tar)), "unsupported_entry_type");
            assert!(e.to_string().contains(name), "{e}");
        }
    }

    #[test]
    fn pax_header() {
        let record = b"30 path=../../../../etc/passwd\n";
        let pax = Raw::file("PaxHeaders/x", record.len() as u64).typeflag(b'x').seal();
        let tar = [pax, data_blocks(record), valid_tar()].concat();
        let e = assert_code(read_all(&zst(&tar)), "unsupported_entry_type");
        assert!(e.to_string().contains("PAX extended header"), "{e}");
    }

    #[test]
    fn gnu_longname() {
        let long = format!("{}\0", "a/".repeat(80));
        let h = Raw::file("././@LongLink", long.len() as u64).typeflag(b'L').magic(b"ustar  \0").seal();
        let tar = [h, data_blocks(long.as_bytes()), valid_tar()].concat();
        let e = assert_code(read_all(&zst(&tar)), "unsupported_entry_type");
        assert!(e.to_string().contains("GNU long name"), "{e}");
    }

    #[test]
    fn gnu_or_v7_magic_on_regular_file() {
        for magic in [b"ustar  \0", b"\0\0\0\0\0\0\0\0", b"ustar\x0001"] {
            let tar = tar_with(Raw::file("a", 0).magic(magic).seal(), b"");
            assert_code(read_all(&zst(&tar)), "malformed_archive");
        }
    }

    #[test]
    fn setuid_and_other_modes() {
        for mode in [b"0004755\0", b"0002755\0", b"0001644\0", b"0000777\0", b"0000664\0", b"0100644\0", b"0000600\0"] {
            let tar = tar_with(Raw::file("a", 0).mode(mode).seal(), b"");
            assert_code(read_all(&zst(&tar)), "unsafe_mode");
        }
        let tar = tar_with(Raw::file("a", 0).mode(b"06x4\0\0\0\0").seal(), b"");
        assert_code(read_all(&zst(&tar)), "malformed_archive");
        // Leading spaces and space terminators are fine.
        let tar = tar_with(Raw::file("a", 0).mode(b"   644 \0").seal(), b"");
        read_all(&zst(&tar)).unwrap();
    }

    #[test]
    fn bad_header_checksum() {
        let mut h = Raw::file("a.txt", 1).seal();
        h[0] = b'b';
        assert_code(read_all(&zst(&tar_with(h, b"x"))), "malformed_archive");
        // A checksum summing bytes as signed chars is not accepted.
        let mut h = Raw::file("a\u{e9}", 1).seal();
        h[field::CHKSUM].copy_from_slice(b"        ");
        let signed: i64 = h.iter().map(|&b| i64::from(b as i8)).sum();
        h[field::CHKSUM].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
        assert_code(read_all(&zst(&tar_with(h, b"x"))), "malformed_archive");
    }

    #[test]
    fn size_field_garbage() {
        let mut base256 = [0u8; 12];
        base256[0] = 0x80;
        base256[11] = 5;
        for field in [&base256, b"0000000001x\0", b"\0\0\0\0\0\0\0\0\0\0\0\0", b"-0000000001\0", b"0000000 001\0"] {
            let tar = tar_with(Raw::file("a", 5).size_field(field).seal(), b"hello");
            assert_code(read_all(&zst(&tar)), "malformed_archive");
        }
    }

    #[test]
    fn oversized_entry() {
        let limits = Limits { max_entry_size: 4, ..Limits::default() };
        let e = assert_code(read_all_with(&zst(&valid_tar()), limits), "limit_exceeded");
        assert!(e.to_string().contains("\"ok.txt\""), "{e}");
        // The declared size is checked before any data is read: a huge
        // size with no data behind it is still a limit error.
        let tar = tar_with(Raw::file("a", 0).size_field(b"77777777777\0").seal(), b"");
        assert_code(read_all(&zst(&tar)), "limit_exceeded");
    }

    #[test]
    fn total_over_limit() {
        let tar = [
            Raw::file("a", 600).seal(),
            data_blocks(&[1; 600]),
            Raw::file("b", 600).seal(),
            data_blocks(&[2; 600]),
            end(),
        ]
        .concat();
        read_all(&zst(&tar)).unwrap();
        let limits = Limits { max_total_size: 3000, ..Limits::default() };
        let e = assert_code(read_all_with(&zst(&tar), limits), "limit_exceeded");
        assert!(e.to_string().contains("\"b\""), "{e}");
        let limits = Limits { max_entries: 1, ..Limits::default() };
        assert_code(read_all_with(&zst(&tar), limits), "limit_exceeded");
    }

    #[test]
    fn window_larger_than_allowed() {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        e.include_checksum(true).unwrap();
        e.window_log(27).unwrap();
        e.long_distance_matching(true).unwrap();
        e.write_all(&valid_tar()).unwrap();
        let bundle = e.finish().unwrap();
        let err = assert_code(read_all(&bundle), "limit_exceeded");
        assert!(err.to_string().contains("134217728"), "{err}");
        // The decoder's own window limit reports the message we map from.
        let mut d = zstd::stream::read::Decoder::with_buffer(&bundle[..]).unwrap();
        d.window_log_max(24).unwrap();
        let e = io::copy(&mut d, &mut io::sink()).unwrap_err();
        assert_eq!(e.to_string(), WINDOW_TOO_LARGE);
        // Accepted when the caller raises the limit.
        let limits = Limits { max_window_log: 27, ..Limits::default() };
        read_all_with(&bundle, limits).unwrap();
    }

    #[test]
    fn window_error_from_decoder_maps_to_limit() {
        let bundle = zst(&valid_tar());
        let r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
        let e = r.decode_error(io::Error::other(WINDOW_TOO_LARGE));
        assert_eq!(e.code(), "limit_exceeded");
        let e = r.decode_error(io::Error::other("Restored data doesn't match checksum"));
        assert_eq!(e.code(), "malformed_archive");
    }

    #[test]
    fn truncated_frame() {
        let (bundle, _) = write_samples();
        for cut in [0, 3, 5, 20, bundle.len() / 2, bundle.len() - 4, bundle.len() - 1] {
            assert_code(read_all(&bundle[..cut]), "malformed_archive");
        }
    }

    #[test]
    fn flipped_content_checksum() {
        let (mut bundle, _) = write_samples();
        let last = bundle.len() - 1;
        bundle[last] ^= 0x01;
        let e = assert_code(read_all(&bundle), "malformed_archive");
        assert!(e.to_string().contains("checksum"), "{e}");
    }

    #[test]
    fn frame_without_checksum() {
        let bundle = zstd::stream::encode_all(&valid_tar()[..], 3).unwrap();
        assert_eq!(bundle[4] & 0x04, 0);
        assert_code(read_all(&bundle), "malformed_archive");
    }

    #[test]
    fn not_zstd_or_skippable_first() {
        assert_code(read_all(&valid_tar()), "malformed_archive");
        let mut skippable = vec![0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
        skippable.extend(zst(&valid_tar()));
        assert_code(read_all(&skippable), "malformed_archive");
    }

    #[test]
    fn second_frame_appended() {
        let (bundle, _) = write_samples();
        let doubled = [bundle.clone(), bundle].concat();
        let e = assert_code(read_all(&doubled), "trailing_data");
        assert!(e.to_string().contains("second zstd frame"), "{e}");
    }

    #[test]
    fn skippable_frame_appended() {
        let (mut bundle, _) = write_samples();
        bundle.extend([0x5F, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, b'e', b'v', b'l']);
        let e = assert_code(read_all(&bundle), "trailing_data");
        assert!(e.to_string().contains("skippable"), "{e}");
    }

    #[test]
    fn garbage_after_frame() {
        let (mut bundle, _) = write_samples();
        bundle.push(0);
        assert_code(read_all(&bundle), "trailing_data");
        bundle.extend(b"garbage");
        assert_code(read_all(&bundle), "trailing_data");
    }

    #[test]
    fn non_zero_after_end_marker() {
        let mut tar = valid_tar();
        tar.extend(b"smuggled");
        assert_code(read_all(&zst(&tar)), "trailing_data");
        // Too many zeros.
        let mut tar = valid_tar();
        tar.resize(tar.len() + MAX_TRAILING_ZEROS as usize + 1, 0);
        assert_code(read_all(&zst(&tar)), "trailing_data");
        // A lone zero block followed by another entry.
        let tar = [Raw::file("a", 0).seal(), vec![0; 512], valid_tar()].concat();
        assert_code(read_all(&zst(&tar)), "trailing_data");
    }

    #[test]
    fn missing_or_short_end_marker() {
        let tar = [Raw::file("a", 1).seal(), data_blocks(b"x")].concat();
        assert_code(read_all(&zst(&tar)), "malformed_archive");
        let tar = [Raw::file("a", 1).seal(), data_blocks(b"x"), vec![0; 512]].concat();
        assert_code(read_all(&zst(&tar)), "malformed_archive");
        let tar = [Raw::file("a", 1).seal(), data_blocks(b"x"), vec![0; 700]].concat();
        assert_code(read_all(&zst(&tar)), "malformed_archive");
    }

    #[test]
    fn truncated_entry_data_and_padding() {
        // Header says 1000 bytes; the stream stops after 10.
        let tar = [Raw::file("a", 1000).seal(), vec![b'x'; 10]].concat();
        assert_code(read_all(&zst(&tar)), "malformed_archive");
        // Non-zero padding.
        let mut tar = valid_tar();
        tar[512 + 5] = b'!';
        assert_code(read_all(&zst(&tar)), "malformed_archive");
    }

    #[test]
    fn partial_header_block() {
        let tar = [valid_tar()[..1024].to_vec(), vec![b'a'; 100]].concat();
        assert_code(read_all(&zst(&tar)), "malformed_archive");
    }

    #[test]
    fn io_errors_are_io() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::ConnectionReset, "boom"))
            }
        }
        let r = ArchiveReader::new(io::BufReader::new(Failing), Limits::default());
        assert_code(r.map(|_| ()), "io_error");
        // Fails after the frame header.
        let bundle = zst(&valid_tar());
        let input = io::BufReader::with_capacity(8, (&bundle[..10]).chain(Failing));
        let mut r = ArchiveReader::new(input, Limits::default()).unwrap();
        assert_code(r.next_entry().map(|_| ()), "io_error");
    }

    #[test]
    fn bad_limits() {
        let bundle = zst(&valid_tar());
        for max_window_log in [9, 32] {
            let limits = Limits { max_window_log, ..Limits::default() };
            assert_code(ArchiveReader::new(&bundle[..], limits).map(|_| ()), "io_error");
        }
    }

    #[test]
    fn octal_parser() {
        assert_eq!(parse_octal(b"0000644\0"), Some(0o644));
        assert_eq!(parse_octal(b"  644 \0\0"), Some(0o644));
        assert_eq!(parse_octal(b"012345\0 "), Some(0o12345));
        assert_eq!(parse_octal(b"77777777777\0"), Some(0o77777777777));
        assert_eq!(parse_octal(b"777777777777"), Some(0o777777777777));
        assert_eq!(parse_octal(b"\0\0\0\0\0\0\0\0"), None);
        assert_eq!(parse_octal(b"        "), None);
        assert_eq!(parse_octal(b"0008\0\0\0\0"), None);
        assert_eq!(parse_octal(b"06 4\0\0\0\0"), None);
        assert_eq!(parse_octal(&[0x80, 0, 0, 0, 0, 0, 0, 1]), None);
    }
}
