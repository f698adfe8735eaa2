//! Writing the tar stream as independent zstd frames, compressed on up to four cores and
//! written in order, followed by the seek table (format reference §2.1).
//!
//! Why this file exists: one zstd frame can only be decoded on one thread, and only from its
//! start. Frames cut at entry boundaries let a verifier decode on several cores and `bundle cat`
//! decode only the frames that hold one file. Where the cuts fall depends only on the entries'
//! sizes ([`FrameSink::entry`]): never on threads, timing or the machine, so the same inputs
//! still give the same bytes. Each frame is compressed in one call with pinned parameters
//! ([`compress_frame`]), so a frame's bytes depend only on its content and the level.
//!
//! Threads ([`FrameSink::new`]): the calling thread fills frames, one thread per usable CPU (at
//! most [`MAX_COMPRESSING_THREADS`]) compresses them, and one writes them in order.
//!
//! Memory: the frame being filled, plus at most `2 × threads + 1` frames in flight (each its
//! input and its compressed output), plus one zstd context per compressing thread: with at most
//! four threads, ten frames of 4 MiB and their outputs, whatever the CPUs.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use super::seek_table::{self, FrameEntry};
use super::write::MAX_BLOCK;
use crate::workers::{Task, Workers};

/// The most tar-stream bytes in one frame. Entries are grouped into a frame while they fit;
/// an entry that does not fit in what is left of the frame starts a new one; an entry larger
/// than a frame starts a new one and is cut every `FRAME_SIZE` bytes, its last piece shared
/// with the entries after it. 4 MiB (twice the 2 MiB window of level 3) keeps the size within
/// +0.5% of one frame (measured on the bench agent: format reference §2.1), decodes in a few
/// milliseconds, and bounds what `bundle cat` decodes beyond the file it wants.
pub const FRAME_SIZE: usize = 4 << 20;

/// The most compressing threads a pack starts, whatever the CPUs. The frames in flight grow with
/// their number, and beyond a few the calling thread (reading and hashing the files) and the
/// writing thread cannot keep more busy: in `perf` of a pack of the 1 GiB bench agent on the
/// 2-vCPU Xeon the two compressing threads took 62 % of the samples, the calling thread 17 % and
/// the writing thread 19 %, so with CPUs to spare about 3.6 compressing threads would keep
/// either of those busy. With one thread per CPU, that pack peaked at 50, 76, 153, 278 and
/// 443 MiB for 2, 4, 8, 16 and 32 (a build told it had that many, 2026-11-28).
pub const MAX_COMPRESSING_THREADS: usize = 4;

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
    level: i32,
    /// The frame being filled: `FRAME_SIZE` bytes, the first `fill` of them used.
    cur: Vec<u8>,
    fill: usize,
    out: Out<W>,
}

/// Where the frames are compressed and written.
enum Out<W> {
    /// On the calling thread, one after the other (one usable CPU).
    Here { out: W, compressed: Vec<u8>, table: Vec<FrameEntry> },
    /// Compressed on threads of their own, written in order on a thread of its own.
    Threads(Threads<W>),
}

/// The threads of a [`FrameSink`] on several CPUs: the calling thread fills frames (reading the
/// agent's files and hashing them), the compressing threads compress them, and the writing
/// thread writes them in order (and whatever the writer does with them: pack compares them with
/// the bundle already there and asks for writeback). Writing on the calling thread made it the
/// bottleneck: on the 2-vCPU Xeon, copying the 728 MB bundle into the page cache cost it 1.0 s
/// of its 3.6 s (a write that allocates page-cache pages is slow in a VM), while the
/// compressing threads waited for frames.
struct Threads<W> {
    workers: Workers<Task>,
    /// To the writing thread: each frame's result, in order. `None` once closed.
    frames: Option<SyncSender<Receiver<Done>>>,
    /// From the writing thread: each written frame's buffers (its input and its output).
    back: Receiver<(Vec<u8>, Vec<u8>)>,
    /// Frame buffers made so far besides the first, and how many may be.
    made: usize,
    limit: usize,
    writer: Option<JoinHandle<io::Result<Written<W>>>>,
}

/// What the writing thread gives back at the end: the writer and the seek table's entries.
type Written<W> = (W, Vec<FrameEntry>);

impl<W: Write + Send + 'static> FrameSink<W> {
    /// Compresses on threads of its own ([`compressing_threads`]) when `threaded`, else on the
    /// calling thread; the bytes are the same. Threads that cannot be started leave the
    /// calling thread to do it all.
    pub fn new(out: W, level: i32, threaded: bool) -> Self {
        let here = |out| Out::Here { out, compressed: Vec::new(), table: Vec::new() };
        let out = match threaded {
            true => Threads::start(compressing_threads(), out).map_or_else(here, Out::Threads),
            false => here(out),
        };
        FrameSink { level, cur: vec![0; FRAME_SIZE], fill: 0, out }
    }
}

/// Compressing threads for a pack: one per usable CPU (affinity mask or cgroup quota), at most
/// [`MAX_COMPRESSING_THREADS`].
fn compressing_threads() -> usize {
    crate::workers::usable_cpus().min(MAX_COMPRESSING_THREADS)
}

impl<W: Write> FrameSink<W> {
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
        let (mut out, table) = match self.out {
            Out::Here { out, table, .. } => (out, table),
            Out::Threads(mut threads) => threads.finish()?,
        };
        out.write_all(&seek_table::encode(&table))?;
        Ok(out)
    }

    fn cut(&mut self) -> io::Result<()> {
        let len = std::mem::take(&mut self.fill);
        let level = self.level;
        match &mut self.out {
            Out::Here { out, compressed, table } => {
                compress_frame(level, &self.cur[..len], compressed)?;
                out.write_all(compressed)?;
                table.push(FrameEntry { compressed: frame_u32(compressed.len())?, decompressed: frame_u32(len)? });
                Ok(())
            }
            Out::Threads(threads) => {
                let (fresh, mut output) = threads.buffers()?;
                let input = std::mem::replace(&mut self.cur, fresh);
                let (tx, rx) = sync_channel(1);
                let queued = threads.workers.run(Box::new(move || {
                    let result = compress_frame(level, &input[..len], &mut output).map(|()| output);
                    // The receiver is gone only when the writing thread stopped early.
                    let _ = tx.send(Done { input, len, output: result });
                }));
                if !queued {
                    return Err(io::Error::other("a compressing thread panicked"));
                }
                threads.send(rx)
            }
        }
    }
}

impl<W: Write + Send + 'static> Threads<W> {
    /// Starts the compressing threads (`n`) and the writing thread, which takes `out`; `out`
    /// back if a thread cannot be started.
    fn start(n: usize, out: W) -> Result<Threads<W>, W> {
        let Ok(workers) = Workers::start("compress", n) else { return Err(out) };
        // Frames in flight besides the one being filled: one per compressing thread, one
        // queued for each, and one being written.
        let limit = 2 * n + 1;
        let (frames, queue) = sync_channel::<Receiver<Done>>(limit + 1);
        // Room for every buffer: the writing thread never waits to give one back.
        let (give_back, back) = sync_channel(limit + 2);
        // The writer goes to the thread once it runs, so that it is still here if it does not.
        let (hand_over, take) = sync_channel::<W>(1);
        let writer = std::thread::Builder::new().name("write".into()).spawn(move || {
            let out = take.recv().map_err(|_| io::Error::other("the writer never came"))?;
            write_in_order(out, &queue, &give_back)
        });
        let Ok(writer) = writer else { return Err(out) };
        // The thread is waiting for it: the channel has room and its receiver is alive.
        let _ = hand_over.send(out);
        Ok(Threads { workers, frames: Some(frames), back, made: 0, limit, writer: Some(writer) })
    }
}

impl<W> Threads<W> {
    /// Buffers for the next frame: a written frame's, a new pair while fewer than `limit` were
    /// made, or else the next pair the writing thread gives back.
    fn buffers(&mut self) -> io::Result<(Vec<u8>, Vec<u8>)> {
        if let Ok(pair) = self.back.try_recv() {
            return Ok(pair);
        }
        if self.made < self.limit {
            self.made += 1;
            return Ok((vec![0; FRAME_SIZE], Vec::new()));
        }
        match self.back.recv() {
            Ok(pair) => Ok(pair),
            Err(_) => Err(self.stopped()),
        }
    }

    /// Gives the writing thread the next frame's result.
    fn send(&mut self, frame: Receiver<Done>) -> io::Result<()> {
        match self.frames.as_ref().map(|frames| frames.send(frame)) {
            Some(Ok(())) => Ok(()),
            _ => Err(self.stopped()),
        }
    }

    /// Why the writing thread stopped before it was told to: its error.
    fn stopped(&mut self) -> io::Error {
        self.frames = None;
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            Some(Err(_)) => io::Error::other("the writing thread panicked"),
            Some(Ok(Ok(_))) | None => io::Error::other("the writing thread stopped early"),
        }
    }

    /// Waits for every frame to be written; the writer and the seek table's entries.
    fn finish(&mut self) -> io::Result<Written<W>> {
        self.frames = None;
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the writing thread panicked")),
            None => Err(io::Error::other("the writing thread stopped early")),
        }
    }
}

impl<W> Drop for Threads<W> {
    /// A sink dropped midway (an error elsewhere) waits for the writing thread, which writes
    /// the frames already queued (to a file its owner then discards) and stops.
    fn drop(&mut self) {
        self.frames = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The writing thread: each frame's result in order, written, its buffers given back.
fn write_in_order<W: Write>(
    mut out: W,
    frames: &Receiver<Receiver<Done>>,
    back: &SyncSender<(Vec<u8>, Vec<u8>)>,
) -> io::Result<Written<W>> {
    let mut table = Vec::new();
    for frame in frames {
        let done = frame.recv().map_err(|_| io::Error::other("a compressing thread panicked"))?;
        let output = done.output?;
        out.write_all(&output)?;
        table.push(FrameEntry { compressed: frame_u32(output.len())?, decompressed: frame_u32(done.len)? });
        // The filling side is gone only when the sink was dropped midway.
        let _ = back.send((done.input, output));
    }
    Ok((out, table))
}

fn frame_u32(n: usize) -> io::Result<u32> {
    u32::try_from(n).map_err(|_| io::Error::other("a frame over 4 GiB"))
}

#[cfg(test)]
mod tests {
    use super::{FRAME_SIZE, FrameSink, MAX_COMPRESSING_THREADS, Out};

    #[test]
    fn a_pack_starts_at_most_max_compressing_threads_whatever_the_cpus() {
        let data: Vec<u8> =
            (0..3 * FRAME_SIZE as u32 + 5).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let mut one = FrameSink::new(Vec::new(), 3, false);
        one.write_all(&data).unwrap();
        let one = one.finish().unwrap();
        for (cpus, threads) in [(2, 2), (64, MAX_COMPRESSING_THREADS)] {
            crate::workers::PRETEND_CPUS.set(Some(cpus));
            let mut sink = FrameSink::new(Vec::new(), 3, true);
            crate::workers::PRETEND_CPUS.set(None);
            let Out::Threads(t) = &sink.out else { panic!("{cpus} CPUs: no threads started") };
            // Frames in flight follow the threads, not the CPUs.
            assert_eq!((t.workers.len(), t.limit), (threads, 2 * threads + 1), "{cpus} CPUs");
            sink.write_all(&data).unwrap();
            assert!(sink.finish().unwrap() == one, "{cpus} CPUs: other bytes than on one thread");
        }
    }
}
