//! `bundle tool list <AGENT_DIR>`: the tools an agent declares.

use std::io::Write;
use std::path::PathBuf;

use agent_bundle::diagnostic::sanitize;
use agent_bundle::ops::tool_list;

use crate::cli::json::{Clean, ToolListReport};
use crate::cli::{Format, Global, Outcome, check, output};

/// An exec argument as a shell would need it written (so that `--tool {tool}` and an empty
/// argument read as what they are).
fn quoted(arg: &str) -> String {
    let plain = !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,{}".contains(&b));
    if plain { arg.to_owned() } else { format!("'{}'", arg.replace('\'', "'\\''")) }
}

/// List the tools in AGENT_DIR/tools.json: id, transport (with an exec tool's arguments),
/// capabilities, secrets.
///
/// A file with problems is listed as far as it is JSON (`bundle check` says what is wrong).
/// Exit status: 0 listed, 1 tools.json is not JSON, 2 usage or I/O error.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  bundle tool list agents/mailer
  bundle tool list agents/mailer --format json | jq -r '.tools[].id'")]
pub struct Args {
    /// The agent folder (it holds tools.json).
    agent_dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(in crate::cli) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let listed = tool_list::list(&args.agent_dir)?;
    if listed.report.has_errors() {
        check::render_report(&listed.report, args.format, global, "tool list")?;
        return Ok(check::outcome(&listed.report));
    }
    let file = listed.tools_path.display().to_string();
    match args.format {
        Format::Json => {
            output::print_json(&Clean(ToolListReport { ok: true, tools_file: file.clone(), tools: &listed.tools }))?
        }
        Format::Github => {
            let n = listed.tools.len();
            output::notice(Some(&file), "tools", &format!("{n} tool{}", if n == 1 { "" } else { "s" }))?
        }
        Format::Human => {
            let rows: Vec<[String; 5]> = listed
                .tools
                .iter()
                .map(|t| {
                    [
                        sanitize(&t.id),
                        sanitize(
                            &std::iter::once(format!("{} {}", t.transport, t.target))
                                .chain(t.args.iter().map(|a| quoted(a)))
                                .collect::<Vec<_>>()
                                .join(" "),
                        ),
                        sanitize(&t.capabilities.join(",")),
                        sanitize(&t.secrets.join(",")),
                        if t.requires_confirmation { "yes".into() } else { "no".into() },
                    ]
                })
                .collect();
            let header = ["id", "transport", "capabilities", "secrets", "confirm"].map(str::to_owned);
            let mut widths = [0; 5];
            for row in std::iter::once(&header).chain(&rows) {
                for (w, cell) in widths.iter_mut().zip(row) {
                    *w = (*w).max(cell.chars().count());
                }
            }
            let mut out = std::io::stdout().lock();
            for row in std::iter::once(&header).chain(&rows) {
                let cells: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
                writeln!(out, "{}", cells.join("  ").trim_end())?;
            }
            out.flush()?;
        }
    }
    Ok(Outcome::Ok)
}
