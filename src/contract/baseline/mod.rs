//! Approved baselines: a TOML file recording each tool's approved contract (written by `bundle
//! baseline snapshot` and `approve`), and the comparison of a release with it that the
//! deployment gate runs (`bundle verify --baseline`). The file format is in
//! docs/book/src/reference/format.md, "Baseline files".
//!
//! The gate fails closed where a change can hurt: a write-capable, network, secret-using or
//! destructive tool (on either side) whose contract is not the approved one, a new such tool,
//! or any tool whose http host moved. Other drift, on read-only tools, is reported but passes.
//!
//! Skills are held the same way, in `bundle diff`'s classes (`contract::skill_changes`): a
//! change `diff` calls widening (a new skill, an `allowed-tools` that names a tool it did not)
//! rejects; another (the skill's files changed, its allowed tools narrowed) is reported.
//!
//! The pinned MCP servers (`[mcp.<server>]`: every Tool object as the release signed it) are
//! held by the rule `bundle guard --on-drift warn-read-only` applies at run time: a pinned tool
//! whose definition is not the approved one, or a new one, rejects unless it is read-only
//! (`readOnlyHint: true`) on both sides; read-only drift is reported.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use toml_edit::{Array, DocumentMut, Item, Table, value};

use super::changes::Impact;
use super::release::{AgentContracts, LoadError, PinnedServer};
use super::skill_changes::compare_skills;
use crate::contract::{self, Change, Contract, Risk};
use crate::limits::{MAX_BASELINE_BYTES, MAX_TOML_ITEMS};
use crate::regular_file::{self, Links};
use crate::rejection::{Reason, Rejection};
use crate::skill::facts::SkillFacts;

/// The only baseline file format this build reads and writes.
pub const FORMAT: i64 = 1;

mod mcp;

const TOP_KEYS: &[&str] = &["format", "agent", "tools", "skills", "mcp"];
/// `tools` is what the gate reads; `file` and `approved_from` are for people reading the file.
const MCP_KEYS: &[&str] = &["file", "approved_from", "tools"];
/// How the gate, `approve` and the reports name a pinned MCP server (`mcp:<server>`, the unit
/// `approve` takes) and one of its tools (`mcp:<server>/<tool>`, as `bundle diff` names it).
pub const MCP_PREFIX: &str = "mcp:";
/// `digest` and `allowed_tools` are what the gate reads; `files` and `approved_from` are for
/// people reading the file.
const SKILL_KEYS: &[&str] = &["digest", "allowed_tools", "files", "approved_from"];
/// How the gate, `approve` and the reports name a skill: as `bundle diff` does. Tool ids have
/// no `/`, so the two never meet.
pub const SKILL_PREFIX: &str = "skills/";
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
    /// Approved skills by name (their digest and allowed tools; no description).
    pub skills: BTreeMap<String, SkillFacts>,
    /// Approved pinned MCP servers by name: every Tool object, as the release signed it.
    pub mcp: BTreeMap<String, Vec<Value>>,
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
    let skills = parse_skills(&doc)?;
    let mcp = mcp::parse_mcp(&doc)?;
    Ok(Baseline { agent, tools, skills, mcp })
}

/// The `[skills.<name>]` tables: a name by the Agent Skills rules, a BLAKE3 digest, the allowed
/// tools as a list (empty when the skill names none).
fn parse_skills(doc: &DocumentMut) -> Result<BTreeMap<String, SkillFacts>, String> {
    let mut skills = BTreeMap::new();
    let Some(item) = doc.get("skills") else { return Ok(skills) };
    let table = item.as_table_like().ok_or("`skills` must be a table of skills")?;
    for (name, entry) in table.iter() {
        if !crate::skill::valid_name(name) {
            return Err(format!("skills.{name}: not a skill name (lowercase letters, digits and single hyphens)"));
        }
        let entry = entry.as_table_like().ok_or_else(|| format!("`skills.{name}` must be a table"))?;
        for (key, _) in entry.iter() {
            if !SKILL_KEYS.contains(&key) {
                return Err(format!("skills.{name}: unknown key `{key}` (expected {})", SKILL_KEYS.join(", ")));
            }
        }
        let digest = entry
            .get("digest")
            .and_then(Item::as_str)
            .filter(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .ok_or_else(|| format!("skills.{name}: `digest` (64 lowercase hex digits) is missing"))?;
        let allowed_tools = entry
            .get("allowed_tools")
            .and_then(Item::as_array)
            .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>())
            .ok_or_else(|| format!("skills.{name}: `allowed_tools` (a list of tool ids) is missing"))?;
        let files = match entry.get("files") {
            None => 0,
            Some(i) => i
                .as_integer()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("skills.{name}: `files` must be a count"))?,
        };
        let facts = SkillFacts {
            name: name.to_owned(),
            digest: digest.to_owned(),
            description: String::new(),
            allowed_tools,
            files,
        };
        skills.insert(name.to_owned(), facts);
    }
    Ok(skills)
}

/// One skill's table in the file.
fn skill_entry(s: &SkillFacts, from: &str) -> Table {
    let mut t = Table::new();
    t["digest"] = value(&s.digest);
    t["allowed_tools"] = Item::Value(s.allowed_tools.iter().map(String::as_str).collect::<Array>().into());
    t["files"] = value(s.files as i64);
    t["approved_from"] = value(from);
    t
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
# approved here is rejected (contract_drift), and so is a new skill, or a skill whose
# allowed-tools name a tool they did not name here, or a pinned MCP tool that is not read-only
# and differs from its entry here. Review with `bundle diff`, then update with
# `bundle baseline approve <THIS FILE> --from <BUNDLE|DIR> <TOOL_ID|skills/NAME|mcp:SERVER>...`.
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
    if !agent.skills.is_empty() {
        let mut skills = Table::new();
        skills.set_implicit(true);
        let mut sorted: Vec<&SkillFacts> = agent.skills.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        for s in sorted {
            skills.insert(&s.name, Item::Table(skill_entry(s, &agent.label())));
        }
        doc["skills"] = Item::Table(skills);
    }
    if !agent.pins.is_empty() {
        let mut mcp = Table::new();
        mcp.set_implicit(true);
        let mut sorted: Vec<&PinnedServer> = agent.pins.iter().collect();
        sorted.sort_by(|a, b| a.server.cmp(&b.server));
        for p in sorted {
            mcp.insert(&p.server, Item::Table(mcp::mcp_entry(p, &agent.label())));
        }
        doc["mcp"] = Item::Table(mcp);
    }
    let mut text = doc.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
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
    let mut done = Vec::new();
    for id in ids {
        if done.iter().any(|a: &Approval| &a.tool == id) {
            continue;
        }
        let approval = match (id.strip_prefix(SKILL_PREFIX), id.strip_prefix(MCP_PREFIX)) {
            (Some(name), _) => approve_skill(&mut doc, &baseline, from, name, path)?,
            (_, Some(server)) => mcp::approve_mcp(&mut doc, &baseline, from, server, path)?,
            _ => approve_tool(&mut doc, &baseline, from, id, path)?,
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

/// Approves (or removes) one tool's entry in `doc`.
fn approve_tool(
    doc: &mut DocumentMut,
    baseline: &Baseline,
    from: &AgentContracts,
    id: &str,
    path: &Path,
) -> Result<Approval, BaselineError> {
    let tools = doc["tools"].as_table_mut().ok_or_else(|| invalid(path, "`tools` must be a table"))?;
    let old = baseline.tools.get(id).map(|c| c.fingerprint.clone());
    Ok(match from.get(id) {
        Some(c) => {
            let action = action(old.as_deref(), &c.fingerprint);
            if action != ApprovalAction::Unchanged {
                replace(tools, id, entry(c, &from.label()));
            }
            Approval { tool: id.to_owned(), action, old, new: Some(c.fingerprint.clone()), risk: Some(c.risk) }
        }
        None if old.is_some() => {
            tools.remove(id);
            Approval { tool: id.to_owned(), action: ApprovalAction::Removed, old, new: None, risk: None }
        }
        None => return Err(neither(&format!("tool `{id}`"), from, path)),
    })
}

/// Approves (or removes) one skill's entry in `doc` (`[skills.<name>]`, made when missing).
fn approve_skill(
    doc: &mut DocumentMut,
    baseline: &Baseline,
    from: &AgentContracts,
    name: &str,
    path: &Path,
) -> Result<Approval, BaselineError> {
    let id = format!("{SKILL_PREFIX}{name}");
    if !doc.contains_key("skills") {
        let mut skills = Table::new();
        skills.set_implicit(true);
        doc["skills"] = Item::Table(skills);
    }
    let skills = doc["skills"].as_table_mut().ok_or_else(|| invalid(path, "`skills` must be a table"))?;
    let old = baseline.skills.get(name).map(|s| s.digest.clone());
    Ok(match from.skills.iter().find(|s| s.name == name) {
        Some(s) => {
            let action = action(old.as_deref(), &s.digest);
            if action != ApprovalAction::Unchanged {
                replace(skills, name, skill_entry(s, &from.label()));
            }
            Approval { tool: id, action, old, new: Some(s.digest.clone()), risk: None }
        }
        None if old.is_some() => {
            skills.remove(name);
            Approval { tool: id, action: ApprovalAction::Removed, old, new: None, risk: None }
        }
        None => return Err(neither(&format!("skill `{name}`"), from, path)),
    })
}

fn action(old: Option<&str>, new: &str) -> ApprovalAction {
    match old {
        None => ApprovalAction::Added,
        Some(f) if f == new => ApprovalAction::Unchanged,
        Some(_) => ApprovalAction::Updated,
    }
}

/// Puts `fresh` under `key`, where the old entry was (keeping its comments).
fn replace(table: &mut Table, key: &str, mut fresh: Table) {
    if let Some(existing) = table.get(key).and_then(Item::as_table) {
        *fresh.decor_mut() = existing.decor().clone();
        fresh.set_position(existing.position());
    }
    table.insert(key, Item::Table(fresh));
}

fn neither(what: &str, from: &AgentContracts, path: &Path) -> BaselineError {
    BaselineError::Usage(format!("{what} is neither in {} nor in {}", from.origin.display(), path.display()))
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

/// One tool whose contract is not the approved one, or one skill that is not the approved one.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    /// The tool id, or `skills/<name>` for a skill ([`SKILL_PREFIX`]).
    pub tool: String,
    pub status: DriftStatus,
    /// The approved and the current risk together: a read-only tool that becomes network is
    /// judged as network. For a skill: the risk of the tools it may call, together.
    pub risk: Risk,
    /// Why the drift rejects (or why it only warns).
    pub reason: String,
    /// The approved fingerprint (a skill's: its digest).
    pub approved: Option<String>,
    pub fingerprint: String,
    /// What changed since approval (for a new tool: that it was added).
    pub changes: Vec<Change>,
    /// The agent file the drifted definition is in, when it is not tools.json or a SKILL.md:
    /// a pinned MCP tool's pin file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl Drift {
    /// Whether this is a skill's drift rather than a tool's.
    pub fn is_skill(&self) -> bool {
        self.tool.starts_with(SKILL_PREFIX)
    }

    /// The pinned MCP server, when this is the drift of one of its tools.
    pub fn mcp_server(&self) -> Option<&str> {
        self.tool.strip_prefix(MCP_PREFIX).and_then(|rest| rest.split_once('/')).map(|(server, _)| server)
    }

    /// What `bundle baseline approve` takes to approve this drift: the tool id, `skills/NAME`,
    /// or for a pinned tool its whole server, `mcp:SERVER`.
    pub fn approval_id(&self) -> String {
        match self.mcp_server() {
            Some(server) => format!("{MCP_PREFIX}{server}"),
            None => self.tool.clone(),
        }
    }
}

/// What the comparison of one release with its baseline found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Findings {
    /// Drift that rejects the release.
    pub drift: Vec<Drift>,
    /// Drift of read-only tools, and skill changes that are not widening: reported, not
    /// rejected.
    pub warnings: Vec<Drift>,
    /// Approved tools (and `skills/<name>`) the release no longer has.
    pub missing: Vec<String>,
}

impl Findings {
    /// The rejection, when there is rejecting drift.
    pub fn rejection(&self, baseline: &Path) -> Option<Rejection> {
        if self.drift.is_empty() {
            return None;
        }
        let skills = self.drift.iter().filter(|d| d.is_skill()).count();
        let pinned = self.drift.iter().filter(|d| d.mcp_server().is_some()).count();
        let tools = self.drift.len() - skills - pinned;
        let counted = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let parts: Vec<String> = [(tools, "tool contract"), (skills, "skill"), (pinned, "pinned MCP tool")]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| counted(n, what))
            .collect();
        let what = match parts.as_slice() {
            [one] => one.clone(),
            [init @ .., last] => format!("{} and {last}", init.join(", ")),
            [] => unreachable!("drift is not empty"),
        };
        let verb = if self.drift.len() == 1 { "is" } else { "are" };
        let list: Vec<String> = self.drift.iter().map(|d| format!("{} ({})", d.tool, d.reason)).collect();
        // The file named is where the first rejecting change is: tools.json, or the SKILL.md.
        let file = match self.drift.first() {
            Some(d) if d.is_skill() => format!("{}/{}", d.tool, crate::skill::FILE_NAME),
            Some(Drift { file: Some(file), .. }) => file.clone(),
            _ => crate::tools::FILE_NAME.to_owned(),
        };
        Some(Rejection::new(
            Reason::ContractDrift,
            Some(&file),
            format!("{what} {verb} not approved in {}: {}", baseline.display(), list.join("; ")),
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
            file: None,
        };
        if risk.is_read_only() && !moved { gate.warnings.push(drift) } else { gate.drift.push(drift) }
    }
    gate.missing = baseline.tools.keys().filter(|id| agent.get(id).is_none()).cloned().collect();
    Ok(gate)
}

/// Compares a release with its approved baseline, its skills too: [`judge`], then each skill
/// in `bundle diff`'s classes. A widening (a new skill, one whose `allowed-tools` names a tool
/// it did not) rejects; other changes are warnings; an approved skill gone is noted.
pub fn judge_release(baseline: &Baseline, agent: &AgentContracts, path: &Path) -> Result<Findings, BaselineError> {
    let mut gate = judge(baseline, agent, path)?;
    for s in &agent.skills {
        let approved = baseline.skills.get(&s.name);
        if approved.is_some_and(|a| a.digest == s.digest) {
            continue;
        }
        let changes = compare_skills(approved.map(std::slice::from_ref).unwrap_or_default(), std::slice::from_ref(s));
        let widening = changes.iter().any(|c| c.impact == Impact::Widening);
        let risk = s.allowed_tools.iter().filter_map(|t| agent.get(t)).fold(Risk::default(), |r, c| r.union(c.risk));
        let narrowed = changes.iter().any(|c| c.kind == super::changes::ChangeKind::SkillToolsNarrowed);
        let reason = match approved {
            None => "new skill",
            Some(_) if widening => "allowed tools widened",
            Some(_) if narrowed => "allowed tools narrowed",
            Some(_) => "files changed",
        };
        let drift = Drift {
            tool: format!("{SKILL_PREFIX}{}", s.name),
            status: if approved.is_some() { DriftStatus::Changed } else { DriftStatus::New },
            risk,
            reason: reason.to_owned(),
            approved: approved.map(|a| a.digest.clone()),
            fingerprint: s.digest.clone(),
            changes,
            file: None,
        };
        if widening { gate.drift.push(drift) } else { gate.warnings.push(drift) }
    }
    let gone = baseline.skills.keys().filter(|name| !agent.skills.iter().any(|s| &s.name == *name));
    gate.missing.extend(gone.map(|name| format!("{SKILL_PREFIX}{name}")));
    mcp::judge_pins(baseline, agent, &mut gate);
    Ok(gate)
}
