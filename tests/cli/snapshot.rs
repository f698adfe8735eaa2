//! Snapshots of what a user sees, as uv's `uv_snapshot!` does: one run of the real binary
//! becomes one text (success, exit code, stdout, stderr), checked against a file in
//! `tests/cli/snapshots/`. Review and accept changed output with
//!
//!     INSTA_UPDATE=always cargo test --locked --test cli     # or: cargo insta review
//!
//! and read the diff before committing it.
//!
//! Every run is made deterministic: no colors (`NO_COLOR`), a fixed terminal width for clap's
//! help (`COLUMNS=100`), no signing key or `SOURCE_DATE_EPOCH` from the environment, and the
//! repository's and each temp dir's absolute path replaced by `[REPO]` and `[TEMP]`. Snapshots
//! sign with the committed test key, so key ids are stable and need no filter.

use std::path::Path;
use std::process::Command;

use crate::support::{Env, Run, bin, repo};

/// `bundle ARGS` run in the repository (fixture paths stay relative in the output).
pub fn in_repo(args: &[&str]) -> Command {
    let mut cmd = bin();
    cmd.current_dir(repo()).args(args);
    cmd
}

/// `bundle ARGS` run in a test's temp dir.
pub fn in_env(env: &Env, args: &[&str]) -> Command {
    let mut cmd = bin();
    cmd.current_dir(env.path()).args(args);
    cmd
}

/// Runs `cmd` and renders exit code, stdout and stderr as one text, with the absolute paths
/// of `temps` and of the repository filtered out.
pub fn shown(cmd: &mut Command, temps: &[&Path]) -> String {
    cmd.env("NO_COLOR", "1").env("COLUMNS", "100").env_remove("CLICOLOR_FORCE");
    let out = cmd.output().expect("run bundle");
    let code = out.status.code().map_or_else(|| "none (killed by a signal)".to_owned(), |c| c.to_string());
    let text = format!(
        "success: {}\nexit_code: {code}\n----- stdout -----\n{}\n----- stderr -----\n{}\n",
        out.status.success(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    filter(text, temps)
}

/// A run already made (by `Env::run` and the like), as the same text as [`shown`], with every
/// temp dir (`$TMPDIR/.tmpXXXXXX`) shown as `[TEMP]` and loopback ports as `[PORT]`: for tests
/// that look at files as well as at the output.
pub fn run_text(run: &Run) -> String {
    let text = format!(
        "success: {}\nexit_code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}\n",
        run.code == 0,
        run.code,
        run.stdout,
        run.stderr
    );
    filtered(&text)
}

/// `text` with the repository shown as `[REPO]`, every temp dir (`$TMPDIR/.tmpXXXXXX`) as
/// `[TEMP]` and loopback ports as `[PORT]`.
pub fn filtered(text: &str) -> String {
    let mut text = filter(text.to_owned(), &[]);
    let tmp = std::env::temp_dir();
    for root in [tmp.display().to_string(), tmp.canonicalize().map(|p| p.display().to_string()).unwrap_or_default()] {
        if !root.is_empty() {
            text = replace_after(&text, &format!("{}/.tmp", root.trim_end_matches('/')), "[TEMP]", |c| {
                c.is_ascii_alphanumeric()
            });
        }
    }
    // A port also shows in file names made from a URL (`pins/127.0.0.1_8080.rap.json`).
    for host in ["127.0.0.1:", "localhost:", "127.0.0.1_"] {
        text = replace_after(&text, host, &format!("{host}[PORT]"), |c| c.is_ascii_digit());
    }
    text
}

/// `text` with every `prefix` and the run of characters after it that `keep` accepts replaced
/// by `with`; a prefix followed by no such character stays.
fn replace_after(text: &str, prefix: &str, with: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let tail = after.find(|c: char| !keep(c)).unwrap_or(after.len());
        out.push_str(&rest[..at]);
        if tail == 0 {
            out.push_str(prefix);
        } else {
            out.push_str(with);
        }
        rest = &after[tail..];
    }
    out.push_str(rest);
    out
}

/// `assert_run_snapshot!(RUN)`: checks a [`Run`] against a snapshot named after the test (see
/// [`run_text`]).
macro_rules! assert_run_snapshot {
    ($run:expr) => {
        insta::assert_snapshot!($crate::snapshot::run_text(&$run))
    };
    ($name:expr, $run:expr) => {
        insta::assert_snapshot!($name, $crate::snapshot::run_text(&$run))
    };
}
pub(crate) use assert_run_snapshot;

fn filter(mut text: String, temps: &[&Path]) -> String {
    let mut paths: Vec<(String, &str)> = Vec::new();
    for temp in temps {
        paths.push((temp.display().to_string(), "[TEMP]"));
        if let Ok(canonical) = temp.canonicalize() {
            paths.push((canonical.display().to_string(), "[TEMP]"));
        }
    }
    paths.push((repo().display().to_string(), "[REPO]"));
    // Longest first, so that a temp dir inside the repository is not half-replaced.
    paths.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    for (path, with) in paths {
        text = text.replace(&path, with);
    }
    text
}

/// `bundle_snapshot!(NAME, COMMAND)` or `bundle_snapshot!(NAME, COMMAND, [TEMP_DIRS])`: runs
/// COMMAND (a `std::process::Command` of the real binary, e.g. from [`in_repo`]) and checks
/// exit code + stdout + stderr against the snapshot `NAME`.
macro_rules! bundle_snapshot {
    ($name:expr, $cmd:expr) => {
        $crate::snapshot::bundle_snapshot!($name, $cmd, [])
    };
    ($name:expr, $cmd:expr, [$($temp:expr),* $(,)?]) => {{
        let shown = $crate::snapshot::shown(&mut $cmd, &[$(::std::path::Path::new($temp)),*]);
        insta::assert_snapshot!($name, shown);
    }};
}
pub(crate) use bundle_snapshot;
