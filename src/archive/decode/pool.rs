//! The decoding threads of one [`FrameStream`](super::FrameStream): started at its first frame
//! that may be decoded elsewhere, stopped and joined when the stream is dropped.
//!
//! Why not rayon's global pool: each decoder here owns its libzstd context, made on the reading
//! thread before the decoder starts, and decodes in one call into a buffer the reading thread
//! allocated and recycles, so a decoder allocates nothing at all (a frame that one call cannot
//! decode goes back to the reading thread's streaming decoder). Under an address-space limit
//! (`ulimit -v`) that matters: an allocator reserves address space for each thread that
//! allocates. The first version spawned a
//! rayon task per frame and decoded into a fresh 4 MiB `Vec` each time; the decoding thread
//! faulted those pages in and the reading thread freed them (an `munmap`, and on a VM an
//! inter-processor interrupt to flush the other CPU's TLB), and verify ran slower on two CPUs
//! than on one. The threads' stacks are small ([`STACK`]): they run the decoder and nothing
//! else, and a bundle verified under a small address-space limit (`ulimit -v`) must not spend
//! it on stacks.

use std::fs::File;
use std::io;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use super::prehash::{Scan, Spans};
use super::{MAX_FRAME_CONTENT, decode_at_once};
use crate::archive::frames::{FrameBuf, FrameHeader};
use crate::workers::Workers;

/// Stack of a decoding thread: libzstd keeps its tables in the context, not on the stack.
const STACK: usize = 256 << 10;

/// A frame to decode whole, the buffer to decode it into (with room for its content), and
/// where to send both back.
pub(super) struct Job {
    /// The frame's bytes; empty when the frame is to be read by position (`at`).
    pub bytes: FrameBuf,
    pub at: Option<FrameAt>,
    pub out: Vec<u8>,
    pub header: FrameHeader,
    /// Given when the reader wants the frame's entries hashed here ([`Scan`]).
    pub scan: Option<Box<Scan>>,
    /// Where the frame starts in the decompressed stream (by the declared content sizes), and
    /// the entries known to go on past a frame, for the scan.
    pub start: Option<u64>,
    pub spans: Option<Spans>,
    pub reply: SyncSender<Done>,
}

/// Where a frame is in the bundle file: a decoding thread reads it there itself.
pub(super) struct FrameAt {
    pub file: Arc<File>,
    /// The frame's first byte, and its length (header, blocks and checksum).
    pub at: u64,
    pub len: usize,
}

/// A job's buffers back, and whether `out` holds the frame's content (else it is empty, and the
/// frame is for the streaming decoder on the reading thread).
pub(super) struct Done {
    pub bytes: FrameBuf,
    pub out: Vec<u8>,
    pub decoded: bool,
    /// The job's scan, run if the frame was decoded.
    pub scan: Option<Box<Scan>>,
    /// Why the frame could not be read by position (the file failed, or ended before it).
    pub unread: Option<io::Error>,
}

/// The decoding threads: the jobs' queue and the threads that take from it.
pub(super) type Pool = Workers<Job>;

/// Starts `n` decoding threads, each with a libzstd context made here.
pub(super) fn start(n: usize, max_window_log: u32) -> io::Result<Pool> {
    let mut contexts = Vec::with_capacity(n);
    for _ in 0..n {
        let mut bulk = zstd::bulk::Decompressor::new()?;
        bulk.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(max_window_log))?;
        contexts.push(bulk);
    }
    Workers::with_states("decode", contexts, Some(STACK), decode)
}

/// Decodes a job in one call (and hashes the entries the frame seems to hold, when asked),
/// allocating nothing: a frame that call cannot decode goes back undecoded (the streaming
/// decoder on the reading thread gives its bytes and fault).
fn decode(bulk: &mut zstd::bulk::Decompressor<'static>, job: Job) {
    let Job { mut bytes, at, mut out, header, mut scan, start, spans, reply } = job;
    if let Some(FrameAt { file, at, len }) = at
        && let Err(e) = bytes.read_at(&file, at, len)
    {
        let _ = reply.send(Done { bytes, out, decoded: false, scan, unread: Some(e) });
        return;
    }
    let decoded = decode_at_once(bulk, bytes.bytes(), &mut out, &header, MAX_FRAME_CONTENT);
    if let Some(scan) = scan.as_mut().filter(|_| decoded) {
        let inside = start.zip(spans.as_ref()).and_then(|(start, spans)| spans.inside(start));
        scan.run(&out, inside);
        if let (Some(start), Some(spans), Some((data, size))) = (start, &spans, scan.opened())
            && let Some(at) = start.checked_add(data as u64)
        {
            spans.add(at, size);
        }
    }
    // The receiver is gone only when the stream was dropped midway.
    let _ = reply.send(Done { bytes, out, decoded, scan, unread: None });
}
