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

use std::io;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::prehash::Scan;
use super::{MAX_FRAME_CONTENT, decode_at_once};
use crate::archive::frames::FrameHeader;

/// Stack of a decoding thread: libzstd keeps its tables in the context, not on the stack.
const STACK: usize = 256 << 10;

/// A frame to decode whole, the buffer to decode it into (with room for its content), and
/// where to send both back.
pub(super) struct Job {
    pub bytes: Vec<u8>,
    pub out: Vec<u8>,
    pub header: FrameHeader,
    /// Given when the reader wants the frame's entries hashed here ([`Scan`]).
    pub scan: Option<Box<Scan>>,
    pub reply: SyncSender<Done>,
}

/// A job's buffers back, and whether `out` holds the frame's content (else it is empty, and the
/// frame is for the streaming decoder on the reading thread).
pub(super) struct Done {
    pub bytes: Vec<u8>,
    pub out: Vec<u8>,
    pub decoded: bool,
    /// The job's scan, run if the frame was decoded.
    pub scan: Option<Box<Scan>>,
}

pub(super) struct Pool {
    /// `None` once the threads were told to stop.
    jobs: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Starts `n` decoding threads, each with a libzstd context made here.
    pub fn start(n: usize, max_window_log: u32) -> io::Result<Pool> {
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut pool = Pool { jobs: Some(jobs), threads: Vec::with_capacity(n) };
        for i in 0..n {
            let mut bulk = zstd::bulk::Decompressor::new()?;
            bulk.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(max_window_log))?;
            let queue = Arc::clone(&queue);
            let thread = std::thread::Builder::new()
                .name(format!("decode-{i}"))
                .stack_size(STACK)
                .spawn(move || work(&queue, &mut bulk))?;
            pool.threads.push(thread);
        }
        Ok(pool)
    }

    /// Queues a frame; `false` if every thread is gone (one panicked).
    pub fn submit(&self, job: Job) -> bool {
        self.jobs.as_ref().is_some_and(|jobs| jobs.send(job).is_ok())
    }
}

/// Decodes jobs in one call each (and hashes the entries a frame seems to hold, when asked),
/// allocating nothing: a frame that call cannot decode goes back
/// undecoded (the streaming decoder on the reading thread gives its bytes and fault).
fn work(queue: &Mutex<Receiver<Job>>, bulk: &mut zstd::bulk::Decompressor<'static>) {
    loop {
        // The lock is held only while waiting for the next job, never while decoding.
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(Job { bytes, mut out, header, mut scan, reply }) = job else { return };
        let decoded = decode_at_once(bulk, &bytes, &mut out, &header, MAX_FRAME_CONTENT);
        if let Some(scan) = scan.as_mut().filter(|_| decoded) {
            scan.run(&out);
        }
        // The receiver is gone only when the stream was dropped midway.
        let _ = reply.send(Done { bytes, out, decoded, scan });
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Closing the queue ends every thread once it has finished its frame.
        self.jobs = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
