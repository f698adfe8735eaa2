//! The gate's judgement of one bundle as the API returns it: passed or refused, the stable reason
//! code, every finding, the agent, the signer, and the tools with their contracts. The JSON form
//! is the document `bundle verify --format json` prints.

use std::fmt;

use super::contracts::ToolContract;
use crate::bundle::verify::Reason;
use crate::contract::baseline::Drift;
use crate::ops::gate::{self, BaselineReport};

/// A stable reason code (`digest_mismatch`, `contract_drift`, ...): the `code` field of `bundle
/// verify --format json`. New codes may be added in minor releases; existing ones never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReasonCode(Reason);

impl ReasonCode {
    pub(crate) fn of(reason: Reason) -> Self {
        ReasonCode(reason)
    }

    /// The stable string form, e.g. `digest_mismatch`.
    pub fn as_str(self) -> &'static str {
        self.0.as_str()
    }

    /// One line saying what the code means (the reference table in the book).
    pub fn describe(self) -> &'static str {
        self.0.describe()
    }

    /// Every reason code, in documentation order.
    pub fn all() -> impl Iterator<Item = ReasonCode> {
        Reason::ALL.iter().map(|r| ReasonCode(*r))
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ReasonCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ReasonCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One thing the gate found: why a bundle is refused, or a warning (drift of a read-only tool).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Finding {
    /// The stable reason code.
    pub code: ReasonCode,
    /// The bundle entry concerned, when there is one.
    pub path: Option<String>,
    /// The tool concerned (contract drift), when there is one.
    pub tool: Option<String>,
    /// What is wrong, for people. Text from the bundle is as found: sanitise it before showing
    /// it on a terminal.
    pub message: String,
}

/// An agent's name and version, as its signed manifest states them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentId {
    /// The agent name.
    pub name: String,
    /// The version (semver).
    pub version: String,
}

/// The gate's judgement of one bundle.
#[derive(Debug, Clone)]
pub struct Verdict {
    passed: bool,
    code: Option<ReasonCode>,
    reasons: Vec<Finding>,
    warnings: Vec<Finding>,
    agent: Option<AgentId>,
    signer: Option<String>,
    tools: Vec<ToolContract>,
    files: Vec<super::VerifiedFile>,
    json: serde_json::Value,
}

impl Verdict {
    pub(crate) fn from_gate(verdict: &gate::Verdict) -> Verdict {
        let json = serde_json::to_value(verdict.report()).unwrap_or_default();
        match verdict {
            gate::Verdict::Passed { verified, baseline, .. } => {
                let m = &verified.manifest;
                let tools = crate::contract::release::from_verified(verified, std::path::Path::new(""))
                    .map(|a| a.contracts.into_iter().map(ToolContract::from_contract).collect())
                    .unwrap_or_default();
                Verdict {
                    passed: true,
                    code: None,
                    reasons: Vec::new(),
                    warnings: baseline.as_ref().map(warnings).unwrap_or_default(),
                    agent: Some(AgentId { name: m.name.clone(), version: m.version.to_string() }),
                    signer: Some(verified.key_id.clone()),
                    tools,
                    files: verified.files.iter().map(super::VerifiedFile::from_inner).collect(),
                    json,
                }
            }
            gate::Verdict::Refused { rejection, baseline, .. } => {
                let code = ReasonCode(rejection.reason);
                let mut reasons = vec![Finding {
                    code,
                    path: rejection.path.clone(),
                    tool: None,
                    message: rejection.message.clone(),
                }];
                if let Some(b) = baseline {
                    reasons.extend(b.findings.drift.iter().map(drift_finding));
                }
                Verdict {
                    passed: false,
                    code: Some(code),
                    reasons,
                    warnings: baseline.as_ref().map(warnings).unwrap_or_default(),
                    agent: rejection
                        .agent
                        .as_ref()
                        .map(|(name, version)| AgentId { name: name.clone(), version: version.clone() }),
                    signer: rejection.key_id.clone(),
                    tools: Vec::new(),
                    files: Vec::new(),
                    json,
                }
            }
        }
    }

    /// Whether every check passed.
    pub fn is_ok(&self) -> bool {
        self.passed
    }

    /// Why the bundle was refused; `None` when it passed.
    pub fn code(&self) -> Option<ReasonCode> {
        self.code
    }

    /// Everything that refuses the bundle: the refusal first, then (for `contract_drift`) one
    /// finding per tool whose contract is not the approved one. Empty when it passed.
    pub fn reasons(&self) -> &[Finding] {
        &self.reasons
    }

    /// Findings that do not refuse: drift of read-only tools against the baseline.
    pub fn warnings(&self) -> &[Finding] {
        &self.warnings
    }

    /// The agent, once its signed manifest was read.
    pub fn agent(&self) -> Option<&AgentId> {
        self.agent.as_ref()
    }

    /// The signing key's id (16 hex digits, as `minisign` shows it), once the signature was read.
    pub fn signer(&self) -> Option<&str> {
        self.signer.as_deref()
    }

    /// The tools of a bundle that passed, in tools.json order, with risk classes and contract
    /// fingerprints. Empty for a refused bundle (and when the contracts cannot be computed,
    /// which a [`crate::api::ContractGate`] then treats as "nothing was signed": it fails closed).
    pub fn tools(&self) -> &[ToolContract] {
        &self.tools
    }

    /// The files a bundle that passed holds, as its signed manifest lists them.
    pub fn files(&self) -> &[super::VerifiedFile] {
        &self.files
    }

    /// The document `bundle verify --format json` prints for this verdict (strings as found,
    /// not sanitised). Beyond what the methods above return, it holds the gate's details:
    /// `signers` (under a trust policy: each signature with its key id, signer, roles, `status`
    /// such as `counted` or `duplicate_key`, and each rule with `needed`, `counted` and `met`),
    /// `attestations` (each judged attestation with its `predicate_type`, `signers`,
    /// `subject_matches`, `builder`, `source_uri` and `verdict`), `keyless` (the Sigstore
    /// signer's `identity`, `issuer`, `kind` and `signed_at`) and `baseline` (the drift found).
    pub fn to_json(&self) -> &serde_json::Value {
        &self.json
    }
}

fn warnings(b: &BaselineReport) -> Vec<Finding> {
    b.findings.warnings.iter().map(drift_finding).collect()
}

fn drift_finding(d: &Drift) -> Finding {
    Finding {
        code: ReasonCode(Reason::ContractDrift),
        path: Some(crate::tools::FILE_NAME.to_owned()),
        tool: Some(d.tool.clone()),
        message: format!("tool `{}` ({}): {}", d.tool, d.reason, describe_changes(d)),
    }
}

fn describe_changes(d: &Drift) -> String {
    let lines: Vec<String> = d.changes.iter().map(|c| format!("{}: {}", c.impact.as_str(), c.message)).collect();
    lines.join("; ")
}
