//! `bundle diff <OLD> <NEW>`: what a release changes in its tools' contracts and its
//! policy.caps, each change classified (contract::changes), for a reviewer or a pipeline.

use std::path::Path;

use serde::Serialize;

use crate::contract::release::{AgentContracts, LoadError, PinnedServer};
use crate::contract::{self, Change, Contract, Impact, Risk};
use crate::formats::mcp_pin;
use crate::ops::contracts;

/// What happened to one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Added,
    Removed,
    Changed,
    Unchanged,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolDiff {
    pub id: String,
    pub status: Status,
    /// Fingerprint and risk on each side, when the tool is there.
    pub old: Option<Side>,
    pub new: Option<Side>,
    pub changes: Vec<Change>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub fingerprint: String,
    pub risk: Risk,
}

impl From<&Contract> for Side {
    fn from(c: &Contract) -> Self {
        Side { fingerprint: c.fingerprint.clone(), risk: c.risk }
    }
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct AgentDiff {
    pub old: AgentContracts,
    pub new: AgentContracts,
    /// The new side's tools in its order, then the removed ones in the old side's order.
    pub tools: Vec<ToolDiff>,
    /// policy.caps grants added and removed.
    pub grants: Vec<Change>,
    /// The declared client tools added or removed (manifest.toml `[skills] client_tools`), then
    /// the skills added, removed or changed.
    pub skills: Vec<Change>,
    /// The pinned MCP servers of either side, by name (new side's order, then removed ones).
    pub pins: Vec<PinDiff>,
}

/// What happened to one pinned MCP server's tools: the changes of `contract::list_drift`,
/// each naming its tool as `mcp:<server>/<tool>` (so that it cannot be taken for a
/// tools.json id).
#[derive(Debug, Clone, Serialize)]
pub struct PinDiff {
    pub server: String,
    /// The pin file on the new side (on the old side when the server is no longer pinned).
    pub file: String,
    pub status: Status,
    /// The pinned tools' fingerprints on each side, by name in served order.
    pub old: Option<Vec<(String, String)>>,
    pub new: Option<Vec<(String, String)>>,
    pub changes: Vec<Change>,
}

/// Which changes make `bundle diff --fail-on` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    Widening,
    Breaking,
    Any,
}

impl FailOn {
    pub fn matches(self, change: &Change) -> bool {
        match self {
            FailOn::Widening => change.impact == Impact::Widening,
            FailOn::Breaking => change.impact == Impact::Breaking,
            FailOn::Any => true,
        }
    }
}

impl AgentDiff {
    /// The two names when OLD and NEW are different agents (a diff of releases of one agent
    /// is what the gate means; across agents every tool is added or removed).
    pub fn different_agents(&self) -> Option<(&str, &str)> {
        match (&self.old.name, &self.new.name) {
            (Some(o), Some(n)) if o != n => Some((o, n)),
            _ => None,
        }
    }

    /// Every change: policy.caps first, then tool by tool, then the pinned MCP servers'.
    pub fn changes(&self) -> impl Iterator<Item = &Change> {
        self.grants
            .iter()
            .chain(&self.skills)
            .chain(self.tools.iter().flat_map(|t| t.changes.iter()))
            .chain(self.pins.iter().flat_map(|p| p.changes.iter()))
    }

    /// How many changes of each impact.
    pub fn count(&self, impact: Impact) -> usize {
        self.changes().filter(|c| c.impact == impact).count()
    }

    /// The changes any of `fail_on` matches.
    pub fn matching<'a>(&'a self, fail_on: &'a [FailOn]) -> impl Iterator<Item = &'a Change> {
        self.changes().filter(|c| fail_on.iter().any(|f| f.matches(c)))
    }
}

/// Reads both sides and compares them; a `[[models]]` identity on either side is judged under
/// `root` (refused without one).
pub fn diff_paths(old: &Path, new: &Path, root: Option<&crate::keyless::TrustedRoot>) -> Result<AgentDiff, LoadError> {
    Ok(diff(contracts::load(old, root)?, contracts::load(new, root)?))
}

/// Compares two releases of an agent.
pub fn diff(old: AgentContracts, new: AgentContracts) -> AgentDiff {
    let mut tools = Vec::new();
    for n in &new.contracts {
        let tool = match old.get(n.id()) {
            None => ToolDiff {
                id: n.id().to_owned(),
                status: Status::Added,
                old: None,
                new: Some(n.into()),
                changes: vec![contract::tool_added(n)],
            },
            Some(o) => {
                let changes = contract::compare(o, n);
                let status = if changes.is_empty() { Status::Unchanged } else { Status::Changed };
                ToolDiff { id: n.id().to_owned(), status, old: Some(o.into()), new: Some(n.into()), changes }
            }
        };
        tools.push(tool);
    }
    for o in old.contracts.iter().filter(|o| new.get(o.id()).is_none()) {
        tools.push(ToolDiff {
            id: o.id().to_owned(),
            status: Status::Removed,
            old: Some(o.into()),
            new: None,
            changes: vec![contract::tool_removed(o)],
        });
    }
    let grants = contract::compare_grants(&old.grants, &new.grants);
    let mut skills = contract::compare_client_tools(&old.client_tools, &new.client_tools);
    skills.extend(contract::compare_skills(&old.skills, &new.skills));
    let pins = pins(&old.pins, &new.pins);
    AgentDiff { old, new, tools, grants, skills, pins }
}

/// Each pinned server of either side compared by name with `contract::list_drift`.
fn pins(old: &[PinnedServer], new: &[PinnedServer]) -> Vec<PinDiff> {
    let fingerprints = |p: &PinnedServer| {
        p.tools
            .iter()
            .map(|t| (mcp_pin::tool_name(t).unwrap_or_default().to_owned(), mcp_pin::fingerprint(t)))
            .collect::<Vec<_>>()
    };
    let find = |list: &'_ [PinnedServer], server: &str| list.iter().position(|p| p.server == server);
    let mut out = Vec::new();
    for n in new {
        let o = find(old, &n.server).map(|i| &old[i]);
        let mut changes = crate::contract::list_drift(o.map_or(&[][..], |o| &o.tools), &n.tools);
        for c in &mut changes {
            c.tool = Some(format!("mcp:{}/{}", n.server, c.tool.as_deref().unwrap_or_default()));
        }
        let status = match (o, changes.is_empty()) {
            (None, _) => Status::Added,
            (Some(_), true) => Status::Unchanged,
            (Some(_), false) => Status::Changed,
        };
        out.push(PinDiff {
            server: n.server.clone(),
            file: n.file.clone(),
            status,
            old: o.map(fingerprints),
            new: Some(fingerprints(n)),
            changes,
        });
    }
    for o in old.iter().filter(|o| find(new, &o.server).is_none()) {
        let mut changes = crate::contract::list_drift(&o.tools, &[]);
        for c in &mut changes {
            c.tool = Some(format!("mcp:{}/{}", o.server, c.tool.as_deref().unwrap_or_default()));
        }
        out.push(PinDiff {
            server: o.server.clone(),
            file: o.file.clone(),
            status: Status::Removed,
            old: Some(fingerprints(o)),
            new: None,
            changes,
        });
    }
    out
}
