//! `bundle man`: the manual page in roff, generated from the clap definitions (clap_mangen), so
//! that packagers ship the same text `--help` shows.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::CommandFactory;

use super::{Cli, Outcome};

/// Print the bundle(1) manual page (roff) on stdout, or write one page per subcommand.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  bundle man | man -l -                           # read it now
  bundle man > ~/.local/share/man/man1/bundle.1   # then: man bundle
  bundle man --dir /usr/local/share/man/man1      # a page per command")]
pub struct Args {
    /// Write bundle.1 and a bundle-<command>.1 page for every subcommand into DIR instead.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let command = Cli::command();
    match args.dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, &dir)
                .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            let mut out = std::io::stdout().lock();
            out.write_all(&page)?;
            out.flush()?;
        }
    }
    Ok(Outcome::Ok)
}
