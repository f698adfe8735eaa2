//! A writer that hands its bytes, in large buffers, to a thread that writes them on: the
//! archive writer reads, hashes and frames files on the calling thread while the zstd encoder
//! (and with it the bundle file) is fed on another.
//!
//! Why: zstd's multithreaded encoder compresses on worker threads, but the thread that feeds it
//! also copies the input into its jobs and writes the output. When that same thread reads and
//! hashes the files as well (about 0.6 s of CPU per GiB), the workers starve while it reads and
//! the reading stops while the encoder blocks; on a busy 2-vCPU machine `bundle pack` took
//! 1.7-1.9x the wall time of `zstd -3 -T0` at the same CPU time. The zstd command line has I/O
//! threads of its own for the same reason (docs/book/src/internals/performance.md).
//!
//! The buffers travel in the bounded pipeline of [`crate::handoff`]: at most [`IN_FLIGHT`] of
//! [`CHUNK`] bytes exist (being filled, queued or being written), zeroed once and reused. The bytes reach the inner
//! writer in the order and amounts they were written, so the output is that of writing to it
//! directly (zstd's output does not depend on how its input is split into calls).
//!
//! The first error of the inner writer ends the thread; the next hand-over (or
//! [`finish`](Pipe::finish)) returns that very error, so a full disk is still reported as one.

use std::io::{self, Read, Write};
use std::thread::JoinHandle;

use crate::handoff::{CHUNK, Filler, IN_FLIGHT, handoff};

pub(crate) struct Pipe<T> {
    /// `None` once the thread was told to stop.
    to_thread: Option<Filler<(Vec<u8>, usize)>>,
    /// The buffer being filled (empty until the first byte arrives) and its bytes of data.
    buf: Vec<u8>,
    filled: usize,
    thread: Option<JoinHandle<io::Result<T>>>,
    /// Set once the thread is gone; every later call fails.
    broken: bool,
}

impl<T: Write + Send + 'static> Pipe<T> {
    /// Starts the writing thread, which owns `inner` until [`finish`](Self::finish).
    pub(crate) fn new(mut inner: T) -> io::Result<Self> {
        let (filler, chunks) = handoff::<(Vec<u8>, usize)>(CHUNK, IN_FLIGHT);
        let thread = std::thread::Builder::new().name("pack-compress".into()).spawn(move || {
            while let Some((buf, len)) = chunks.recv() {
                inner.write_all(&buf[..len])?;
                chunks.give_back(buf);
            }
            Ok(inner)
        })?;
        Ok(Pipe { to_thread: Some(filler), buf: Vec::new(), filled: 0, thread: Some(thread), broken: false })
    }
}

impl<T> Pipe<T> {
    /// Reads at most `limit` bytes (and at least one, unless `input` is at its end or fails)
    /// from `input` straight into the buffer being filled and returns them.
    pub(crate) fn read_from(&mut self, input: &mut dyn Read, limit: usize) -> io::Result<&[u8]> {
        self.room()?;
        let end = CHUNK.min(self.filled + limit);
        let n = input.read(&mut self.buf[self.filled..end])?;
        let start = self.filled;
        self.filled += n;
        Ok(&self.buf[start..self.filled])
    }

    /// Hands over what is left, waits for the thread to write it and returns the inner writer.
    pub(crate) fn finish(mut self) -> io::Result<T> {
        self.hand_over()?;
        self.to_thread = None;
        self.join()
    }

    /// Makes sure the buffer being filled has room for at least one byte.
    fn room(&mut self) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::other("the compressing thread failed earlier"));
        }
        if self.filled == CHUNK {
            self.hand_over()?;
        }
        if self.buf.is_empty() {
            let buffer = self.to_thread.as_mut().and_then(Filler::buffer);
            self.buf = buffer.ok_or_else(|| self.failure())?;
            self.filled = 0;
        }
        Ok(())
    }

    /// Sends the buffer being filled, if it holds anything.
    fn hand_over(&mut self) -> io::Result<()> {
        if self.filled == 0 {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let len = std::mem::replace(&mut self.filled, 0);
        let sent = self.to_thread.as_ref().is_some_and(|f| f.send((buf, len)));
        if sent { Ok(()) } else { Err(self.failure()) }
    }

    /// The thread stopped: its error.
    fn failure(&mut self) -> io::Error {
        self.to_thread = None;
        match self.join() {
            Err(e) => e,
            Ok(_) => io::Error::other("the compressing thread stopped"),
        }
    }

    fn join(&mut self) -> io::Result<T> {
        self.broken = true;
        let thread = self.thread.take().ok_or_else(|| io::Error::other("the compressing thread failed earlier"))?;
        thread.join().map_err(|_| io::Error::other("the compressing thread panicked"))?
    }
}

impl<T> Write for Pipe<T> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if bytes.is_empty() {
            return Ok(0);
        }
        self.room()?;
        let n = bytes.len().min(CHUNK - self.filled);
        self.buf[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
        self.filled += n;
        Ok(n)
    }

    /// Does nothing: the bytes go on in whole buffers (a flush would also end a zstd block
    /// early and change the output).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<T> Drop for Pipe<T> {
    fn drop(&mut self) {
        // Closing the channel ends the thread once it has written what was queued.
        self.to_thread = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepts `room` bytes, then fails every write as a full disk would.
    struct Disk {
        data: Vec<u8>,
        room: usize,
    }

    impl Write for Disk {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.room - self.data.len());
            if n == 0 {
                return Err(io::Error::from_raw_os_error(28)); // ENOSPC
            }
            self.data.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn bytes_arrive_in_order_whatever_the_calls() {
        let src = data(5 * CHUNK + 77);
        let mut pipe = Pipe::new(Disk { data: Vec::new(), room: usize::MAX }).unwrap();
        let mut input = &src[..];
        let mut seen = Vec::new();
        let mut i = 0;
        while !input.is_empty() {
            // Alternate reads of odd sizes with small writes.
            if i % 3 == 0 {
                let n = 100.min(input.len());
                pipe.write_all(&input[..n]).unwrap();
                seen.extend_from_slice(&input[..n]);
                input = &input[n..];
            } else {
                let got = pipe.read_from(&mut input, 300_001).unwrap();
                seen.extend_from_slice(got);
            }
            i += 1;
        }
        assert_eq!(pipe.read_from(&mut input, 10).unwrap().len(), 0);
        let disk = pipe.finish().unwrap();
        assert!(seen == src, "read_from returned other bytes");
        assert!(disk.data == src, "the inner writer got other bytes");
    }

    #[test]
    fn the_inner_writers_error_is_returned_and_no_call_succeeds_after_it() {
        let src = data(20 * CHUNK);
        let mut pipe = Pipe::new(Disk { data: Vec::new(), room: 3 * CHUNK + 5 }).unwrap();
        let err = pipe.write_all(&src).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28), "{err}");
        assert!(pipe.write_all(b"x").is_err());
        assert!(pipe.read_from(&mut &src[..], 10).is_err());
        assert!(pipe.finish().is_err());
    }

    #[test]
    fn an_error_found_only_at_finish_is_returned() {
        let mut pipe = Pipe::new(Disk { data: Vec::new(), room: 10 }).unwrap();
        pipe.write_all(&data(100)).unwrap();
        assert_eq!(pipe.finish().err().and_then(|e| e.raw_os_error()), Some(28));
    }

    #[test]
    fn dropping_midway_ends_the_thread() {
        /// A writer whose bytes the test can see after the thread that owns it is gone.
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let written = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut pipe = Pipe::new(Shared(std::sync::Arc::clone(&written))).unwrap();
        let src = data(3 * CHUNK + 1);
        pipe.write_all(&src).unwrap();
        drop(pipe);
        // The thread has ended (it owned the only other handle) after writing what was queued:
        // the three full buffers; the partly filled one is dropped unwritten.
        assert_eq!(std::sync::Arc::strong_count(&written), 1, "the writing thread is still alive");
        assert!(*written.lock().unwrap() == src[..3 * CHUNK], "the queued buffers were not all written");
    }
}
