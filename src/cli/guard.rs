//! `bundle guard BUNDLE --server NAME -- COMMAND...`: the gate, then an MCP session held to
//! the tool definitions the bundle signed for that server.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use agent_bundle::diagnostic::sanitize;
use agent_bundle::guard::session::Audit;
use agent_bundle::guard::stdio::{End, Report};
use agent_bundle::guard::{Decision, OnDrift, Policy};
use agent_bundle::mcp_client::{EnvVar, Server};
use agent_bundle::ops::guard::{GuardOptions, Guarded, Transport};

use super::args::{GateArgs, TrustArgs};
use super::{Format, Global, Outcome, output};

/// Run an MCP server under the signed contracts of a bundle: verify the bundle (the same gate
/// as `bundle verify`), then proxy the MCP session on stdin/stdout so that the client sees
/// only the tools the bundle pinned for --server, exactly as signed, and can call only those,
/// with arguments their signed input schemas allow.
///
/// A tool the server serves differently (description, schema, annotations, any field), a tool
/// it adds or renames, and two tools of one name are removed from tools/list answers; calls to
/// tools not passed get a JSON-RPC error and never reach the server. After
/// notifications/tools/list_changed the guard lists and judges the new tools before the client
/// hears of the change. Everything else passes through unchanged.
///
/// Streamable HTTP: with --upstream URL --listen ADDR:PORT instead of a command, the guard
/// serves the MCP endpoint at http://ADDR:PORT/mcp and forwards to URL under the same rules
/// (--upstream-plain-http, --upstream-ca-cert).
///
/// Exit status: 0 the client ended the session, 1 the bundle was rejected (the server is never
/// started), 2 usage or I/O error, or the server exited during the session.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle guard mailer-1.4.0.agent.bundle --key release.pub --server time \\\n      -- uvx mcp-server-time\n  bundle guard mailer.agent.bundle --key release.pub --server files \\\n      --audit guard.jsonl --check-results -- npx server-files /srv\n\nIn an MCP host's configuration, the server's command becomes `bundle guard ... --`\nfollowed by the original command."
)]
pub struct Args {
    /// The bundle file (or registry artifact, oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX)).
    #[arg(value_name = "BUNDLE")]
    bundle: PathBuf,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    gate: GateArgs,
    #[command(flatten)]
    registry: super::registry::RegistryArgs,
    #[command(flatten)]
    keyless: Box<super::keyless::KeylessArgs>,
    /// The server whose pinned tools (pins/NAME.mcp.json in the bundle) hold the session.
    #[arg(long, value_name = "NAME", required = true)]
    server: String,
    /// What to do with a tool served differently from its signed definition: block (remove
    /// it), or warn-read-only (pass it with a warning when it is read-only as signed and as
    /// served; block it otherwise).
    #[arg(long, value_enum, default_value_t = DriftArg::Block)]
    on_drift: DriftArg,
    /// Also hold each result's structuredContent to the tool's signed outputSchema; a result
    /// that does not match is replaced by an error result.
    #[arg(long)]
    check_results: bool,
    /// Answer a request with an error when the server has not answered it after SECS.
    #[arg(long, value_name = "SECS", default_value_t = agent_bundle::limits::MCP_GUARD_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86400))]
    request_timeout: u64,
    /// Append one JSON line per decision to FILE (time, server, tool, fingerprints served and
    /// signed, decision, reason code); never argument values, results or environment values.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Pass this variable of the environment to the server (NAME), or set it (NAME=VALUE);
    /// repeatable. The server otherwise gets only HOME, LOGNAME, PATH, SHELL, TERM and USER.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<EnvVar>,
    /// Streamable HTTP: the server's MCP endpoint (https://HOST/mcp; http:// needs
    /// --upstream-plain-http, --upstream-ca-cert adds roots), instead of a command.
    #[arg(long, value_name = "URL", requires = "listen", conflicts_with = "command")]
    upstream: Option<String>,
    /// Streamable HTTP: reach an http:// upstream, without TLS (a server on loopback or a
    /// trusted network only). Never chosen automatically.
    #[arg(long, requires = "upstream")]
    upstream_plain_http: bool,
    /// Streamable HTTP: also trust the root certificates in this PEM file for the upstream (a
    /// private CA); repeatable.
    #[arg(long = "upstream-ca-cert", value_name = "PEM", requires = "upstream")]
    upstream_ca_certs: Vec<PathBuf>,
    /// Streamable HTTP: where the client connects (ADDR:PORT, e.g. 127.0.0.1:8931; port 0
    /// picks a free one, printed on stderr). The endpoint is /mcp.
    #[arg(long, value_name = "ADDR:PORT", requires = "upstream")]
    listen: Option<std::net::SocketAddr>,
    /// The MCP server's command and its arguments (stdio transport).
    #[arg(value_name = "COMMAND", last = true, required_unless_present = "upstream")]
    command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DriftArg {
    Block,
    WarnReadOnly,
}

/// Warnings on stderr (the guard's stdout is the client's channel).
struct Stderr {
    global: Global,
    /// At most `MAX_GUARD_STDERR_LINES_PER_SEC` lines in each second; the rest are counted.
    second: Option<std::time::Instant>,
    printed: u32,
    suppressed: u64,
}

impl Stderr {
    fn new(global: Global) -> Self {
        Stderr { global, second: None, printed: 0, suppressed: 0 }
    }

    /// Prints `line` unless this second's lines are used up; the first line printed after some
    /// were held back says how many.
    fn line(&mut self, line: &str) {
        if self.global.quiet {
            return;
        }
        let now = std::time::Instant::now();
        if self.second.is_none_or(|s| now.duration_since(s) >= std::time::Duration::from_secs(1)) {
            self.second = Some(now);
            self.printed = 0;
        }
        if self.printed >= agent_bundle::limits::MAX_GUARD_STDERR_LINES_PER_SEC {
            self.suppressed += 1;
            return;
        }
        self.printed += 1;
        self.say_suppressed();
        let _ = writeln!(std::io::stderr(), "{line}");
    }

    /// How many lines were held back since the last one printed, if any.
    fn say_suppressed(&mut self) {
        if self.suppressed > 0 {
            let _ = writeln!(
                std::io::stderr(),
                "bundle guard: {} more warnings and blocks were not shown (at most {} a second; the audit log has every decision)",
                self.suppressed,
                agent_bundle::limits::MAX_GUARD_STDERR_LINES_PER_SEC
            );
            self.suppressed = 0;
        }
    }
}

impl Drop for Stderr {
    fn drop(&mut self) {
        if !self.global.quiet {
            self.say_suppressed();
        }
    }
}

impl Report for Stderr {
    fn audit(&mut self, record: &Audit) {
        if record.decision == Decision::Block {
            let tool = record.tool.as_deref().map(|t| format!(" `{}`", sanitize(t))).unwrap_or_default();
            self.line(&format!("bundle guard: blocked{tool} [{}]", record.reason.as_str()));
        }
    }
    fn warn(&mut self, message: &str) {
        self.line(&format!("bundle guard: warning: {message}"));
    }
    fn listening(&mut self, addr: std::net::SocketAddr) {
        // Always said: a host started with port 0 needs it.
        let _ = writeln!(std::io::stderr(), "bundle guard: listening on http://{addr}/mcp");
    }
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let gate = super::gate_args::open(&args.trust, args.gate, &args.keyless, global)?;
    let source = args.registry.source(&args.bundle)?;
    let transport = match (&args.upstream, args.listen, args.command.split_first()) {
        (Some(upstream), Some(listen), _) => Transport::Http {
            upstream: upstream.clone(),
            listen,
            plain_http: args.upstream_plain_http,
            ca_certs: args.upstream_ca_certs.clone(),
        },
        (_, _, Some((program, rest))) => {
            Transport::Stdio(Server { program: program.clone(), args: rest.to_vec(), env: args.env })
        }
        _ => anyhow::bail!("give the server's command after `--`, or --upstream URL --listen ADDR:PORT"),
    };
    let guard = GuardOptions {
        server_name: args.server.clone(),
        transport,
        policy: Policy {
            on_drift: match args.on_drift {
                DriftArg::Block => OnDrift::Block,
                DriftArg::WarnReadOnly => OnDrift::WarnReadOnly,
            },
            check_results: args.check_results,
        },
        timeout: Duration::from_secs(args.request_timeout),
        audit: args.audit,
    };
    let bar = super::progress::Bar::new(global);
    // The server's log, passed on as it comes, each line marked as the server's.
    let server_log = Box::new(move |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        let mut err = std::io::stderr().lock();
        for line in text.split_inclusive('\n') {
            let _ = err.write_all(sanitize(line.trim_end_matches('\n')).as_bytes());
            if line.ends_with('\n') {
                let _ = err.write_all(b"\n");
            }
        }
    });
    let guarded =
        agent_bundle::ops::guard::guard(&source, gate, &guard, &bar, Box::new(Stderr::new(global)), server_log)?;
    match guarded {
        Guarded::Refused(verdict) => super::verify::render(&args.bundle, &verdict, Format::Human, global),
        Guarded::Ended { end: End::ClientClosed, .. } => Ok(Outcome::Ok),
        Guarded::Ended { end: End::Stopped { signal, name }, .. } => {
            output::print_error_line(
                global,
                &format!(
                    "note: the guard was stopped by {name}; the MCP server `{}` was stopped first",
                    sanitize(&args.server)
                ),
            );
            // Ends as the signal would have ended it (a shell that sent SIGINT sees so).
            let _ = std::io::stderr().flush();
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            Ok(Outcome::Failed)
        }
        Guarded::Ended { end: End::ServerExited { status, stderr }, .. } => {
            let mut message = format!(
                "error[mcp_server_failed]: the MCP server `{}` of `{}` ended the session ({status})",
                sanitize(&args.server),
                sanitize(&args.command.join(" "))
            );
            let tail = stderr.trim_end();
            if !tail.is_empty() {
                message.push_str("\n  the end of its stderr:");
                for line in tail.lines().rev().take(10).collect::<Vec<_>>().into_iter().rev() {
                    message.push_str(&format!("\n    {}", sanitize(line)));
                }
            }
            output::print_error_line(global, &message);
            Ok(Outcome::Failed)
        }
    }
}
