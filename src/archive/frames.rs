//! The zstd frame structure (RFC 8878 §3.1), read from the bytes themselves: frame headers,
//! block headers, content checksums and skippable frames.
//!
//! Why this file exists: a bundle is a sequence of independent zstd frames (format reference
//! §2.1). The reader finds where each frame ends by walking its block headers, never by
//! believing the seek table, so that frames can be handed to other threads and a lying table
//! cannot move a boundary. The walk is the format's own: a frame header, blocks until the one
//! marked last, then the 4-byte content checksum, which every frame of a bundle must carry.

use std::io::{self, BufRead, Read};

use super::ArchiveError;
use super::bundle_read::BundleRead;

/// zstd frame magic number (little-endian on the wire: 28 B5 2F FD).
pub(crate) const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// Skippable frames use magic numbers 0x184D2A50..=0x184D2A5F.
pub(crate) const SKIPPABLE_MAGIC_MASK: u32 = 0xFFFF_FFF0;
pub(crate) const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
/// Largest zstd frame header: magic 4 + descriptor 1 + window 1 + dict id 4 + content size 8.
pub(crate) const MAX_FRAME_HEADER: usize = 18;
/// Largest block (RFC 8878 §3.1.1.2.4: Block_Maximum_Size is at most 128 KiB).
const MAX_BLOCK: usize = 128 << 10;

/// A frame header that passed the checks of format reference §2.1.
#[derive(Clone, Copy)]
pub(crate) struct FrameHeader {
    pub bytes: [u8; MAX_FRAME_HEADER],
    pub len: usize,
    /// The window the frame declares.
    pub window_size: u64,
    /// Frame_Content_Size, when the header has it.
    pub content_size: Option<u64>,
}

impl FrameHeader {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Why a frame's bytes could not be taken: the input failed, ended, or is not a frame.
#[derive(Debug)]
pub(crate) enum Fault {
    Io(io::Error),
    Truncated,
    Malformed(String),
    /// A window over the limit (its size), seen while decoding (the header check normally
    /// catches it).
    Window(u64),
    /// A later frame's header failed the checks of [`read_header`].
    Header(ArchiveError),
}

impl Fault {
    /// The error for this fault, met in the entry at `path` (when known).
    pub fn into_error(self, path: Option<String>, max_window_log: u32) -> ArchiveError {
        match self {
            Fault::Io(source) => ArchiveError::Io { path, source },
            Fault::Truncated => ArchiveError::Malformed { path, reason: "the zstd frame is truncated".into() },
            Fault::Malformed(reason) => ArchiveError::Malformed { path, reason },
            Fault::Window(value) => ArchiveError::LimitExceeded {
                path,
                what: "zstd window size in bytes",
                value,
                limit: 1u64 << max_window_log,
            },
            Fault::Header(mut e) => {
                if let ArchiveError::Malformed { path: p, .. }
                | ArchiveError::LimitExceeded { path: p, .. }
                | ArchiveError::Io { path: p, .. } = &mut e
                {
                    *p = p.take().or(path);
                }
                e
            }
        }
    }
}

/// Reads the first 4 bytes of a frame: `None` at the end of the input, else up to 4 bytes (fewer
/// only where the input ends).
pub(crate) fn read_magic<R: Read>(input: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok((got > 0).then(|| magic[..got].to_vec()))
}

pub(crate) fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Reads and checks the rest of a frame header whose magic number (4 bytes) was read:
/// descriptor, window descriptor, dictionary id, content size. The checks, in order: zstd
/// magic (a skippable frame or anything else is `Malformed`), reserved bit, content checksum
/// flag, no dictionary, then the window against `max_window` (`LimitExceeded`).
pub(crate) fn read_header<R: Read>(magic: &[u8], input: &mut R, max_window: u64) -> Result<FrameHeader, ArchiveError> {
    let short = "the input is too short for a zstd frame header";
    if magic.len() < 4 {
        return Err(ArchiveError::malformed(None, short));
    }
    let mut header = [0u8; MAX_FRAME_HEADER];
    header[..4].copy_from_slice(magic);
    let magic = le32(magic);
    if magic != ZSTD_MAGIC {
        let what = if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC {
            "the input starts with a zstd skippable frame, not a data frame"
        } else {
            "the input is not a zstd frame (bad magic number)"
        };
        return Err(ArchiveError::malformed(None, what));
    }
    read_exact(input, &mut header[4..5], short)?;
    let descriptor = header[4];
    let fcs_flag = descriptor >> 6;
    let single_segment = descriptor & 0x20 != 0;
    if descriptor & 0x08 != 0 {
        return Err(ArchiveError::malformed(None, "the zstd frame header sets the reserved bit"));
    }
    if descriptor & 0x04 == 0 {
        return Err(ArchiveError::malformed(None, "the zstd frame has no content checksum"));
    }
    if descriptor & 0x03 != 0 {
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

    let content_size = (fcs_len > 0).then(|| {
        let mut le = [0u8; 8];
        le[..fcs_len].copy_from_slice(&header[5 + window_len..len]);
        let size = u64::from_le_bytes(le);
        if fcs_len == 2 { size + 256 } else { size }
    });
    let window_size = match content_size {
        // The window is the whole content.
        Some(size) if single_segment => size,
        _ => {
            let descriptor = header[5];
            let log = 10 + u32::from(descriptor >> 3);
            let base = 1u64 << log;
            base + (base / 8) * u64::from(descriptor & 0x07)
        }
    };
    if window_size > max_window {
        return Err(ArchiveError::LimitExceeded {
            path: None,
            what: "zstd window size in bytes",
            value: window_size,
            limit: max_window,
        });
    }
    Ok(FrameHeader { bytes: header, len, window_size, content_size })
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    BlockHeader,
    Body { left: usize, last: bool },
    Checksum { left: usize },
    Done,
}

/// Walks one frame's blocks after its header, copying the frame's bytes out of the input and
/// stopping exactly where the frame ends.
pub(crate) struct Walker {
    state: State,
    /// The frame's bytes taken so far, header included.
    pub taken: u64,
    /// The content checksum's 4 bytes, once read.
    pub checksum: [u8; 4],
}

impl Walker {
    pub fn new(header: &FrameHeader) -> Self {
        Walker { state: State::BlockHeader, taken: header.len as u64, checksum: [0; 4] }
    }

    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Appends at most `max` more bytes of the frame to `out` (at least one unless the frame
    /// is complete). A block header with the reserved type or a size over 128 KiB is
    /// `Malformed`, the input ending inside the frame `Truncated`.
    pub fn read_into<R: BufRead, O: FrameBytes>(
        &mut self,
        input: &mut R,
        out: &mut O,
        max: usize,
    ) -> Result<(), Fault> {
        let start = out.len();
        while out.len() - start < max {
            let room = max - (out.len() - start);
            match self.state {
                State::Done => break,
                State::BlockHeader => {
                    if room < 3 && out.len() > start {
                        break;
                    }
                    let mut h = [0u8; 3];
                    input.read_exact(&mut h).map_err(eof_is_truncated)?;
                    let h24 = u32::from_le_bytes([h[0], h[1], h[2], 0]);
                    let (last, kind, size) = (h24 & 1 == 1, (h24 >> 1) & 3, (h24 >> 3) as usize);
                    if kind == 3 {
                        return Err(Fault::Malformed("a zstd block has the reserved block type".into()));
                    }
                    if size > MAX_BLOCK {
                        return Err(Fault::Malformed(format!("a zstd block declares {size} bytes (at most 128 KiB)")));
                    }
                    out.push(&h);
                    self.taken += 3;
                    let left = if kind == 1 { 1 } else { size };
                    self.state = State::Body { left, last };
                    self.after_body();
                }
                State::Body { left, last } => {
                    let n = out.take_from(input, left.min(room))?;
                    self.taken += n as u64;
                    self.state = State::Body { left: left - n, last };
                    self.after_body();
                }
                State::Checksum { left } => {
                    let n = out.take_from(input, left.min(room))?;
                    let at = 4 - left;
                    self.checksum[at..at + n].copy_from_slice(&out.filled()[out.len() - n..]);
                    self.taken += n as u64;
                    self.state = if left == n { State::Done } else { State::Checksum { left: left - n } };
                }
            }
        }
        Ok(())
    }

    /// Walks on like [`read_into`](Self::read_into), at most `max` more bytes, but reads only
    /// the block headers and the checksum and passes over the block bodies
    /// ([`BundleRead::skip`]): for a file whose frame a decoding thread reads by position. A
    /// fault here is not the reading path's (a caller walks the frame again by reading).
    pub fn pass_over<R: BundleRead>(&mut self, input: &mut R, max: u64) -> Result<(), Fault> {
        let mut walked = 0u64;
        while walked < max {
            match self.state {
                State::Done => break,
                State::BlockHeader => {
                    let mut h = [0u8; 3];
                    input.read_exact(&mut h).map_err(eof_is_truncated)?;
                    let h24 = u32::from_le_bytes([h[0], h[1], h[2], 0]);
                    let (last, kind, size) = (h24 & 1 == 1, (h24 >> 1) & 3, (h24 >> 3) as usize);
                    if kind == 3 || size > MAX_BLOCK {
                        return Err(Fault::Malformed("a zstd block header is not valid".into()));
                    }
                    walked += 3;
                    self.taken += 3;
                    let left = if kind == 1 { 1 } else { size };
                    self.state = State::Body { left, last };
                    self.after_body();
                }
                State::Body { left, last } => {
                    let n = input.skip(left).map_err(Fault::Io)?;
                    if n == 0 {
                        return Err(Fault::Truncated);
                    }
                    walked += n as u64;
                    self.taken += n as u64;
                    self.state = State::Body { left: left - n, last };
                    self.after_body();
                }
                State::Checksum { .. } => {
                    input.read_exact(&mut self.checksum).map_err(eof_is_truncated)?;
                    walked += 4;
                    self.taken += 4;
                    self.state = State::Done;
                }
            }
        }
        Ok(())
    }

    /// Appends the rest of the frame's current piece (a block with its header, or the content
    /// checksum) to `out`.
    pub fn read_piece<R: BufRead>(&mut self, input: &mut R, out: &mut Vec<u8>) -> Result<(), Fault> {
        if self.state == State::BlockHeader {
            self.read_into(input, out, 3)?;
        }
        match self.state {
            State::Body { left, .. } | State::Checksum { left } if left > 0 => self.read_into(input, out, left),
            _ => Ok(()),
        }
    }

    fn after_body(&mut self) {
        if let State::Body { left: 0, last } = self.state {
            self.state = if last { State::Checksum { left: 4 } } else { State::BlockHeader };
        }
    }
}

/// Where the pieces of a frame held in memory end: its header, each block with its header, its
/// checksum (see [`piece_end`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece {
    Header,
    Block,
    Checksum,
    End,
}

/// The end of the piece of `bytes` (a frame's bytes from its start) that begins at `at`, and
/// the kind of piece after it; never past `bytes.len()` (a frame cut short ends in a part of a
/// piece).
pub(crate) fn piece_end(bytes: &[u8], at: usize, piece: Piece, header_len: usize) -> (usize, Piece) {
    let (end, next) = match piece {
        Piece::Header => (header_len, Piece::Block),
        Piece::Block if at + 3 <= bytes.len() => {
            let h = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], 0]);
            let (last, kind, size) = (h & 1 == 1, (h >> 1) & 3, (h >> 3) as usize);
            let body = if kind == 1 { 1 } else { size };
            (at + 3 + body, if last { Piece::Checksum } else { Piece::Block })
        }
        Piece::Block => (bytes.len(), Piece::End),
        Piece::Checksum => (at + 4, Piece::End),
        Piece::End => (bytes.len(), Piece::End),
    };
    (end.min(bytes.len()), next)
}

fn eof_is_truncated(e: io::Error) -> Fault {
    if e.kind() == io::ErrorKind::UnexpectedEof { Fault::Truncated } else { Fault::Io(e) }
}

/// Copies up to `want` bytes (at least one) from `input` to `out`.
/// Where a [`Walker`] puts a frame's bytes: a `Vec` it appends to, or a [`FrameBuf`] that reads
/// them straight into room kept from earlier frames.
pub(crate) trait FrameBytes {
    /// The bytes so far.
    fn filled(&self) -> &[u8];
    fn len(&self) -> usize {
        self.filled().len()
    }
    fn push(&mut self, bytes: &[u8]);
    /// Appends up to `want` (> 0) bytes of `input`: at least one, or `Truncated` at its end.
    fn take_from<R: BufRead>(&mut self, input: &mut R, want: usize) -> Result<usize, Fault>;
}

impl FrameBytes for Vec<u8> {
    fn filled(&self) -> &[u8] {
        self
    }

    fn push(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn take_from<R: BufRead>(&mut self, input: &mut R, want: usize) -> Result<usize, Fault> {
        copy(input, self, want)
    }
}

/// A frame's compressed bytes read whole, in a buffer kept from frame to frame: `buf[..len]`
/// are this frame's bytes, the rest of `buf` is room written by earlier frames.
///
/// Why: the bytes are read with `Read::read` straight into that room (or by position, on a
/// decoding thread: [`read_at`](Self::read_at)), so that the bundle file's small buffer
/// (`archive::FileAt`) hands block bodies to the kernel's copy out of the page cache directly,
/// instead of copying them out of its own buffer or a read-ahead thread's: that second copy of
/// the 727 MB bench bundle was about 6 % of verify's CPU. A `Vec` read into must be
/// initialized, and safe Rust cannot skip that; keeping the room initialized across frames
/// zeroes each buffer once in its life, not once per frame.
pub(crate) struct FrameBuf {
    buf: Vec<u8>,
    len: usize,
}

impl FrameBuf {
    /// An empty frame in `buf` (its contents are room), with room for `want` bytes.
    pub fn with_room(mut buf: Vec<u8>, want: usize) -> FrameBuf {
        if buf.capacity() < want {
            buf.reserve_exact(want - buf.len());
        }
        FrameBuf { buf, len: 0 }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The frame's bytes as a `Vec` of exactly them.
    pub fn into_vec(mut self) -> Vec<u8> {
        self.buf.truncate(self.len);
        self.buf
    }

    /// The buffer, room included, for a later frame.
    pub fn into_room(self) -> Vec<u8> {
        self.buf
    }

    /// Appends the `len` bytes of `file` at offset `at` (read by position); a file that ends
    /// before them is an error.
    pub fn read_at(&mut self, file: &std::fs::File, at: u64, len: usize) -> io::Result<()> {
        let mut done = 0;
        while done < len {
            let room = self.room(len - done);
            let n = match super::bundle_read::read_at(file, room, at + done as u64) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                got => got?,
            };
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the bundle file is shorter than when its frames were walked (it changed while read)",
                ));
            }
            self.len += n;
            done += n;
        }
        Ok(())
    }

    /// Room for `n` more bytes, zeroed only where never written (up to the capacity at once,
    /// so that later frames find it initialized).
    fn room(&mut self, n: usize) -> &mut [u8] {
        let end = self.len + n;
        if end > self.buf.len() {
            let to = end.max(self.buf.capacity());
            self.buf.resize(to, 0);
        }
        &mut self.buf[self.len..end]
    }
}

impl FrameBytes for FrameBuf {
    fn filled(&self) -> &[u8] {
        self.bytes()
    }

    fn push(&mut self, bytes: &[u8]) {
        self.room(bytes.len()).copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn take_from<R: BufRead>(&mut self, input: &mut R, want: usize) -> Result<usize, Fault> {
        let n = loop {
            match input.read(self.room(want)) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Fault::Io(e)),
            }
        };
        if n == 0 {
            return Err(Fault::Truncated);
        }
        self.len += n;
        Ok(n)
    }
}

fn copy<R: BufRead>(input: &mut R, out: &mut Vec<u8>, want: usize) -> Result<usize, Fault> {
    let buf = loop {
        match input.fill_buf() {
            Ok(buf) => break buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Fault::Io(e)),
        }
    };
    if buf.is_empty() {
        return Err(Fault::Truncated);
    }
    let n = buf.len().min(want);
    out.extend_from_slice(&buf[..n]);
    input.consume(n);
    Ok(n)
}

/// What follows the data frames, for a `trailing_data` message.
pub(crate) fn describe_trailing(rest: &[u8]) -> String {
    if let Some(magic) = rest.get(..4) {
        let magic = le32(magic);
        if magic == ZSTD_MAGIC {
            return "a second zstd frame follows the archive frame".into();
        }
        if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC {
            return "a zstd skippable frame follows the archive frame".into();
        }
    }
    "unexpected bytes follow the zstd frame".into()
}
