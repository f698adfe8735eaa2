//! Command-line definitions (clap) and dispatch; one file per subcommand renders that
//! command's result. Only this layer prints.

mod check;
mod init;
mod inspect;
mod keygen;
mod keys;
mod lock;
pub mod output;
mod pack;
mod unpack;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use agent_bundle::timestamp::Timestamp;

/// Turn an AI agent's source folder into a signed, verifiable, reproducible release bundle.
#[derive(Debug, Parser)]
#[command(name = "bundle", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,

    /// When to use colors: auto (a terminal and NO_COLOR unset), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto)]
    color: ColorWhen,

    /// Print nothing but errors.
    #[arg(short, long, global = true)]
    quiet: bool,

    /// Judge `[bundle] expires` against this RFC 3339 instant instead of the system clock.
    /// For tests and for re-checking a past decision; hidden because a gate must use the clock.
    #[arg(long, global = true, hide = true, value_name = "RFC3339", value_parser = Timestamp::parse)]
    now: Option<Timestamp>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

/// How a judging command prints its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// rustc-style diagnostics on stderr.
    #[default]
    Human,
    /// One JSON document on stdout.
    Json,
    /// GitHub Actions workflow annotations on stdout.
    Github,
}

#[derive(Debug, Subcommand)]
enum Command {
    Init(init::Args),
    Check(check::Args),
    Lock(lock::Args),
    Keygen(keygen::Args),
    Pack(pack::Args),
    Verify(verify::Args),
    Inspect(inspect::Args),
    Unpack(unpack::Args),
}

/// Global settings every command's renderer needs.
#[derive(Debug, Clone, Copy)]
pub struct Global {
    pub color: ColorWhen,
    pub quiet: bool,
    /// `--now`, the injected clock.
    pub now: Option<Timestamp>,
}

impl Global {
    /// The time expiry is judged against: `--now`, else the system clock.
    pub fn now(&self) -> Timestamp {
        self.now.unwrap_or_else(Timestamp::now)
    }
}

/// What a command concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Rejected,
    /// The run itself failed (I/O), though it produced a report.
    Failed,
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let global = Global { color: cli.color, quiet: cli.quiet, now: cli.now };
    let result = match cli.command {
        Command::Init(args) => init::run(args, global),
        Command::Check(args) => check::run(args, global),
        Command::Lock(args) => lock::run(args, global),
        Command::Keygen(args) => keygen::run(args, global),
        Command::Pack(args) => pack::run(args, global),
        Command::Verify(args) => verify::run(args, global),
        Command::Inspect(args) => inspect::run(args, global),
        Command::Unpack(args) => unpack::run(args, global),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Rejected) => ExitCode::from(1),
        Ok(Outcome::Failed) => ExitCode::from(2),
        Err(e) => {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            output::print_error(global, &e);
            ExitCode::from(2)
        }
    }
}
