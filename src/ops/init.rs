//! `bundle init`: scaffold an agent folder that passes `bundle check` (seed §4: "generate an
//! empty tools.json (version 1)").

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::manifest::{self, check_agent_name};
use crate::{atomic, policy, tools};

/// Where editors find the tools.json schema (the `$id` of schemas/tools.v1.schema.json).
pub const TOOLS_SCHEMA_URL: &str = "https://agent-bundle.dev/schemas/tools.v1.schema.json";

/// The files `init` wrote.
#[derive(Debug)]
pub struct Initialized {
    pub name: String,
    pub files: Vec<PathBuf>,
}

/// A valid agent name derived from a folder name, if one can be.
pub fn name_from_dir(dir: &Path) -> Option<String> {
    let raw = std::fs::canonicalize(dir).ok().or_else(|| Some(dir.to_path_buf()))?;
    let base = raw.file_name()?.to_string_lossy().to_lowercase();
    let mut name: String = base.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect();
    name = name.trim_matches('-').to_owned();
    check_agent_name(&name).ok().map(|()| name)
}

/// What `init` writes beyond the defaults.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options<'a> {
    /// The agent name (default: derived from the folder name).
    pub name: Option<&'a str>,
    /// The first version (default: 0.1.0).
    pub version: Option<&'a semver::Version>,
    /// Overwrite existing files.
    pub force: bool,
}

pub fn init(dir: &Path, opts: &Options<'_>) -> Result<Initialized> {
    let Options { name, version, force } = *opts;
    let version = version.map_or_else(|| "0.1.0".to_owned(), |v| v.to_string());
    let name = match name {
        Some(n) => {
            check_agent_name(n).map_err(Error::Usage)?;
            n.to_owned()
        }
        None => name_from_dir(dir)
            .ok_or_else(|| Error::Usage(format!("cannot derive an agent name from {}; pass --name", dir.display())))?,
    };
    let files = [
        (
            tools::FILE_NAME,
            format!("{{\n  \"$schema\": \"{TOOLS_SCHEMA_URL}\",\n  \"version\": 1,\n  \"tools\": []\n}}\n"),
        ),
        (
            policy::FILE_NAME,
            "# policy.caps: the capabilities this agent is granted, one per line as `family:scope`,\n\
             # e.g. `net:api.example.com`, `net:*.example.com` or `fs:/data/*`. A tool that requires\n\
             # a capability not granted here is denied by the runtime, and `bundle check` reports it.\n"
                .to_owned(),
        ),
        (
            manifest::FILE_NAME,
            format!(
                "# manifest.toml: what this agent is. `bundle lock` adds the BLAKE3 digest and size of\n\
                 # every file; `bundle pack` signs this file.\n\
                 [bundle]\nformat = 1\n\n[agent]\nname = \"{name}\"\nversion = \"{version}\"\n"
            ),
        ),
    ];
    if !force && let Some((existing, _)) = files.iter().find(|(f, _)| dir.join(f).exists()) {
        return Err(Error::Usage(format!("{} already exists; use --force to overwrite", dir.join(existing).display())));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut written = Vec::new();
    for (file, content) in &files {
        let path = dir.join(file);
        atomic::write(&path, content.as_bytes(), force).map_err(|e| Error::io(&path, e))?;
        written.push(path);
    }
    // Lock right away, so that the new agent passes `bundle check` as it is.
    let locked = crate::agent::lock_agent(dir);
    if let Err(refused) = &locked
        && let Some(d) = refused.report.diagnostics.iter().find(|d| d.is_error())
    {
        return Err(Error::Usage(format!("created the files, but could not lock them: {}", d.message)));
    }
    Ok(Initialized { name, files: written })
}
