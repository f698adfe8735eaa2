//! `bundle completions <SHELL>`: a shell completion script, generated from the clap
//! definitions (clap_complete) so it can never disagree with the real flags.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, Outcome};

/// Print a completion script for SHELL on stdout.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  bundle completions bash > ~/.local/share/bash-completion/completions/bundle
  bundle completions zsh > ~/.zfunc/_bundle   # fpath+=(~/.zfunc) in ~/.zshrc
  bundle completions fish > ~/.config/fish/completions/bundle.fish
  bundle completions powershell >> $PROFILE")]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "bundle", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(Outcome::Ok)
}
