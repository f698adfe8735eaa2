//! `bundle check`: validate agent folders (tools.json, policy.caps, manifest.toml) and report
//! every problem at once.

use std::path::PathBuf;

use crate::agent::{AgentCheck, CheckOptions, check_agent_with, find_agents};
use crate::error::Result;

/// Checks every agent the paths name.
pub fn check_paths(paths: &[PathBuf], opts: CheckOptions<'_>) -> Result<Vec<AgentCheck>> {
    let mut dirs = Vec::new();
    for p in paths {
        dirs.extend(find_agents(p)?);
    }
    Ok(check_all(&dirs, opts))
}

/// Checks agents on all cores (each agent is independent); results keep the input order.
fn check_all(dirs: &[PathBuf], opts: CheckOptions<'_>) -> Vec<AgentCheck> {
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
