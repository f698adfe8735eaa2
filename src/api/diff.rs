//! What one release changes against another in its tools' contracts and its policy.caps grants,
//! each change classified: `bundle diff` as a library call.

use std::path::Path;

use super::contracts::Risk;
use super::error::{Error, FailureCode};
use super::verdict::ReasonCode;
use crate::contract::Change;
use crate::contract::release::LoadError;
use crate::error::ErrorCode;
use crate::ops::diff::{self, Status};

/// What happened to one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChangeStatus {
    /// Only the new release has it.
    Added,
    /// Only the old release has it.
    Removed,
    /// Its contract differs.
    Changed,
    /// Its contract is the same.
    Unchanged,
}

/// One tool in a comparison of two releases.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolChange {
    /// The tool id.
    pub id: String,
    /// Added, removed, changed or unchanged.
    pub status: ToolChangeStatus,
    /// Fingerprint and risk in the old release, when it has the tool.
    pub old: Option<(String, Risk)>,
    /// Fingerprint and risk in the new release, when it has the tool.
    pub new: Option<(String, Risk)>,
    /// Each change: `(kind, impact, message)` with the stable codes of the book's change table
    /// (`http_host_changed`, `widening`, ...).
    pub changes: Vec<(&'static str, &'static str, String)>,
}

/// The comparison of two releases.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReleaseDiff {
    /// The new release's tools in its order, then the removed ones.
    pub tools: Vec<ToolChange>,
    /// policy.caps grants added and removed: `(kind, impact, message)`.
    pub grants: Vec<(&'static str, &'static str, String)>,
}

impl ReleaseDiff {
    /// Every change's impact, policy.caps first: for `--fail-on`-like decisions.
    pub fn impacts(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.grants.iter().chain(self.tools.iter().flat_map(|t| t.changes.iter())).map(|c| c.1)
    }
}

/// Compares two releases, each a bundle file or an agent folder, as `bundle diff OLD NEW`
/// does. A bundle's archive, digests and tools.json are checked, but not its signature: verify
/// a bundle before trusting what it says.
pub fn diff(old: impl AsRef<Path>, new: impl AsRef<Path>) -> Result<ReleaseDiff, Error> {
    let d = diff::diff_paths(old.as_ref(), new.as_ref(), None).map_err(|e| {
        let code = match &e {
            LoadError::Io(crate::Error::Io { .. }) => FailureCode::Error(ErrorCode::IoError),
            LoadError::Rejected { code, .. } => FailureCode::Unreadable(ReasonCode::of(*code)),
            _ => FailureCode::Error(ErrorCode::Usage),
        };
        Error::failed(code, e.to_string())
    })?;
    let change = |c: &Change| (c.kind.as_str(), c.impact.as_str(), c.message.clone());
    let side =
        |s: &Option<diff::Side>| s.as_ref().map(|s| (s.fingerprint.clone(), super::contracts::risk_from_inner(s.risk)));
    let tools = d
        .tools
        .iter()
        .map(|t| ToolChange {
            id: t.id.clone(),
            status: match t.status {
                Status::Added => ToolChangeStatus::Added,
                Status::Removed => ToolChangeStatus::Removed,
                Status::Changed => ToolChangeStatus::Changed,
                Status::Unchanged => ToolChangeStatus::Unchanged,
            },
            old: side(&t.old),
            new: side(&t.new),
            changes: t.changes.iter().map(change).collect(),
        })
        .collect();
    Ok(ReleaseDiff { tools, grants: d.grants.iter().map(change).collect() })
}
