//! `bundle import --from agentcli|rap|rune|openai|mcp INPUT`: another system's tool manifest
//! as tools.json.

use std::path::PathBuf;
use std::time::Duration;

use agent_bundle::agent::LockReport;
use agent_bundle::formats::Reach;
use agent_bundle::mcp_client::{Endpoint, Limits, Server};
use agent_bundle::ops::import::{self, From, Options, Output};

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
    /// OpenAI function tools (Chat Completions, Responses or legacy form); needs --http or --exec.
    Openai,
    /// MCP tools: a tools/list response file, or a live server with --stdio; needs --http or --exec.
    Mcp,
    /// Agent Skills folders (a folder with SKILL.md, or a folder of them), copied into the
    /// agent folder -o names (AGENT_DIR/skills/<name>/), checked, and the manifest relocked.
    Skills,
    /// An MCP bundle (.mcpb): the tools its manifest.json claims, read without extracting
    /// anything; needs --http or --exec.
    Mcpb,
}

/// Convert another system's tool manifest to tools.json version 1.
///
/// The input is validated by its own format's rules first (exit 1, every problem listed); the
/// result must pass tools.json validation. Everything that could not be carried over is
/// reported as a `not_carried_over` warning, every renamed tool as `renamed_tool`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  bundle import --from agentcli tools/agentcli.json -o agents/clock/tools.json
  bundle import --from agentcli manifest.json --exec-root /opt/clock
  bundle import --from rap github-tools.json
  bundle import --from rap http://127.0.0.1:8080 http://127.0.0.1:8081
  bundle import --from rap https://tools.example.com --pin \\
      -o agents/gh/tools.json
  bundle import --from rap https://rap.corp.internal --ca-cert corp-root.pem
  bundle import --from rune path/to/rune-agent
  bundle import --from openai fns.json --http POST https://fn.example/{tool}
  bundle import --from mcp tools-list.json --exec /opt/bin/call --arg {tool}
  bundle import --from mcpb weather.mcpb --exec /opt/bin/mcp-call --arg {tool}
  bundle import --from skills ~/skills/pdf-report -o agents/mailer
  bundle import --from mcp --stdio --exec /opt/bin/mcp-call --arg {tool} \\
      -o agents/clock/tools.json --force --grant -- mcp-server-time
  bundle import --from mcp --stdio --pin --server time \\
      --exec /opt/bin/mcp-call --arg {tool} -o agents/clock/tools.json \\
      --force -- mcp-server-time
  bundle import --from mcp tools-list.json --pin --server time \\
      --exec /opt/bin/mcp-call --arg {tool} -o agents/clock/tools.json
  bundle import --from mcp --url https://mcp.example/mcp --pin \\
      --server files --exec /opt/bin/mcp-call --arg {tool} \\
      -o agents/files/tools.json")]
pub struct Args {
    /// The input format.
    #[arg(long, value_enum)]
    from: Source,

    /// The manifest file, RAP files or URLs, the Rune agent folder; with --stdio, the MCP
    /// server's command and its arguments (after `--`).
    #[arg(value_name = "INPUT", required_unless_present = "url")]
    inputs: Vec<String>,

    /// MCP: start INPUT... as an MCP server (stdio transport), list its tools, stop it.
    #[arg(long, group = "live")]
    stdio: bool,

    /// MCP: list the tools of the MCP server at this endpoint (streamable HTTP, e.g.
    /// https://HOST/mcp; --ca-cert adds roots), then end its session.
    #[arg(long, value_name = "URL", group = "live", conflicts_with = "inputs")]
    url: Option<String>,

    /// --stdio, --url: give up on a server that has not listed its tools after this many
    /// seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, requires = "live",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,

    /// --stdio: pass this variable of the environment to the server (NAME), or set it
    /// (NAME=VALUE); repeatable. The server otherwise gets only HOME, LOGNAME, PATH, SHELL,
    /// TERM and USER: never registry passwords, signing keys or cloud credentials.
    #[arg(long = "env", value_name = "NAME[=VALUE]", requires = "stdio")]
    env: Vec<agent_bundle::mcp_client::EnvVar>,

    /// OpenAI, MCP: reach every tool over http with this method and URL (`{tool}` in the URL
    /// is replaced by the tool's id); the tools need `net:<host>` (see --grant).
    #[arg(long, num_args = 2, value_names = ["METHOD", "URL"], conflicts_with = "exec")]
    http: Option<Vec<String>>,

    /// OpenAI, MCP: reach every tool by running this program (an absolute path; `{tool}` is
    /// replaced by the tool's id).
    #[arg(long, value_name = "PATH")]
    exec: Option<PathBuf>,

    /// --exec: an argument for the program (repeatable; `{tool}` is replaced by the tool's id).
    #[arg(long = "arg", value_name = "A", requires = "exec", allow_hyphen_values = true)]
    exec_args: Vec<String>,

    /// -o AGENT_DIR/tools.json: also add the capabilities the tools need to policy.caps (the
    /// manifest is relocked either way).
    #[arg(long, requires = "output")]
    grant: bool,

    /// Write tools.json here instead of stdout (an existing file needs --force).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Overwrite the -o file.
    #[arg(long)]
    force: bool,

    /// RAP from URLs: keep each fetched toolset in the agent folder (pins/<host>.rap.json) and
    /// record its URL and BLAKE3 digest in manifest.toml [pins]. MCP: keep every Tool object
    /// the server listed, exactly as served, in pins/<server>.mcp.json and record the server's
    /// name, its command (never --env values) or URL (never user:password@ nor query
    /// parameters that could be secrets) and the file's BLAKE3. `bundle check --refresh`
    /// then reports drift, and `bundle guard` holds the server to the signed pin. Needs -o
    /// inside an agent folder.
    #[arg(long, requires = "output")]
    pin: bool,

    /// MCP --pin: the server's name in this agent (the pin file's name, what `bundle guard
    /// --server` asks for); default, the name the server gives itself. Required for a file.
    #[arg(long, value_name = "NAME", requires = "pin")]
    server: Option<String>,

    /// RAP from https URLs, MCP --url: also trust the root certificates in this PEM file (a
    /// private CA's), in addition to the public (Mozilla) roots. Repeatable.
    #[arg(long, value_name = "PEM")]
    ca_cert: Vec<PathBuf>,

    /// agentcli, Rune: the folder relative commands resolve against where the agent runs
    /// (default: the input's folder, with a `local_path` warning); commands are written as
    /// absolute paths.
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
        Source::Openai => From::Openai,
        Source::Mcp => From::Mcp,
        Source::Mcpb => From::Mcpb,
        Source::Skills => {
            return super::import_skills::run(&args.inputs, args.output.as_deref(), args.force, args.format, global);
        }
    };
    if !args.ca_cert.is_empty() && !args.inputs.iter().any(|i| import::is_url(i)) && args.url.is_none() {
        anyhow::bail!(
            "--ca-cert trusts a root for https servers: use it with --from rap and an https:// input, or --from mcp --url"
        );
    }
    let pins_rap = matches!(args.from, Source::Rap) && args.inputs.iter().all(|i| import::is_url(i));
    if args.pin && !pins_rap && !matches!(args.from, Source::Mcp) {
        anyhow::bail!(
            "--pin pins RAP toolsets fetched from URLs and MCP servers' tools: use --from rap with http:// or https:// inputs, or --from mcp"
        );
    }
    if args.pin && matches!(args.from, Source::Mcp) && !args.stdio && args.url.is_none() && args.server.is_none() {
        anyhow::bail!("--pin of a tools/list file needs --server NAME: the file does not say which server listed it");
    }
    if args.server.is_some() && !matches!(args.from, Source::Mcp) {
        anyhow::bail!("--server names a pinned MCP server: use it with --from mcp --pin");
    }
    if let Some(name) = &args.server {
        agent_bundle::formats::mcp_pin::check_server_name(name).map_err(|why| anyhow::anyhow!("--server: {why}"))?;
    }
    if (args.stdio || args.url.is_some()) && !matches!(args.from, Source::Mcp) {
        anyhow::bail!("--stdio and --url list an MCP server's tools: use them with --from mcp");
    }
    if let Some(url) = &args.url
        && !import::is_url(url)
    {
        anyhow::bail!("--url {url}: give the server's MCP endpoint as an http:// or https:// URL");
    }
    let foreign = matches!(args.from, Source::Openai | Source::Mcp | Source::Mcpb);
    if !foreign && (args.http.is_some() || args.exec.is_some()) {
        anyhow::bail!(
            "--http and --exec give OpenAI and MCP tools a transport; the other formats say how a tool is reached"
        );
    }
    if foreign && args.exec_root.is_some() {
        anyhow::bail!("--exec-root resolves agentcli and Rune commands; give OpenAI and MCP tools --exec PATH instead");
    }
    let reach = match (&args.http, &args.exec) {
        (Some(h), _) => Some(Reach::Http { method: h[0].to_ascii_uppercase(), url: h[1].clone() }),
        (None, Some(p)) if !p.is_absolute() => anyhow::bail!(
            "--exec {}: give the absolute path the runtime will run (tools.json exec commands are absolute)",
            p.display()
        ),
        (None, Some(p)) => Some(Reach::Exec { command: p.display().to_string(), args: args.exec_args.clone() }),
        (None, None) => None,
    };
    let server = args.stdio.then(|| Server {
        program: args.inputs[0].clone(),
        args: args.inputs[1..].to_vec(),
        env: args.env.clone(),
    });
    let opts = Options {
        exec_root: args.exec_root,
        ca_certs: args.ca_cert.clone(),
        reach,
        server,
        endpoint: args.url.clone().map(|url| Endpoint { url, ca_certs: args.ca_cert.clone() }),
        limits: Limits { timeout: Duration::from_secs(args.timeout), ..Limits::default() },
        output: args.output.clone().map(|path| Output {
            path,
            force: args.force,
            pin: args.pin,
            server_name: args.server.clone(),
            grant: args.grant,
        }),
        ..Options::new(from, args.inputs)
    };
    let result = import::import(&opts)?;
    let (pinned, installed) = (&result.pinned, &result.installed);
    let tools = result.tools.as_ref().map_or(0, |t| t.tools.len());
    if args.format == Format::Json {
        let lock_diagnostics = installed.iter().flat_map(|i| i.lock.iter().flat_map(|l| &l.report().diagnostics));
        output::print_json(&ImportReport {
            ok: result.text.is_some(),
            tools,
            output: args.output.as_ref().map(|p| p.display().to_string()),
            pinned,
            granted: installed.as_ref().map_or(&[][..], |i| &i.granted),
            ungranted: installed.as_ref().map_or(&[][..], |i| &i.ungranted),
            relocked: installed.as_ref().and_then(|i| i.lock.as_ref()).map(Result::is_ok),
            document: if args.output.is_none() {
                result.text.as_deref().and_then(|t| serde_json::from_str(t).ok())
            } else {
                None
            },
            diagnostics: json::diagnostics(result.report.diagnostics.iter().chain(lock_diagnostics)),
        })?;
    } else {
        check::render_report(&result.report, args.format, global, "import")?;
        if let Some(text) = &result.text {
            match &args.output {
                Some(p) => {
                    let done =
                        format!("imported {tools} tool{} into {}", if tools == 1 { "" } else { "s" }, p.display());
                    if args.format == Format::Github {
                        output::notice(Some(&p.display().to_string()), "imported", &done)?;
                    } else {
                        output::status(global, &done);
                    }
                    for file in pinned {
                        output::status(global, &format!("pinned {file} in manifest.toml [pins]"));
                    }
                    if let Some(i) = installed {
                        render_installed(i, global)?;
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

fn render_installed(i: &import::Installed, global: Global) -> std::io::Result<()> {
    if let Some(policy) = &i.policy_path {
        if !i.granted.is_empty() {
            output::status(global, &format!("granted {} in {}", i.granted.join(", "), policy.display()));
        }
        if !i.ungranted.is_empty() {
            output::status(
                global,
                &format!(
                    "hint: {} does not grant {}; add --grant, or add the lines yourself, before `bundle check`",
                    policy.display(),
                    i.ungranted.join(", ")
                ),
            );
        }
    }
    if let Some(lock) = &i.lock {
        if lock.is_err() {
            output::human(lock.report(), global)?;
            output::status(
                global,
                "the tools were written, but manifest.toml could not be relocked: fix the above, then run `bundle lock`",
            );
        } else if lock.written() {
            output::status(global, &format!("relocked {}", lock.manifest_path().display()));
        }
    }
    Ok(())
}
