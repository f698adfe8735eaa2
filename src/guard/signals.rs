//! The signals that stop `bundle guard` (SIGTERM, SIGINT, SIGHUP): instead of ending the
//! guard on the spot and leaving the server it started running in its own process group, each
//! wakes the guard's event loop through a self-pipe, and the guard stops the server first.

use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use signal_hook::SigId;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::stdio::StopSignal;

const HANDLED: [(i32, &str); 3] = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT"), (SIGHUP, "SIGHUP")];

/// The handlers while they are installed (removed on drop).
pub struct StopSignals {
    wake: UnixStream,
    /// The number of the last signal received, 0 for none.
    last: Arc<AtomicUsize>,
    ids: Vec<SigId>,
}

impl StopSignals {
    /// Installs the handlers.
    pub fn install() -> std::io::Result<Self> {
        let (wake, write) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        let last = Arc::new(AtomicUsize::new(0));
        let mut ids = Vec::new();
        for (number, _) in HANDLED {
            // The flag first, then the wake-up (signal-hook's order: the reader drains the pipe,
            // then reads the flag).
            ids.push(signal_hook::flag::register_usize(number, Arc::clone(&last), number as usize)?);
            ids.push(signal_hook::low_level::pipe::register(number, write.try_clone()?)?);
        }
        Ok(StopSignals { wake, last, ids })
    }
}

impl AsFd for StopSignals {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }
}

impl StopSignal for StopSignals {
    fn received(&self) -> Option<(i32, &'static str)> {
        let mut buf = [0u8; 64];
        loop {
            match (&self.wake).read(&mut buf) {
                Ok(n) if n > 0 => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                _ => break,
            }
        }
        let number = self.last.load(Ordering::SeqCst);
        HANDLED.iter().find(|(n, _)| *n as usize == number).copied()
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
