//! Reading on a thread of its own: a `BufRead` over chunks another thread reads ahead, so that
//! the thread that consumes them (verify's zstd decoder) never stops for a `read` call.
//!
//! Why: `bundle verify` decodes on one thread; with the reads on that thread too, every read
//! (the kernel's copy out of the page cache, or a wait for the disk or the network) stalls the
//! decoder. The zstd command line reads and writes on threads of its own and so spends more
//! CPU than the linked library but less wall time (issue 29). Here the reading thread runs
//! beside the decoder while the decoder works on the previous chunk.
//!
//! The chunks travel in the bounded pipeline of [`crate::handoff`] ([`AHEAD`] buffers of
//! [`CHUNK`] bytes, reused), so memory stays flat whatever the input's size. Every chunk is
//! first given to a `tee` on the reading thread (the registry's download writes its temp file
//! there, `oci::prefetch`), and passed on only after that succeeded. An error of the source or
//! the tee reaches the consumer in place of the next chunk, and again on every later call; a
//! consumer that stops early (a rejection) makes the reading thread stop at its next chunk.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::handoff::{CHUNK, Drainer, Filler, IN_FLIGHT, handoff, second_cpu};
use crate::read_full::read_until_error;

/// Chunks read ahead at most (of [`CHUNK`] bytes each; the consumer's included). More than the
/// other pipelines' [`IN_FLIGHT`]: verify's reading thread takes a whole frame at once (up to
/// 4 MiB compressed for `pack`'s) and several in a row when the decoding threads are idle.
/// Verify of the 1 GiB bench bundle on the 2-vCPU Xeon, medians of 9: 0.716 s with 4 chunks,
/// 0.679 s with 8, 0.670 s with 16 (2026-11-28).
pub(crate) const AHEAD: usize = 2 * IN_FLIGHT;

/// A chunk and its bytes of data (0: the end of the source), or what went wrong.
type Message = io::Result<(Vec<u8>, usize)>;

/// The consuming end.
pub(crate) struct ReadAhead {
    chunks: Drainer<Message>,
    current: Vec<u8>,
    len: usize,
    pos: usize,
    done: bool,
    /// The error received, returned again on every later call.
    failed: Option<(io::ErrorKind, String)>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl ReadAhead {
    /// Starts reading `source` on a thread named `name`, giving every chunk to `tee` before
    /// passing it on (`io::sink()` for none); `tee` is flushed at the end of the source.
    pub(crate) fn spawn(
        name: &str,
        source: impl Read + Send + 'static,
        tee: impl Write + Send + 'static,
    ) -> io::Result<Self> {
        let (filler, chunks) = handoff(CHUNK, AHEAD);
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || read_on(source, tee, filler))?;
        Ok(ReadAhead { chunks, current: Vec::new(), len: 0, pos: 0, done: false, failed: None, thread: Some(thread) })
    }

    /// [`spawn`](Self::spawn) with `tee` on a thread of its own (named `name-tee`): the chunks
    /// go from the reading thread to the tee's and from there, written, to this end. The same
    /// buffers travel both legs, so memory is bounded as before.
    ///
    /// Why: on a registry pull the reading thread received the layer, hashed it (SHA-256) and
    /// wrote it to the temp file, 1.21 s of CPU per 695 MiB on the 2-vCPU bench machine against
    /// the decoder's 0.67 s, so the decoder waited for it. Split, the two legs and the decoder
    /// share both CPUs.
    pub(crate) fn spawn_teeing(
        name: &str,
        source: impl Read + Send + 'static,
        mut tee: impl Write + Send + 'static,
    ) -> io::Result<Self> {
        let (filler, received) = handoff(CHUNK, AHEAD);
        let (to_consumer, chunks) = received.relay(AHEAD);
        // The tee's thread passes every buffer on and keeps no way back for them: were it to
        // hold one, a consumer gone with every buffer (in its hands or queued to it) would
        // leave the reading thread waiting for a buffer and this thread for a chunk, for ever.
        let received = received.into_messages();
        let reader =
            std::thread::Builder::new().name(name.into()).spawn(move || read_on(source, io::sink(), filler))?;
        let thread = std::thread::Builder::new().name(format!("{name}-tee")).spawn(move || {
            let teed = tee_on(&mut tee, &received, &to_consumer);
            // Whatever ended it, the reading thread is told (its next hand-over fails) and
            // waited for; an error of its own comes first.
            drop(received);
            let read = reader.join().map_err(|_| io::Error::other("the reading thread panicked"))?;
            read.and(teed)
        })?;
        Ok(ReadAhead { chunks, current: Vec::new(), len: 0, pos: 0, done: false, failed: None, thread: Some(thread) })
    }

    /// Stops reading and waits for the reading thread: its error, if reading or the tee failed
    /// (`Ok` if it stopped early because this end stopped reading).
    pub(crate) fn finish(mut self) -> io::Result<()> {
        let thread = self.thread.take();
        // Dropping the receiving end stops a thread that is still reading.
        drop(self);
        match thread.map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the reading thread panicked")),
            None => Ok(()),
        }
    }
}

fn read_on(mut source: impl Read, mut tee: impl Write, mut filler: Filler<Message>) -> io::Result<()> {
    loop {
        // `None`: the consumer stopped; nothing more is needed.
        let Some(mut buf) = filler.buffer() else { return Ok(()) };
        let (n, read_error) = read_until_error(&mut source, &mut buf);
        let end = n == 0 && read_error.is_none();
        if let Err(e) = tee.write_all(&buf[..n]).and_then(|()| if end { tee.flush() } else { Ok(()) }) {
            filler.recycle(buf);
            filler.send(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
        let Some(e) = read_error else {
            if !filler.send(Ok((buf, n))) || end {
                return Ok(());
            }
            continue;
        };
        // The bytes read before the error go on before it, as a reader on the consumer's own
        // thread would have given them: the consumer's verdict on them must not depend on
        // where a chunk happened to end.
        if n > 0 {
            if !filler.send(Ok((buf, n))) {
                return Ok(());
            }
        } else {
            filler.recycle(buf);
        }
        filler.send(Err(io::Error::new(e.kind(), e.to_string())));
        return Err(e);
    }
}

/// Writes every chunk `received` brings to `tee`, then passes it on to the consumer: a chunk
/// reaches the consumer only once written. An error of the reading thread is passed on as
/// received; one of `tee` takes the chunk's place.
fn tee_on(tee: &mut impl Write, received: &Receiver<Message>, to_consumer: &SyncSender<Message>) -> io::Result<()> {
    while let Ok(message) = received.recv() {
        let (buf, n) = match message {
            Ok(chunk) => chunk,
            Err(e) => {
                // The reading thread's error: it returns that error itself.
                let _ = to_consumer.send(Err(e));
                return Ok(());
            }
        };
        let step = tee.write_all(&buf[..n]).and_then(|()| if n == 0 { tee.flush() } else { Ok(()) });
        if let Err(e) = step {
            // The buffer is dropped: the pipeline ends here (the reading thread's next
            // hand-over fails once this thread returns).
            drop(buf);
            let _ = to_consumer.send(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
        if to_consumer.send(Ok((buf, n))).is_err() || n == 0 {
            return Ok(());
        }
    }
    Ok(())
}

/// Inputs at least this large are read ahead: starting a thread costs tens of microseconds,
/// reading 4 MiB from the page cache about a millisecond.
pub(crate) const READ_AHEAD_FROM: u64 = 4 * CHUNK as u64;

/// An input read once from start to end (a bundle being verified): read ahead on a thread when
/// it is large and a second CPU is usable, else through a buffer sized for it.
pub(crate) enum Sequential<R> {
    Buffered(BufReader<R>),
    Ahead(ReadAhead),
}

/// `source` of `size` bytes as a [`Sequential`] input.
pub(crate) fn sequential<R: Read + Send + 'static>(source: R, size: u64) -> io::Result<Sequential<R>> {
    if size >= READ_AHEAD_FROM && second_cpu() {
        return ReadAhead::spawn("read-ahead", source, io::sink()).map(Sequential::Ahead);
    }
    // The buffer is zeroed before its first use; a small input gets a small one.
    let capacity = usize::try_from(size).unwrap_or(usize::MAX).clamp(8 << 10, CHUNK);
    Ok(Sequential::Buffered(BufReader::with_capacity(capacity, source)))
}

impl<R: Read> Read for Sequential<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sequential::Buffered(r) => r.read(buf),
            Sequential::Ahead(r) => r.read(buf),
        }
    }
}

impl<R: Read> crate::archive::BundleRead for Sequential<R> {}

impl<R: Read> BufRead for Sequential<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        match self {
            Sequential::Buffered(r) => r.fill_buf(),
            Sequential::Ahead(r) => r.fill_buf(),
        }
    }

    fn consume(&mut self, amt: usize) {
        match self {
            Sequential::Buffered(r) => r.consume(amt),
            Sequential::Ahead(r) => r.consume(amt),
        }
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for ReadAhead {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos == self.len && !self.done {
            if let Some((kind, message)) = &self.failed {
                return Err(io::Error::new(*kind, message.clone()));
            }
            if !self.current.is_empty() {
                self.chunks.give_back(std::mem::take(&mut self.current));
                (self.len, self.pos) = (0, 0);
            }
            match self.chunks.recv() {
                Some(Ok((chunk, 0))) => {
                    self.chunks.give_back(chunk);
                    self.done = true;
                }
                Some(Ok((chunk, len))) => {
                    self.current = chunk;
                    self.len = len;
                    self.pos = 0;
                }
                Some(Err(e)) => self.failed = Some((e.kind(), e.to_string())),
                // The thread stopped without an end or an error: it panicked.
                None => self.failed = Some((io::ErrorKind::Other, "the reading thread stopped".into())),
            }
        }
        Ok(&self.current[self.pos..self.len])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// Both ways of reading ahead: the tee on the reading thread, and on a thread of its own.
    fn spawn(
        teeing: bool,
        source: impl Read + Send + 'static,
        tee: impl Write + Send + 'static,
    ) -> io::Result<ReadAhead> {
        if teeing { ReadAhead::spawn_teeing("test", source, tee) } else { ReadAhead::spawn("test", source, tee) }
    }

    /// Yields `self.0` bytes, then fails.
    struct Broken(usize);

    impl Read for Broken {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::new(io::ErrorKind::ConnectionReset, "reset"));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(7);
            self.0 -= n;
            Ok(n)
        }
    }

    /// Accepts `self.0` bytes, then fails as a full disk would.
    struct Full(usize);

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::from_raw_os_error(28)); // ENOSPC
            }
            let n = buf.len().min(self.0);
            self.0 -= n;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn passes_every_byte_on_in_order_through_reused_buffers() {
        for teeing in [false, true] {
            for len in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17, 2 * IN_FLIGHT * CHUNK + 5] {
                let src = data(len);
                let mut r = spawn(teeing, io::Cursor::new(src.clone()), io::sink()).unwrap();
                let mut got = Vec::new();
                r.read_to_end(&mut got).unwrap();
                assert!(got == src, "teeing {teeing}, len {len}: other bytes came out");
                assert_eq!(r.fill_buf().unwrap().len(), 0, "the end stays the end");
                r.finish().unwrap();
            }
        }
    }

    #[test]
    fn the_tee_sees_every_byte_before_the_consumer_does() {
        for teeing in [false, true] {
            let src = data(2 * CHUNK + 3);
            let file = tempfile::tempfile().unwrap();
            let mut r = spawn(teeing, io::Cursor::new(src.clone()), file.try_clone().unwrap()).unwrap();
            let mut got = Vec::new();
            r.read_to_end(&mut got).unwrap();
            r.finish().unwrap();
            let mut copied = Vec::new();
            let mut f = file;
            io::Seek::rewind(&mut f).unwrap();
            f.read_to_end(&mut copied).unwrap();
            assert!(got == src && copied == src, "teeing {teeing}");
        }
    }

    #[test]
    fn an_error_of_the_source_reaches_the_consumer_and_stays() {
        for teeing in [false, true] {
            let mut r = spawn(teeing, Broken(CHUNK + 10), io::sink()).unwrap();
            let mut got = Vec::new();
            assert_eq!(r.read_to_end(&mut got).unwrap_err().kind(), io::ErrorKind::ConnectionReset);
            assert_eq!(got.len(), CHUNK + 10, "every byte before the error was passed on");
            assert_eq!(r.fill_buf().unwrap_err().kind(), io::ErrorKind::ConnectionReset, "an error is not an end");
            assert_eq!(r.finish().unwrap_err().kind(), io::ErrorKind::ConnectionReset, "teeing {teeing}");
        }
    }

    #[test]
    fn an_error_of_the_tee_takes_the_place_of_its_chunk() {
        // An endless source: a reader that read on past the tee's error would never end.
        crate::handoff::within_a_minute("read-ahead after a tee error", || {
            for teeing in [false, true] {
                let mut r = spawn(teeing, io::repeat(1), Full(CHUNK + 10)).unwrap();
                let mut got = Vec::new();
                let err = r.read_to_end(&mut got).unwrap_err();
                assert_eq!(err.kind(), io::ErrorKind::StorageFull, "teeing {teeing}: {err}");
                assert_eq!(got.len(), CHUNK, "teeing {teeing}: only the chunk written in full was passed on");
                assert_eq!(r.finish().unwrap_err().kind(), io::ErrorKind::StorageFull, "teeing {teeing}");
            }
        });
    }

    /// A tee that tells, once, when it has written `n` chunks.
    struct Counting(usize, Option<std::sync::mpsc::Sender<()>>);

    impl Write for Counting {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 = self.0.saturating_sub(1);
            if self.0 == 0
                && let Some(told) = self.1.take()
            {
                let _ = told.send(());
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Found by the deadline below: a consumer that stops while every buffer waits for it (in
    /// its hands or queued to it) left the tee's thread waiting for the reading thread and the
    /// reading thread waiting for a buffer, for ever (`pull` refusing a large layer part way
    /// could hang in `finish`). The tee's thread holds no way back for buffers now, so the
    /// consumer's going away frees the reading thread.
    #[test]
    fn a_consumer_that_stops_with_every_buffer_queued_to_it_stops_the_teeing_threads() {
        crate::handoff::within_a_minute("the teeing threads after the consumer stopped", || {
            let (told, written) = std::sync::mpsc::channel();
            let mut r = ReadAhead::spawn_teeing("t", io::repeat(1), Counting(AHEAD, Some(told))).unwrap();
            // One chunk in the consumer's hands, the others written and queued to it.
            assert_eq!(r.fill_buf().unwrap().len(), CHUNK);
            written.recv().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100));
            r.finish().unwrap();
        });
    }

    /// The only way this can fail is by waiting forever (`finish` joins threads that never
    /// stop): it fails after a minute instead.
    #[test]
    fn a_consumer_that_stops_early_stops_the_reading_threads() {
        crate::handoff::within_a_minute("read-ahead's threads after the consumer stopped", || {
            for teeing in [false, true] {
                // An endless source: only the consumer's going away can end the threads.
                let r = spawn(teeing, io::repeat(1), io::sink()).unwrap();
                r.finish().unwrap();
            }
        });
    }
}
