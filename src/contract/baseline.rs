//! Approved baselines: a TOML file recording each tool's approved contract (written by `bundle
//! baseline snapshot` and `approve`), and the comparison of a release with it that the
//! deployment gate runs (`bundle verify --baseline`). The file format is in
//! docs/book/src/reference/format.md, "Baseline files".
//!
//! The gate fails closed where a change can hurt: a write-capable, network, secret-using or
//! destructive tool (on either side) whose contract is not the approved one, a new such tool,
//! or any tool whose http host moved. Other drift, on read-only tools, is reported but passes.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use toml_edit::{Array, DocumentMut, Item, Table, value};

use super::release::{AgentContracts, LoadError};
use crate::contract::{self, Change, Contract, Risk};
use crate::limits::{MAX_BASELINE_BYTES, MAX_TOML_ITEMS};
use crate::regular_file::{self, Links};
use crate::rejection::{Reason, Rejection};

/// The only baseline file format this build reads and writes.
pub const FORMAT: i64 = 1;

const TOP_KEYS: &[&str] = &["format", "agent", "tools"];
/// `fingerprint` and `contract` are what the gate reads; the rest is for people reading the
/// file (and is rewritten by every approval).
const ENTRY_KEYS: &[&str] = &[
    "risk",
    "fingerprint",
    "approved_from",
    "transport",
    "capabilities",
    "secrets",
    "requires_confirmation",
    "contract",
];

/// A parsed baseline file.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The agent the baseline is for, when it says.
    pub agent: Option<String>,
    /// Approved contracts by tool id.
    pub tools: BTreeMap<String, Contract>,
}

#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error(transparent)]
    Io(#[from] crate::Error),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{0}")]
    Usage(String),
}

impl crate::error::Coded for BaselineError {
    fn code(&self) -> crate::error::ErrorCode {
        use crate::error::ErrorCode;
        match self {
            BaselineError::Io(e) => e.code(),
            BaselineError::Load(e) => crate::error::Coded::code(e),
            BaselineError::Invalid { .. } | BaselineError::Usage(_) => ErrorCode::Usage,
        }
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> BaselineError {
    BaselineError::Invalid { path: path.display().to_string(), message: message.into() }
}

/// Reads and checks a baseline file.
pub fn read(path: &Path) -> Result<Baseline, BaselineError> {
    let text = read_text(path)?;
    parse(&text).map_err(|m| invalid(path, m))
}

/// A baseline file's text: a regular file of at most [`MAX_BASELINE_BYTES`].
fn read_text(path: &Path) -> Result<String, BaselineError> {
    regular_file::read_to_string(path, MAX_BASELINE_BYTES, Links::Follow)
        .map_err(|e| crate::Error::io(path, e.into_io()).into())
}

/// Parses a baseline file's text. Every entry's contract must be canonical JSON whose BLAKE3 is
/// its fingerprint, for the tool it is filed under.
pub fn parse(text: &str) -> Result<Baseline, String> {
    // Counted before toml_edit builds the document (about 300 bytes per item).
    if crate::manifest::over_item_limit(text, MAX_TOML_ITEMS).is_some() {
        return Err(format!("more than {MAX_TOML_ITEMS} TOML keys, values and tables"));
    }
    let doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| format!("not TOML: {e}"))?;
    for (key, _) in doc.iter() {
        if !TOP_KEYS.contains(&key) {
            return Err(format!("unknown key `{key}` (expected {})", TOP_KEYS.join(", ")));
        }
    }
    match doc.get("format").and_then(Item::as_integer) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(format!("baseline format {other} is not supported; this bundle reads format {FORMAT}"));
        }
        None => return Err(format!("`format = {FORMAT}` is missing")),
    }
    let agent = match doc.get("agent") {
        None => None,
        Some(item) => Some(item.as_str().ok_or("`agent` must be a string")?.to_owned()),
    };
    let mut tools = BTreeMap::new();
    if let Some(item) = doc.get("tools") {
        let table = item.as_table_like().ok_or("`tools` must be a table of tools")?;
        for (id, entry) in table.iter() {
            let entry = entry.as_table_like().ok_or_else(|| format!("`tools.{id}` must be a table"))?;
            for (key, _) in entry.iter() {
                if !ENTRY_KEYS.contains(&key) {
                    return Err(format!("tools.{id}: unknown key `{key}` (expected {})", ENTRY_KEYS.join(", ")));
                }
            }
            let string = |key: &str| {
                entry
                    .get(key)
                    .and_then(Item::as_str)
                    .ok_or_else(|| format!("tools.{id}: `{key}` (a string) is missing"))
            };
            let (fingerprint, text) = (string("fingerprint")?, string("contract")?);
            let contract = Contract::from_canonical(text).map_err(|e| format!("tools.{id}.contract: {e}"))?;
            if contract.fingerprint != fingerprint {
                return Err(format!(
                    "tools.{id}: the fingerprint is {fingerprint}, but the contract's BLAKE3 is {}; the entry was edited by hand: approve the tool again",
                    contract.fingerprint
                ));
            }
            if contract.id() != id {
                return Err(format!("tools.{id}: the contract is for tool `{}`", contract.id()));
            }
            tools.insert(id.to_owned(), contract);
        }
    }
    Ok(Baseline { agent, tools })
}

/// One tool's table in the file.
fn entry(c: &Contract, from: &str) -> Table {
    let strings = |items: &[String]| Item::Value(items.iter().map(String::as_str).collect::<Array>().into());
    let mut t = Table::new();
    t["risk"] = Item::Value(c.risk.names().into_iter().collect::<Array>().into());
    t["fingerprint"] = value(&c.fingerprint);
    t["approved_from"] = value(from);
    t["transport"] = value(c.doc.transport.summary());
    if !c.doc.capabilities.is_empty() {
        t["capabilities"] = strings(&c.doc.capabilities);
    }
    if !c.doc.secrets.is_empty() {
        t["secrets"] = strings(&c.doc.secrets);
    }
    t["requires_confirmation"] = value(c.doc.requires_confirmation);
    t["contract"] = value(&c.canonical);
    t
}

const HEADER: &str = "\
# Approved tool contracts, for `bundle verify --baseline`. The format: the agent-bundle book,
# reference/format.md, \"Baseline files\".
# A write-capable, network, secret-using or destructive tool whose contract differs from the one
# approved here is rejected (contract_drift). Review with `bundle diff`, then update entries with
# `bundle baseline approve <THIS FILE> --from <BUNDLE|DIR> <TOOL_ID>...`.
";

/// The text of a baseline approving every tool of `agent`, sorted by tool id.
pub fn snapshot_text(agent: &AgentContracts) -> String {
    let mut doc = DocumentMut::new();
    doc["format"] = value(FORMAT);
    if let Some(name) = &agent.name {
        doc["agent"] = value(name);
    }
    doc.decor_mut().set_prefix(HEADER);
    let mut tools = Table::new();
    tools.set_implicit(true);
    let mut sorted: Vec<&Contract> = agent.contracts.iter().collect();
    sorted.sort_by(|a, b| a.id().cmp(b.id()));
    for c in sorted {
        tools.insert(c.id(), Item::Table(entry(c, &agent.label())));
    }
    doc["tools"] = Item::Table(tools);
    doc.to_string()
}

/// Writes a baseline approving every tool of `agent`; an existing file is replaced only with
/// `overwrite`.
pub fn snapshot(agent: &AgentContracts, out: &Path, overwrite: bool) -> Result<(), BaselineError> {
    crate::atomic::write(out, snapshot_text(agent).as_bytes(), overwrite).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            BaselineError::Usage(format!(
                "{} exists; pass --force to replace it, or update entries with `bundle baseline approve`",
                out.display()
            ))
        } else {
            crate::Error::io(out, e).into()
        }
    })
}

/// What `approve` did to one tool's entry.
#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    pub tool: String,
    pub action: ApprovalAction,
    /// The fingerprint approved before, if any.
    pub old: Option<String>,
    /// The fingerprint approved now; `None` when the entry was removed.
    pub new: Option<String>,
    pub risk: Option<Risk>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalAction {
    Added,
    Updated,
    Unchanged,
    /// The tool is no longer in the release; its entry was removed.
    Removed,
}

/// Takes the contracts of `ids` in `from` as approved: entries are added or replaced (in
/// place, keeping the file's comments and order), and the entry of a tool `from` no longer has
/// is removed. The file is rewritten atomically, and only when something changed.
pub fn approve(path: &Path, from: &AgentContracts, ids: &[String]) -> Result<Vec<Approval>, BaselineError> {
    let text = read_text(path)?;
    let baseline = parse(&text).map_err(|m| invalid(path, m))?;
    check_agent(&baseline, from, path)?;
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| invalid(path, e.to_string()))?;
    if !doc.contains_key("tools") {
        let mut tools = Table::new();
        tools.set_implicit(true);
        doc["tools"] = Item::Table(tools);
    }
    let tools = doc["tools"].as_table_mut().ok_or_else(|| invalid(path, "`tools` must be a table"))?;
    let mut done = Vec::new();
    for id in ids {
        if done.iter().any(|a: &Approval| &a.tool == id) {
            continue;
        }
        let old = baseline.tools.get(id).map(|c| c.fingerprint.clone());
        let approval = match from.get(id) {
            Some(c) => {
                let action = match &old {
                    None => ApprovalAction::Added,
                    Some(f) if *f == c.fingerprint => ApprovalAction::Unchanged,
                    Some(_) => ApprovalAction::Updated,
                };
                if action != ApprovalAction::Unchanged {
                    let mut fresh = entry(c, &from.label());
                    if let Some(existing) = tools.get(id).and_then(Item::as_table) {
                        *fresh.decor_mut() = existing.decor().clone();
                        fresh.set_position(existing.position());
                    }
                    tools.insert(id, Item::Table(fresh));
                }
                Approval { tool: id.clone(), action, old, new: Some(c.fingerprint.clone()), risk: Some(c.risk) }
            }
            None if old.is_some() => {
                tools.remove(id);
                Approval { tool: id.clone(), action: ApprovalAction::Removed, old, new: None, risk: None }
            }
            None => {
                return Err(BaselineError::Usage(format!(
                    "tool `{id}` is neither in {} nor in {}",
                    from.origin.display(),
                    path.display()
                )));
            }
        };
        done.push(approval);
    }
    if done.iter().any(|a| a.action != ApprovalAction::Unchanged) {
        // Through a symlinked baseline to the file it names (the link stays), as `--state`.
        let target = crate::atomic::Output::new(path, "baseline").map_err(crate::Error::from)?;
        target.write(doc.to_string().as_bytes()).map_err(crate::Error::from)?;
    }
    Ok(done)
}

fn check_agent(baseline: &Baseline, agent: &AgentContracts, path: &Path) -> Result<(), BaselineError> {
    match (&baseline.agent, &agent.name) {
        (Some(want), Some(have)) if want != have => Err(BaselineError::Usage(format!(
            "{} is the baseline of agent `{want}`, but {} is agent `{have}`",
            path.display(),
            agent.origin.display()
        ))),
        _ => Ok(()),
    }
}

/// Why a tool shows up in the gate's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftStatus {
    /// The contract differs from the approved one.
    Changed,
    /// The baseline has no entry for the tool.
    New,
}

/// One tool whose contract is not the approved one.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    pub tool: String,
    pub status: DriftStatus,
    /// The approved and the current risk together: a read-only tool that becomes network is
    /// judged as network.
    pub risk: Risk,
    /// Why the drift rejects (or why it only warns).
    pub reason: String,
    pub approved: Option<String>,
    pub fingerprint: String,
    /// What changed since approval (for a new tool: that it was added).
    pub changes: Vec<Change>,
}

/// What the comparison of one release with its baseline found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Findings {
    /// Drift that rejects the release.
    pub drift: Vec<Drift>,
    /// Drift of read-only tools: reported, not rejected.
    pub warnings: Vec<Drift>,
    /// Approved tools the release no longer has.
    pub missing: Vec<String>,
}

impl Findings {
    /// The rejection, when there is rejecting drift.
    pub fn rejection(&self, baseline: &Path) -> Option<Rejection> {
        if self.drift.is_empty() {
            return None;
        }
        let n = self.drift.len();
        let list: Vec<String> = self.drift.iter().map(|d| format!("{} ({})", d.tool, d.reason)).collect();
        Some(Rejection::new(
            Reason::ContractDrift,
            Some(crate::tools::FILE_NAME),
            format!(
                "{n} tool contract{} not approved in {}: {}",
                if n == 1 { " is" } else { "s are" },
                baseline.display(),
                list.join("; ")
            ),
        ))
    }
}

/// Compares a release with its approved baseline (read from `path`).
pub fn judge(baseline: &Baseline, agent: &AgentContracts, path: &Path) -> Result<Findings, BaselineError> {
    check_agent(baseline, agent, path)?;
    let mut gate = Findings::default();
    for c in &agent.contracts {
        let (status, risk, moved, approved, changes) = match baseline.tools.get(c.id()) {
            Some(a) if a.fingerprint == c.fingerprint => continue,
            Some(a) => {
                let moved = a.doc.transport.http_origin() != c.doc.transport.http_origin();
                (
                    DriftStatus::Changed,
                    a.risk.union(c.risk),
                    moved,
                    Some(a.fingerprint.clone()),
                    contract::compare(a, c),
                )
            }
            None => (DriftStatus::New, c.risk, false, None, vec![contract::tool_added(c)]),
        };
        let new = if status == DriftStatus::New { "new, " } else { "" };
        let reason = if !risk.is_read_only() {
            format!("{new}{risk}")
        } else if moved {
            "read-only, but its http host changed".to_owned()
        } else {
            format!("{new}read-only")
        };
        let drift = Drift {
            tool: c.id().to_owned(),
            status,
            risk,
            reason,
            approved,
            fingerprint: c.fingerprint.clone(),
            changes,
        };
        if risk.is_read_only() && !moved { gate.warnings.push(drift) } else { gate.drift.push(drift) }
    }
    gate.missing = baseline.tools.keys().filter(|id| agent.get(id).is_none()).cloned().collect();
    Ok(gate)
}
