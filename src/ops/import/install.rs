//! Writing an import into an agent folder: `-o AGENT_DIR/tools.json` leaves the agent as
//! `bundle check` wants it, as `bundle tool add` does: with `grant`, the capabilities the
//! tools need are appended to policy.caps; then manifest.toml is relocked.

use std::path::{Path, PathBuf};

use crate::agent::{LockOutcome, lock_agent};
use crate::diagnostic::Source;
use crate::error::{Error, Result};
use crate::limits;
use crate::policy::{self, Capability, Policy};
use crate::regular_file::{self, Links};
use crate::tools::ToolsFile;
use crate::{atomic, manifest, tools};

/// What writing the import did.
#[derive(Debug)]
pub struct Installed {
    /// Capabilities appended to policy.caps.
    pub granted: Vec<String>,
    /// Capabilities the tools need that policy.caps still does not grant (without `grant`).
    pub ungranted: Vec<String>,
    pub policy_path: Option<PathBuf>,
    /// The relock that followed, for an agent folder.
    pub lock: Option<LockOutcome>,
}

/// The agent folder `output` is the tools.json of, if any.
fn agent_of(output: &Path) -> Option<PathBuf> {
    if output.file_name().is_none_or(|n| n != tools::FILE_NAME) {
        return None;
    }
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    dir.join(manifest::FILE_NAME).is_file().then_some(dir)
}

/// Writes `text` (the imported tools.json) to `output`; for an agent folder, grants (with
/// `grant`) and relocks.
pub fn install(output: &Path, text: &str, tools: &ToolsFile, grant: bool) -> Result<Installed> {
    // Checked before anything is written: -o names a regular file (or nothing yet).
    let target = atomic::Output::new(output, "-o").map_err(Error::from)?;
    let agent = agent_of(output);
    if grant && agent.is_none() {
        return Err(Error::Usage(format!(
            "--grant adds capabilities to the agent's policy.caps: -o must be AGENT_DIR/tools.json in a folder with manifest.toml (got {})",
            output.display()
        )));
    }
    let mut out = Installed { granted: Vec::new(), ungranted: Vec::new(), policy_path: None, lock: None };
    if let Some(dir) = &agent {
        let policy_path = dir.join(policy::FILE_NAME);
        let current = match regular_file::read_to_string(&policy_path, limits::MAX_POLICY_BYTES, Links::Refuse) {
            Ok(t) => t,
            Err(regular_file::ReadError::NotFound) => String::new(),
            Err(e) => return Err(Error::io(&policy_path, e.into_io())),
        };
        let missing = ungranted(&current, tools);
        if grant && !missing.is_empty() {
            let mut text = current.clone();
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            for c in &missing {
                text.push_str(c);
                text.push('\n');
            }
            atomic::write(&policy_path, text.as_bytes(), true).map_err(|e| Error::io(&policy_path, e))?;
            out.granted = missing;
        } else {
            out.ungranted = missing;
        }
        out.policy_path = Some(policy_path);
    }
    target.write(text.as_bytes()).map_err(Error::from)?;
    if let Some(dir) = &agent {
        out.lock = Some(lock_agent(dir));
    }
    Ok(out)
}

/// The capabilities the tools list that the policy text does not grant, first use first.
fn ungranted(policy_text: &str, tools: &ToolsFile) -> Vec<String> {
    let policy = Policy::parse(&Source::new(policy::FILE_NAME, policy_text), &mut Vec::new());
    let mut missing: Vec<String> = Vec::new();
    for cap in tools.tools.iter().flat_map(|t| &t.capabilities) {
        let granted = Capability::parse(cap).is_ok_and(|c| policy.grant_for(&c).is_some());
        if !granted && Capability::parse(cap).is_ok() && !missing.contains(cap) {
            missing.push(cap.clone());
        }
    }
    missing
}
