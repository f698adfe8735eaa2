//! The stdio transport of `bundle guard`: the guard's own stdin and stdout are the client's
//! end, the server is a child process (started as import starts one, `crate::mcp_process`).
//!
//! One thread moves every message: it waits (`poll`) on the client's input, the server's
//! output, the server's input while something waits to be written there, and the signals that
//! stop the guard, then reads whatever a pipe holds, cuts it into messages within the caps
//! ([`super::frame`]), judges them and writes them on. A call through the guard costs two
//! wake-ups of this thread and no hand-over between threads (there were four, and they were
//! most of the guard's cost per call). The server's input is written without blocking: what
//! it does not take at once waits in a queue of a few messages, so that neither a server that
//! floods nor one that stops reading can grow the guard's memory or stall the client (a
//! request that cannot be queued is answered with an error, and one that is not answered in
//! time gets an error too). The server's stderr is passed on by a thread of its own.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::process::ChildStdin;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

use super::frame::{Caps, Frame, Framer};
use super::session::{Action, Audit, Session};
use crate::limits;
use crate::mcp_process::{self, Started};

/// Where the guard's decisions and warnings go (the command prints warnings; the audit log
/// is a file).
pub trait Report {
    fn audit(&mut self, record: &Audit);
    fn warn(&mut self, message: &str);
    /// The HTTP guard listens at `addr` (with `--listen ...:0`, the port it was given).
    fn listening(&mut self, addr: std::net::SocketAddr) {
        let _ = addr;
    }
}

/// What the server writes to its stderr is handed, as it comes, to this.
pub type ServerLog = Box<dyn FnMut(&[u8]) + Send>;

/// How a session ended.
#[derive(Debug)]
pub enum End {
    /// The client closed its end (the normal end); the server was stopped.
    ClientClosed,
    /// The server exited or closed its stdout first: `status` says how, `stderr` is the end of
    /// what it wrote there.
    ServerExited { status: String, stderr: String },
    /// The guard was asked to stop by a signal (its number and name, `SIGTERM`); the server
    /// was stopped.
    Stopped { signal: i32, name: &'static str },
}

/// Something readable that says the guard was asked to stop (a signal's self-pipe), and
/// which signal it was.
pub trait StopSignal: AsFd {
    /// The signal's number and name once one arrived (after the descriptor became readable).
    fn received(&self) -> Option<(i32, &'static str)>;
}

/// How many bytes one read takes from a pipe (a message larger than this arrives in pieces).
const READ_CHUNK: usize = 64 * 1024;

/// Runs one session between the client (`client` read, `client_out` written) and the started
/// server, until either side ends it or `stop` fires; the server is stopped before this returns.
#[allow(clippy::too_many_arguments)]
pub fn run(
    mut session: Session,
    server: Started,
    mut client: impl Read + AsFd,
    client_out: impl Write,
    caps: Caps,
    report: &mut dyn Report,
    mut server_log: ServerLog,
    stop: Option<&dyn StopSignal>,
) -> End {
    let Started { mut child, stdin, mut stdout, stderr } = server;
    let (tail_tx, tail_rx) = mpsc::channel();
    thread::spawn(move || {
        let tail = mcp_process::read_tail(stderr, limits::MAX_MCP_STDERR_BYTES, |b| server_log(b));
        let _ = tail_tx.send(tail);
    });
    let mut io = Io {
        to_server: ToServer::new(stdin),
        out: std::io::BufWriter::with_capacity(READ_CHUNK, client_out),
        client_ok: true,
    };
    let mut from_client = Framer::new(caps);
    let mut from_server = Framer::new(caps);
    let mut client_open = true;
    // Once the client is gone, the server gets a moment to finish and exit by itself.
    let mut closing: Option<Instant> = None;
    let mut buf = vec![0u8; READ_CHUNK];
    let end = loop {
        let now = Instant::now();
        if closing.is_some_and(|until| now >= until) {
            break Ended::Client;
        }
        if !client_open && closing.is_none() {
            io.to_server.close();
            closing = Some(now + mcp_process::GRACE);
        }
        let next = [session.next_deadline(), closing].into_iter().flatten().min();
        let ready = match wait(client_open.then_some(&client), &stdout, &io.to_server, stop, next) {
            Ok(ready) => ready,
            Err(_) => break Ended::Client,
        };
        if ready.stop
            && let Some((signal, name)) = stop.and_then(StopSignal::received)
        {
            break Ended::Stopped(signal, name);
        }
        if ready.server_in {
            for request in io.to_server.flush() {
                let actions = session.undeliverable(&request);
                io.apply(actions, &mut session, report);
            }
        }
        if ready.client {
            let mut frames = Vec::new();
            match read_some(&mut client, &mut buf) {
                Some(n) => from_client.feed(&buf[..n], |f| frames.push(f)),
                None => {
                    frames.extend(from_client.end());
                    frames.push(Frame::Eof);
                }
            }
            for frame in frames {
                let actions = match frame {
                    Frame::Line(line) => session.from_client(line, Instant::now()),
                    Frame::Refused { id, why } => session.refused_from_client(id, &why),
                    Frame::Eof => {
                        client_open = false;
                        Vec::new()
                    }
                };
                io.apply(actions, &mut session, report);
            }
        }
        if ready.server {
            let mut frames = Vec::new();
            let eof = match read_some(&mut stdout, &mut buf) {
                Some(n) => {
                    from_server.feed(&buf[..n], |f| frames.push(f));
                    false
                }
                None => {
                    frames.extend(from_server.end());
                    true
                }
            };
            for frame in frames {
                let actions = match frame {
                    Frame::Line(line) => session.from_server(line, Instant::now()),
                    Frame::Refused { id, why } => session.refused_from_server(id, &why),
                    Frame::Eof => Vec::new(),
                };
                io.apply(actions, &mut session, report);
            }
            if eof {
                if closing.is_some() {
                    break Ended::Client;
                }
                let actions = session.server_exited("exited or closed its output");
                io.apply(actions, &mut session, report);
                break Ended::Server;
            }
        }
        if next.is_some_and(|d| Instant::now() >= d) {
            let actions = session.tick(Instant::now());
            io.apply(actions, &mut session, report);
        }
        client_open &= io.client_ok;
    };
    drop(io);
    match end {
        Ended::Client => {
            // The client is done: the server's stdin is closed (with `io`), then the
            // lifecycle's shutdown.
            mcp_process::stop(&mut child);
            End::ClientClosed
        }
        Ended::Stopped(signal, name) => {
            mcp_process::stop_now(&mut child);
            End::Stopped { signal, name }
        }
        Ended::Server => {
            let status = mcp_process::exit_status(&mut child);
            mcp_process::stop(&mut child);
            let stderr = tail_rx.recv_timeout(Duration::from_millis(500)).unwrap_or_default();
            End::ServerExited { status, stderr: crate::mcp_client::redact_env(&stderr) }
        }
    }
}

/// Who ended the session.
enum Ended {
    Client,
    Server,
    Stopped(i32, &'static str),
}

/// Which of the descriptors the loop waits on are ready.
#[derive(Debug, Default)]
struct Ready {
    client: bool,
    server: bool,
    server_in: bool,
    stop: bool,
}

/// Waits until something is ready or `until` passes (then nothing is). A descriptor that is
/// not asked about is left out altogether: a closed pipe would otherwise wake every wait.
fn wait(
    client: Option<&impl AsFd>,
    server: &impl AsFd,
    to_server: &ToServer,
    stop: Option<&dyn StopSignal>,
    until: Option<Instant>,
) -> std::io::Result<Ready> {
    let server_in = to_server.waiting().then_some(to_server.pipe.as_ref()).flatten();
    let mut fds = Vec::with_capacity(4);
    fds.push(PollFd::new(server, PollFlags::IN));
    if let Some(client) = client {
        fds.push(PollFd::new(client, PollFlags::IN));
    }
    if let Some(pipe) = server_in {
        fds.push(PollFd::new(pipe, PollFlags::OUT));
    }
    if let Some(stop) = stop {
        fds.push(PollFd::from_borrowed_fd(stop.as_fd(), PollFlags::IN));
    }
    let timeout = until.map(|d| {
        let left = d.saturating_duration_since(Instant::now());
        // Rounded up to a millisecond, so that the deadline has passed when poll returns.
        Timespec::try_from(left + Duration::from_micros(999)).unwrap_or(Timespec { tv_sec: 3600, tv_nsec: 0 })
    });
    match rustix::event::poll(&mut fds, timeout.as_ref()) {
        Ok(_) => {}
        Err(rustix::io::Errno::INTR) => return Ok(Ready::default()),
        Err(e) => return Err(e.into()),
    }
    // Readable or writable, or closed or failed (the read or write that follows says which).
    let mut hits = fds.iter().map(|fd| !fd.revents().is_empty());
    let mut next = |asked: bool| asked && hits.next().unwrap_or(false);
    Ok(Ready {
        server: next(true),
        client: next(client.is_some()),
        server_in: next(server_in.is_some()),
        stop: next(stop.is_some()),
    })
}

/// One read of what `input` holds (it was reported ready, so this does not wait); `None` at
/// its end or on an error.
fn read_some(input: &mut impl Read, buf: &mut [u8]) -> Option<usize> {
    loop {
        match input.read(buf) {
            Ok(0) => return None,
            Ok(n) => return Some(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // Nothing there after all (a spurious wake-up): nothing read, not the end.
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Some(0),
            Err(_) => return None,
        }
    }
}

/// The guard's two outputs.
struct Io<W: Write> {
    to_server: ToServer,
    out: std::io::BufWriter<W>,
    /// Whether the client can still be written to.
    client_ok: bool,
}

impl<W: Write> Io<W> {
    /// Carries out `actions` (and those they lead to).
    fn apply(&mut self, actions: Vec<Action>, session: &mut Session, report: &mut dyn Report) {
        if actions.is_empty() {
            return;
        }
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::ToClient(line) => {
                    self.client_ok &=
                        self.out.write_all(line.as_bytes()).and_then(|()| self.out.write_all(b"\n")).is_ok();
                }
                Action::ToServer { line, request } => {
                    if !self.to_server.send(line, request.clone()) {
                        match request {
                            Some(id) => queue.extend(session.undeliverable(&id)),
                            None => report.warn("the server is not reading its input; a notification was dropped"),
                        }
                    }
                }
                Action::Audit(record) => report.audit(&record),
                Action::Warn(message) => report.warn(&message),
            }
        }
        self.client_ok &= self.out.flush().is_ok();
    }
}

/// The server's stdin, written without blocking: a message it does not take at once waits in
/// a queue of at most [`limits::MAX_MCP_QUEUED_MESSAGES`], written on when the pipe has room.
struct ToServer {
    /// `None` once closed (the client is gone) or broken (the server stopped reading for good).
    pipe: Option<ChildStdin>,
    /// Messages (line break included) not yet written whole: the first may be partly written
    /// (`written` bytes of it); each with the id of the request it carries, if one.
    queue: VecDeque<(Vec<u8>, Option<String>)>,
    written: usize,
    /// Close the pipe once the queue is written.
    close_when_done: bool,
}

impl ToServer {
    fn new(pipe: ChildStdin) -> Self {
        // Our end only (the server reads its own end as it likes); if this fails, writes block
        // as a plain pipe's do, which is slower to fail but not wrong.
        let _ = rustix::io::ioctl_fionbio(&pipe, true);
        ToServer { pipe: Some(pipe), queue: VecDeque::new(), written: 0, close_when_done: false }
    }

    /// Whether something waits for room in the pipe.
    fn waiting(&self) -> bool {
        self.pipe.is_some() && !self.queue.is_empty()
    }

    /// Writes `line` now or queues it; `false` when it can be neither (the server is not
    /// reading, the queue is full, or the pipe is closed).
    fn send(&mut self, line: String, request: Option<String>) -> bool {
        if self.pipe.is_none() || self.close_when_done || self.queue.len() >= limits::MAX_MCP_QUEUED_MESSAGES {
            return false;
        }
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        self.queue.push_back((bytes, request));
        if self.queue.len() == 1 {
            // Nothing was waiting: the broken pipe a write may find is reported for this message.
            self.flush();
            return self.pipe.is_some();
        }
        true
    }

    /// Writes what the pipe takes now; the requests that can no longer be delivered (the pipe
    /// broke) are returned, and the pipe is dropped.
    fn flush(&mut self) -> Vec<String> {
        while let Some(pipe) = self.pipe.as_mut() {
            let Some((bytes, _)) = self.queue.front() else {
                if self.close_when_done {
                    self.pipe = None;
                }
                break;
            };
            match pipe.write(&bytes[self.written..]) {
                Ok(n) => {
                    self.written += n;
                    if self.written == bytes.len() {
                        self.queue.pop_front();
                        self.written = 0;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.pipe = None;
                    self.written = 0;
                    let refused = self.queue.drain(..).filter_map(|(_, request)| request).collect();
                    return refused;
                }
            }
        }
        Vec::new()
    }

    /// Closes the pipe (the server's end of input) once what is queued is written.
    fn close(&mut self) {
        self.close_when_done = true;
        if self.queue.is_empty() {
            self.pipe = None;
        }
    }
}
