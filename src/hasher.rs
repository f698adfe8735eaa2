//! BLAKE3 on its own thread, fed by the thread that decompresses: `bundle verify` hashes each
//! entry beside decompression instead of after it. Buffers are recycled and at most
//! [`IN_FLIGHT`] of [`CHUNK`] bytes exist at once, so memory stays bounded.
//!
//! Design decisions (measured on the 1 GiB bench agent, 2-core VM; see
//! docs/book/src/internals/performance.md):
//! - Chunks are small (128 KiB, 1 MiB in flight): they stay in cache between the decoder that
//!   writes them and the hasher that reads them. 1 MiB chunks cost the decoding thread about
//!   0.1 s more in `memmove` per GiB.
//! - The hashing thread is the fast stage, so with a blocking channel it sleeps after every
//!   chunk and every hand-over pays a futex wake-up; the scheduler also tends to wake it on the
//!   decoder's CPU, where it preempts the decoder. Verify then ran at 1.2x `zstd -dc`. Instead
//!   the hasher waits for the next chunk by yielding for up to [`SPIN`] before it parks (only
//!   when there is more than one CPU): it stays on its own core while chunks keep coming, and
//!   parks as soon as they stop. That costs the second core while a large bundle verifies.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes per hand-over.
pub const CHUNK: usize = 128 << 10;
/// Buffers alive at once (being filled, queued, or being hashed).
pub const IN_FLIGHT: usize = 8;
/// Entries up to this size are hashed on the calling thread.
pub const INLINE_UP_TO: u64 = 1 << 20;
/// How long the hashing thread waits for the next chunk before it parks.
pub const SPIN: Duration = Duration::from_millis(1);

enum Job {
    /// A buffer and how many of its bytes are data (buffers stay CHUNK long, so they are
    /// zeroed once, when allocated).
    Chunk(Vec<u8>, usize),
    Finish,
}

enum Back {
    Buffer(Vec<u8>),
    Hash(blake3::Hash),
}

pub struct BackgroundHasher {
    to_worker: Option<SyncSender<Job>>,
    from_worker: Receiver<Back>,
    pool: Vec<Vec<u8>>,
    allocated: usize,
    worker: Option<JoinHandle<()>>,
}

impl Default for BackgroundHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl BackgroundHasher {
    pub fn new() -> Self {
        let (to_worker, jobs) = sync_channel::<Job>(IN_FLIGHT);
        let (back, from_worker) = sync_channel::<Back>(IN_FLIGHT + 1);
        let spin = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        let worker = std::thread::spawn(move || {
            let mut hasher = blake3::Hasher::new();
            while let Some(job) = next_job(&jobs, spin) {
                let reply = match job {
                    Job::Chunk(buf, len) => {
                        hasher.update(&buf[..len]);
                        Back::Buffer(buf)
                    }
                    Job::Finish => {
                        let hash = hasher.finalize();
                        hasher.reset();
                        Back::Hash(hash)
                    }
                };
                if back.send(reply).is_err() {
                    return;
                }
            }
        });
        BackgroundHasher {
            to_worker: Some(to_worker),
            from_worker,
            pool: Vec::new(),
            allocated: 0,
            worker: Some(worker),
        }
    }

    fn gone() -> io::Error {
        io::Error::other("the hashing thread stopped")
    }

    fn buffer(&mut self) -> io::Result<Vec<u8>> {
        while let Ok(Back::Buffer(b)) = self.from_worker.try_recv() {
            self.pool.push(b);
        }
        if let Some(b) = self.pool.pop() {
            return Ok(b);
        }
        if self.allocated < IN_FLIGHT {
            self.allocated += 1;
            return Ok(vec![0; CHUNK]);
        }
        match self.from_worker.recv() {
            Ok(Back::Buffer(b)) => Ok(b),
            _ => Err(Self::gone()),
        }
    }

    /// Reads `input` to its end, giving every chunk to `each` (on this thread) and to the
    /// hashing thread; returns the BLAKE3 hash of all the bytes.
    pub fn hash_reader(
        &mut self,
        input: &mut dyn Read,
        mut each: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<blake3::Hash> {
        let tx = self.to_worker.clone().ok_or_else(Self::gone)?;
        loop {
            let mut buf = self.buffer()?;
            let mut filled = 0;
            while filled < CHUNK {
                match input.read(&mut buf[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        // Keep the pipeline consistent: finish this entry's hash and drop it.
                        self.pool.push(buf);
                        let _ = self.finish(&tx);
                        return Err(e);
                    }
                }
            }
            if filled > 0 {
                each(&buf[..filled])?;
                tx.send(Job::Chunk(buf, filled)).map_err(|_| Self::gone())?;
            } else {
                self.pool.push(buf);
            }
            if filled < CHUNK {
                return self.finish(&tx);
            }
        }
    }

    fn finish(&mut self, tx: &SyncSender<Job>) -> io::Result<blake3::Hash> {
        tx.send(Job::Finish).map_err(|_| Self::gone())?;
        loop {
            match self.from_worker.recv() {
                Ok(Back::Buffer(b)) => self.pool.push(b),
                Ok(Back::Hash(h)) => return Ok(h),
                Err(_) => return Err(Self::gone()),
            }
        }
    }
}

/// The next job, waiting for it by yielding for up to [`SPIN`] (if `spin`) before parking;
/// `None` once the sending side is gone.
fn next_job(jobs: &Receiver<Job>, spin: bool) -> Option<Job> {
    if spin {
        let start = Instant::now();
        loop {
            match jobs.try_recv() {
                Ok(job) => return Some(job),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) if start.elapsed() < SPIN => std::thread::yield_now(),
                Err(TryRecvError::Empty) => break,
            }
        }
    }
    jobs.recv().ok()
}

impl Drop for BackgroundHasher {
    fn drop(&mut self) {
        self.to_worker = None;
        // Unblock a worker waiting to send, then wait for it.
        while self.from_worker.try_recv().is_ok() {}
        if let Some(w) = self.worker.take() {
            drop(std::mem::replace(&mut self.from_worker, sync_channel(0).1));
            let _ = w.join();
        }
    }
}

/// Hashes small entries on the calling thread (handing a few KiB to another thread costs more
/// than hashing them) and large ones beside it, starting the hashing thread only when the first
/// large entry arrives: verifying a small bundle never spawns it.
#[derive(Default)]
pub struct EntryHasher {
    background: Option<BackgroundHasher>,
    small: Vec<u8>,
}

impl EntryHasher {
    pub fn new() -> Self {
        Self::default()
    }

    /// Like [`BackgroundHasher::hash_reader`]; `size` (the entry's declared size) picks the way.
    pub fn hash_reader(
        &mut self,
        size: u64,
        input: &mut dyn Read,
        mut each: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<blake3::Hash> {
        if size > INLINE_UP_TO {
            return self.background.get_or_insert_with(BackgroundHasher::new).hash_reader(input, each);
        }
        if self.small.is_empty() {
            self.small = vec![0; 64 * 1024];
        }
        let mut hasher = blake3::Hasher::new();
        loop {
            match input.read(&mut self.small) {
                Ok(0) => return Ok(hasher.finalize()),
                Ok(n) => {
                    each(&self.small[..n])?;
                    hasher.update(&self.small[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_hasher_agrees_on_both_paths() {
        let mut h = EntryHasher::new();
        for len in [0usize, 10, CHUNK, CHUNK + 1, INLINE_UP_TO as usize, INLINE_UP_TO as usize + 1, 3 << 20] {
            let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let got = h.hash_reader(len as u64, &mut data.as_slice(), |_| Ok(())).unwrap();
            assert_eq!(got, blake3::hash(&data), "len {len}");
        }
    }

    #[test]
    fn hashes_like_blake3_across_chunk_boundaries() {
        let mut h = BackgroundHasher::new();
        for len in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 7] {
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut seen = 0;
            let got = h.hash_reader(&mut data.as_slice(), |c| {
                seen += c.len();
                Ok(())
            });
            assert_eq!(got.unwrap(), blake3::hash(&data), "len {len}");
            assert_eq!(seen, len);
        }
    }
}
