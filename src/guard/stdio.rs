//! The stdio transport of `bundle guard`: the guard's own stdin and stdout are the client's
//! end, the server is a child process (started as import starts one, `crate::mcp_process`).
//! Each side is read by a thread of its own, message by message within the caps
//! ([`super::frame`]), into one bounded queue; the server's stdin is written by a thread with a
//! bounded queue too, so that neither a server that floods nor one that stops reading can
//! grow the guard's memory or stall the client: a request that cannot be queued is answered
//! with an error, and one that is not answered in time gets an error too.

use std::io::{BufReader, BufWriter, Read, Write};
use std::process::ChildStdin;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::thread;
use std::time::{Duration, Instant};

use super::frame::{self, Caps, Frame};
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
}

enum Event {
    Client(Frame),
    Server(Frame),
}

/// Runs one session between the client (`client` read, `client_out` written) and the started
/// server, until either side ends it; the server is stopped before this returns.
pub fn run(
    mut session: Session,
    server: Started,
    client: impl Read + Send + 'static,
    client_out: impl Write,
    caps: Caps,
    report: &mut dyn Report,
    mut server_log: ServerLog,
) -> End {
    let Started { mut child, stdin, stdout, stderr } = server;
    // Small queues: a peer that floods waits for the guard, it does not fill its memory.
    let (events, inbox) = mpsc::sync_channel::<Event>(2);
    spawn_reader(client, caps, events.clone(), Event::Client);
    spawn_reader(stdout, caps, events, Event::Server);
    let (to_server, queue) = mpsc::sync_channel::<String>(limits::MAX_MCP_QUEUED_MESSAGES);
    thread::spawn(move || write_lines(stdin, &queue));
    let (tail_tx, tail_rx) = mpsc::channel();
    thread::spawn(move || {
        let tail = mcp_process::read_tail(stderr, limits::MAX_MCP_STDERR_BYTES, |b| server_log(b));
        let _ = tail_tx.send(tail);
    });
    let mut out = BufWriter::new(client_out);
    let server_gone = pump(&mut session, &inbox, to_server, &mut out, report);
    match server_gone {
        None => {
            // The client is done: the server's stdin is closed (`to_server` dropped), then
            // the lifecycle's shutdown.
            mcp_process::stop(&mut child);
            End::ClientClosed
        }
        Some(()) => {
            let status = mcp_process::exit_status(&mut child);
            mcp_process::stop(&mut child);
            let stderr = tail_rx.recv_timeout(Duration::from_millis(500)).unwrap_or_default();
            End::ServerExited { status, stderr: crate::mcp_client::redact_env(&stderr) }
        }
    }
}

/// Moves messages until the client closes its end (`None`) or the server's stdout ends
/// (`Some`).
fn pump(
    session: &mut Session,
    inbox: &Receiver<Event>,
    to_server: SyncSender<String>,
    out: &mut impl Write,
    report: &mut dyn Report,
) -> Option<()> {
    let mut to_server = Some(to_server);
    let mut client_open = true;
    // Once the client is gone, the server gets a moment to finish and exit by itself.
    let mut closing: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if closing.is_some_and(|until| now >= until) {
            return None;
        }
        let next = [session.next_deadline(), closing].into_iter().flatten().min();
        let wait = next.map_or(Duration::from_secs(3600), |d| d.saturating_duration_since(now));
        let event = match inbox.recv_timeout(wait) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => {
                let actions = session.tick(Instant::now());
                client_open &= apply(actions, session, &to_server, out, report);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return None,
        };
        let now = Instant::now();
        let actions = match event {
            Event::Client(Frame::Line(line)) => session.from_client(line, now),
            Event::Client(Frame::Refused { id, why }) => session.refused_from_client(id, &why),
            Event::Client(Frame::Eof) => {
                client_open = false;
                Vec::new()
            }
            Event::Server(Frame::Line(line)) => session.from_server(line, now),
            Event::Server(Frame::Refused { id, why }) => session.refused_from_server(id, &why),
            Event::Server(Frame::Eof) => {
                if closing.is_some() {
                    return None;
                }
                let actions = session.server_exited("exited or closed its output");
                apply(actions, session, &to_server, out, report);
                return Some(());
            }
        };
        client_open &= apply(actions, session, &to_server, out, report);
        if !client_open && closing.is_none() {
            to_server = None;
            closing = Some(Instant::now() + mcp_process::GRACE);
        }
    }
}

/// Carries out `actions`; whether the client can still be written to.
fn apply(
    actions: Vec<Action>,
    session: &mut Session,
    to_server: &Option<SyncSender<String>>,
    out: &mut impl Write,
    report: &mut dyn Report,
) -> bool {
    let mut client_ok = true;
    let mut queue: std::collections::VecDeque<Action> = actions.into();
    while let Some(action) = queue.pop_front() {
        match action {
            Action::ToClient(line) => {
                client_ok &= out.write_all(line.as_bytes()).and_then(|()| out.write_all(b"\n")).is_ok();
            }
            Action::ToServer { line, request } => {
                let sent = match to_server {
                    Some(tx) => match tx.try_send(line) {
                        Ok(()) => true,
                        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
                    },
                    None => false,
                };
                if !sent {
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
    client_ok && out.flush().is_ok()
}

fn spawn_reader(input: impl Read + Send + 'static, caps: Caps, tx: SyncSender<Event>, wrap: fn(Frame) -> Event) {
    thread::spawn(move || {
        let mut reader = BufReader::with_capacity(64 * 1024, input);
        loop {
            let frame = frame::read(&mut reader, caps);
            let eof = matches!(frame, Frame::Eof);
            if tx.send(wrap(frame)).is_err() || eof {
                return;
            }
        }
    });
}

/// Writes each line to the server's stdin until the sender is dropped (then stdin is closed)
/// or the server stops reading for good (a broken pipe).
fn write_lines(mut pipe: ChildStdin, rx: &Receiver<String>) {
    for line in rx {
        let written = pipe.write_all(line.as_bytes()).and_then(|()| pipe.write_all(b"\n")).and_then(|()| pipe.flush());
        if written.is_err() {
            return;
        }
    }
}
