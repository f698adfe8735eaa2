//! Buffers handed from one thread to another and back: the one bounded-buffer mechanism under
//! every pipeline of ours. pack's feeding thread (`archive::pipe`), verify's hashing thread
//! (`hasher`) and the reading threads of verify and pull (`read_ahead`) each pass large
//! buffers one way and get them back the other, so that:
//! - memory is bounded: at most `limit` buffers of `size` bytes exist (being filled, queued,
//!   or being used on the other side), whatever the length of the stream;
//! - buffers are allocated (and zeroed) once and then reused, never once per chunk;
//! - nothing spins or yields: each side sleeps in a channel when the other is behind (a spin
//!   before parking made 490,000 `sched_yield` calls per GiB on a 2-vCPU VM; see
//!   docs/book/src/internals/performance.md);
//! - the side that fills never waits to get a buffer back once the other side has finished
//!   with it: the return channel has room for all of them.
//!
//! When the other side is gone (it finished, failed or was dropped), [`Filler::buffer`] and
//! [`Filler::send`] say so instead of waiting forever; what the other side's error was is for
//! its owner to report.

use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};

/// Bytes per hand-over: about a thousand wake-ups per GiB (measured: 128 KiB hand-overs cost
/// 22,000 context switches per GiB, 1 MiB 4,100, at the same CPU time from 512 KiB up).
pub(crate) const CHUNK: usize = 1 << 20;
/// Buffers alive at once per pipeline.
pub(crate) const IN_FLIGHT: usize = 4;

/// Whether a second thread can run beside this one: more than one CPU is usable (the
/// affinity mask and a cgroup's CPU quota count, [`usable_cpus`](crate::workers::usable_cpus)). With
/// one, a second thread could only take turns with the first, paying a wake-up and a context
/// switch per hand-over, so the pipelines' users then do the work on the calling thread.
pub(crate) fn second_cpu() -> bool {
    crate::workers::usable_cpus() > 1
}

/// The side that fills buffers and sends them, inside messages `M`, to the other.
pub(crate) struct Filler<M> {
    to: SyncSender<M>,
    back: Receiver<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    allocated: usize,
    limit: usize,
    size: usize,
}

/// The side that receives the messages and gives their buffers back.
pub(crate) struct Drainer<M> {
    from: Receiver<M>,
    back: SyncSender<Vec<u8>>,
}

/// A pipeline of at most `limit` buffers of `size` bytes.
pub(crate) fn handoff<M>(size: usize, limit: usize) -> (Filler<M>, Drainer<M>) {
    let limit = limit.max(1);
    let (to, from) = sync_channel(limit);
    // Room for every buffer: the draining side never waits to give one back.
    let (give_back, back) = sync_channel(limit);
    let filler = Filler { to, back, pool: Vec::new(), allocated: 0, limit, size };
    (filler, Drainer { from, back: give_back })
}

impl<M> Filler<M> {
    /// A buffer of `size` bytes: one given back, a new one while fewer than `limit` exist, or
    /// else the next one the other side gives back. `None` when the other side is gone.
    pub(crate) fn buffer(&mut self) -> Option<Vec<u8>> {
        self.reclaim();
        if let Some(b) = self.pool.pop() {
            return Some(b);
        }
        if self.allocated < self.limit {
            self.allocated += 1;
            return Some(vec![0; self.size]);
        }
        self.back.recv().ok()
    }

    /// Keeps a buffer that was taken but not sent.
    pub(crate) fn recycle(&mut self, buf: Vec<u8>) {
        self.pool.push(buf);
    }

    /// Sends `message` (waiting while `limit` are queued); `false` when the other side is gone.
    pub(crate) fn send(&self, message: M) -> bool {
        self.to.send(message).is_ok()
    }

    /// Takes in the buffers given back so far; `false` once the other side is gone and
    /// nothing more can come back.
    pub(crate) fn reclaim(&mut self) -> bool {
        loop {
            match self.back.try_recv() {
                Ok(b) => self.pool.push(b),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return false,
            }
        }
    }

    /// Whether every buffer ever allocated is back in the pool (for tests of error paths).
    #[cfg(test)]
    pub(crate) fn all_back(&mut self) -> bool {
        self.reclaim();
        self.pool.len() == self.allocated
    }
}

impl<M> Drainer<M> {
    /// The next message; `None` once the filling side is gone and nothing is queued.
    pub(crate) fn recv(&self) -> Option<M> {
        self.from.recv().ok()
    }

    /// Returns a buffer to the filling side (dropped if that side is gone).
    pub(crate) fn give_back(&self, buf: Vec<u8>) {
        // Never blocks: the channel has room for every buffer there is.
        let _ = self.back.try_send(buf);
    }

    /// The messages alone, without a way to give buffers back: for a middle stage that passes
    /// every buffer on ([`relay`](Self::relay)), so that the last stage's going away leaves the
    /// filling side no sender to wait on.
    pub(crate) fn into_messages(self) -> Receiver<M> {
        self.from
    }

    /// A further stage of the pipeline: a drainer of the messages sent to the returned sender
    /// (by the thread that drains this one and passes them on), whose buffers go back to the
    /// same filler. At most `limit` messages wait between the two stages.
    pub(crate) fn relay(&self, limit: usize) -> (SyncSender<M>, Drainer<M>) {
        let (to, from) = sync_channel(limit.max(1));
        (to, Drainer { from, back: self.back.clone() })
    }
}

/// Runs `f` on a thread of its own and fails if it takes more than a minute, for tests whose
/// only way to fail is to wait forever (a buffer lost, a thread that never stops).
#[cfg(test)]
pub(crate) fn within_a_minute(what: &str, f: impl FnOnce() + Send + 'static) {
    use std::sync::mpsc;
    let (done, finished) = mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    match finished.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(()) => t.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => std::panic::resume_unwind(t.join().unwrap_err()),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} did not finish within a minute"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_more_than_limit_buffers_and_each_is_reused() {
        let (mut filler, drainer) = handoff::<Vec<u8>>(16, 3);
        let t = std::thread::spawn(move || {
            let mut seen = 0;
            while let Some(buf) = drainer.recv() {
                seen += 1;
                drainer.give_back(buf);
            }
            seen
        });
        for _ in 0..100 {
            let buf = filler.buffer().unwrap();
            assert_eq!(buf.len(), 16);
            assert!(filler.send(buf));
        }
        assert!(filler.allocated <= 3, "{} buffers allocated", filler.allocated);
        let Filler { to, .. } = filler;
        drop(to);
        assert_eq!(t.join().unwrap(), 100);
    }

    #[test]
    fn a_gone_drainer_is_noticed_instead_of_waited_for() {
        let (mut filler, drainer) = handoff::<Vec<u8>>(8, 2);
        let a = filler.buffer().unwrap();
        let b = filler.buffer().unwrap();
        assert!(filler.send(a));
        drop(drainer);
        assert!(filler.buffer().is_none(), "all buffers are out and nobody can give one back");
        assert!(!filler.send(b));
        assert!(!filler.reclaim());
    }
}
