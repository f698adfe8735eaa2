//! `bundle import`: read a neighbouring format, validate it by its own rules, convert it to
//! tools.json v1 and validate the result by ours. Every field that could not be carried over
//! comes back as a warning; an input that breaks its own spec comes back as errors.

mod foreign;
mod install;
mod mcpb;

pub use foreign::Served;
pub use install::Installed;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::error::{Error, Result};
use crate::fetch::{Fetched, Fetcher};
use crate::formats::{self, Imported};
use crate::json::{self, JsonPath};
use crate::limits::{self, MAX_RUNE_DESCRIPTOR_BYTES};
use crate::policy::Policy;
use crate::regular_file::{self, Links};
use crate::tools::{self, ToolsFile};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    Agentcli,
    Rap,
    Rune,
    Openai,
    Mcp,
    Mcpb,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub from: From,
    /// A manifest file, a Rune agent folder (or its `tools/`), or RAP files / base URLs.
    pub inputs: Vec<String>,
    /// Where relative agentcli commands and Rune modules resolve (default: the input's folder,
    /// with a `local_path` warning).
    pub exec_root: Option<PathBuf>,
    /// RAP from https URLs: PEM files of extra trusted roots (private CAs).
    pub ca_certs: Vec<PathBuf>,
    /// OpenAI and MCP: the transport every tool gets.
    pub reach: Option<formats::Reach>,
    /// MCP: list the tools of this server (over stdio) instead of reading a file.
    pub server: Option<crate::mcp_client::Server>,
    /// MCP: list the tools of the streamable HTTP server there instead (`--url`).
    pub endpoint: Option<crate::mcp_client::Endpoint>,
    pub limits: crate::mcp_client::Limits,
    /// Where the tools.json goes (`-o`); `None`: the caller prints it.
    pub output: Option<Output>,
}

/// `-o FILE` and what else happens in its agent folder.
#[derive(Debug, Clone)]
pub struct Output {
    pub path: PathBuf,
    /// Replace an existing file (`--force`).
    pub force: bool,
    /// Keep the fetched RAP toolsets, or the MCP server's Tool objects, in the agent folder and
    /// record them in `[pins]` (`--pin`).
    pub pin: bool,
    /// MCP `--pin`: the server's name (`--server`); default, the name it gives itself.
    pub server_name: Option<String>,
    /// Add the capabilities the tools need to policy.caps (`--grant`).
    pub grant: bool,
}

impl Options {
    pub fn new(from: From, inputs: Vec<String>) -> Options {
        Options {
            from,
            inputs,
            exec_root: None,
            ca_certs: Vec::new(),
            reach: None,
            server: None,
            endpoint: None,
            limits: Default::default(),
            output: None,
        }
    }
}

/// What an import produced: the tools.json text when the input was valid and the result passed
/// tools.json validation, and the report (errors, not-carried-over warnings, renames).
#[derive(Debug, Default)]
pub struct Import {
    pub report: Report,
    pub text: Option<String>,
    pub tools: Option<ToolsFile>,
    /// RAP toolsets fetched over the network, as sent (what `--pin` keeps).
    pub fetched: Vec<Fetched>,
    /// MCP: the Tool objects read, as served (what `--pin` keeps).
    pub served: Option<Served>,
    /// The files `--pin` kept in the agent folder.
    pub pinned: Vec<String>,
    /// What writing to `-o` did (when the import succeeded and there was an `-o`).
    pub installed: Option<Installed>,
}

/// Imports, and with an [`Output`], writes the tools.json there (pinning and granting as
/// asked). An existing `-o` file without `force` is refused before anything is read.
pub fn import(opts: &Options) -> Result<Import> {
    if let Some(o) = &opts.output
        && o.path.exists()
        && !o.force
    {
        return Err(Error::Usage(format!("{} exists; add --force to overwrite it", o.path.display())));
    }
    if let (Some(o), Some(s)) = (&opts.output, &opts.server)
        && o.pin
    {
        // Refused before the server starts: its command line would be signed.
        let command: Vec<String> = std::iter::once(s.program.clone()).chain(s.args.iter().cloned()).collect();
        if let Some(why) = crate::tools::credentials::literal_credential_in_command(&command) {
            return Err(Error::Usage(format!(
                "--pin records the server's command in manifest.toml, which is signed, but {why}; pass secrets with --env NAME (the server reads them from its environment)"
            )));
        }
    }
    let mut out = convert(opts)?;
    let (Some(text), Some(tools), Some(o)) = (&out.text, &out.tools, &opts.output) else { return Ok(out) };
    if o.pin {
        let agent_dir = match o.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        out.pinned = match &out.served {
            Some(served) => {
                if let Some(e) = &opts.endpoint
                    && crate::formats::mcp_pin::public_url(&e.url) != e.url
                {
                    out.report.push(
                        Diagnostic::warning(
                            Code::HardcodedCredential,
                            "manifest.toml",
                            format!(
                                "manifest.toml [pins] records the server's URL as {}: without its user:password@ part, fragment and the query parameters that could be secrets (the pin is signed and copied with every bundle)",
                                crate::formats::mcp_pin::public_url(&e.url)
                            ),
                        )
                        .with_help("a server that needs a secret should read it from a header or its own configuration, not from its URL"),
                    );
                }
                vec![pin_mcp(opts, o, agent_dir, served)?]
            }
            None => crate::agent::pins::pin(agent_dir, &out.fetched)?,
        };
    }
    out.installed = Some(install::install(&o.path, text, tools, o.grant)?);
    Ok(out)
}

/// Keeps the server's tools as its pin: named by `--server`, else by what the server calls
/// itself, else by its program's file name (or its URL's host); started again by the same
/// command, or reached again at its URL without what could be a secret in it
/// ([`crate::formats::mcp_pin::public_url`]); a file gives neither.
fn pin_mcp(opts: &Options, o: &Output, agent_dir: &Path, served: &Served) -> Result<String> {
    use crate::formats::mcp_pin::server_name_from;
    let name = match (&o.server_name, &served.server_name, &opts.server, &opts.endpoint) {
        (Some(n), ..) => n.clone(),
        (None, Some(n), ..) => server_name_from(n),
        (None, None, Some(s), _) => {
            server_name_from(Path::new(&s.program).file_name().and_then(|f| f.to_str()).unwrap_or(""))
        }
        (None, None, None, Some(e)) => server_name_from(crate::formats::mcp_pin::host_of(&e.url)),
        (None, None, None, None) => {
            return Err(Error::Usage("--pin of a tools/list file needs --server NAME".to_owned()));
        }
    };
    let start = match (&opts.server, &opts.endpoint) {
        (Some(s), _) => Some(crate::manifest::McpStart::Stdio {
            command: std::iter::once(s.program.clone()).chain(s.args.iter().cloned()).collect(),
        }),
        (None, Some(e)) => Some(crate::manifest::McpStart::Http { url: crate::formats::mcp_pin::public_url(&e.url) }),
        (None, None) => None,
    };
    crate::agent::pins::pin_mcp(agent_dir, &name, start, served.tools.clone())
}

/// Reads the input and converts it (nothing is written).
fn convert(opts: &Options) -> Result<Import> {
    let mut out = Import::default();
    let (display, converted) = match opts.from {
        From::Agentcli => import_agentcli(opts, &mut out.report)?,
        From::Rap => import_rap(opts, &mut out.fetched, &mut out.report)?,
        From::Rune => import_rune(Path::new(single(opts)?), opts.exec_root.as_deref(), &mut out.report)?,
        From::Openai => foreign::import_openai(opts, &mut out.report)?,
        From::Mcp => foreign::import_mcp(opts, &mut out.served, &mut out.report)?,
        From::Mcpb => mcpb::import_mcpb(opts, &mut out.report)?,
    };
    let Some(imported) = converted else {
        return Ok(out);
    };
    for note in &imported.notes {
        out.report.push(note.diagnostic(&display));
    }
    finish(imported, out)
}

/// Serialises the tools and checks them as `bundle check` would.
fn finish(imported: Imported, mut out: Import) -> Result<Import> {
    let file = ToolsFile { schema: None, version: tools::SUPPORTED_VERSION, tools: imported.tools };
    let text = serde_json::to_string_pretty(&file).map_err(|e| Error::Usage(e.to_string()))? + "\n";
    let source = Source::new("tools.json (imported)", text.as_str());
    let mut diags = Vec::new();
    let no_files: HashMap<String, Vec<u8>> = HashMap::new();
    // The tools' own capabilities are granted here: whether the agent's policy.caps grants
    // them is `bundle check`'s question (and `--grant`'s answer), not the import's.
    let caps: Vec<&str> = file.tools.iter().flat_map(|t| &t.capabilities).map(String::as_str).collect();
    let policy = Policy::parse(&Source::new("policy.caps", caps.join("\n")), &mut Vec::new());
    let validated = tools::validate(&source, &no_files, "", &policy, &mut diags);
    if validated.valid.is_none() {
        out.report.add_source(&source);
    }
    out.report.diagnostics.extend(diags);
    if validated.valid.is_some() {
        out.text = Some(text);
        out.tools = Some(file);
    }
    Ok(out)
}

fn single(opts: &Options) -> Result<&str> {
    match opts.inputs.as_slice() {
        [one] => Ok(one),
        _ => Err(Error::Usage("this format takes exactly one input".to_owned())),
    }
}

/// The name the report uses for the input, and the converted tools; `None` when the input
/// broke its own format's rules (the problems are in the report then).
type Converted = (String, Option<Imported>);

/// Reads an input file as UTF-8 text. An unreadable file (not a regular file, larger than
/// `limit`) stops the import (exit 2); text that is not UTF-8 is an `invalid_utf8` problem in
/// `report`.
fn read_input(path: &Path, limit: u64, links: Links, report: &mut Report) -> Result<Option<Source>> {
    // A regular file (a FIFO would block, a device never end) and at most `limit` bytes.
    let bytes = regular_file::read(path, limit, links).map_err(|e| Error::io(path, e.into_io()))?;
    let name = path.display().to_string();
    match json::decode_utf8(&name, bytes) {
        Ok(text) => Ok(Some(Source::new(name, text))),
        Err(d) => {
            report.push(d);
            Ok(None)
        }
    }
}

/// Keeps the problems (and the source they point into, for showing the offending line).
fn problems(report: &mut Report, source: &Source, problems: Vec<Diagnostic>) {
    report.add_source(source);
    report.diagnostics.extend(problems);
}

fn import_agentcli(opts: &Options, report: &mut Report) -> Result<Converted> {
    let path = Path::new(single(opts)?);
    let display = path.display().to_string();
    let Some(source) = read_input(path, limits::MAX_IMPORT_BYTES, Links::Follow, report)? else {
        return Ok((display, None));
    };
    let root = match &opts.exec_root {
        Some(r) => r.clone(),
        None => path.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let root = absolute(&root)?;
    match formats::agentcli::parse(&source) {
        Ok(specs) => {
            if opts.exec_root.is_none() {
                for (i, spec) in specs.iter().enumerate() {
                    if !spec.command[0].starts_with('/') {
                        report.push(local_path(&display, format!("tools[{i}].command[0]"), &root));
                    }
                }
            }
            Ok((display, Some(formats::agentcli::to_tools(&specs, &root))))
        }
        Err(found) => {
            problems(report, &source, found);
            Ok((display, None))
        }
    }
}

/// A command resolved against `root`, a folder of the importing machine (no `--exec-root`).
fn local_path(file: &str, path: String, root: &Path) -> Diagnostic {
    Diagnostic::warning(
        Code::LocalPath,
        file,
        format!(
            "the relative command is written as an absolute path under {}, a folder on this machine; the runtime must have the program at that same path",
            root.display()
        ),
    )
    .at_path(path)
    .with_help("pass --exec-root DIR to name the folder the tools will be installed in where the agent runs")
}

/// An absolute, lexically clean form of `dir` (symlinks kept, so the path is what the user named).
pub fn absolute(dir: &Path) -> Result<PathBuf> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let abs = std::path::absolute(dir).map_err(|e| Error::io(dir, e))?;
    let mut clean = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    Ok(clean)
}

/// RAP: each input is a file or an `http(s)://` base URL (the well-known path is appended).
/// Every toolset is validated; any problem anywhere imports nothing. A server that cannot be
/// fetched is an `io_error` or `tls_error` in `report`.
fn import_rap(opts: &Options, fetched: &mut Vec<Fetched>, report: &mut Report) -> Result<Converted> {
    if opts.inputs.is_empty() {
        return Err(Error::Usage("give at least one RAP toolset file or server URL".to_owned()));
    }
    let display = opts.inputs.join(", ");
    let mut toolsets = Vec::new();
    let mut sources = Vec::new();
    let mut fetcher = None;
    for input in &opts.inputs {
        let source = if is_url(input) {
            let fetcher = match &fetcher {
                Some(f) => f,
                None => fetcher.insert(Fetcher::new(&opts.ca_certs)?),
            };
            let url = discovery_url(input);
            match fetcher.get(&url) {
                Ok(text) => {
                    fetched.push(Fetched { url: url.clone(), text: text.clone() });
                    Source::new(url, text)
                }
                Err(e) => {
                    report.push(e.diagnostic(&url, "`--ca-cert FILE.pem`"));
                    continue;
                }
            }
        } else {
            match read_input(Path::new(input), limits::MAX_IMPORT_BYTES, Links::Follow, report)? {
                Some(source) => source,
                None => continue,
            }
        };
        match formats::rap::parse(&source) {
            Ok((ts, doc)) => {
                toolsets.push(ts);
                sources.push((source, doc));
            }
            Err(found) => problems(report, &source, found),
        }
    }
    if report.has_errors() {
        return Ok((display, None));
    }
    match formats::rap::to_tools(&toolsets) {
        Ok(imported) => Ok((display, Some(imported))),
        Err(clashes) => {
            // Each clash is shown where its name is defined again (the first definition is
            // named in the message).
            for clash in clashes {
                let &(i, j) = clash.at.last().unwrap_or(&(0, 0));
                let (source, doc) = &sources[i];
                let path = JsonPath::root().key("tools").index(j).key("name");
                report.add_source(source);
                report.push(
                    Diagnostic::error(Code::InvalidImport, &source.name, clash.message)
                        .at_path(path.to_string())
                        .at_span(source, doc.value_span(&path))
                        .with_help("tool names MUST be unique across the toolsets a runtime loads: import the toolsets separately, or rename one tool on its server"),
                );
            }
            Ok((display, None))
        }
    }
}

/// Whether a RAP input names a server rather than a file.
pub fn is_url(input: &str) -> bool {
    input.starts_with("http://") || input.starts_with("https://")
}

/// The discovery URL of a RAP server: `{base}/.well-known/rap-toolset` (a URL that already ends
/// with it is used as is).
pub fn discovery_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(formats::rap::WELL_KNOWN) {
        base.to_owned()
    } else {
        format!("{base}{}", formats::rap::WELL_KNOWN)
    }
}

/// Rune: an agent folder (its `tools/*.yaml`) or the `tools/` folder itself.
fn import_rune(input: &Path, exec_root: Option<&Path>, report: &mut Report) -> Result<Converted> {
    let tools_dir = if input.join("tools").is_dir() { input.join("tools") } else { input.to_path_buf() };
    let agent_dir = absolute(tools_dir.parent().unwrap_or(Path::new(".")))?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&tools_dir)
        .map_err(|e| Error::io(&tools_dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let display = tools_dir.display().to_string();
    if files.is_empty() {
        report.push(
            Diagnostic::error(Code::InvalidImport, &display, "no *.yaml tool descriptors in this folder")
                .with_help("give a Rune agent folder (with tools/*.yaml) or its tools/ folder"),
        );
        return Ok((display, None));
    }
    let mut descriptors = Vec::new();
    for f in &files {
        // Descriptors found in a folder are never read through a symlink.
        let Some(source) = read_input(f, MAX_RUNE_DESCRIPTOR_BYTES, Links::Refuse, report)? else { continue };
        match formats::rune::parse(&source) {
            Ok(d) => descriptors.push(d),
            Err(found) => problems(report, &source, found),
        }
    }
    if report.has_errors() {
        return Ok((display, None));
    }
    // Schema files the descriptors name: read like an agent's own files, all within one budget.
    let budget = json::Budget::default();
    let load = |rel: &str| -> Option<serde_json::Value> {
        if rel.starts_with('/') || rel.split('/').any(|s| s == "..") {
            return None;
        }
        let text = regular_file::read_to_string(&agent_dir.join(rel), limits::MAX_JSON_BYTES, Links::Refuse).ok()?;
        json::parse_within(&Source::new(rel, text), &budget, &mut Vec::new()).ok().map(|d| d.value)
    };
    let command_root = match exec_root {
        Some(r) => absolute(r)?,
        None => {
            for (f, d) in files.iter().zip(&descriptors) {
                if d.runtime == formats::rune::Runtime::Process && !d.name.starts_with("rune@") {
                    report.push(local_path(&f.display().to_string(), "module".to_owned(), &agent_dir));
                }
            }
            agent_dir.clone()
        }
    };
    Ok((display, Some(formats::rune::to_tools(&descriptors, &command_root, &load))))
}
