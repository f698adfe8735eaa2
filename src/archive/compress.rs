//! Writing the tar stream as independent zstd frames, compressed on every core and written in
//! order, followed by the seek table (format reference §2.1).
//!
//! Why this file exists: one zstd frame can only be decoded on one thread, and only from its
//! start. Frames cut at entry boundaries let a verifier decode on every core and `bundle cat`
//! decode only the frames that hold one file. Where the cuts fall depends only on the entries'
//! sizes ([`FrameSink::entry`]): never on threads, timing or the machine, so the same inputs
//! still give the same bytes. Each frame is compressed in one call with pinned parameters
//! ([`compress_frame`]), so a frame's bytes depend only on its content and the level.
//!
//! Memory: the frame being filled, plus at most `threads + 1` frames in flight (each its input
//! and its compressed output), plus one zstd context per compressing thread: about 40 MiB at
//! level 3 on 2 CPUs.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, sync_channel};

use super::seek_table::{self, FrameEntry};
use super::write::MAX_BLOCK;

/// The most tar-stream bytes in one frame. Entries are grouped into a frame while they fit;
/// an entry that does not fit in what is left of the frame starts a new one; an entry larger
/// than a frame starts a new one and is cut every `FRAME_SIZE` bytes, its last piece shared
/// with the entries after it. 4 MiB (twice the 2 MiB window of level 3) keeps the size within
/// +0.5% of one frame (measured on the bench agent: format reference §2.1), decodes in a few
/// milliseconds, and bounds what `bundle cat` decodes beyond the file it wants.
pub const FRAME_SIZE: usize = 4 << 20;

struct Done {
    input: Vec<u8>,
    len: usize,
    output: io::Result<Vec<u8>>,
}

thread_local! {
    /// One compression context per thread, kept between frames of the same level.
    static CONTEXT: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
}

/// Compresses `src` into one frame at `level`: content size and content checksum in the frame,
/// no dictionary id, blocks under 128 KiB (see [`MAX_BLOCK`]). `out` is cleared first.
pub(crate) fn compress_frame(level: i32, src: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    use zstd::zstd_safe::CParameter;
    CONTEXT.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.as_ref().is_none_or(|(l, _)| *l != level) {
            let mut c = zstd::bulk::Compressor::new(level)?;
            c.include_checksum(true)?;
            c.include_contentsize(true)?;
            c.include_dictid(false)?;
            c.set_parameter(CParameter::MaxBlockSize(MAX_BLOCK))?;
            *cell = Some((level, c));
        }
        let (_, c) = cell.as_mut().expect("set above");
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(src.len()));
        c.compress_to_buffer(src, out).map(drop)
    })
}

/// The tar stream's destination when frames are cut at entry boundaries.
pub(crate) struct FrameSink<W: Write> {
    out: W,
    level: i32,
    /// The frame being filled: `FRAME_SIZE` bytes, the first `fill` of them used.
    cur: Vec<u8>,
    fill: usize,
    free_in: Vec<Vec<u8>>,
    free_out: Vec<Vec<u8>>,
    pending: VecDeque<Receiver<Done>>,
    /// Frames in flight at most; 0 compresses on the calling thread.
    in_flight: usize,
    table: Vec<FrameEntry>,
}

impl<W: Write> FrameSink<W> {
    /// Compresses on rayon's threads when `threaded`, else on the calling thread; the bytes are
    /// the same.
    pub fn new(out: W, level: i32, threaded: bool) -> Self {
        let in_flight = if threaded { super::decode::threads() + 1 } else { 0 };
        FrameSink {
            out,
            level,
            cur: vec![0; FRAME_SIZE],
            fill: 0,
            free_in: Vec::new(),
            free_out: Vec::new(),
            pending: VecDeque::new(),
            in_flight,
            table: Vec::new(),
        }
    }

    /// An entry of `len` tar bytes (header, data, padding) starts: cuts the frame before it
    /// unless it fits in what is left (or the frame is empty).
    pub fn entry(&mut self, len: u64) -> io::Result<()> {
        if self.fill > 0 && (self.fill as u64).saturating_add(len) > FRAME_SIZE as u64 {
            self.cut()?;
        }
        Ok(())
    }

    pub fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.fill == FRAME_SIZE {
                self.cut()?;
            }
            let n = bytes.len().min(FRAME_SIZE - self.fill);
            self.cur[self.fill..self.fill + n].copy_from_slice(&bytes[..n]);
            self.fill += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Reads at most `limit` bytes of `data` into the frame (at least one unless `data` is at
    /// its end) and returns them for hashing.
    pub fn read_from(&mut self, data: &mut dyn Read, limit: usize) -> io::Result<&[u8]> {
        if self.fill == FRAME_SIZE {
            self.cut()?;
        }
        let want = limit.min(FRAME_SIZE - self.fill);
        let n = data.read(&mut self.cur[self.fill..self.fill + want])?;
        self.fill += n;
        Ok(&self.cur[self.fill - n..self.fill])
    }

    /// Ends the last frame, writes every frame and the seek table, and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        if self.fill > 0 {
            self.cut()?;
        }
        while !self.pending.is_empty() {
            self.write_next()?;
        }
        self.out.write_all(&seek_table::encode(&self.table))?;
        Ok(self.out)
    }

    fn cut(&mut self) -> io::Result<()> {
        let fresh = self.free_in.pop().unwrap_or_else(|| vec![0; FRAME_SIZE]);
        let input = std::mem::replace(&mut self.cur, fresh);
        let len = std::mem::take(&mut self.fill);
        let mut output = self.free_out.pop().unwrap_or_default();
        let level = self.level;
        if self.in_flight == 0 {
            let result = compress_frame(level, &input[..len], &mut output).map(|()| output);
            return self.write_frame(Done { input, len, output: result });
        }
        let (tx, rx) = sync_channel(1);
        rayon::spawn(move || {
            let result = compress_frame(level, &input[..len], &mut output).map(|()| output);
            // The receiver is gone only when the writer was dropped midway.
            let _ = tx.send(Done { input, len, output: result });
        });
        self.pending.push_back(rx);
        while self.pending.len() > self.in_flight {
            self.write_next()?;
        }
        Ok(())
    }

    fn write_next(&mut self) -> io::Result<()> {
        let rx = self.pending.pop_front().expect("a frame is pending");
        let done = rx.recv().map_err(|_| io::Error::other("a compressing thread panicked"))?;
        self.write_frame(done)
    }

    fn write_frame(&mut self, done: Done) -> io::Result<()> {
        let output = done.output?;
        self.out.write_all(&output)?;
        self.table.push(FrameEntry { compressed: frame_u32(output.len())?, decompressed: frame_u32(done.len)? });
        self.free_in.push(done.input);
        self.free_out.push(output);
        Ok(())
    }
}

fn frame_u32(n: usize) -> io::Result<u32> {
    u32::try_from(n).map_err(|_| io::Error::other("a frame over 4 GiB"))
}
