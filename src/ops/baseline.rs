//! `bundle baseline snapshot|approve`: record the tool contracts of a release (a bundle or an
//! agent folder) as approved, in a baseline file the deployment gate reads.

use std::path::Path;

use crate::contract::baseline::{self, Approval, BaselineError};
use crate::contract::release::{self, AgentContracts};

/// Writes a baseline approving every tool of the release at `source`; an existing file is
/// replaced only with `overwrite`. Returns the contracts approved.
pub fn snapshot(source: &Path, out: &Path, overwrite: bool) -> Result<AgentContracts, BaselineError> {
    let agent = release::load(source)?;
    baseline::snapshot(&agent, out, overwrite)?;
    Ok(agent)
}

/// Approves the contracts of `ids` in the release at `from` in the baseline file `path`.
/// Returns the release read and what happened to each tool's entry.
pub fn approve(path: &Path, from: &Path, ids: &[String]) -> Result<(AgentContracts, Vec<Approval>), BaselineError> {
    let agent = release::load(from)?;
    let done = baseline::approve(path, &agent, ids)?;
    Ok((agent, done))
}
