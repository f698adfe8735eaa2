//! The decompressed tar stream of a bundle: its zstd frames decoded in order, on every usable
//! CPU when there is more than one, giving the same bytes and the same faults at the same
//! places as on one.
//!
//! Why this file exists: a seekable bundle's frames are independent, so several can be decoded
//! at once; but the verifier's verdict must not depend on how many were. The design makes that
//! hold by construction:
//! - Frame boundaries come from walking the frames' own block headers ([`Walker`]), on the
//!   reading thread, never from the seek table. When the bundle is a file that nothing else
//!   must read in order ([`BundleRead::file`]), that walk reads only the headers and passes
//!   over the block bodies, and the decoding thread reads its frame by position; a frame whose
//!   walk fails is walked again from its start by reading, as on any other input, so its bytes
//!   and fault are the reading path's. A file that changed between the walk and that read is
//!   an I/O error, never a verdict.
//! - Every frame is decoded by the same streaming decoder ([`Inline`]); a frame handed to
//!   another thread is decoded in one call first, and if that call fails for any reason it is
//!   decoded again by the streaming decoder, so that it yields exactly the bytes the streaming
//!   decoder gives before the fault, then the fault. Bytes and faults are served strictly in
//!   stream order, so the tar reader above sees one byte stream whatever the thread count.
//! - Which frames go to other threads depends only on the frame (compressed size at most
//!   [`MAX_BUFFERED_FRAME`], declared content size at most [`MAX_FRAME_CONTENT`]); any other
//!   frame (the one frame of a bundle from an earlier release, a frame of unknown content size)
//!   is decoded on the reading thread while it is read, in bounded memory.
//!
//! Feeding: the reading thread gives the decoding threads the next frames whenever it can, not
//! only between frames: while it waits for a frame still being decoded, and while the consumer
//! reads the current one (each `fill_buf`). Fed only between frames, the decoders of a bundle
//! `pack` wrote (4 MiB frames of text and of random bytes, each followed by a frame of a few
//! hundred bytes) ran dry while the reading thread hashed, and it then waited for them: on the
//! 2-vCPU bench machine each side waited a third of the run.
//!
//! Memory: with `n` decoding threads ([`pool`]; `n` is the number of usable CPUs, at most
//! [`MAX_DECODING_THREADS`]), the frames queued are at most `4n + 2` (18) and hold at most
//! `(n + 2)` × [`QUEUE_BYTES_PER_SLOT`] (48 MiB) of
//! compressed and declared content bytes together (a frame is queued while they hold less, so
//! one frame may cross it), plus the frame being served; each frame read whole is at most
//! [`MAX_BUFFERED_FRAME`] compressed and [`MAX_FRAME_CONTENT`] decoded, its buffers reused from
//! frame to frame (for a bundle `pack` wrote, on 2 CPUs: about 40 MiB at most); plus one zstd
//! context per decoding thread (no window: a frame decoded whole is decoded into its buffer),
//! and on the reading thread one streaming context (window at most 16 MiB) for frames decoded
//! while they are read. A stream that reads no frame whole ([`Decoding::Streaming`]) holds only
//! that context and one piece of a frame.

mod inline;
mod pool;
pub(crate) mod prehash;
mod whole;

use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};

use inline::Inline;
use pool::{Done, FrameAt, Job, Pool};
use prehash::{Scan, Spans};
pub(crate) use whole::{Decoded, decode_at_once, decode_whole};

use crate::blake3_tree::{Chunks, Prehash};

use zstd::stream::raw::{Decoder, Operation};

use super::ArchiveError;
use super::bundle_read::BundleRead;
use super::frames::{self, Fault, FrameBuf, FrameBytes, FrameHeader, Walker, ZSTD_MAGIC, le32};
use super::seek_table::{SEEK_TABLE_MAGIC, Walked};

/// A frame up to this many compressed bytes is read whole before it is decoded.
pub const MAX_BUFFERED_FRAME: usize = 9 << 20;
/// A frame that declares at most this much content may be decoded on another thread.
pub const MAX_FRAME_CONTENT: u64 = 8 << 20;
/// What the queued frames may hold per decoding thread (plus two), compressed and declared
/// content together: two of `pack`'s frames (4 MiB of content, at most about as much
/// compressed). Measured on the 2-vCPU Xeon (verify of the 1 GiB bench bundle after a pack,
/// medians of 7–11, 2026-11-28): with the decoding threads also hashing (`prehash`) and the
/// bundle read through the read-ahead thread, budgets of 12, 16, 20, 24 and 32 MiB gave 0.491,
/// 0.485, 0.473, 0.472 and 0.51–0.52 s; read straight into the frames' buffers instead
/// ([`FrameBuf`]), so that the queue is the only read-ahead, 24, 28, 32 and 40 MiB gave 0.487,
/// 0.457, 0.460 and 0.456 s (peak RSS 48, 56, 56, 64 MiB). In this VM every MiB first touched
/// costs 0.6–2.9 ms of system time, so the budget is the smallest that keeps the decoders fed.
pub const QUEUE_BYTES_PER_SLOT: usize = 8 << 20;

/// The most decoding threads a stream starts, whatever the CPUs. The frames queued for them grow
/// with their number (above), and beyond a few the reading thread, which reads every frame and
/// serves the tar reader, cannot feed more: in `perf` of verify of the 1 GiB bench bundle on the
/// 2-vCPU Xeon it took 42 % of the samples and the two decoding threads 58 %, so with CPUs to
/// spare it would keep about 1.4 of them busy (more where the kernel's copy out of the page
/// cache is cheaper than in that VM). With one thread per CPU, that verify peaked at 54, 71,
/// 103, 168 and 298 MiB for 2, 4, 8, 16 and 32 (a build told it had that many, 2026-11-28).
pub const MAX_DECODING_THREADS: usize = 4;

/// How a [`FrameStream`] takes its frames; every way gives the same bytes and the same faults
/// at the same places.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Decoding {
    /// Frames read whole ahead, decoded on other threads ([`threads`]).
    Parallel,
    /// Frames read whole ahead, decoded on this thread.
    ThisThread,
    /// Every frame decoded on this thread while it is read, nothing read ahead: for a reader
    /// that wants only the stream's first entries (`bundle cat` reading the manifest and the
    /// signature), which then costs what it decodes (the streaming context's window, touched
    /// only as far as the frame is decoded), not whole frames compressed and decoded.
    Streaming,
}

/// A frame's facts for the seek table check.
#[derive(Clone, Copy)]
struct Info {
    compressed: u64,
    checksum: [u8; 4],
    produced: u64,
}

/// A frame read from the input and not yet served.
enum Pending {
    /// Decoding on another thread, in one call; if that fails, decoded on this thread. Last:
    /// what its two buffers hold (their capacity), for the queue's byte budget.
    Job(Receiver<Done>, FrameHeader, Info, usize),
    /// Read whole, of bounded content; decoded whole on this thread when reached.
    Whole { bytes: FrameBuf, header: FrameHeader, info: Info },
    /// Read whole (or up to a fault of the walk); decoded on this thread when reached.
    Buffered { bytes: FrameBuf, header: FrameHeader, fault: Option<Fault>, info: Info },
    /// Too large to read whole: the bytes so far; the rest is read from the input when reached.
    Streaming { bytes: FrameBuf, header: FrameHeader, walker: Walker },
    /// A frame header that failed its checks.
    Fault(Fault),
}

impl Pending {
    /// What the frame holds against the queue's byte budget: the memory of its buffers (the
    /// compressed bytes' and the decoded content's), for a frame read whole.
    fn weight(&self) -> usize {
        match self {
            Pending::Job(.., weight) => *weight,
            Pending::Whole { bytes, header, .. } => bytes.capacity() + header.content_size.unwrap_or(0) as usize,
            Pending::Buffered { .. } | Pending::Streaming { .. } | Pending::Fault(_) => 0,
        }
    }
}

/// What the consumer is reading now.
enum Current {
    Idle,
    Bytes { data: Vec<u8>, pos: usize, fault: Option<Fault>, info: Info, scan: Option<Box<Scan>> },
    Stream(Inline, Option<Walker>, Info),
}

/// Where the input stands.
enum InputState {
    /// The next thing is a frame's magic number, or the end.
    Frames,
    /// A frame is being read by the streaming decoder.
    InFrame,
    /// The data frames are over; the first bytes of what follows (up to 4, none at the end).
    Ended(Vec<u8>),
    /// A fault was queued; nothing more is read.
    Failed,
}

/// The decompressed stream over the frames of `R`.
pub(crate) struct FrameStream<R> {
    input: R,
    max_window_log: u32,
    /// The first frame's header, checked by [`new`](Self::new).
    first: Option<FrameHeader>,
    state: InputState,
    queue: VecDeque<Pending>,
    current: Current,
    /// Frames queued at most; 1 when decoding on this thread only.
    in_flight: usize,
    /// Compressed and declared content bytes the queued frames may hold (a frame is queued
    /// while they hold less); unbounded (`usize::MAX`) when decoding on this thread only,
    /// where `in_flight` is 1.
    budget: usize,
    /// Compressed and declared content bytes of the frames queued now.
    queued_bytes: usize,
    /// Decoding threads wanted (0: this thread only).
    threads: usize,
    /// Frames are read whole (up to [`MAX_BUFFERED_FRAME`]) before they are decoded; else
    /// every frame is streamed ([`Decoding::Streaming`]).
    buffered: bool,
    /// Started at the first frame that may be decoded elsewhere.
    pool: Option<Pool>,
    /// Buffers of frames served, for the next frames: compressed, and decoded.
    spare_in: Vec<Vec<u8>>,
    spare_out: Vec<Vec<u8>>,
    dctx: Decoder<'static>,
    walked: Walked,
    /// Frames decoded on other threads have their entries hashed there too ([`prehash`]).
    prehash: bool,
    /// Where the next frame read starts in the decompressed stream (by the declared content
    /// sizes of the frames before it; `None` once a frame declares none).
    frame_start: Option<u64>,
    /// Decompressed bytes served so far.
    served: u64,
    /// Entries known to go on past a frame ([`Spans`]).
    spans: Spans,
    /// Scans of frames served, for the next frames.
    #[allow(clippy::vec_box, reason = "a scan moves through the decoding threads' queue by pointer")]
    spare_scans: Vec<Box<Scan>>,
}

impl<R: BundleRead> FrameStream<R> {
    /// Reads and checks the first frame's header (format reference §2.1), so that a file that
    /// is not a bundle fails before anything is decoded.
    pub fn new(mut input: R, max_window_log: u32, decoding: Decoding) -> Result<Self, ArchiveError> {
        let io_err = |source| ArchiveError::Io { path: None, source };
        let magic = frames::read_magic(&mut input).map_err(io_err)?.unwrap_or_default();
        let header = frames::read_header(&magic, &mut input, 1u64 << max_window_log)?;
        let mut dctx = Decoder::new().map_err(io_err)?;
        dctx.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(max_window_log)).map_err(io_err)?;
        let threads = if decoding == Decoding::Parallel { threads() } else { 0 };
        Ok(FrameStream {
            input,
            max_window_log,
            first: Some(header),
            state: InputState::Frames,
            queue: VecDeque::new(),
            current: Current::Idle,
            in_flight: if threads > 0 { 4 * threads + 2 } else { 1 },
            budget: if threads > 0 { (threads + 2).saturating_mul(QUEUE_BYTES_PER_SLOT) } else { usize::MAX },
            queued_bytes: 0,
            threads,
            buffered: decoding != Decoding::Streaming,
            pool: None,
            spare_in: Vec::new(),
            spare_out: Vec::new(),
            dctx,
            walked: Walked::default(),
            prehash: false,
            frame_start: Some(0),
            served: 0,
            spans: Spans::new(),
            spare_scans: Vec::new(),
        })
    }

    /// Reads decompressed bytes: `Ok(0)` only once every data frame has been served whole.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize, Fault> {
        let available = self.fill_buf()?;
        let n = buf.len().min(available.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }

    /// The decoded bytes ready to be served, without copying them (as `BufRead::fill_buf`):
    /// empty only once every data frame has been served whole. What [`read`](Self::read)
    /// would give, at the same places.
    pub fn fill_buf(&mut self) -> Result<&[u8], Fault> {
        self.ready()?;
        Ok(self.buffered())
    }

    /// The bytes [`fill_buf`](Self::fill_buf) gave last, less those consumed since.
    pub fn buffered(&self) -> &[u8] {
        match &self.current {
            Current::Bytes { data, pos, .. } => &data[*pos..],
            Current::Stream(inline, ..) => inline.pending(),
            Current::Idle => &[],
        }
    }

    /// Marks `n` bytes of [`buffered`](Self::buffered) as served.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.buffered().len());
        self.served += n as u64;
        match &mut self.current {
            Current::Bytes { data, pos, .. } => *pos = (*pos + n).min(data.len()),
            Current::Stream(inline, ..) => inline.consume(n),
            Current::Idle => {}
        }
    }

    /// Moves on until the current frame has bytes to serve, or every frame was served.
    fn ready(&mut self) -> Result<(), Fault> {
        loop {
            match &mut self.current {
                Current::Bytes { data, pos, fault, info, scan } => {
                    if *pos < data.len() {
                        if self.pool.is_some() {
                            // While this frame is read, the decoding threads get the next ones.
                            self.top_up();
                        }
                        return Ok(());
                    }
                    if let Some(fault) = fault.take() {
                        return Err(fault);
                    }
                    let info = Info { produced: data.len() as u64, ..*info };
                    self.walked.add(info.compressed, info.produced, info.checksum);
                    let data = std::mem::take(data);
                    recycle(&mut self.spare_out, data, self.in_flight);
                    if let Some(scan) = scan.take() {
                        self.spare_scans.push(scan);
                    }
                    self.current = Current::Idle;
                }
                Current::Stream(inline, walker, info) => {
                    if !inline.pending().is_empty() {
                        return Ok(());
                    }
                    inline.fill(&mut self.dctx, walker.as_mut(), &mut self.input)?;
                    if !inline.pending().is_empty() {
                        return Ok(());
                    }
                    let mut info = *info;
                    info.produced = inline.produced;
                    if let Some(w) = walker {
                        info.compressed = w.taken;
                        info.checksum = w.checksum;
                        self.state = InputState::Frames;
                    }
                    self.walked.add(info.compressed, info.produced, info.checksum);
                    self.current = Current::Idle;
                }
                Current::Idle => {
                    self.top_up();
                    let Some(next) = self.queue.pop_front() else { return Ok(()) };
                    self.queued_bytes -= next.weight();
                    self.current = self.start(next)?;
                    self.top_up();
                }
            }
        }
    }

    /// Turns the next pending frame into what the consumer reads.
    fn start(&mut self, next: Pending) -> Result<Current, Fault> {
        self.dctx.reinit().map_err(Fault::Io)?;
        Ok(match next {
            Pending::Fault(f) => return Err(f),
            Pending::Job(rx, header, info, _) => {
                let Done { bytes, out, decoded, scan, unread } = self.wait_for(&rx)?;
                if let Some(e) = unread {
                    // The file could not be read where the walk found the frame.
                    self.state = InputState::Failed;
                    return Err(Fault::Io(e));
                }
                if decoded {
                    recycle(&mut self.spare_in, bytes.into_room(), self.in_flight);
                    Current::Bytes { data: out, pos: 0, fault: None, info, scan }
                } else {
                    // A frame one call could not decode: the streaming decoder, here, finds the
                    // bytes before its fault and the fault (a decoding thread allocates nothing).
                    recycle(&mut self.spare_out, out, self.in_flight);
                    Current::Stream(Inline::new(bytes.into_vec(), &header, None), None, info)
                }
            }
            Pending::Whole { bytes, header, info } => {
                let out = take_buffer(&mut self.spare_out, header.content_size.unwrap_or(0) as usize);
                let Decoded { data, fault } =
                    decode_whole(bytes.bytes(), out, &header, self.max_window_log, MAX_FRAME_CONTENT);
                recycle(&mut self.spare_in, bytes.into_room(), self.in_flight);
                Current::Bytes { data, pos: 0, fault, info, scan: None }
            }
            Pending::Buffered { bytes, header, fault, info } => {
                Current::Stream(Inline::new(bytes.into_vec(), &header, fault), None, info)
            }
            Pending::Streaming { bytes, header, walker } => {
                let info = Info { compressed: 0, checksum: [0; 4], produced: 0 };
                Current::Stream(Inline::new(bytes.into_vec(), &header, None), Some(walker), info)
            }
        })
    }

    /// The decoded frame `rx` brings; while it is not ready, reads frames ahead for the other
    /// decoding threads (as many as may be queued), then waits.
    fn wait_for(&mut self, rx: &Receiver<Done>) -> Result<Done, Fault> {
        let panicked = || Fault::Io(io::Error::other("a decoding thread panicked"));
        loop {
            match rx.try_recv() {
                Ok(done) => return Ok(done),
                Err(TryRecvError::Disconnected) => return Err(panicked()),
                Err(TryRecvError::Empty) if self.read_ahead() => {}
                Err(TryRecvError::Empty) => return rx.recv().map_err(|_| panicked()),
            }
        }
    }

    /// Reads frames ahead while the queue has room.
    fn top_up(&mut self) {
        while self.read_ahead() {}
    }

    /// Reads the next frame into the queue if it has room (fewer than `in_flight` frames,
    /// holding less than `budget` bytes) and the input is between frames: whether it did.
    fn read_ahead(&mut self) -> bool {
        let room = self.queue.len() < self.in_flight && self.queued_bytes < self.budget;
        if !room || !matches!(self.state, InputState::Frames) {
            return false;
        }
        match self.read_frame() {
            Some(pending) => {
                self.queued_bytes += pending.weight();
                self.queue.push_back(pending);
                true
            }
            None => false,
        }
    }

    /// Reads the next frame from the input (its header, then its blocks); `None` where the data
    /// frames end.
    fn read_frame(&mut self) -> Option<Pending> {
        let header = match self.first.take() {
            Some(h) => h,
            None => match frames::read_magic(&mut self.input) {
                Err(e) => return Some(self.failed(Fault::Io(e))),
                Ok(None) => {
                    self.state = InputState::Ended(Vec::new());
                    return None;
                }
                Ok(Some(magic)) if magic.len() < 4 || le32(&magic) != ZSTD_MAGIC => {
                    self.state = InputState::Ended(magic);
                    return None;
                }
                Ok(Some(magic)) => match frames::read_header(&magic, &mut self.input, 1u64 << self.max_window_log) {
                    Ok(h) => h,
                    Err(e) => return Some(self.failed(Fault::Header(e))),
                },
            },
        };
        let start = self.frame_start;
        self.frame_start = start.zip(header.content_size).map(|(s, n)| s.saturating_add(n));
        let bounded = header.content_size.is_some_and(|n| n <= MAX_FRAME_CONTENT);
        if bounded && self.buffered && self.input.file().is_some() && self.start_pool() {
            match self.pass_over(header, start) {
                Ok(Some(job)) => return Some(job),
                Ok(None) => {}
                Err(e) => return Some(self.failed(Fault::Io(e))),
            }
        }
        let mut walker = Walker::new(&header);
        let likely = if self.buffered { likely_size(&header) } else { header.len };
        let mut bytes = FrameBuf::with_room(take_spare(&mut self.spare_in, likely), likely);
        bytes.push(header.bytes());
        let max = if self.buffered { MAX_BUFFERED_FRAME - header.len } else { 0 };
        let walk = walker.read_into(&mut self.input, &mut bytes, max);
        if walk.is_ok() && !walker.done() {
            self.state = InputState::InFrame;
            return Some(Pending::Streaming { bytes, header, walker });
        }
        let info = Info { compressed: walker.taken, checksum: walker.checksum, produced: 0 };
        let fault = walk.err();
        if fault.is_some() {
            self.state = InputState::Failed;
        }
        if !bounded || fault.is_some() {
            return Some(Pending::Buffered { bytes, header, fault, info });
        }
        if self.start_pool() {
            return Some(self.job(bytes, None, header, info, start));
        }
        Some(Pending::Whole { bytes, header, info })
    }

    /// Walks the frame whose `header` was read, reading only its block headers and checksum
    /// ([`Walker::pass_over`]), and gives it to a decoding thread to read by position: `None`
    /// (the input back at the end of the header) when that walk fails or the frame is larger
    /// than [`MAX_BUFFERED_FRAME`], for the frame to be read as on any other input.
    fn pass_over(&mut self, header: FrameHeader, start: Option<u64>) -> io::Result<Option<Pending>> {
        let Some(file) = self.input.file().cloned() else { return Ok(None) };
        let body = self.input.position();
        let at = body - header.len as u64;
        let mut walker = Walker::new(&header);
        let max = (MAX_BUFFERED_FRAME - header.len) as u64;
        if walker.pass_over(&mut self.input, max).is_err() || !walker.done() {
            self.input.rewind(body)?;
            return Ok(None);
        }
        let len = walker.taken as usize;
        // Room as for a frame read (its likely size), so that the kept buffers stay alike and
        // one is never grown for a frame it was too small for.
        let room = len.max(likely_size(&header));
        let bytes = FrameBuf::with_room(take_spare(&mut self.spare_in, room), room);
        let info = Info { compressed: walker.taken, checksum: walker.checksum, produced: 0 };
        #[cfg(test)]
        BY_POSITION.set(BY_POSITION.get() + 1);
        Ok(Some(self.job(bytes, Some(FrameAt { file, at, len }), header, info, start)))
    }

    /// A frame (read whole, or to be read by position: `at`) given to a decoding thread.
    fn job(
        &mut self,
        bytes: FrameBuf,
        at: Option<FrameAt>,
        header: FrameHeader,
        info: Info,
        start: Option<u64>,
    ) -> Pending {
        let (reply, rx) = sync_channel(1);
        // Allocated here, so that the decoding threads never allocate: under an address-space
        // limit (`ulimit -v`) each thread that allocates costs the allocator a reservation of
        // its own.
        let out = take_buffer(&mut self.spare_out, header.content_size.unwrap_or(0) as usize);
        let weight = bytes.capacity() + out.capacity();
        let pool = self.pool.as_ref().expect("started");
        let scan = self
            .prehash
            .then(|| self.spare_scans.pop().unwrap_or_else(|| Scan::for_frame(header.content_size.unwrap_or(0))));
        // A frame that starts inside an entry begun before it is scanned as such.
        let spans = self.prehash.then(|| self.spans.clone());
        if pool.run(Job { bytes, at, out, header, scan, start, spans, reply }) {
            return Pending::Job(rx, header, info, weight);
        }
        self.failed(Fault::Io(io::Error::other("a decoding thread panicked")))
    }

    /// Starts the decoding threads on first use; `false` when decoding on this thread only, or
    /// when they cannot be started (then every frame is decoded here, giving the same).
    fn start_pool(&mut self) -> bool {
        if self.pool.is_none() && self.threads > 0 {
            match pool::start(self.threads, self.max_window_log) {
                Ok(pool) => self.pool = Some(pool),
                Err(_) => {
                    self.threads = 0;
                    self.in_flight = 1;
                    self.budget = usize::MAX;
                }
            }
        }
        self.pool.is_some()
    }

    /// From the next frame read on, frames decoded on other threads also have their entries
    /// hashed there, for [`prehashed`](Self::prehashed).
    pub fn prehash(&mut self) {
        self.prehash = true;
    }

    /// The consumer starts an entry of `size` bytes, whose data is the next byte to serve:
    /// frames read from now on that start inside it are hashed as part of it.
    pub fn entry_starts(&mut self, size: u64) {
        if self.prehash {
            self.spans.add(self.served, size);
        }
    }

    /// The whole chunks of an entry of `size` bytes hashed ahead for the current frame, if the
    /// frame starts `at` bytes into the entry's data, nothing of it was served yet, and its
    /// decoding thread was told so.
    pub fn chunks_at(&mut self, at: u64, size: u64) -> Option<Chunks> {
        let chunks = match &mut self.current {
            Current::Bytes { pos: 0, scan: Some(scan), .. } => scan.take_middle(at, size),
            _ => None,
        };
        #[cfg(test)]
        MIDDLES.set(MIDDLES.get() + usize::from(chunks.is_some()));
        chunks
    }

    /// The hash computed ahead (see [`prehash`]) for an entry of `size` bytes whose data starts
    /// at the next byte to serve, if there is one; call once the bytes are ready (`fill_buf`).
    pub fn prehashed(&mut self, size: u64) -> Option<Prehash> {
        let ahead = match &mut self.current {
            Current::Bytes { pos, scan: Some(scan), .. } => scan.take(*pos, size),
            _ => None,
        };
        #[cfg(test)]
        PREHASHED.set(PREHASHED.get() + usize::from(ahead.is_some()));
        ahead
    }

    /// Whether frames are being decoded on other threads: the reading thread then has time to
    /// spare (to hash, say), and when not, it is the one decoding.
    pub fn decodes_elsewhere(&self) -> bool {
        self.pool.is_some()
    }

    fn failed(&mut self, fault: Fault) -> Pending {
        self.state = InputState::Failed;
        Pending::Fault(fault)
    }

    /// After the last data frame was served: nothing more, or the seek table (checked against
    /// the frames walked) and nothing after it; anything else is `trailing_data`.
    pub fn finish(mut self) -> Result<(), ArchiveError> {
        let io_err = |source| ArchiveError::Io { path: None, source };
        let InputState::Ended(magic) = std::mem::replace(&mut self.state, InputState::Failed) else {
            return Err(ArchiveError::malformed(None, "the zstd frames were not read to their end"));
        };
        if magic.is_empty() {
            return Ok(());
        }
        if magic.len() == 4 && le32(&magic) == SEEK_TABLE_MAGIC {
            return self.walked.check(&mut self.input);
        }
        let mut rest = magic;
        if rest.len() < 4 {
            let more = self.input.fill_buf().map_err(io_err)?;
            rest.extend_from_slice(&more[..more.len().min(4)]);
        }
        Err(ArchiveError::TrailingData { reason: frames::describe_trailing(&rest) })
    }
}

/// Whether the bundle in `file` starts with a frame that a reader takes whole (a seekable
/// bundle's: it declares at most [`MAX_FRAME_CONTENT`]), so that its input should be read with
/// a small buffer, block bodies straight into the frames' own buffers ([`FrameBuf`]); a
/// one-frame bundle of an earlier release is decoded while it is read, better from a reading
/// thread's large buffers. A file that cannot be read by position (a FIFO) gives `false`.
pub(crate) fn frames_read_whole(file: &std::fs::File) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        let mut head = [0u8; frames::MAX_FRAME_HEADER];
        let Ok(n) = file.read_at(&mut head, 0) else { return false };
        let (magic, mut rest) = head[..n].split_at(n.min(4));
        frames::read_header(magic, &mut rest, u64::MAX)
            .is_ok_and(|h| h.content_size.is_some_and(|size| size <= MAX_FRAME_CONTENT))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        false
    }
}

#[cfg(test)]
thread_local! {
    /// Entries whose hash (or first chunks) was computed ahead, read on this thread.
    pub(crate) static PREHASHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Frames read by position by the decoding threads, for a stream on this thread.
    pub(crate) static BY_POSITION: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Frames whose chunks of an entry begun earlier were hashed ahead, on this thread.
    pub(crate) static MIDDLES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Decoding threads for a stream: one per usable CPU (affinity mask or cgroup quota), at most
/// [`MAX_DECODING_THREADS`].
pub(crate) fn threads() -> usize {
    crate::workers::usable_cpus().min(MAX_DECODING_THREADS)
}

/// Room for a frame as it most likely is (its declared content stored, block headers and
/// checksum included, for a frame of bounded content), so that reading it never grows the
/// buffer by copying it.
fn likely_size(header: &FrameHeader) -> usize {
    match header.content_size {
        Some(n) if n <= MAX_FRAME_CONTENT => header.len + n as usize + (n as usize >> 10) + 64,
        _ => header.len,
    }
}

/// Frames up to this size get buffers of their own, never a kept one: a kept buffer is as large
/// as the largest frame it held, and the many small frames of a bundle (each file's last piece)
/// would otherwise hold that much memory each while queued.
const SMALL_BUFFER: usize = 64 << 10;

/// A kept buffer (its contents are room) for a frame of `want` bytes when large, else a new one.
fn take_spare(spare: &mut Vec<Vec<u8>>, want: usize) -> Vec<u8> {
    if want > SMALL_BUFFER { spare.pop().unwrap_or_default() } else { Vec::new() }
}

/// An empty buffer with room for `want` bytes: a kept one for a large frame, else a new one.
fn take_buffer(spare: &mut Vec<Vec<u8>>, want: usize) -> Vec<u8> {
    let mut buf = take_spare(spare, want);
    buf.clear();
    buf.reserve_exact(want);
    buf
}

/// Keeps a large `buf` for a later frame, unless `limit` are kept already.
fn recycle(spare: &mut Vec<Vec<u8>>, buf: Vec<u8>, limit: usize) {
    if spare.len() < limit && buf.capacity() > SMALL_BUFFER {
        spare.push(buf);
    }
}

#[cfg(test)]
mod tests;
