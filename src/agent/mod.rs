//! The agent folder: finding agents under a path, reading their text files into sources for
//! diagnostics, and listing and hashing their files against what manifest.toml claims. Every
//! operation that starts from a folder (check, lock, pack, tool add) reads it through here, and
//! the steps several of them share live here too: checking one agent, locking one, its pins.

use std::path::{Path, PathBuf};

use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::error::{Error, Result};
use crate::{manifest, tools};

mod check;
mod digests;
mod lock;
pub mod pins;

pub use check::{AgentCheck, Options as CheckOptions, check_agent_with};
pub use digests::{Current, claimed_digests, current_digests, stale_entries};
pub use lock::{Locked, lock_agent};

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
    match std::fs::read(dir.join(name)) {
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
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if required {
                report.push(
                    Diagnostic::error(Code::MissingFile, &display, format!("the agent folder has no {name}"))
                        .with_help("create it, e.g. with `bundle init`"),
                );
            }
            None
        }
        Err(e) => {
            report.push(Diagnostic::error(Code::IoError, &display, format!("cannot read {name}: {e}")));
            None
        }
    }
}
