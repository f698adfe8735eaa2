//! `bundle import --from agentcli|rap|rune INPUT`: another system's tool manifest as tools.json.

use std::path::PathBuf;

use agent_bundle::ops::import::{self, From, Options};

use super::json::{self, ImportReport};
use super::{Format, Global, Outcome, check, output};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Source {
    /// agentcli tools.json (`{"tools": [{name, schema, command, ...}]}`).
    Agentcli,
    /// RAP toolset documents: files, or server base URLs (`/.well-known/rap-toolset` is appended).
    Rap,
    /// Rune tool descriptors: an agent folder with tools/*.yaml, or the tools/ folder.
    Rune,
}

/// Convert another system's tool manifest to tools.json version 1.
///
/// The input is validated by its own format's rules first (exit 1, every problem listed); the
/// result must pass tools.json validation. Everything that could not be carried over is
/// reported as a `not_carried_over` warning, every renamed tool as `renamed_tool`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  bundle import --from agentcli tools/agentcli.json -o agents/clock/tools.json
  bundle import --from agentcli manifest.json --exec-root /opt/clock   # where ./tools/bin/ lives
  bundle import --from rap github-tools.json
  bundle import --from rap http://127.0.0.1:8080 http://127.0.0.1:8081
  bundle import --from rap https://tools.example.com --pin -o agents/gh/tools.json
  bundle import --from rap https://rap.corp.internal --ca-cert corp-root.pem   # private CA
  bundle import --from rune path/to/rune-agent")]
pub struct Args {
    /// The input format.
    #[arg(long, value_enum)]
    from: Source,

    /// The manifest file, RAP files or URLs, or the Rune agent folder.
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<String>,

    /// Write tools.json here instead of stdout (an existing file needs --force).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Overwrite the -o file.
    #[arg(long)]
    force: bool,

    /// RAP from URLs: keep each fetched toolset in the agent folder (pins/<host>.rap.json) and
    /// record its URL and BLAKE3 digest in manifest.toml [pins]; `bundle check --refresh` then
    /// reports when the server's toolset drifts. Needs -o inside an agent folder.
    #[arg(long, requires = "output")]
    pin: bool,

    /// RAP from https URLs: also trust the root certificates in this PEM file (a private CA's),
    /// in addition to the public (Mozilla) roots. Repeatable.
    #[arg(long, value_name = "PEM")]
    ca_cert: Vec<PathBuf>,

    /// agentcli: the folder relative `./tools/bin/` commands resolve against (default: the
    /// manifest's folder); commands are written as absolute paths.
    #[arg(long, value_name = "DIR")]
    exec_root: Option<PathBuf>,

    /// Output format of the report.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let from = match args.from {
        Source::Agentcli => From::Agentcli,
        Source::Rap => From::Rap,
        Source::Rune => From::Rune,
    };
    if let Some(o) = &args.output
        && o.exists()
        && !args.force
    {
        anyhow::bail!("{} exists; add --force to overwrite it", o.display());
    }
    if !args.ca_cert.is_empty() && !args.inputs.iter().any(|i| import::is_url(i)) {
        anyhow::bail!("--ca-cert trusts a root for https servers: use it with --from rap and an https:// input");
    }
    if args.pin && (!matches!(args.from, Source::Rap) || !args.inputs.iter().all(|i| import::is_url(i))) {
        anyhow::bail!("--pin pins RAP toolsets fetched from URLs: use --from rap with http:// or https:// inputs");
    }
    let result =
        import::import(&Options { from, inputs: args.inputs, exec_root: args.exec_root, ca_certs: args.ca_cert })?;
    let mut pinned = Vec::new();
    if let (Some(text), Some(path)) = (&result.text, &args.output) {
        if args.pin {
            let agent_dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => std::path::Path::new("."),
            };
            pinned = agent_bundle::agent::pins::pin(agent_dir, &result.fetched)?;
        }
        agent_bundle::atomic::write(path, text.as_bytes(), true)?;
    }
    let tools = result.tools.as_ref().map_or(0, |t| t.tools.len());
    if args.format == Format::Json {
        output::print_json(&ImportReport {
            ok: result.text.is_some(),
            tools,
            output: args.output.as_ref().map(|p| p.display().to_string()),
            pinned: &pinned,
            document: if args.output.is_none() {
                result.text.as_deref().and_then(|t| serde_json::from_str(t).ok())
            } else {
                None
            },
            diagnostics: json::diagnostics(&result.report.diagnostics),
        })?;
    } else {
        check::render_report(&result.report, args.format, global, "import")?;
        if let Some(text) = &result.text {
            match &args.output {
                Some(p) => {
                    output::status(
                        global,
                        &format!("imported {tools} tool{} into {}", if tools == 1 { "" } else { "s" }, p.display()),
                    );
                    for file in &pinned {
                        output::status(global, &format!("pinned {file} in manifest.toml [pins]; run `bundle lock`"));
                    }
                }
                None => output::print_line(text.trim_end())?,
            }
        }
    }
    Ok(match check::outcome(&result.report) {
        _ if result.text.is_some() => Outcome::Ok,
        Outcome::Ok => Outcome::Rejected,
        failed => failed,
    })
}
