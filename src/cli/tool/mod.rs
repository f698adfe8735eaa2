//! `bundle tool add|list|remove`: edit the tools of an agent folder, one file per subcommand.

mod add;
mod list;
mod remove;

use super::{Format, Global, Outcome};

/// Manage the tools of an agent.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  bundle tool add agents/mailer          # asks for each field on a terminal
  bundle tool list agents/mailer
  bundle tool remove agents/mailer mail.draft_render")]
pub struct Args {
    #[command(subcommand)]
    command: ToolCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ToolCommand {
    Add(Box<add::AddArgs>),
    List(list::Args),
    Remove(remove::Args),
}

impl Args {
    pub(super) fn format(&self) -> Format {
        match &self.command {
            ToolCommand::Add(a) => a.format,
            ToolCommand::List(a) => a.format,
            ToolCommand::Remove(a) => a.format,
        }
    }
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    match args.command {
        ToolCommand::Add(a) => add::run(*a, global),
        ToolCommand::List(a) => list::run(a, global),
        ToolCommand::Remove(a) => remove::run(a, global),
    }
}
