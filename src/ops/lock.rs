//! `bundle lock`: write the BLAKE3 digest and size of every file into the manifest.toml of
//! every agent the paths name.

use std::path::PathBuf;

use crate::agent::{Hashing, Locked, find_agents, lock_agent_with};
use crate::error::Result;

/// Locks every agent the paths name, in order. An agent that cannot be locked is reported in
/// its own [`Locked::report`] and does not stop the others.
pub fn lock_paths(paths: &[PathBuf]) -> Result<Vec<Locked>> {
    let mut dirs = Vec::new();
    for p in paths {
        dirs.extend(find_agents(p)?);
    }
    // `bundle lock` writes digests for review; `pack` hashes again whatever it signs.
    Ok(dirs.iter().map(|d| lock_agent_with(d, Hashing::StatCache)).collect())
}
