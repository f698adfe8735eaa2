//! `bundle lock`: write the BLAKE3 digest and size of every file into the manifest.toml of
//! every agent the paths name.

use std::path::{Path, PathBuf};

use crate::agent::{
    CheckOptions, Hashing, LockOutcome, NotLocked, check_agent_with, find_agents, lock_agent_with, lock_can_fix,
};
use crate::error::Result;

/// Locks every agent the paths name, in order. An agent that cannot be locked is reported in
/// its own report and does not stop the others.
pub fn lock_paths(paths: &[PathBuf]) -> Result<Vec<LockOutcome>> {
    let mut dirs = Vec::new();
    for p in paths {
        dirs.extend(find_agents(p)?);
    }
    // `bundle lock` writes digests for review; `pack` hashes again whatever it signs.
    Ok(dirs.iter().map(|d| lock_checked(d)).collect())
}

/// Locks an agent only if it passes `check` (digests aside): locking a broken tools.json would
/// make the pre-commit hook say "files were modified", which invites re-staging instead of
/// fixing. The check's problems are the report, and nothing is written.
fn lock_checked(dir: &Path) -> LockOutcome {
    let Err(problems) = check_agent_with(dir, CheckOptions { digests: false, refresh: None, trusted_root: None })
    else {
        return lock_agent_with(dir, Hashing::StatCache);
    };
    if !problems.report.diagnostics.iter().any(|d| d.is_error() && !lock_can_fix(d)) {
        return lock_agent_with(dir, Hashing::StatCache);
    }
    Err(NotLocked {
        dir: dir.to_path_buf(),
        manifest_path: dir.join(crate::manifest::FILE_NAME),
        report: problems.report,
    })
}
