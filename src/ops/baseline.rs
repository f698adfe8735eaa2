//! `bundle baseline snapshot|approve`: record the tool contracts of a release (a bundle or an
//! agent folder) as approved, in a baseline file the deployment gate reads.

use std::path::{Path, PathBuf};

use crate::contract::baseline::{self, Approval, BaselineError};
use crate::contract::release::AgentContracts;
use crate::keyless::TrustedRoot;
use crate::ops::contracts;

/// The name of the default baselines folder.
pub const DEFAULT_DIR: &str = "baselines";

/// Writes a baseline approving every tool of the release at `source` to `out`, by default
/// `baselines/<agent>.toml` (see [`default_dir`]); an existing file is replaced only with
/// `overwrite`. A file inside an agent folder is refused; missing folders are created. Returns
/// the contracts approved and the file written. A `[[models]]` identity of the release is
/// judged under `root` (refused without one).
pub fn snapshot(
    source: &Path,
    out: Target,
    overwrite: bool,
    root: Option<&TrustedRoot>,
) -> Result<(AgentContracts, PathBuf), BaselineError> {
    let agent = contracts::load(source, root)?;
    let named = |dir: &Path| -> Result<PathBuf, BaselineError> {
        let name = agent.name.as_deref().ok_or_else(|| {
            BaselineError::Usage(format!(
                "{} names no agent; say where the baseline goes with -o FILE",
                source.display()
            ))
        })?;
        Ok(dir.join(format!("{name}.toml")))
    };
    let out = match out {
        Target::File(out) => out.to_path_buf(),
        Target::Folder(dir) => named(dir)?,
        Target::Default => {
            let name = agent.name.as_deref().ok_or_else(|| {
                BaselineError::Usage(format!(
                    "{} names no agent; say where the baseline goes with -o FILE",
                    source.display()
                ))
            })?;
            default_dir(source).join(format!("{name}.toml"))
        }
    };
    if let Some(agent_dir) = agent_folder_holding(&out) {
        return Err(BaselineError::Usage(format!(
            "{} is inside the agent folder {}: the baseline would be packed into the agent's next bundle; \
             write it beside the agents, e.g. to {DEFAULT_DIR}/ (the default)",
            out.display(),
            agent_dir.display(),
        )));
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| crate::Error::io(parent, e))?;
    }
    baseline::snapshot(&agent, &out, overwrite)?;
    Ok((agent, out))
}

/// Where `snapshot` writes.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// `baselines/<agent>.toml` beside the agents (see [`default_dir`]).
    Default,
    /// This file.
    File(&'a Path),
    /// `<folder>/<agent>.toml`.
    Folder(&'a Path),
}

/// The releases `sources` name, in order: bundles and agent folders as given, a folder of
/// agents (`agents/`) as every agent below it, as `check` and `pack` take them.
pub fn sources(sources: &[PathBuf]) -> Result<Vec<PathBuf>, BaselineError> {
    let mut out = Vec::new();
    for s in sources {
        if !s.exists() || (s.is_dir() && !crate::agent::is_agent_folder(s)) {
            out.extend(crate::agent::find_agents(s)?);
        } else {
            out.push(s.clone());
        }
    }
    Ok(out)
}

/// The folder baselines go in by default: `baselines/` beside the `agents/` folder that holds
/// the agent (a repository of many agents), else `baselines/` in the working directory.
/// `verify --baseline DIR` reads `DIR/<agent>.toml` from it.
pub fn default_dir(source: &Path) -> PathBuf {
    let agents_parent = |p: &Path| {
        let parent = p.parent()?;
        (parent.file_name()? == "agents").then(|| parent.parent().map(Path::to_path_buf).unwrap_or_default())
    };
    if !source.is_dir() {
        return PathBuf::from(DEFAULT_DIR);
    }
    let root = agents_parent(source)
        .or_else(|| std::fs::canonicalize(source).ok().and_then(|abs| agents_parent(&abs)))
        .unwrap_or_default();
    root.join(DEFAULT_DIR)
}

/// The agent folder `path` would be written into, if any: a baseline there would be packed
/// into the agent's next bundle, and change its digests, without anyone asking for it.
pub fn agent_folder_holding(path: &Path) -> Option<PathBuf> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // The folder may not exist yet: judge from the nearest one that does.
    let existing = parent.ancestors().find(|a| a.as_os_str().is_empty() || a.exists())?;
    let start = std::fs::canonicalize(if existing.as_os_str().is_empty() { Path::new(".") } else { existing }).ok()?;
    start.ancestors().find(|dir| crate::agent::is_agent_folder(dir)).map(Path::to_path_buf)
}

/// Approves the contracts of `ids` in the release at `from` in the baseline file `path`.
/// Returns the release read and what happened to each tool's entry. A `[[models]]` identity
/// of the release is judged under `root` (refused without one).
pub fn approve(
    path: &Path,
    from: &Path,
    ids: &[String],
    root: Option<&TrustedRoot>,
) -> Result<(AgentContracts, Vec<Approval>), BaselineError> {
    let agent = contracts::load(from, root)?;
    let done = baseline::approve(path, &agent, ids)?;
    Ok((agent, done))
}
