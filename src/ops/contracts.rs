//! Reading one side of a contract comparison, a bundle file or an agent folder: a step that
//! `diff` and `baseline` share (cargo keeps such steps beside its ops, e.g.
//! `common_for_install_and_uninstall.rs`). It reads through the layers below (`agent`'s check,
//! `bundle::verify`) and builds [`AgentContracts`].

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use crate::agent;
use crate::bundle::verify::{self, Discard, Expect, Trust};
use crate::contract;
use crate::contract::release::{self, AgentContracts, LoadError};
use crate::tools;

/// Reads a bundle (a file) or an agent folder. A bundle's signature is not checked (that is
/// `bundle verify`'s job); its archive, digests and tools.json are. A folder must pass `bundle
/// check`, except that its manifest's digests may be stale.
/// A `[[models]]` entry's Sigstore identity is judged under `root` (the operator's
/// `--trusted-root`); without one it is refused (`model_trusted_root_missing`).
pub fn load(path: &Path, root: Option<&crate::keyless::TrustedRoot>) -> Result<AgentContracts, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| crate::Error::io(path, e))?;
    if meta.is_dir() { load_folder_with_root(path, root) } else { load_bundle(path, root) }
}

/// An agent folder, a `[[models]]` identity judged under `root`.
pub fn load_folder_with_root(
    dir: &Path,
    root: Option<&crate::keyless::TrustedRoot>,
) -> Result<AgentContracts, LoadError> {
    let shown = dir.display().to_string();
    if !dir.join(tools::FILE_NAME).is_file() {
        return Err(crate::Error::Usage(format!(
            "{shown} is not an agent folder (it has no tools.json) and not a bundle file"
        ))
        .into());
    }
    let checked =
        match agent::check_agent_with(dir, agent::CheckOptions { digests: false, refresh: None, trusted_root: root }) {
            Ok(checked) => checked,
            Err(problems) => {
                let d = problems.report.diagnostics.iter().find(|d| d.is_error());
                let at = d.map(|d| (d.file.clone(), d.line));
                let message = d.map_or_else(
                    || "the agent has problems".to_owned(),
                    |d| {
                        let at = d.line.map(|l| format!(":{l}")).unwrap_or_default();
                        format!("{}{at}: {} [{}]", d.file, d.message, d.code)
                    },
                );
                return Err(LoadError::Invalid { path: shown, message, at });
            }
        };
    let tools = checked.tools.model().map_err(|d| LoadError::Invalid {
        path: shown.clone(),
        message: format!("{}: {} [{}]", d.file, d.message, d.code),
        at: Some((d.file.clone(), d.line)),
    })?;
    let contracts = contract::tool_contracts(&tools, &dir.to_path_buf())
        .map_err(|source| LoadError::Contract { path: shown.clone(), source })?;
    let read = |f: &str| {
        crate::regular_file::read(&dir.join(f), crate::limits::MAX_IMPORT_BYTES, crate::regular_file::Links::Refuse)
            .ok()
    };
    let pins = crate::agent::pins::mcp::pinned_servers(&checked.manifest, read)
        .map_err(|source| LoadError::Contract { path: shown.clone(), source })?;
    Ok(AgentContracts {
        origin: dir.to_path_buf(),
        name: Some(checked.manifest.name),
        version: Some(checked.manifest.version.to_string()),
        contracts,
        grants: release::grants(&checked.policy),
        skills: checked.skills,
        pins,
        client_tools: checked.manifest.client_tools.iter().map(ToString::to_string).collect(),
        models: checked.models,
    })
}

fn load_bundle(path: &Path, root: Option<&crate::keyless::TrustedRoot>) -> Result<AgentContracts, LoadError> {
    let file = File::open(path).map_err(|e| crate::Error::io(path, e))?;
    let read = BufReader::with_capacity(1 << 20, file);
    let expect = Expect { model_root: root, ..Expect::default() };
    let verified = match verify::verify(read, Trust::Unchecked, &expect, &mut Discard) {
        Ok(v) => v,
        Err(e) => {
            let r = e.rejection(path)?;
            return Err(LoadError::Rejected { path: path.display().to_string(), code: r.reason, message: r.message });
        }
    };
    let shown = || path.display().to_string();
    let mut agent =
        release::from_verified(&verified, path).map_err(|source| LoadError::Contract { path: shown(), source })?;
    agent.pins =
        crate::agent::pins::mcp::pins_of(&verified).map_err(|source| LoadError::Contract { path: shown(), source })?;
    Ok(agent)
}
