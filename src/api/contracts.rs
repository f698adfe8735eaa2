//! Tool contracts at run time: the fingerprint of a tool definition (the same function the gate
//! compares baselines with), the risk class derived from it, and [`ContractGate`], which holds
//! the tools a runtime is about to expose to the contracts a bundle signed or a baseline
//! approved, with the rules of `bundle verify --baseline`: drift of a write-capable, network,
//! secret-using or destructive tool (or of any tool whose http host moved) refuses; drift of a
//! read-only tool is only reported.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use super::error::{Error, FailureCode};
use super::verdict::Verdict;
use crate::contract::baseline::{self, Baseline, DriftStatus};
use crate::contract::release::AgentContracts;
use crate::contract::{self, Contract};
use crate::error::ErrorCode;
use crate::tools::ToolsFile;

/// What a tool may do, derived from its contract (the book's "Risk class"). A tool may carry
/// several flags; one with none is read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Risk {
    /// exec transport, an http method other than GET/HEAD, or a capability outside `net:`.
    pub write: bool,
    /// A `net:` capability.
    pub network: bool,
    /// At least one secret.
    pub secrets: bool,
    /// http DELETE, or `requires_confirmation`.
    pub destructive: bool,
}

pub(crate) fn risk_from_inner(r: contract::Risk) -> Risk {
    Risk::from_inner(r)
}

impl Risk {
    fn from_inner(r: contract::Risk) -> Risk {
        Risk { write: r.write, network: r.network, secrets: r.secrets, destructive: r.destructive }
    }

    fn inner(self) -> contract::Risk {
        contract::Risk {
            write: self.write,
            network: self.network,
            secrets: self.secrets,
            destructive: self.destructive,
        }
    }

    /// Whether no flag is set.
    pub fn is_read_only(self) -> bool {
        self.inner().is_read_only()
    }

    /// The class names: some of `write-capable`, `network`, `secret-using`, `destructive`, or
    /// `read-only`.
    pub fn names(self) -> Vec<&'static str> {
        self.inner().names()
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner().fmt(f)
    }
}

/// One tool's contract: its id, risk class, fingerprint and canonical document.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolContract(pub(crate) Contract);

impl ToolContract {
    pub(crate) fn from_contract(c: Contract) -> ToolContract {
        ToolContract(c)
    }

    /// The tool id.
    pub fn id(&self) -> &str {
        self.0.id()
    }

    /// The risk class.
    pub fn risk(&self) -> Risk {
        Risk::from_inner(self.0.risk)
    }

    /// BLAKE3 of [`canonical`](ToolContract::canonical), 64 lowercase hex digits.
    pub fn fingerprint(&self) -> &str {
        &self.0.fingerprint
    }

    /// The contract document in RFC 8785 canonical JSON: the bytes that are fingerprinted.
    pub fn canonical(&self) -> &str {
        &self.0.canonical
    }
}

/// The contract of one tool definition, given as the JSON of one entry of tools.json's `tools`:
/// the function `bundle inspect`, `diff` and the gate fingerprint tools with. Its `schema:`
/// references resolve through its own `schema_refs` only (a definition that names the schema
/// files of a bundle is checked with [`VerifiedAgent::contract_gate`](crate::api::VerifiedAgent::contract_gate),
/// which resolves them in the verified bundle). Key order, whitespace, the order of
/// capabilities and secrets, and fields with default values do not change the fingerprint.
/// A definition that is not a tools.json tool is an error with code `invalid_tool`.
pub fn contract_fingerprint(tool_json: &str) -> Result<ToolContract, Error> {
    let mut contracts = contracts_of(&[tool_json], &HashMap::new())?;
    Ok(ToolContract(contracts.remove(0)))
}

fn contracts_of(tools_json: &[&str], files: &HashMap<String, Vec<u8>>) -> Result<Vec<Contract>, Error> {
    let invalid = |e: String| Error::failed(FailureCode::InvalidTool, e);
    let mut tools = Vec::with_capacity(tools_json.len());
    for text in tools_json {
        // serde_json's own recursion limit bounds the depth; this, the size.
        if text.len() as u64 > crate::bundle::MAX_JSON_BYTES {
            return Err(invalid(format!(
                "a tool definition of {} bytes; at most {} are accepted",
                text.len(),
                crate::bundle::MAX_JSON_BYTES
            )));
        }
        tools.push(serde_json::from_str(text).map_err(|e| invalid(format!("not a tools.json tool: {e}")))?);
    }
    let file = ToolsFile { schema: None, version: 1, tools };
    contract::tool_contracts(&file, files).map_err(|e| invalid(e.to_string()))
}

/// One tool whose live contract is not the reference one.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolDrift {
    /// The tool id.
    pub tool: String,
    /// Whether the reference has the tool at all (`false`: a new tool).
    pub known: bool,
    /// The reference and the live risk together: a read-only tool that became network is
    /// judged as network.
    pub risk: Risk,
    /// The reference fingerprint (none for a new tool).
    pub expected: Option<String>,
    /// The live fingerprint.
    pub fingerprint: String,
    /// Why it refuses, or why it only warns.
    pub reason: String,
    /// What changed, one line each (`breaking: ...`, `widening: ...`).
    pub changes: Vec<String>,
}

/// What [`ContractGate::check`] found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DriftReport {
    /// Drift that must block the tools (risky, or an http host that moved).
    pub drift: Vec<ToolDrift>,
    /// Drift of read-only tools: to report, not to block.
    pub warnings: Vec<ToolDrift>,
    /// Reference tools the runtime did not offer.
    pub missing: Vec<String>,
}

impl DriftReport {
    /// Whether nothing blocks.
    pub fn is_ok(&self) -> bool {
        self.drift.is_empty()
    }
}

/// Compares the tools a runtime is about to expose with a reference: the contracts a verified
/// bundle signed ([`ContractGate::from_verdict`]) or an approved baseline file
/// ([`ContractGate::from_baseline_file`]).
#[derive(Debug, Clone)]
pub struct ContractGate {
    pub(crate) reference: Baseline,
    pub(crate) agent: Option<String>,
    pub(crate) label: PathBuf,
    /// The files `schema:` references of live definitions resolve in (a verified bundle's).
    pub(crate) files: HashMap<String, Vec<u8>>,
}

impl ContractGate {
    /// The contracts of a bundle that passed the gate. A refused verdict has no contracts, so
    /// every risky live tool is then drift: the gate fails closed.
    pub fn from_verdict(verdict: &Verdict) -> ContractGate {
        let tools: BTreeMap<String, Contract> =
            verdict.tools().iter().map(|t| (t.id().to_owned(), t.0.clone())).collect();
        let agent = verdict.agent().map(|a| a.name.clone());
        let label = match verdict.agent() {
            Some(a) => PathBuf::from(format!("the signed bundle {} {}", a.name, a.version)),
            None => PathBuf::from("the signed bundle"),
        };
        ContractGate {
            reference: Baseline { agent: agent.clone(), tools, skills: Default::default(), mcp: Default::default() },
            agent,
            label,
            files: HashMap::new(),
        }
    }

    /// The approved contracts of a baseline file (`bundle baseline snapshot`).
    pub fn from_baseline_file(path: impl AsRef<Path>) -> Result<ContractGate, Error> {
        let path = path.as_ref();
        let reference = baseline::read(path).map_err(|e| {
            let code = match &e {
                baseline::BaselineError::Io(crate::Error::Io { .. }) => ErrorCode::IoError,
                _ => ErrorCode::Usage,
            };
            Error::failed(code, e.to_string())
        })?;
        Ok(ContractGate { agent: reference.agent.clone(), reference, label: path.to_path_buf(), files: HashMap::new() })
    }

    /// This gate, with `schema:` references of live definitions resolved in `agent`'s verified
    /// files (the bundle the tools come from): a baseline holds contracts, not schema files.
    pub fn resolving_in(mut self, agent: &super::VerifiedAgent) -> ContractGate {
        let held = agent.verdict().files().iter().filter(|f| crate::bundle::is_held(&f.path, f.size, 0));
        self.files = held.filter_map(|f| Some((f.path.clone(), agent.file(&f.path)?.to_vec()))).collect();
        self
    }

    /// The reference fingerprint of a tool, if the reference has it.
    pub fn expected(&self, tool: &str) -> Option<&str> {
        self.reference.tools.get(tool).map(|c| c.fingerprint.as_str())
    }

    /// Compares live tool definitions (each the JSON of one tools.json tool) with the reference.
    /// A definition that is not a tools.json tool is an error (`invalid_tool`): nothing is
    /// judged.
    pub fn check(&self, live_tools: &[&str]) -> Result<DriftReport, Error> {
        let contracts = contracts_of(live_tools, &self.files)?;
        let live = AgentContracts {
            origin: PathBuf::from("<runtime>"),
            name: self.agent.clone(),
            version: None,
            contracts,
            grants: Vec::new(),
            skills: Vec::new(),
            pins: Vec::new(),
            client_tools: Vec::new(),
            models: Vec::new(),
        };
        let findings = baseline::judge(&self.reference, &live, &self.label)
            .map_err(|e| Error::failed(ErrorCode::Usage, e.to_string()))?;
        let convert = |d: &baseline::Drift| ToolDrift {
            tool: d.tool.clone(),
            known: d.status == DriftStatus::Changed,
            risk: Risk::from_inner(d.risk),
            expected: d.approved.clone(),
            fingerprint: d.fingerprint.clone(),
            reason: d.reason.clone(),
            changes: d.changes.iter().map(|c| format!("{}: {}", c.impact.as_str(), c.message)).collect(),
        };
        Ok(DriftReport {
            drift: findings.drift.iter().map(convert).collect(),
            warnings: findings.warnings.iter().map(convert).collect(),
            missing: findings.missing,
        })
    }
}
