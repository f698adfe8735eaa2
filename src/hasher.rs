//! BLAKE3 of each entry while `bundle verify` decompresses it, beside decompression when a
//! second CPU is usable and on the decoding thread when not. Buffers are recycled and at most
//! [`IN_FLIGHT`] of [`CHUNK`] bytes exist at once, so memory stays bounded.
//!
//! Design decisions (measured on the 1 GiB bench agent; see
//! docs/book/src/internals/performance.md):
//! - Only one usable CPU (affinity mask or cgroup quota, which `available_parallelism`
//!   respects): the decoder hashes each piece itself right after reading it, while it is still
//!   in cache. A second thread could only take turns with the decoder on that CPU, paying a
//!   wake-up and a context switch per hand-over.
//! - More than one: a hashing thread beside the decoder. Hashing is the faster stage, so that
//!   thread runs dry and sleeps, and the next hand-over wakes it (a futex call and, in a VM, an
//!   inter-processor interrupt). Hand-overs are therefore large ([`CHUNK`]): about a thousand
//!   wake-ups per GiB, milliseconds in all. Nothing spins or yields while waiting: the earlier
//!   yield-before-park loop (tuned on a Xeon with 128 KiB hand-overs) made 490,000
//!   `sched_yield` calls per GiB on a 2-vCPU AMD EPYC VM, up to 1.3 s of system time, and
//!   verify ran faster there pinned to one CPU than on two.
//! - The decoder never waits for an entry's hash: [`EntryHasher::hash`] queues the entry and
//!   returns, and the hashes come out in entry order ([`EntryHasher::ready`] without waiting,
//!   [`EntryHasher::wait`] at the end or before a rejection), so the caller compares each with
//!   its manifest digest an entry or two later. Waiting at the end of every entry for the
//!   hashing thread to catch up (a wake-up there and one back) cost the decoder 0.10 s of its
//!   0.75 s on the 1 GiB bench bundle (256 entries of 4 MiB) on the 2-vCPU Xeon.
//! - Frames decoded on other threads (`archive::decode`): those threads also hash the entries of
//!   the frames they decode (`archive::decode::prehash`), and the reading thread finishes each
//!   entry's hash from what they computed (`archive::Entry::hash_ahead`, `blake3_tree`) and
//!   queues it here ([`EntryHasher::queue`]), straight from the decoded frame, with no copy and
//!   no hand-over. Hashed on the reading thread instead, 1 GiB of content kept one CPU busy
//!   0.15 s while the decoders had work; with it spread, verify of the 1 GiB bench bundle took
//!   0.509 s instead of 0.538 s (medians of 7, alternating, 2-vCPU Xeon).
//! - Every way out of [`EntryHasher::hash`], errors included, ends the entry on the hashing
//!   thread and takes its buffers back, so the next entry starts from a fresh hash and never
//!   waits for a buffer that was lost; a failed entry queues no hash.

use std::collections::VecDeque;
use std::io::{self, BufRead, Read};
use std::sync::mpsc::{Receiver, TryRecvError, channel};
use std::thread::JoinHandle;

use crate::handoff::{CHUNK, Filler, IN_FLIGHT, handoff, second_cpu};
use crate::read_full::read_full;
/// Entries up to this size are hashed on the calling thread (handing a few KiB to another
/// thread costs more than hashing them).
pub(crate) const INLINE_UP_TO: u64 = 1 << 20;
/// Bytes per read when hashing on the calling thread: small enough to stay in the L2 cache
/// between the decoder writing them and BLAKE3 reading them.
const INLINE_PIECE: usize = 128 << 10;

/// Hashes entries, choosing per entry between the calling thread and a hashing thread that is
/// started when the first large entry arrives (verifying a small bundle never spawns it).
pub struct EntryHasher {
    threaded: bool,
    worker: Option<Worker>,
    /// One per entry given to [`hash`](Self::hash) whose hash was not taken yet, in order:
    /// `None` while the hashing thread is still on it.
    queued: VecDeque<Option<blake3::Hash>>,
}

impl Default for EntryHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl EntryHasher {
    /// Uses a hashing thread for large entries if more than one CPU is usable.
    pub fn new() -> Self {
        #[cfg(test)]
        if HOLD.get() {
            return Self::with_thread(true);
        }
        Self::with_thread(second_cpu())
    }

    /// `threaded: false` hashes everything on the calling thread.
    pub fn with_thread(threaded: bool) -> Self {
        EntryHasher { threaded, worker: None, queued: VecDeque::new() }
    }

    /// Reads `input` to its end, giving every piece to `each` (on this thread, in order), and
    /// queues the BLAKE3 hash of all the bytes without waiting for it; `size` (the entry's
    /// declared size) picks the thread. The first error from `input` or `each` is returned and
    /// queues nothing; the hasher stays usable.
    pub fn hash(
        &mut self,
        size: u64,
        input: &mut dyn BufRead,
        each: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.threaded && size > INLINE_UP_TO {
            let worker = self.worker.get_or_insert_with(Worker::start);
            let fed = worker.feed(input, each);
            // Always end the entry, so that an error leaves no partial hash and no buffer behind.
            worker.send(Job::Finish)?;
            self.queued.push_back(None);
            if let Err(e) = fed {
                // The failed entry's hash is the last one to come: wait for it and drop it.
                self.receive_all()?;
                self.queued.pop_back();
                return Err(e);
            }
            return Ok(());
        }
        let hash = hash_inline(input, each)?;
        self.queued.push_back(Some(hash));
        Ok(())
    }

    /// Queues a hash computed elsewhere (`archive::Entry::hash_ahead`), after those queued.
    pub fn queue(&mut self, hash: blake3::Hash) {
        self.queued.push_back(Some(hash));
    }

    /// The hash of the oldest entry not taken yet, if it is known already (never waits).
    pub fn ready(&mut self) -> io::Result<Option<blake3::Hash>> {
        if let Some(worker) = &mut self.worker {
            for slot in self.queued.iter_mut().filter(|s| s.is_none()) {
                match worker.hashes.try_recv() {
                    Ok(hash) => *slot = Some(hash),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return Err(Worker::gone()),
                }
            }
        }
        Ok(if matches!(self.queued.front(), Some(Some(_))) { self.queued.pop_front().flatten() } else { None })
    }

    /// The hash of the oldest entry not taken yet, waiting for the hashing thread if need be;
    /// `None` when every hash was taken.
    pub fn wait(&mut self) -> io::Result<Option<blake3::Hash>> {
        if matches!(self.queued.front(), Some(None)) {
            self.receive_all()?;
        }
        Ok(self.queued.pop_front().flatten())
    }

    /// [`hash`](Self::hash), then waits for that hash (and takes every one before it).
    #[cfg(test)]
    pub fn hash_reader(
        &mut self,
        size: u64,
        input: &mut dyn BufRead,
        each: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<blake3::Hash> {
        self.hash(size, input, each)?;
        let mut last = None;
        while let Some(hash) = self.wait()? {
            last = Some(hash);
        }
        last.ok_or_else(Worker::gone)
    }

    /// Waits for every hash the hashing thread still owes.
    fn receive_all(&mut self) -> io::Result<()> {
        let Some(worker) = &mut self.worker else { return Ok(()) };
        worker.release_all();
        for slot in self.queued.iter_mut().filter(|s| s.is_none()) {
            *slot = Some(worker.hashes.recv().map_err(|_| Worker::gone())?);
        }
        // Every chunk before the last `Finish` was hashed and its buffer given back.
        worker.filler()?.reclaim();
        Ok(())
    }
}

/// Hashes the input's bytes where they are (a decoded frame, say), without copying them.
fn hash_inline(input: &mut dyn BufRead, mut each: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<blake3::Hash> {
    let mut hasher = blake3::Hasher::new();
    loop {
        let piece = match input.fill_buf() {
            Ok([]) => return Ok(hasher.finalize()),
            Ok(piece) => piece,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // At most a piece that stays in the L2 cache between `each` and the hash.
        let n = piece.len().min(INLINE_PIECE);
        each(&piece[..n])?;
        hasher.update(&piece[..n]);
        input.consume(n);
    }
}

#[cfg(test)]
thread_local! {
    /// See [`held`].
    static HOLD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Test hook: runs `f` with every [`EntryHasher::new`] on this thread using a hashing thread
/// that keeps each hash back until the caller waits for it ([`EntryHasher::wait`]), the
/// slowest a hashing thread can be. What the caller decides while a hash is outstanding is
/// then the same on every run, instead of depending on which thread wins.
#[cfg(test)]
pub(crate) fn held<T>(f: impl FnOnce() -> T) -> T {
    HOLD.set(true);
    let out = f();
    HOLD.set(false);
    out
}

/// How many hashes a held hashing thread may send: its caller raises it when it waits.
#[cfg(test)]
#[derive(Default)]
struct Release {
    allowed: std::sync::Mutex<u64>,
    raised: std::sync::Condvar,
}

#[cfg(test)]
impl Release {
    fn allow(&self, n: u64) {
        *self.allowed.lock().unwrap() = n;
        self.raised.notify_all();
    }

    /// Blocks until the `n`th hash (counted from 1) may be sent.
    fn wait_for(&self, n: u64) {
        let mut allowed = self.allowed.lock().unwrap();
        while *allowed < n {
            allowed = self.raised.wait(allowed).unwrap();
        }
    }
}

enum Job {
    /// A buffer and how many of its bytes are data.
    Chunk(Vec<u8>, usize),
    /// The entry ended: send its hash and start the next one.
    Finish,
}

/// The hashing thread and the buffers that travel to it and back ([`crate::handoff`]).
struct Worker {
    /// `None` once the thread was told to stop.
    to_worker: Option<Filler<Job>>,
    /// One hash per `Finish`, in order. Unbounded, but at most one per entry still queued in
    /// the caller's [`EntryHasher`], and each such entry holds a buffer until it is hashed.
    hashes: Receiver<blake3::Hash>,
    thread: Option<JoinHandle<()>>,
    /// Entries ended (`Finish` sent), and the hold of a held thread ([`held`]).
    #[cfg(test)]
    finished: u64,
    #[cfg(test)]
    release: Option<std::sync::Arc<Release>>,
}

impl Worker {
    fn start() -> Self {
        let (filler, jobs) = handoff::<Job>(CHUNK, IN_FLIGHT);
        let (reply, hashes) = channel::<blake3::Hash>();
        #[cfg(test)]
        let release = HOLD.get().then(|| std::sync::Arc::new(Release::default()));
        #[cfg(test)]
        let (held, mut sent) = (release.clone(), 0);
        let thread = std::thread::spawn(move || {
            let mut hasher = blake3::Hasher::new();
            while let Some(job) = jobs.recv() {
                match job {
                    Job::Chunk(buf, len) => {
                        hasher.update(&buf[..len]);
                        jobs.give_back(buf);
                    }
                    Job::Finish => {
                        #[cfg(test)]
                        if let Some(release) = &held {
                            sent += 1;
                            release.wait_for(sent);
                        }
                        if reply.send(hasher.finalize()).is_err() {
                            return;
                        }
                        hasher.reset();
                    }
                }
            }
        });
        Worker {
            to_worker: Some(filler),
            hashes,
            thread: Some(thread),
            #[cfg(test)]
            finished: 0,
            #[cfg(test)]
            release,
        }
    }

    fn gone() -> io::Error {
        io::Error::other("the hashing thread stopped")
    }

    fn filler(&mut self) -> io::Result<&mut Filler<Job>> {
        self.to_worker.as_mut().ok_or_else(Self::gone)
    }

    fn send(&mut self, job: Job) -> io::Result<()> {
        #[cfg(test)]
        if matches!(job, Job::Finish) {
            self.finished += 1;
        }
        if self.filler()?.send(job) { Ok(()) } else { Err(Self::gone()) }
    }

    /// A held thread ([`held`]) may now send every hash owed so far.
    fn release_all(&self) {
        #[cfg(test)]
        if let Some(release) = &self.release {
            release.allow(self.finished);
        }
    }

    /// Hands every chunk of `input` to the hashing thread: decoded straight into the buffer
    /// that travels (no copy on this side). Every buffer not handed over goes back to the
    /// pool, whatever happens.
    fn feed(&mut self, input: &mut dyn Read, mut each: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        loop {
            let filler = self.filler()?;
            let mut buf = filler.buffer().ok_or_else(Self::gone)?;
            let filled = match read_full(input, &mut buf).and_then(|n| each(&buf[..n]).map(|()| n)) {
                Ok(n) => n,
                Err(e) => {
                    filler.recycle(buf);
                    return Err(e);
                }
            };
            if filled == 0 {
                filler.recycle(buf);
                return Ok(());
            }
            self.send(Job::Chunk(buf, filled))?;
            if filled < CHUNK {
                return Ok(());
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the job channel ends the thread's loop; it never waits to reply.
        self.to_worker = None;
        self.release_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// A hasher that lost its buffers waits forever: fail instead.
    fn within_a_minute(f: impl FnOnce() + Send + 'static) {
        crate::handoff::within_a_minute("the hasher", f);
    }

    /// A reader that yields `len` bytes of [`data`] and then fails.
    struct FailsAfter(io::Cursor<Vec<u8>>);

    impl Read for FailsAfter {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(io::Error::other("disk on fire")),
                n => Ok(n),
            }
        }
    }

    #[test]
    fn inline_and_threaded_agree_with_blake3_and_each_sees_every_byte() {
        let sizes = [0, 1, INLINE_PIECE - 1, INLINE_PIECE, INLINE_PIECE + 1, CHUNK - 1, CHUNK, CHUNK + 1];
        let sizes = sizes.into_iter().chain([INLINE_UP_TO as usize + 1, 3 * CHUNK, 5 * CHUNK + 7]);
        for threaded in [false, true] {
            let mut h = EntryHasher::with_thread(threaded);
            for len in sizes.clone() {
                let data = data(len);
                let mut seen = Vec::new();
                let got = h.hash_reader(len as u64, &mut data.as_slice(), |c| {
                    seen.extend_from_slice(c);
                    Ok(())
                });
                assert_eq!(got.unwrap(), blake3::hash(&data), "threaded {threaded}, len {len}");
                assert!(seen == data, "threaded {threaded}, len {len}: `each` saw other bytes");
            }
            assert_eq!(h.worker.is_some(), threaded, "the hashing thread starts only when threaded");
        }
    }

    #[test]
    fn queued_hashes_come_out_in_entry_order_and_ready_never_waits() {
        within_a_minute(|| {
            let mut h = EntryHasher::with_thread(true);
            // Threaded and inline entries mixed, with a failed one in the middle that queues nothing.
            let sizes = [3 * CHUNK + 1, 10, 2 * CHUNK, 1, 5 * CHUNK];
            let mut expected = Vec::new();
            for (i, len) in sizes.into_iter().enumerate() {
                let d: Vec<u8> = data(len).into_iter().map(|b| b.wrapping_add(i as u8)).collect();
                h.hash(len as u64, &mut d.as_slice(), |_| Ok(())).unwrap();
                expected.push(blake3::hash(&d));
                if i == 2 {
                    let mut failing = io::BufReader::new(FailsAfter(io::Cursor::new(data(2 * CHUNK))));
                    assert!(h.hash(4 * CHUNK as u64, &mut failing, |_| Ok(())).is_err());
                }
            }
            let mut got = Vec::new();
            // `ready` gives only what is known, in order; `wait` the rest.
            while let Some(hash) = h.ready().unwrap() {
                got.push(hash);
            }
            while let Some(hash) = h.wait().unwrap() {
                got.push(hash);
            }
            assert_eq!(got, expected);
            assert_eq!(h.ready().unwrap(), None, "nothing is left");
            assert_eq!(h.wait().unwrap(), None, "nothing is left to wait for");
        });
    }

    #[test]
    fn a_held_hashing_thread_gives_no_hash_until_it_is_waited_for() {
        within_a_minute(|| {
            held(|| {
                let mut h = EntryHasher::new();
                let (first, second) = (data(3 * CHUNK), data(2 * CHUNK + 1));
                h.hash(first.len() as u64, &mut first.as_slice(), |_| Ok(())).unwrap();
                assert_eq!(h.ready().unwrap(), None, "held: not ready before the caller waits");
                assert_eq!(h.wait().unwrap(), Some(blake3::hash(&first)));
                h.hash(second.len() as u64, &mut second.as_slice(), |_| Ok(())).unwrap();
                assert_eq!(h.ready().unwrap(), None, "held again for the next entry");
                assert_eq!(h.wait().unwrap(), Some(blake3::hash(&second)));
            });
        });
    }

    #[test]
    fn small_entries_never_start_the_hashing_thread() {
        let mut h = EntryHasher::with_thread(true);
        let data = data(INLINE_UP_TO as usize);
        assert_eq!(h.hash_reader(INLINE_UP_TO, &mut data.as_slice(), |_| Ok(())).unwrap(), blake3::hash(&data));
        assert!(h.worker.is_none());
    }

    #[test]
    fn an_error_from_each_returns_the_buffer_and_leaves_no_partial_hash() {
        within_a_minute(|| {
            let mut h = EntryHasher::with_thread(true);
            let big = data(3 * CHUNK);
            // More failures than there are buffers: a lost buffer per failure would deadlock.
            for _ in 0..2 * IN_FLIGHT {
                let mut calls = 0;
                let got = h.hash_reader(big.len() as u64, &mut big.as_slice(), |_| {
                    calls += 1;
                    if calls == 2 { Err(io::Error::other("sink full")) } else { Ok(()) }
                });
                assert_eq!(got.unwrap_err().to_string(), "sink full");
                let filler = h.worker.as_mut().unwrap().to_worker.as_mut().unwrap();
                assert!(filler.all_back(), "every buffer is back in the pool");
            }
            let good = data(2 * CHUNK + 3);
            let got = h.hash_reader(good.len() as u64, &mut good.as_slice(), |_| Ok(())).unwrap();
            assert_eq!(got, blake3::hash(&good), "the failed entries' chunks leaked into the next hash");
        });
    }

    #[test]
    fn a_read_error_returns_the_buffer_and_leaves_no_partial_hash() {
        within_a_minute(|| {
            for threaded in [false, true] {
                let mut h = EntryHasher::with_thread(threaded);
                for _ in 0..2 * IN_FLIGHT {
                    let mut failing = io::BufReader::new(FailsAfter(io::Cursor::new(data(CHUNK + CHUNK / 2))));
                    let got = h.hash_reader(3 * CHUNK as u64, &mut failing, |_| Ok(()));
                    assert_eq!(got.unwrap_err().to_string(), "disk on fire");
                }
                if let Some(worker) = &mut h.worker {
                    assert!(worker.to_worker.as_mut().unwrap().all_back(), "every buffer is back in the pool");
                }
                let good = data(2 * CHUNK);
                let got = h.hash_reader(good.len() as u64, &mut good.as_slice(), |_| Ok(())).unwrap();
                assert_eq!(got, blake3::hash(&good), "threaded {threaded}");
            }
        });
    }
}
