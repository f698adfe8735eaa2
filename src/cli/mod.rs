//! Command-line definitions (clap) and dispatch; one file per subcommand renders that
//! command's result. Only this layer prints.

mod agentcard;
mod args;
mod attest;
mod baseline;
mod cat;
mod check;
mod completions;
mod cosign;
mod diff;
mod export;
mod gate_args;
mod guard;
mod import;
mod import_skills;
mod init;
mod inspect;
mod inspect_mcpb;
mod json;
mod keygen;
mod keyless;
mod keys;
mod lock;
mod man;
pub mod output;
mod pack;
mod progress;
mod pubkey;
mod pull;
mod push;
mod registry;
mod schema;
mod tool;
mod trust;
mod unpack;
mod verify;
mod vsa;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Examples:
  bundle init agents/mailer        # scaffold an agent that passes check
  bundle tool add agents/mailer    # add a tool (asks on a terminal)
  bundle check                     # the pre-commit hook
  bundle pack agents/mailer --key release.key --locked   # the release step
  bundle verify mailer-1.4.0.agent.bundle --key release.pub   # the gate
  bundle completions bash > ~/.local/share/bash-completion/completions/bundle

Exit status: 0 success, 1 checked and rejected, 2 usage or I/O error.";

use agent_bundle::timestamp::Timestamp;

/// Turn an AI agent's source folder into a signed, verifiable, reproducible release bundle.
#[derive(Debug, Parser)]
#[command(name = "bundle", version, about, long_about = None, propagate_version = true, after_help = AFTER_HELP)]
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
    Attest(attest::Args),
    Agentcard(agentcard::Args),
    Pubkey(pubkey::Args),
    Verify(verify::Args),
    Guard(guard::Args),
    Inspect(inspect::Args),
    Diff(diff::Args),
    Baseline(baseline::Args),
    Unpack(unpack::Args),
    Cat(cat::Args),
    Push(push::Args),
    Pull(pull::Args),
    Import(import::Args),
    Export(export::Args),
    Tool(tool::Args),
    Schema(schema::Args),
    Completions(completions::Args),
    Man(man::Args),
    Cosign(cosign::Args),
    Trust(trust::Args),
}

impl Command {
    /// The output format the command was asked for (human for commands without `--format`).
    fn format(&self) -> Format {
        match self {
            Command::Check(a) => a.targets.format,
            Command::Lock(a) => a.targets.format,
            Command::Pack(a) => a.format,
            Command::Attest(a) => a.format,
            Command::Agentcard(a) => a.format,
            Command::Verify(a) => a.format,
            Command::Inspect(a) => a.format,
            Command::Unpack(a) => a.format,
            Command::Cat(a) => a.format,
            Command::Push(a) => a.format,
            Command::Pull(a) => a.format,
            Command::Import(a) => a.format,
            Command::Export(a) => a.format,
            Command::Tool(a) => a.format(),
            Command::Diff(a) => a.format,
            Command::Baseline(a) => a.format(),
            Command::Cosign(a) => a.format,
            Command::Trust(a) => a.format(),
            Command::Guard(_)
            | Command::Init(_)
            | Command::Keygen(_)
            | Command::Pubkey(_)
            | Command::Schema(_)
            | Command::Completions(_)
            | Command::Man(_) => Format::Human,
        }
    }
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

/// The instant a `--expires WHEN` flag names (an RFC 3339 date-time: one meaning for the flag
/// in every command); a span given to it gets the flag that takes one.
pub fn expires_flag(text: &str) -> anyhow::Result<Timestamp> {
    Timestamp::parse(text).map_err(|e| match agent_bundle::timestamp::parse_span(text) {
        Ok(_) => anyhow::anyhow!(
            "--expires takes a date-time such as 2027-01-01T00:00:00Z, not a span: for {text} from now, use \
             --expires-in {text}"
        ),
        Err(_) => anyhow::anyhow!("--expires: {e}"),
    })
}

/// What a command concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Rejected,
    /// The run itself failed (I/O), though it produced a report.
    Failed,
}

impl Outcome {
    /// The outcome of two runs together: a failure outweighs a rejection, which outweighs
    /// success.
    pub fn worst(self, other: Outcome) -> Outcome {
        match (self, other) {
            (Outcome::Failed, _) | (_, Outcome::Failed) => Outcome::Failed,
            (Outcome::Rejected, _) | (_, Outcome::Rejected) => Outcome::Rejected,
            _ => Outcome::Ok,
        }
    }
}

/// The `--color` the command line asks for, read before clap parses it so that clap's own
/// help and usage errors follow it too (clap itself already honours `NO_COLOR`).
fn color_from_args(args: &[std::ffi::OsString]) -> Option<clap::ColorChoice> {
    let mut rest = args.iter().skip(1).map(|a| a.to_str());
    let mut choice = None;
    while let Some(arg) = rest.next() {
        let value = match arg {
            Some("--") => break,
            Some("--color") => rest.next().flatten(),
            Some(a) => a.strip_prefix("--color="),
            None => None,
        };
        choice = match value {
            Some("always") => Some(clap::ColorChoice::Always),
            Some("never") => Some(clap::ColorChoice::Never),
            Some("auto") => Some(clap::ColorChoice::Auto),
            _ => choice,
        };
    }
    choice
}

/// The `--format` the command line asks for, read before clap parses it so that a usage error
/// is reported in that format too (`… --format json | jq -r .code` always has a document).
fn format_from_args(args: &[std::ffi::OsString]) -> Format {
    let mut rest = args.iter().skip(1).map(|a| a.to_str());
    let mut format = Format::Human;
    while let Some(arg) = rest.next() {
        let value = match arg {
            Some("--") => break,
            Some("--format") => rest.next().flatten(),
            Some(a) => a.strip_prefix("--format="),
            None => None,
        };
        format = match value {
            Some("json") => Format::Json,
            Some("github") => Format::Github,
            Some("human") => Format::Human,
            _ => format,
        };
    }
    format
}

/// clap suggests a flag by Jaro similarity, which misses a transposition in a short name
/// (`--kye`); the edit distance the rest of the tool uses for typos catches it.
fn suggest_flag(mut e: clap::Error, command: &clap::Command, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument || e.get(ContextKind::SuggestedArg).is_some() {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return e };
    let Some(flag) = arg.strip_prefix("--").map(str::to_owned) else { return e };
    // The (sub)command the arguments name.
    let mut cmd = command;
    for word in args.iter().skip(1).filter_map(|a| a.to_str()) {
        if let Some(sub) = cmd.find_subcommand(word) {
            cmd = sub;
        }
    }
    let longs: Vec<&str> = cmd.get_arguments().filter_map(clap::Arg::get_long).collect();
    if let Some(best) = agent_bundle::diagnostic::did_you_mean(&flag, &longs) {
        e.insert(ContextKind::SuggestedArg, ContextValue::String(format!("--{best}")));
        // Instead of "to pass it as a value, use -- --kye".
        e.insert(ContextKind::Suggested, ContextValue::StyledStrs(Vec::new()));
    }
    e
}

pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut command = Cli::command();
    if let Some(choice) = color_from_args(&args) {
        command = command.color(choice);
    }
    let cli = match command.try_get_matches_from_mut(&args).and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            let e = suggest_flag(e.format(&mut command), &command, &args);
            let _ = e.print();
            if !e.use_stderr() {
                return ExitCode::SUCCESS;
            }
            let rendered = e.render().to_string();
            // The first paragraph, without clap's `error: ` and usage lines.
            let paragraph = rendered.split("\n\n").next().unwrap_or_default();
            let message = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
            let message = message.trim_start_matches("error: ");
            match format_from_args(&args) {
                Format::Json => {
                    let _ = output::print_json(&output::error_json("usage", message, &[]));
                }
                Format::Github => {
                    let _ = output::print_line(&output::github_annotation("error", None, "bundle", message));
                }
                Format::Human => {}
            }
            return ExitCode::from(2);
        }
    };
    let global = Global { color: cli.color, quiet: cli.quiet, now: cli.now };
    let format = cli.command.format();
    let result = match cli.command {
        Command::Init(args) => init::run(args, global),
        Command::Check(args) => check::run(args, global),
        Command::Lock(args) => lock::run(args, global),
        Command::Keygen(args) => keygen::run(args, global),
        Command::Pack(args) => pack::run(args, global),
        Command::Attest(args) => attest::run(args, global),
        Command::Agentcard(args) => agentcard::run(args, global),
        Command::Pubkey(args) => pubkey::run(args, global),
        Command::Verify(args) => verify::run(args, global),
        Command::Guard(args) => guard::run(args, global),
        Command::Inspect(args) => inspect::run(args, global),
        Command::Diff(args) => diff::run(args, global),
        Command::Baseline(args) => baseline::run(args, global),
        Command::Unpack(args) => unpack::run(args, global),
        Command::Cat(args) => cat::run(args, global),
        Command::Push(args) => push::run(args, global),
        Command::Pull(args) => pull::run(args, global),
        Command::Import(args) => import::run(args, global),
        Command::Export(args) => export::run(args, global),
        Command::Tool(args) => tool::run(args, global),
        Command::Schema(args) => schema::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
        Command::Cosign(args) => cosign::run(args, global),
        Command::Trust(args) => trust::run(args, global),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Rejected) => ExitCode::from(1),
        Ok(Outcome::Failed) => ExitCode::from(2),
        Err(e) => {
            // A closed stdout (`bundle ... | head`) is not an error, however deep in the chain
            // the write failure sits (ripgrep walks `err.chain()` the same way).
            if e.chain().any(|cause| {
                cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            output::print_error(global, &e);
            match format {
                Format::Json => output::json_error(&e),
                Format::Github => output::github_error(&e),
                Format::Human => {}
            }
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command with its subcommands, depth first.
    fn all_commands(cmd: &clap::Command) -> Vec<clap::Command> {
        let mut out = vec![cmd.clone()];
        for sub in cmd.get_subcommands() {
            out.extend(all_commands(sub));
        }
        out
    }

    #[test]
    fn help_examples_do_not_wrap_at_80_columns() {
        let mut root = Cli::command().term_width(80);
        root.build();
        let mut wrapped = Vec::new();
        for mut cmd in all_commands(&root) {
            let Some(after) = cmd.get_after_help().map(|h| h.to_string()) else { continue };
            let rendered = cmd.render_long_help().to_string();
            let lines: Vec<&str> = rendered.lines().map(str::trim_end).collect();
            for example in after.lines().filter(|l| l.starts_with("  ")) {
                if !lines.contains(&example.trim_end()) {
                    wrapped.push(format!("{}: {example}", cmd.get_name()));
                }
            }
        }
        assert!(wrapped.is_empty(), "help lines wrapped at 80 columns:\n{}", wrapped.join("\n"));
    }
}
