//! Starting and stopping an MCP server over stdio, shared by the one-shot listing of
//! [`crate::mcp_client`] (import, `check --refresh`) and the long-lived proxy of
//! [`crate::guard`]: the same cleared environment plus allowlist and `--env`, the server in a
//! process group of its own, and the shutdown sequence of the MCP lifecycle (close its stdin,
//! wait, SIGTERM, wait, SIGKILL), after which nothing the server started is left running.

use std::io::{BufReader, Read};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The variables of our environment a server gets unasked (what the Python MCP SDK passes):
/// everything else, credentials and signing keys included, only when `--env` names it.
pub const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The server to start: a program, its arguments, and what of the environment it gets.
#[derive(Debug, Clone)]
pub struct Server {
    pub program: String,
    pub args: Vec<String>,
    /// `--env NAME` (passed from our environment, if set) and `--env NAME=VALUE`, on top of
    /// [`INHERITED_ENV`]; nothing else of our environment reaches the server.
    pub env: Vec<EnvVar>,
}

/// One `--env` of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvVar {
    /// Passed from our environment when set there.
    Inherit(String),
    /// Set to this value.
    Set(String, String),
}

impl std::str::FromStr for EnvVar {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, value) = match s.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (s, None),
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("`{name}` is not an environment variable name (letters, digits, _)"));
        }
        Ok(match value {
            Some(v) => EnvVar::Set(name.to_owned(), v.to_owned()),
            None => EnvVar::Inherit(name.to_owned()),
        })
    }
}

impl Server {
    /// The command line, for messages.
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_str()).chain(self.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
    }
}

/// How long a server gets to exit after its stdin is closed, and again after SIGTERM.
pub const GRACE: Duration = Duration::from_millis(1000);

/// A started server with its three pipes taken out for the caller's threads.
pub struct Started {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Starts `server` with a cleared environment plus [`INHERITED_ENV`] and what `--env` names,
/// in its own process group, all three standard streams piped.
pub fn spawn(server: &Server) -> std::io::Result<Started> {
    let mut cmd = Command::new(&server.program);
    cmd.args(&server.args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.env_clear();
    for name in INHERITED_ENV {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    for var in &server.env {
        match var {
            EnvVar::Inherit(name) => {
                if let Some(v) = std::env::var_os(name) {
                    cmd.env(name, v);
                }
            }
            EnvVar::Set(name, value) => {
                cmd.env(name, value);
            }
        }
    }
    #[cfg(unix)]
    {
        // Its own process group: the server and everything it starts are stopped together.
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn()?;
    let missing = || std::io::Error::other("a pipe of the server was not created");
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr = child.stderr.take().ok_or_else(missing)?;
    Ok(Started { child, stdin, stdout, stderr })
}

/// Stops the server whose stdin the caller has already closed, as the lifecycle says (wait;
/// SIGTERM; wait; SIGKILL), and then its whole process group.
pub fn stop(child: &mut Child) {
    stop_after(child, GRACE);
}

/// Stops the server at once when the guard itself is asked to stop (its stdin is already
/// closed): SIGTERM without the first wait, SIGKILL after [`GRACE`], then its whole group.
pub fn stop_now(child: &mut Child) {
    stop_after(child, Duration::ZERO);
}

/// The shutdown after the server's stdin was closed: `first` to exit by itself, SIGTERM,
/// [`GRACE`], SIGKILL, then its whole group.
fn stop_after(child: &mut Child, first: Duration) {
    if !wait_for(child, first) {
        signal_group(child, Signal::Term);
        if !wait_for(child, GRACE) {
            signal_group(child, Signal::Kill);
            let _ = child.wait();
        }
    }
    stop_group(child);
}

/// Whatever the server started and left running goes too; SIGKILL is delivered
/// asynchronously, so the group gets a moment to be gone (a killed child of an exited parent
/// may stay a zombie until init reaps it, which is why this is bounded).
fn stop_group(child: &mut Child) {
    if signal_group(child, Signal::Kill) {
        let until = Instant::now() + Duration::from_millis(250);
        while group_alive(child) && Instant::now() < until {
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// How the server ended, waiting a moment for it (stdout closes just before the exit).
pub fn exit_status(child: &mut Child) -> String {
    let until = Instant::now() + Duration::from_millis(500);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return describe(status),
            Ok(None) if Instant::now() < until => thread::sleep(Duration::from_millis(10)),
            _ => return "it closed stdout and is still running".to_owned(),
        }
    }
}

pub fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("killed by signal {sig}");
        }
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}

/// Reads stderr to its end, keeping the last `keep` bytes; each chunk read is also handed to
/// `each` (the guard passes a server's log on as it comes).
pub fn read_tail(err: impl Read, keep: usize, mut each: impl FnMut(&[u8])) -> String {
    let mut kept: Vec<u8> = Vec::new();
    let mut reader = BufReader::new(err);
    let mut buf = [0u8; 8192];
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        each(&buf[..n]);
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * keep {
            kept.drain(..kept.len() - keep);
        }
    }
    if kept.len() > keep {
        kept.drain(..kept.len() - keep);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Whether the child exited within `grace` (it is reaped then).
fn wait_for(child: &mut Child, grace: Duration) -> bool {
    let until = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) if Instant::now() < until => thread::sleep(Duration::from_millis(10)),
            Ok(None) => return false,
            Err(_) => return true,
        }
    }
}

enum Signal {
    Term,
    Kill,
}

/// Signals the child's process group (its own, see [`spawn`]); elsewhere, kills the child.
/// Whether any process received it.
fn signal_group(child: &mut Child, signal: Signal) -> bool {
    #[cfg(unix)]
    {
        use rustix::process::{Pid, Signal as Sig, kill_process_group};
        let sig = match signal {
            Signal::Term => Sig::TERM,
            Signal::Kill => Sig::KILL,
        };
        // A group that is already empty is ESRCH: nothing left to stop.
        kill_process_group(Pid::from_child(child), sig).is_ok()
    }
    #[cfg(not(unix))]
    {
        let _ = signal;
        child.kill().is_ok()
    }
}

/// Whether the child's process group still has members (zombies included).
fn group_alive(child: &Child) -> bool {
    #[cfg(unix)]
    {
        use rustix::process::{Pid, test_kill_process_group};
        test_kill_process_group(Pid::from_child(child)).is_ok()
    }
    #[cfg(not(unix))]
    {
        let _ = child;
        false
    }
}
