//! Locking one agent folder: write the BLAKE3 digest and size of every file into its
//! manifest.toml (`bundle lock`, and `init`, `tool add` and `pack` on the way).

use std::path::{Path, PathBuf};

use super::{Current, Hashing, current_digests, display_prefix, read_source};
use crate::atomic;
use crate::diagnostic::{Code, Diagnostic, Report, Severity};
use crate::manifest;
use crate::manifest::edit::{self, Changes};

/// An agent whose manifest now holds the current digests.
#[derive(Debug)]
pub struct Locked {
    pub dir: PathBuf,
    pub manifest_path: PathBuf,
    pub changes: Changes,
    /// False when the manifest was already current (and left untouched, mtime included).
    pub written: bool,
    /// Warnings only.
    pub report: Report,
    /// The files and digests now in the manifest.
    pub current: Current,
    /// The manifest's text as written.
    pub manifest_text: String,
}

/// An agent lock refused to change: the manifest is as it was.
#[derive(Debug)]
pub struct NotLocked {
    pub dir: PathBuf,
    pub manifest_path: PathBuf,
    /// Why; at least one diagnostic is an error.
    pub report: Report,
}

/// What `lock` did to one agent.
pub type LockOutcome = Result<Locked, NotLocked>;

/// What commands that relock on the way (`tool add`, `import`) report of either outcome.
pub trait LockReport {
    fn report(&self) -> &Report;
    fn into_report(self) -> Report;
    fn manifest_path(&self) -> &Path;
    /// Whether manifest.toml was rewritten.
    fn written(&self) -> bool;
}

impl LockReport for LockOutcome {
    fn report(&self) -> &Report {
        match self {
            Ok(l) => &l.report,
            Err(n) => &n.report,
        }
    }
    fn into_report(self) -> Report {
        match self {
            Ok(l) => l.report,
            Err(n) => n.report,
        }
    }
    fn manifest_path(&self) -> &Path {
        match self {
            Ok(l) => &l.manifest_path,
            Err(n) => &n.manifest_path,
        }
    }
    fn written(&self) -> bool {
        self.as_ref().is_ok_and(|l| l.written)
    }
}

/// Codes `lock` repairs rather than refuses.
pub fn lock_can_fix(d: &Diagnostic) -> bool {
    let in_digests = d.path.as_deref().is_some_and(|p| p.starts_with("files") || p.starts_with("artifacts"));
    // A trusted root not given is no problem of the folder: lock judges no model's signer.
    d.severity == Severity::Warning
        || d.code == Code::InvalidDigest
        || d.code == Code::ModelTrustedRootMissing
        || (in_digests && matches!(d.code, Code::MissingField | Code::WrongType))
}

/// Locks one agent folder. Problems that lock cannot repair (a broken manifest, symlinks,
/// secret-looking files) leave the manifest untouched and are returned in the report.
pub fn lock_agent(dir: &Path) -> LockOutcome {
    lock_agent_with(dir, Hashing::Every)
}

/// [`lock_agent`], taking unchanged files' digests from the stat cache when `hashing` says so
/// (`bundle lock`; never `pack`, which signs what it locks).
pub fn lock_agent_with(dir: &Path, hashing: Hashing) -> LockOutcome {
    let prefix = display_prefix(dir);
    let manifest_path = dir.join(manifest::FILE_NAME);
    let mut report = Report::default();
    let refused = |report| Err(NotLocked { dir: dir.to_path_buf(), manifest_path: manifest_path.clone(), report });
    let Some(source) = read_source(dir, &prefix, manifest::FILE_NAME, true, &mut report) else {
        return refused(report);
    };
    let mut diags = Vec::new();
    let parsed = manifest::parse(&source, &mut diags);
    let blocking: Vec<Diagnostic> = diags.into_iter().filter(|d| !lock_can_fix(d)).collect();
    let Some(parsed) = parsed.filter(|_| blocking.is_empty()) else {
        report.diagnostics.extend(blocking);
        return refused(report);
    };
    let mut diags = Vec::new();
    let current = current_digests(dir, &prefix, &parsed, &mut diags, hashing);
    if diags.iter().any(Diagnostic::is_error) {
        report.diagnostics.extend(diags);
        return refused(report);
    }
    let (text, changes) = match edit::apply(&source.text, &current.digests) {
        Ok(edited) => edited,
        Err(e) => {
            report.push(Diagnostic::error(Code::InvalidToml, &source.name, format!("not valid TOML: {}", e.message())));
            return refused(report);
        }
    };
    let written = text != *source.text;
    if written && let Err(e) = atomic::write(&manifest_path, text.as_bytes(), true) {
        report.push(Diagnostic::error(Code::IoError, &source.name, format!("cannot write manifest.toml: {e}")));
        return refused(report);
    }
    Ok(Locked { dir: dir.to_path_buf(), manifest_path, changes, written, report, current, manifest_text: text })
}
