//! `bundle check`: validate agent folders (tools.json, policy.caps, manifest.toml) and report
//! every problem at once.

use std::path::{Path, PathBuf};

use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::error::{Error, Result};
use crate::fetch::Fetcher;
use crate::manifest::{self, Manifest};
use crate::ops::{lock, pin};
use crate::policy::{self, Policy};
use crate::regular_file::{self, Links, ReadError};
use crate::{limits, tools};

/// The outcome of checking one agent folder.
#[derive(Debug)]
pub struct AgentCheck {
    pub dir: PathBuf,
    pub manifest: Option<Manifest>,
    /// tools.json as JSON, when it is valid (`tools::Validated::model` gives the typed view).
    pub tools: Option<serde_json::Value>,
    pub policy: Policy,
    pub report: Report,
    /// The manifest's text as read, when it parsed.
    pub manifest_text: Option<std::sync::Arc<str>>,
    /// The files and their digests, when they were compared with the manifest.
    pub current: Option<lock::Current>,
    /// The schema files tools.json's validation read (relative paths).
    pub schema_files: Vec<String>,
}

/// The agent folders a PATH names: the folder itself when it holds manifest.toml or
/// tools.json, else every folder under its `agents/`.
pub fn find_agents(path: &Path) -> Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_dir() {
        return Err(Error::Usage(format!(
            "{} is not a folder; give an agent folder or a folder with agents/",
            path.display()
        )));
    }
    if path.join(manifest::FILE_NAME).exists() || path.join(tools::FILE_NAME).exists() {
        return Ok(vec![path.to_path_buf()]);
    }
    // `agents/mailer`, not `./agents/mailer`: the names reach annotations and JSON output.
    let agents = if path == Path::new(".") { PathBuf::from("agents") } else { path.join("agents") };
    if agents.is_dir() {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&agents)
            .map_err(|e| Error::io(&agents, e))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        found.sort();
        if !found.is_empty() {
            return Ok(found);
        }
    }
    Err(Error::Usage(format!(
        "no agent in {}: an agent folder holds manifest.toml and tools.json (create one with `bundle init`)",
        path.display()
    )))
}

/// How an agent folder's files are named in diagnostics: `agents/mailer/tools.json`.
pub fn display_prefix(dir: &Path) -> String {
    let s = dir.to_string_lossy();
    let s = s.strip_prefix("./").unwrap_or(&s);
    if s.is_empty() || s == "." { String::new() } else { format!("{}/", s.trim_end_matches('/')) }
}

/// Reads a text file of the agent into a [`Source`]; a missing or unreadable file becomes a
/// diagnostic.
pub fn read_source(dir: &Path, prefix: &str, name: &str, required: bool, report: &mut Report) -> Option<Source> {
    let display = format!("{prefix}{name}");
    // Each file is read under the cap `bundle verify` applies to it, never through a symlink,
    // and never if it is a FIFO or a device (which would block or never end).
    let limit = match name {
        manifest::FILE_NAME => limits::MAX_MANIFEST_BYTES,
        policy::FILE_NAME => limits::MAX_POLICY_BYTES,
        _ => limits::MAX_JSON_BYTES,
    };
    match regular_file::read(&dir.join(name), limit, Links::Refuse) {
        Ok(bytes) => match crate::json::decode_utf8(&display, bytes) {
            Ok(text) => {
                let source = Source::new(display, text);
                report.add_source(&source);
                Some(source)
            }
            Err(d) => {
                report.push(d);
                None
            }
        },
        Err(ReadError::NotFound) => {
            if required {
                report.push(
                    Diagnostic::error(Code::MissingFile, &display, format!("the agent folder has no {name}"))
                        .with_help("create it, e.g. with `bundle init`"),
                );
            }
            None
        }
        Err(ReadError::NotRegular { what }) => {
            report.push(
                Diagnostic::error(
                    Code::UnsupportedFileType,
                    &display,
                    format!("{name} is {what}; an agent's files must be regular files"),
                )
                .with_help("replace it with a regular file (symbolic links are never followed)"),
            );
            None
        }
        Err(ReadError::TooLarge { limit }) => {
            report.push(
                Diagnostic::error(
                    Code::LimitExceeded,
                    &display,
                    format!("{name} is larger than {limit} bytes, the most `bundle verify` accepts"),
                )
                .with_help("split the agent, or move data out of it into other files"),
            );
            None
        }
        Err(ReadError::Io(e)) => {
            report.push(Diagnostic::error(Code::IoError, &display, format!("cannot read {name}: {e}")));
            None
        }
    }
}

/// What a check does besides validating the files.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// Hash the files and compare them with the manifest (`pack` without `--locked` skips
    /// it, because it locks right after).
    pub digests: bool,
    /// Fetch every pinned URL with this client and report drift (`bundle check --refresh`;
    /// network).
    pub refresh: Option<&'a Fetcher>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options { digests: true, refresh: None }
    }
}

/// Checks one agent folder, including whether the manifest's digests are current.
pub fn check_agent(dir: &Path) -> AgentCheck {
    check_agent_with(dir, Options::default())
}

/// Checks one agent folder as `opts` says.
pub fn check_agent_with(dir: &Path, opts: Options<'_>) -> AgentCheck {
    let prefix = display_prefix(dir);
    let mut report = Report::default();
    let mut diags = Vec::new();

    let manifest = read_source(dir, &prefix, manifest::FILE_NAME, true, &mut report)
        .and_then(|src| manifest::parse(&src, &mut diags).map(|m| (m, src)));
    let mut current = None;
    let manifest_text = manifest.as_ref().map(|(_, src)| src.text.clone());
    // Digests are compared only when the manifest itself is sound: lock cannot fix them
    // before the manifest is fixed, and the noise would hide the real problem.
    let manifest_sound = !diags.iter().any(|d| d.is_error());
    if let Some((m, src)) = manifest.as_ref().filter(|_| opts.digests && manifest_sound) {
        let found = lock::current_digests(dir, &prefix, m, &mut diags);
        for (key, message) in lock::stale_entries(m, &found.digests) {
            diags.push(
                Diagnostic::error(Code::StaleDigest, &src.name, message)
                    .at_path(key)
                    .with_help("run `bundle lock` to update the digests"),
            );
        }
        current = Some(found);
    }
    if let Some((m, src)) = manifest.as_ref() {
        pin::check(dir, &prefix, m, &src.name, &mut diags);
        if let Some(fetcher) = opts.refresh {
            pin::refresh(fetcher, dir, &prefix, m, &src.name, &mut diags);
        }
    }
    let manifest = manifest.map(|(m, _)| m);

    let policy = read_source(dir, &prefix, policy::FILE_NAME, false, &mut report)
        .map(|src| Policy::parse(&src, &mut diags))
        .unwrap_or_default();

    let mut tools_file = None;
    let mut schema_files = Vec::new();
    if let Some(src) = read_source(dir, &prefix, tools::FILE_NAME, true, &mut report) {
        let validated = tools::validate(&src, &dir.to_path_buf(), &prefix, &policy, &mut diags);
        for s in &validated.sources {
            report.add_source(s);
        }
        tools_file = validated.value;
        schema_files = validated.schema_files;
    }
    report.diagnostics.extend(diags);
    AgentCheck {
        dir: dir.to_path_buf(),
        manifest,
        tools: tools_file,
        policy,
        report,
        manifest_text,
        current,
        schema_files,
    }
}

/// Checks every agent the paths name.
pub fn check_paths(paths: &[PathBuf], opts: Options<'_>) -> Result<Vec<AgentCheck>> {
    let mut dirs = Vec::new();
    for p in paths {
        dirs.extend(find_agents(p)?);
    }
    Ok(check_all(&dirs, opts))
}

/// Checks agents on all cores (each agent is independent); results keep the input order.
fn check_all(dirs: &[PathBuf], opts: Options<'_>) -> Vec<AgentCheck> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(dirs.len()).max(1);
    if threads == 1 {
        return dirs.iter().map(|d| check_agent_with(d, opts)).collect();
    }
    let chunk = dirs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = dirs
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|d| check_agent_with(d, opts)).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}
