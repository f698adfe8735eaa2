//! Which files of an agent folder go into its bundle.
//!
//! Every regular file is included except what `.bundleignore` (gitignore syntax) or the
//! default ignore list excludes. Symlinks and special files are errors (never followed);
//! paths must obey `paths::check` and not collide when case is folded; files that look like
//! secrets are refused unless the manifest's `[bundle] allow_secret_files` names them.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::diagnostic::{Code, Diagnostic};
use crate::limits::MAX_BUNDLEIGNORE_BYTES;
use crate::paths;
use crate::regular_file::{self, Links, ReadError};

/// Excluded without being listed in `.bundleignore`: version control, editor droppings,
/// built bundles, and our own temp files.
pub const DEFAULT_IGNORES: &[&str] = &[
    ".git/",
    ".hg/",
    ".svn/",
    ".jj/",
    ".bundleignore",
    ".DS_Store",
    "Thumbs.db",
    "desktop.ini",
    "*~",
    "*.swp",
    "*.swo",
    ".#*",
    "#*#",
    ".idea/",
    ".vscode/",
    "__pycache__/",
    "*.pyc",
    "*.agent.bundle",
    ".*.tmp",
    crate::entries::SIGNATURE_ENTRY,
];

/// Names that look like secrets: refused unless explicitly allowed.
pub const SECRET_PATTERNS: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "credentials.json",
    "*.kdbx",
];

/// One file that belongs in the bundle, as the folder's listing names it (not yet `stat`ed).
#[derive(Debug, Clone)]
pub struct Found {
    /// Relative, `/`-separated path inside the agent folder.
    pub path: String,
    pub full: PathBuf,
}

/// One file that belongs in the bundle, with its metadata.
#[derive(Debug, Clone)]
pub struct AgentFile {
    /// Relative, `/`-separated path inside the agent folder.
    pub path: String,
    pub full: PathBuf,
    pub size: u64,
    pub executable: bool,
}

impl AgentFile {
    /// `found`, with its metadata (tools.json and policy.caps are data: never executable).
    pub fn new(found: Found, meta: &std::fs::Metadata) -> AgentFile {
        let named = found.path == crate::tools::FILE_NAME || found.path == crate::policy::FILE_NAME;
        let executable = !named && is_executable(meta);
        AgentFile { path: found.path, full: found.full, size: meta.len(), executable }
    }
}

/// A matcher for built-in patterns, built once per process (building compiles regexes, which
/// costs more than checking a small agent). Paths are matched relative to the agent folder.
fn builtin(cell: &'static OnceLock<Gitignore>, lines: &[&str]) -> &'static Gitignore {
    cell.get_or_init(|| matcher(Path::new(""), lines))
}

static DEFAULTS: OnceLock<Gitignore> = OnceLock::new();
static SECRETS: OnceLock<Gitignore> = OnceLock::new();

/// What the built-in lists say of one folder entry.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Builtin {
    /// Matched by [`DEFAULT_IGNORES`].
    ignored: bool,
    /// A file matched by [`SECRET_PATTERNS`].
    secret: bool,
}

/// The most entry names [`builtin`] remembers per thread (per kind: files, folders).
const REMEMBERED_NAMES: usize = 256;

/// What the built-in lists say of the entry at `rel_path`. Their patterns hold no `/` but a
/// trailing one (folders only), so the answer depends only on the entry's name and whether it
/// is a folder (a test holds this): it is remembered per thread, for the names a check meets in
/// every agent (each has a tools.json; matching them again was 4% of `check`).
fn builtin_verdict(rel_path: &Path, is_dir: bool) -> Builtin {
    thread_local! {
        static REMEMBERED: RefCell<[HashMap<OsString, Builtin>; 2]> = RefCell::default();
    }
    let name = rel_path.file_name().unwrap_or(rel_path.as_os_str());
    REMEMBERED.with(|cell| {
        let mut memo = cell.borrow_mut();
        let names = &mut memo[usize::from(is_dir)];
        if let Some(verdict) = names.get(name) {
            return *verdict;
        }
        let verdict = match_builtin(name, is_dir);
        if names.len() < REMEMBERED_NAMES {
            names.insert(name.to_owned(), verdict);
        }
        verdict
    })
}

fn match_builtin(name: &OsStr, is_dir: bool) -> Builtin {
    let path = Path::new(name);
    Builtin {
        ignored: builtin(&DEFAULTS, DEFAULT_IGNORES).matched(path, is_dir).is_ignore(),
        secret: !is_dir && builtin(&SECRETS, SECRET_PATTERNS).matched(path, false).is_ignore(),
    }
}

fn matcher(root: &Path, lines: &[&str]) -> Gitignore {
    let mut b = GitignoreBuilder::new(root);
    for line in lines {
        // The patterns are constants known to be valid.
        let _ = b.add_line(None, line);
    }
    b.build().unwrap_or_else(|_| Gitignore::empty())
}

/// Lists the agent's files (sorted by path), reporting every problem. `manifest.toml` itself
/// is not listed: it is the bundle's first entry, not an artifact.
pub fn collect(dir: &Path, prefix: &str, allowed_secrets: &[String], diags: &mut Vec<Diagnostic>) -> Vec<AgentFile> {
    let found = walk(dir, prefix, allowed_secrets, diags);
    let mut files = Vec::with_capacity(found.len());
    for f in found {
        match std::fs::symlink_metadata(&f.full) {
            Ok(meta) => files.push(AgentFile::new(f, &meta)),
            Err(e) => diags.push(Diagnostic::error(
                Code::IoError,
                format!("{prefix}{}", f.path),
                format!("cannot read {}: {e}", f.path),
            )),
        }
    }
    files
}

/// The files that belong in the bundle, sorted by path, as [`collect`] finds them but without
/// their metadata: the listing's file types tell files from folders and links, so nothing is
/// `stat`ed (`bundle check` opens each file next, and `fstat`s it then).
pub fn walk(dir: &Path, prefix: &str, allowed_secrets: &[String], diags: &mut Vec<Diagnostic>) -> Vec<Found> {
    let user = user_ignores(dir, prefix, diags);

    let mut files = Vec::new();
    let mut walker = walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name().min_depth(1).into_iter();
    while let Some(entry) = walker.next() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let at = e.path().map(|p| p.display().to_string()).unwrap_or_else(|| dir.display().to_string());
                diags.push(Diagnostic::error(Code::IoError, at, format!("cannot read the agent folder: {e}")));
                continue;
            }
        };
        let rel_path = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let is_dir = entry.file_type().is_dir();
        let verdict = builtin_verdict(rel_path, is_dir);
        if verdict.ignored || user.matched(rel_path, is_dir).is_ignore() {
            if is_dir {
                walker.skip_current_dir();
            }
            continue;
        }
        if is_dir {
            continue;
        }
        let Some(rel) = rel_path.to_str().map(|s| s.replace(std::path::MAIN_SEPARATOR, "/")) else {
            diags.push(
                Diagnostic::error(
                    Code::UnsafePath,
                    format!("{prefix}{}", rel_path.display()),
                    "the file name is not valid UTF-8",
                )
                .with_help("rename the file"),
            );
            continue;
        };
        // Named only in a diagnostic: most files have none.
        let display = || format!("{prefix}{rel}");
        let file_type = entry.file_type();
        if !file_type.is_file() {
            let what = if file_type.is_symlink() { "a symbolic link" } else { "not a regular file" };
            diags.push(
                Diagnostic::error(
                    Code::UnsupportedFileType,
                    display(),
                    format!("{rel} is {what}; bundles hold only regular files"),
                )
                .with_help("replace it with a copy of the file, or exclude it in .bundleignore"),
            );
            continue;
        }
        if rel == crate::manifest::FILE_NAME {
            continue;
        }
        if let Err(why) = paths::check(&rel) {
            diags.push(
                Diagnostic::error(Code::UnsafePath, display(), format!("{rel} cannot be packed: {why}"))
                    .with_help("rename the file"),
            );
            continue;
        }
        if verdict.secret && !allowed_secrets.iter().any(|a| a == &rel) {
            diags.push(
                Diagnostic::error(Code::SecretFile, display(), format!("{rel} looks like a secret and would be shipped in the bundle"))
                    .with_help(format!(
                        "exclude it in .bundleignore, or if it is meant to ship, list it in manifest.toml: [bundle] allow_secret_files = [\"{rel}\"]"
                    )),
            );
            continue;
        }
        files.push(Found { path: rel, full: entry.path().to_path_buf() });
    }
    files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));

    let listed: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    for clash in paths::clashes(&listed, crate::entries::OWN_ENTRIES) {
        let (path, message) = match clash {
            paths::Clash::Case { path, first } => (path, format!("{path} and {first} differ only in case")),
            paths::Clash::FileAndFolder { path, folder } => {
                (path, format!("{folder} is a file, and a folder of {path} when case is folded"))
            }
        };
        diags.push(
            Diagnostic::error(Code::UnsafePath, format!("{prefix}{path}"), message)
                .with_help("rename one: they collide on case-insensitive file systems"),
        );
    }
    files
}

/// `.bundleignore`, read like every agent file (a regular file, not through a symlink, at most
/// [`MAX_BUNDLEIGNORE_BYTES`]).
fn user_ignores(dir: &Path, prefix: &str, diags: &mut Vec<Diagnostic>) -> Gitignore {
    let path = dir.join(".bundleignore");
    let display = format!("{prefix}.bundleignore");
    let text = match regular_file::read_to_string(&path, MAX_BUNDLEIGNORE_BYTES, Links::Refuse) {
        Ok(text) => text,
        Err(ReadError::NotFound) => return Gitignore::empty(),
        Err(e) => {
            let code = match e {
                ReadError::NotRegular { .. } => Code::UnsupportedFileType,
                ReadError::TooLarge { .. } => Code::LimitExceeded,
                _ => Code::IoError,
            };
            diags.push(Diagnostic::error(code, display, format!("cannot use .bundleignore: {e}")));
            return Gitignore::empty();
        }
    };
    let mut builder = GitignoreBuilder::new(dir);
    for line in text.lines() {
        if let Err(e) = builder.add_line(Some(path.clone()), line) {
            diags.push(Diagnostic::error(Code::IoError, &display, format!("cannot use .bundleignore: {e}")));
        }
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_: &std::fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `walk` finds what `collect` finds, by file types alone; `collect` adds the metadata.
    #[cfg(unix)]
    #[test]
    fn walk_lists_what_collect_lists_without_metadata() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("b/c")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        for (path, bytes) in [("tools.json", "{}"), ("b/c/d.md", "hello"), ("a.sh", "#!/bin/sh\n"), (".git/x", "")] {
            std::fs::write(root.join(path), bytes).unwrap();
        }
        std::fs::set_permissions(root.join("a.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(root.join("tools.json"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("a.sh", root.join("link")).unwrap();
        let (mut walked, mut collected) = (Vec::new(), Vec::new());
        let found: Vec<String> = walk(root, "", &[], &mut walked).into_iter().map(|f| f.path).collect();
        let files = collect(root, "", &[], &mut collected);
        assert_eq!(found, ["a.sh", "b/c/d.md", "tools.json"]);
        assert_eq!(files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), found);
        let codes = |d: &[Diagnostic]| d.iter().map(|d| d.code).collect::<Vec<_>>();
        assert_eq!(codes(&walked), [Code::UnsupportedFileType]);
        assert_eq!(codes(&walked), codes(&collected));
        let facts: Vec<(u64, bool)> = files.iter().map(|f| (f.size, f.executable)).collect();
        // tools.json is data: never executable, whatever its mode.
        assert_eq!(facts, [(10, true), (5, false), (2, false)]);
    }

    #[test]
    fn built_in_patterns_depend_only_on_the_name() {
        for pattern in DEFAULT_IGNORES.iter().chain(SECRET_PATTERNS) {
            assert!(!pattern.trim_end_matches('/').contains('/'), "{pattern} names a path, not a name");
        }
        let names = [
            "tools.json",
            ".git",
            ".env",
            ".env.local",
            "a.pem",
            "id_rsa",
            "x.swp",
            "#a#",
            ".#a",
            "a~",
            ".x.tmp",
            "__pycache__",
            "m.pyc",
            "b.agent.bundle",
            "credentials.json",
            "notes.md",
            ".DS_Store",
            "key",
            "a.key",
        ];
        for name in names {
            for is_dir in [false, true] {
                let verdict = builtin_verdict(Path::new(name), is_dir);
                assert_eq!(verdict, builtin_verdict(Path::new(name), is_dir), "remembered {name}");
                for dir in ["", "a/", "a/b/", ".git/"] {
                    let path = format!("{dir}{name}");
                    let full = Builtin {
                        ignored: builtin(&DEFAULTS, DEFAULT_IGNORES).matched(Path::new(&path), is_dir).is_ignore(),
                        secret: !is_dir
                            && builtin(&SECRETS, SECRET_PATTERNS).matched(Path::new(&path), false).is_ignore(),
                    };
                    assert_eq!(verdict, full, "{path} (folder: {is_dir})");
                }
            }
        }
        assert!(builtin_verdict(Path::new("a/.git"), true).ignored);
        assert!(!builtin_verdict(Path::new("a/.git"), false).ignored);
        assert!(builtin_verdict(Path::new("x/y.pem"), false).secret);
    }
}
