//! The tool contracts of a release, read from a bundle or from an agent folder: what `bundle
//! diff` compares and `bundle baseline` records.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::agent;
use crate::bundle::verify::{self, Discard, Expect, Trust, Verified};
use crate::contract::{self, Contract, ContractError};
use crate::diagnostic::Source;
use crate::policy::{self, Policy};
use crate::tools::{self, ToolsFile};

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
    Invalid { path: String, message: String },
    #[error("{path}: not a valid bundle: {message} [{code}]")]
    Rejected { path: String, code: &'static str, message: String },
    #[error("{path}: {source}")]
    Contract { path: String, source: ContractError },
}

/// Reads a bundle (a file) or an agent folder. A bundle's signature is not checked (that is
/// `bundle verify`'s job); its archive, digests and tools.json are. A folder must pass `bundle
/// check`, except that its manifest's digests may be stale.
pub fn load(path: &Path) -> Result<AgentContracts, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| crate::Error::io(path, e))?;
    if meta.is_dir() { load_folder(path) } else { load_bundle(path) }
}

fn load_folder(dir: &Path) -> Result<AgentContracts, LoadError> {
    let shown = dir.display().to_string();
    if !dir.join(tools::FILE_NAME).is_file() {
        return Err(crate::Error::Usage(format!(
            "{shown} is not an agent folder (it has no tools.json) and not a bundle file"
        ))
        .into());
    }
    let checked = agent::check_agent_with(dir, agent::CheckOptions { digests: false, refresh: None });
    if let Some(d) = checked.report.diagnostics.iter().find(|d| d.is_error()) {
        let at = d.line.map(|l| format!(":{l}")).unwrap_or_default();
        let message = format!("{}{at}: {} [{}]", d.file, d.message, d.code);
        return Err(LoadError::Invalid { path: shown, message });
    }
    let file: ToolsFile = checked
        .tools
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| LoadError::Invalid { path: shown.clone(), message: "tools.json could not be read".into() })?;
    let contracts = contract::tool_contracts(&file, &dir.to_path_buf())
        .map_err(|source| LoadError::Contract { path: shown.clone(), source })?;
    Ok(AgentContracts {
        origin: dir.to_path_buf(),
        name: checked.manifest.as_ref().map(|m| m.name.clone()),
        version: checked.manifest.as_ref().map(|m| m.version.to_string()),
        contracts,
        grants: grants(&checked.policy),
    })
}

fn load_bundle(path: &Path) -> Result<AgentContracts, LoadError> {
    let file = File::open(path).map_err(|e| crate::Error::io(path, e))?;
    let verified =
        verify::verify(BufReader::with_capacity(1 << 20, file), Trust::Unchecked, &Expect::default(), &mut Discard)
            .map_err(|r| LoadError::Rejected {
                path: path.display().to_string(),
                code: r.reason.as_str(),
                message: r.message,
            })?;
    from_verified(&verified, path).map_err(|source| LoadError::Contract { path: path.display().to_string(), source })
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
    })
}

fn grants(policy: &Policy) -> Vec<String> {
    policy.grants.iter().map(|g| g.capability.to_string()).collect()
}
