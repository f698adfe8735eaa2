//! The agent folder: finding agents under a path, reading their text files into sources for
//! diagnostics, and listing and hashing their files against what manifest.toml claims. Every
//! operation that starts from a folder (check, lock, pack, tool add) reads it through here, and
//! the steps several of them share live here too: checking one agent, locking one, its pins.

use std::path::{Path, PathBuf};

use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::error::{Error, Result};
use crate::regular_file::{self, Links, ReadError};
use crate::{limits, manifest, tools};

mod check;
mod digests;
mod lock;
pub mod models;
pub mod pins;
pub mod skills;
pub mod stat_cache;

#[cfg(test)]
pub use check::ADMITTED_FROM;
pub use check::{AgentCheck, Options as CheckOptions, check_agent_admitted, check_agent_with, into_parts};
pub use digests::{Current, Hashing, Kept, claimed_digests, current_digests, stale_entries};
pub use lock::{LockOutcome, LockReport, NotLocked, lock_agent, lock_agent_with, lock_can_fix};

use crate::limits::MAX_AGENT_SEARCH_DEPTH as MAX_SEARCH_DEPTH;

/// Whether `dir` is an agent folder: it holds manifest.toml or tools.json.
pub fn is_agent_folder(dir: &Path) -> bool {
    dir.join(manifest::FILE_NAME).exists() || dir.join(tools::FILE_NAME).exists()
}

/// The agent folders a PATH names, in sorted order: the folder itself when it is an agent
/// folder; else every agent folder below its `agents/` when it has one (so `.` in a repository
/// means `agents/`), else every agent folder below it, at any depth. Hidden folders,
/// `node_modules`, caches (with a `CACHEDIR.TAG`) and symlinks are not searched, and the search
/// does not go into an agent folder.
pub fn find_agents(path: &Path) -> Result<Vec<PathBuf>> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(no_such_folder(path)),
        Err(e) => return Err(Error::io(path, e)),
    };
    if !meta.is_dir() {
        return Err(Error::Usage(format!(
            "{} is not a folder; give an agent folder or a folder with agents/",
            path.display()
        )));
    }
    if is_agent_folder(path) {
        return Ok(vec![path.to_path_buf()]);
    }
    // `agents/mailer`, not `./agents/mailer`: the names reach annotations and JSON output.
    let agents = if path == Path::new(".") { PathBuf::from("agents") } else { path.join("agents") };
    let root = if agents.is_dir() { agents } else { path.to_path_buf() };
    let mut found = Vec::new();
    search(&root, 1, &mut found)?;
    found.sort();
    if found.is_empty() {
        return Err(Error::Usage(format!(
            "no agent in {}: an agent folder holds manifest.toml and tools.json (create one with `bundle init`)",
            path.display()
        )));
    }
    Ok(found)
}

/// A path given as an agent folder that is not there: say so, before anything else (an I/O
/// error, `io_error`, as any missing input).
pub fn no_such_folder(path: &Path) -> Error {
    let why = std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!(
            "no such folder; give an agent folder or a folder of agents (to create an agent there: `bundle init {}`)",
            path.display()
        ),
    );
    Error::io(path, why)
}

/// Collects the agent folders below `dir`. A folder directly in an `agents/` folder counts as
/// an agent even without its files (when no agent is below it), so that `check` reports what
/// it lacks instead of passing over it.
fn search(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) -> Result<()> {
    let mut subdirs: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let skipped = name.to_string_lossy().starts_with('.') || name == "node_modules";
        // file_type() does not follow symlinks: a linked folder is not searched.
        if !skipped && entry.file_type().is_ok_and(|t| t.is_dir()) {
            subdirs.push(if dir == Path::new(".") { PathBuf::from(entry.file_name()) } else { entry.path() });
        }
    }
    subdirs.sort();
    let kinds = folder_kinds(&subdirs);
    let in_agents = dir.file_name().is_some_and(|n| n == "agents");
    for (sub, kind) in subdirs.into_iter().zip(kinds) {
        match kind {
            Kind::Cache => continue,
            Kind::Agent => {
                found.push(sub);
                continue;
            }
            Kind::Other => {}
        }
        let before = found.len();
        if depth < MAX_SEARCH_DEPTH {
            search(&sub, depth + 1, found)?;
        }
        if found.len() == before && in_agents {
            found.push(sub);
        }
    }
    Ok(())
}

/// What a folder met in the search is.
enum Kind {
    /// A cache (a build's target/ marks itself with CACHEDIR.TAG): not searched, it can be huge.
    Cache,
    Agent,
    Other,
}

/// Folders from this many up are looked at on every core: a monorepo's `agents/` of 20,000
/// agents costs 40,000 `stat`s before any agent is checked (0.1 s on one core of the 2-vCPU
/// bench machine, with the other idle).
const KINDS_IN_PARALLEL_FROM: usize = 256;

fn folder_kinds(dirs: &[PathBuf]) -> Vec<Kind> {
    use rayon::prelude::*;
    let kind = |d: &PathBuf| {
        if d.join("CACHEDIR.TAG").exists() {
            Kind::Cache
        } else if is_agent_folder(d) {
            Kind::Agent
        } else {
            Kind::Other
        }
    };
    if dirs.len() >= KINDS_IN_PARALLEL_FROM {
        dirs.par_iter().map(kind).collect()
    } else {
        dirs.iter().map(kind).collect()
    }
}

/// How an agent folder's files are named in diagnostics: `agents/mailer/tools.json`.
pub fn display_prefix(dir: &Path) -> String {
    let s = dir.to_string_lossy();
    let s = s.strip_prefix("./").unwrap_or(&s);
    if s.is_empty() || s == "." { String::new() } else { format!("{}/", s.trim_end_matches('/')) }
}

/// An agent folder's files as tools.json's schema references read them: those [`Kept`] while
/// hashing (each taken out once), else read from the folder.
pub struct FolderFiles {
    pub dir: PathBuf,
    pub kept: std::cell::RefCell<Kept>,
}

impl tools::AgentFiles for FolderFiles {
    fn read(&self, rel: &str) -> std::result::Result<Option<Vec<u8>>, ReadError> {
        match self.kept.borrow_mut().remove(rel) {
            Some(bytes) => Ok(Some(bytes)),
            None => self.dir.read(rel),
        }
    }
}

/// An agent's tools.json as the tool editing commands (`tool list`, `tool remove`) read it.
#[derive(Debug)]
pub struct ToolsJson {
    pub path: PathBuf,
    /// The text, or `None` when it could not be read (then `report` says why).
    pub source: Option<Source>,
    pub report: Report,
}

/// Reads the tools.json of the agent in `dir`. A folder that is not there, or has no
/// tools.json, is an error (usage): it is not an agent folder.
pub fn read_tools_json(dir: &Path) -> Result<ToolsJson> {
    std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
    let mut report = Report::default();
    let source = read_source(dir, &display_prefix(dir), tools::FILE_NAME, true, &mut report);
    if source.is_none() && report.diagnostics.iter().any(|d| d.code == Code::MissingFile) {
        return Err(Error::Usage(format!("{} has no tools.json (is it an agent folder?)", dir.display())));
    }
    Ok(ToolsJson { path: dir.join(tools::FILE_NAME), source, report })
}

/// Reads a text file of the agent into a [`Source`]; a missing or unreadable file becomes a
/// diagnostic.
pub fn read_source(dir: &Path, prefix: &str, name: &str, required: bool, report: &mut Report) -> Option<Source> {
    read_source_kept(dir, prefix, name, required, report, &mut Kept::new())
}

/// [`read_source`], with the bytes from `kept` (taken out) when the file was read whole while
/// it was hashed.
pub fn read_source_kept(
    dir: &Path,
    prefix: &str,
    name: &str,
    required: bool,
    report: &mut Report,
    kept: &mut Kept,
) -> Option<Source> {
    let display = format!("{prefix}{name}");
    // Each file is read under the cap `bundle verify` applies to it, never through a symlink,
    // and never if it is a FIFO or a device (which would block or never end).
    let limit = match name {
        crate::manifest::FILE_NAME => limits::MAX_MANIFEST_BYTES,
        crate::policy::FILE_NAME => limits::MAX_POLICY_BYTES,
        _ => limits::MAX_JSON_BYTES,
    };
    // Kept bytes are within every cap (asserted where they are kept).
    let read = match kept.remove(name) {
        Some(bytes) => Ok(bytes),
        None => regular_file::read(&dir.join(name), limit, Links::Refuse),
    };
    match read {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Enough folders that their kinds are looked at on every core: the answer is the one
    /// folder by folder would give, in sorted order.
    #[test]
    fn many_folders_are_sorted_into_agents_caches_and_others_as_one_by_one() {
        let base = tempfile::tempdir().unwrap();
        let agents = base.path().join("agents");
        let mut want = Vec::new();
        for i in 0..KINDS_IN_PARALLEL_FROM + 44 {
            let dir = agents.join(format!("a{i:04}"));
            std::fs::create_dir_all(&dir).unwrap();
            match i % 4 {
                // A cache is skipped even when it looks like an agent.
                0 => {
                    std::fs::write(dir.join("CACHEDIR.TAG"), "Signature: 8a477f597d28d172789f06886806bc55").unwrap();
                    std::fs::write(dir.join(manifest::FILE_NAME), "").unwrap();
                }
                1 => {
                    std::fs::write(dir.join(manifest::FILE_NAME), "").unwrap();
                    want.push(dir);
                }
                // An agent one level down is found instead of its folder.
                2 => {
                    std::fs::create_dir(dir.join("inner")).unwrap();
                    std::fs::write(dir.join("inner").join(tools::FILE_NAME), "").unwrap();
                    want.push(dir.join("inner"));
                }
                // A folder directly in agents/ with no agent below counts as one.
                _ => want.push(dir),
            }
        }
        assert_eq!(find_agents(base.path()).unwrap(), want);
    }
}
