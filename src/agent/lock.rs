//! Locking one agent folder: write the BLAKE3 digest and size of every file into its
//! manifest.toml (`bundle lock`, and `init`, `tool add` and `pack` on the way).

use std::path::{Path, PathBuf};

use super::{Current, Hashing, current_digests, display_prefix, read_source};
use crate::atomic;
use crate::diagnostic::{Code, Diagnostic, Report, Severity};
use crate::manifest;
use crate::manifest::edit::{self, Changes};

/// What `lock` did to one agent.
#[derive(Debug)]
pub struct Locked {
    pub dir: PathBuf,
    pub manifest_path: PathBuf,
    pub changes: Changes,
    /// False when the manifest was already current (and left untouched, mtime included).
    pub written: bool,
    pub report: Report,
    /// The files and digests now in the manifest (when locking succeeded).
    pub current: Option<Current>,
    /// The manifest's text as written (when locking succeeded).
    pub manifest_text: Option<String>,
}

/// Codes `lock` repairs rather than refuses.
fn lock_can_fix(d: &Diagnostic) -> bool {
    let in_digests = d.path.as_deref().is_some_and(|p| p.starts_with("files") || p.starts_with("artifacts"));
    d.severity == Severity::Warning
        || d.code == Code::InvalidDigest
        || (in_digests && matches!(d.code, Code::MissingField | Code::WrongType))
}

/// Locks one agent folder. Problems that lock cannot repair (a broken manifest, symlinks,
/// secret-looking files) leave the manifest untouched and are returned in the report.
pub fn lock_agent(dir: &Path) -> Locked {
    lock_agent_with(dir, Hashing::Every)
}

/// [`lock_agent`], taking unchanged files' digests from the stat cache when `hashing` says so
/// (`bundle lock`; never `pack`, which signs what it locks).
pub fn lock_agent_with(dir: &Path, hashing: Hashing) -> Locked {
    let prefix = display_prefix(dir);
    let manifest_path = dir.join(manifest::FILE_NAME);
    let mut report = Report::default();
    let mut result = Locked {
        dir: dir.to_path_buf(),
        manifest_path: manifest_path.clone(),
        changes: Changes::default(),
        written: false,
        report: Report::default(),
        current: None,
        manifest_text: None,
    };
    let Some(source) = read_source(dir, &prefix, manifest::FILE_NAME, true, &mut report) else {
        result.report = report;
        return result;
    };
    let mut diags = Vec::new();
    let parsed = manifest::parse(&source, &mut diags);
    let blocking: Vec<Diagnostic> = diags.into_iter().filter(|d| !lock_can_fix(d)).collect();
    let Some(parsed) = parsed.filter(|_| blocking.is_empty()) else {
        report.diagnostics.extend(blocking);
        result.report = report;
        return result;
    };
    let mut diags = Vec::new();
    let current = current_digests(dir, &prefix, &parsed, &mut diags, hashing);
    if diags.iter().any(Diagnostic::is_error) {
        report.diagnostics.extend(diags);
        result.report = report;
        return result;
    }
    match edit::apply(&source.text, &current.digests) {
        Ok((text, changes)) => {
            if text != *source.text {
                if let Err(e) = atomic::write(&manifest_path, text.as_bytes(), true) {
                    report.push(Diagnostic::error(
                        Code::IoError,
                        &source.name,
                        format!("cannot write manifest.toml: {e}"),
                    ));
                } else {
                    result.written = true;
                }
            }
            result.changes = changes;
            if !report.has_errors() {
                result.manifest_text = Some(text);
                result.current = Some(current);
            }
        }
        Err(e) => {
            report.push(Diagnostic::error(Code::InvalidToml, &source.name, format!("not valid TOML: {}", e.message())))
        }
    }
    result.report = report;
    result
}
