//! The tool contracts of a release: what `bundle diff` compares and `bundle baseline` records.
//! Reading them from a file or folder is an operation's step (`ops::contracts`); this module
//! only builds them from a bundle already read.

use std::path::{Path, PathBuf};

use crate::bundle::verify::Verified;
use crate::contract::{self, Contract, ContractError};
use crate::diagnostic::Source;
use crate::policy::{self, Policy};

/// One side of a comparison.
#[derive(Debug, Clone)]
pub struct AgentContracts {
    /// The path as given.
    pub origin: PathBuf,
    pub name: Option<String>,
    pub version: Option<String>,
    /// In tools.json order.
    pub contracts: Vec<Contract>,
    /// policy.caps grants, in file order.
    pub grants: Vec<String>,
    /// The skills in `skills/`, by name.
    pub skills: Vec<crate::skill::facts::SkillFacts>,
    /// The MCP servers pinned in manifest.toml `[pins]` (`format = "mcp"`), by file.
    pub pins: Vec<PinnedServer>,
    /// manifest.toml `[skills] client_tools`, as written (`Read`, `Bash(git:*)`).
    pub client_tools: Vec<String>,
    /// The vendor-signed models of manifest.toml `[[models]]`, checked against their keys.
    pub models: Vec<crate::attest::model_verify::ModelFacts>,
}

/// One pinned MCP server: its name, the pin file, and every Tool object it served.
#[derive(Debug, Clone)]
pub struct PinnedServer {
    pub server: String,
    pub file: String,
    pub tools: Vec<serde_json::Value>,
}

impl AgentContracts {
    pub fn get(&self, id: &str) -> Option<&Contract> {
        self.contracts.iter().find(|c| c.id() == id)
    }

    /// `mailer 1.4.0`, or the path when the agent has no manifest.
    pub fn label(&self) -> String {
        match (&self.name, &self.version) {
            (Some(n), Some(v)) => format!("{n} {v}"),
            _ => self.origin.display().to_string(),
        }
    }
}

/// Why a side could not be read. All of these stop the command (exit 2): nothing was judged.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Io(#[from] crate::Error),
    #[error("{path}: the agent has problems ({message}); run `bundle check {path}`")]
    Invalid {
        path: String,
        message: String,
        /// The file and line of the first problem, for an annotation on them.
        at: Option<(String, Option<usize>)>,
    },
    #[error("{path}: not a valid bundle: {message} [{code}]")]
    Rejected { path: String, code: crate::rejection::Reason, message: String },
    #[error("{path}: {source}")]
    Contract { path: String, source: ContractError },
}

/// The contracts of a bundle that has been read (by `verify`, `inspect`, ...).
pub fn from_verified(v: &Verified, origin: &Path) -> Result<AgentContracts, ContractError> {
    let contracts = match &v.tools {
        Some(t) => contract::tool_contracts(t, &v.held)?,
        None => Vec::new(),
    };
    // verify already rejected a policy.caps that is not UTF-8 or has bad lines.
    let policy = v
        .held
        .get(policy::FILE_NAME)
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(|text| Policy::parse(&Source::new(policy::FILE_NAME, text), &mut Vec::new()))
        .unwrap_or_default();
    Ok(AgentContracts {
        origin: origin.to_path_buf(),
        name: Some(v.manifest.name.clone()),
        version: Some(v.manifest.version.to_string()),
        contracts,
        grants: grants(&policy),
        skills: crate::skill::facts::from_bundle(v.files.iter().map(|f| (f.path.as_str(), f.blake3.as_str())), &v.held),
        // Read by the callers that compare them (`agent::pins::mcp::pins_of`): a pin that cannot be read must
        // not take the tools' contracts (and what attests them) with it.
        pins: Vec::new(),
        client_tools: v.manifest.client_tools.iter().map(ToString::to_string).collect(),
        models: v.models.clone(),
    })
}

pub(crate) fn grants(policy: &Policy) -> Vec<String> {
    policy.grants.iter().map(|g| g.capability.to_string()).collect()
}

impl crate::error::Coded for LoadError {
    fn code(&self) -> crate::error::ErrorCode {
        use crate::error::ErrorCode;
        match self {
            LoadError::Io(e) => e.code(),
            LoadError::Invalid { .. } | LoadError::Rejected { .. } | LoadError::Contract { .. } => ErrorCode::Usage,
        }
    }
}
