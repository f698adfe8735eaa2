//! `bundle import --from skills DIR... -o AGENT_DIR`: existing Agent Skills folders become
//! skills of an agent. Each is checked first (its SKILL.md by the specification's rules, its
//! `allowed-tools` against the agent's tools.json, its files: regular, named safely, within
//! the caps); only when every one passes are they copied into `AGENT_DIR/skills/<name>/`
//! (each through a staging folder renamed into place) and the manifest relocked. Bad input
//! changes nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::agent::skills::Callable;
use crate::agent::{LockOutcome, lock_agent};
use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::error::{Error, Result};
use crate::limits::{MAX_SKILL_BYTES, MAX_SKILL_FILES, MAX_SKILL_IMPORT_BYTES};
use crate::regular_file::{self, Links};
use crate::skill;
use crate::skill::facts::SkillFacts;
use crate::{manifest, tools};

/// What an import of skills did.
#[derive(Debug, Default)]
pub struct SkillsImport {
    pub report: Report,
    /// The skills written (empty when any input had an error).
    pub imported: Vec<SkillFacts>,
    /// The relock that followed.
    pub lock: Option<LockOutcome>,
}

/// One skill folder ready to copy.
struct Staged {
    name: String,
    from: PathBuf,
    /// Relative paths (with `/`) and whether each is executable.
    files: Vec<(String, bool)>,
}

/// Imports the skill folders `inputs` (each a skill folder, or a folder of them) into the
/// agent `agent_dir`; `force` replaces a skill of the same name.
pub fn import_skills(inputs: &[PathBuf], agent_dir: &Path, force: bool) -> Result<SkillsImport> {
    if !agent_dir.join(manifest::FILE_NAME).is_file() {
        return Err(Error::Usage(format!(
            "{}: not an agent folder (no manifest.toml); -o names the agent the skills go into",
            agent_dir.display()
        )));
    }
    let callable = callable(agent_dir)?;
    let mut out = SkillsImport::default();
    let mut staged = Vec::new();
    let mut names = BTreeSet::new();
    for folder in inputs.iter().flat_map(|i| skill_folders(i)).collect::<Result<Vec<_>>>()? {
        let Some(s) = stage(&folder, &callable, &mut out.report)? else { continue };
        let target = agent_dir.join(skill::DIR).join(&s.name);
        if !names.insert(s.name.clone()) {
            out.report.push(Diagnostic::error(
                Code::InvalidSkillName,
                folder.display().to_string(),
                format!("two inputs are both skill `{}`", s.name),
            ));
        } else if std::fs::symlink_metadata(&target).is_ok() && !force {
            out.report.push(
                Diagnostic::error(
                    Code::InvalidSkillName,
                    folder.display().to_string(),
                    format!("the agent already has a skill `{}`", s.name),
                )
                .with_help("add --force to replace it"),
            );
        }
        staged.push(s);
    }
    if out.report.has_errors() {
        return Ok(out);
    }
    let root = agent_dir.join(skill::DIR);
    std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
    for s in &staged {
        install(s, &root)?;
    }
    let mut diags = Vec::new();
    let check = crate::agent::skills::check(agent_dir, "", Some(&callable), &mut Report::default(), &mut diags);
    out.imported = check.into_iter().filter(|f| names.contains(&f.name)).collect();
    out.lock = Some(lock_agent(agent_dir));
    Ok(out)
}

/// What a skill may name: the ids of the agent's tools.json, and the tools of its pinned MCP
/// servers (a pin that cannot be read adds none; `bundle check` reports it).
fn callable(agent_dir: &Path) -> Result<Callable> {
    let path = agent_dir.join(tools::FILE_NAME);
    let text = regular_file::read_to_string(&path, crate::limits::MAX_JSON_BYTES, Links::Refuse)
        .map_err(|e| Error::io(&path, e.into_io()))?;
    let file: tools::ToolsFile = serde_json::from_str(&text).map_err(|e| {
        Error::Usage(format!("{}: not a valid tools.json ({e}); run `bundle check` and fix it first", path.display()))
    })?;
    let read = |f: &str| regular_file::read(&agent_dir.join(f), crate::limits::MAX_IMPORT_BYTES, Links::Refuse).ok();
    let manifest_path = agent_dir.join(manifest::FILE_NAME);
    let manifest = regular_file::read_to_string(&manifest_path, crate::limits::MAX_MANIFEST_BYTES, Links::Refuse)
        .ok()
        .and_then(|text| manifest::parse(&Source::new(manifest::FILE_NAME, text), &mut Vec::new()));
    let pins = manifest
        .as_ref()
        .map(|m| {
            let pinned = m.pins.iter().filter_map(|(file, pin)| Some((file, pin.mcp_server()?)));
            pinned
                .filter_map(|(file, server)| {
                    crate::formats::mcp_pin::parse(&read(file)?).ok().filter(|p| p.server == server)
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let client_tools = manifest.map(|m| m.client_tools).unwrap_or_default();
    Ok(Callable::new(file.tools.iter().map(|t| t.id.as_str()), &pins, &client_tools))
}

/// `dir` itself when it holds a SKILL.md, else each sub-folder of it (sorted).
fn skill_folders(dir: &Path) -> Vec<Result<PathBuf>> {
    if dir.join(skill::FILE_NAME).exists() {
        return vec![Ok(dir.to_path_buf())];
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => return vec![Err(Error::io(dir, e))],
    };
    let mut found: Vec<PathBuf> =
        entries.filter_map(|e| e.ok()).filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect();
    found.sort();
    if found.is_empty() {
        return vec![Err(Error::Usage(format!("{}: no SKILL.md, and no skill folders in it", dir.display())))];
    }
    found.into_iter().map(Ok).collect()
}

/// Checks one skill folder; `None` when it has errors (reported).
fn stage(folder: &Path, callable: &Callable, report: &mut Report) -> Result<Option<Staged>> {
    let shown = folder.display().to_string();
    let name = folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let md = folder.join(skill::FILE_NAME);
    let display = format!("{shown}/{}", skill::FILE_NAME);
    let bytes = match regular_file::read(&md, MAX_SKILL_BYTES, Links::Refuse) {
        Ok(b) => b,
        Err(regular_file::ReadError::NotFound) => {
            report.push(Diagnostic::error(Code::MissingSkillFile, &display, "the skill folder has no SKILL.md"));
            return Ok(None);
        }
        Err(regular_file::ReadError::TooLarge { limit }) => {
            report.push(Diagnostic::error(
                Code::LimitExceeded,
                &display,
                format!("SKILL.md is larger than {limit} bytes"),
            ));
            return Ok(None);
        }
        Err(e) => return Err(Error::io(&md, e.into_io())),
    };
    let text = match crate::json::decode_utf8(&display, bytes) {
        Ok(t) => t,
        Err(d) => {
            report.push(d);
            return Ok(None);
        }
    };
    let source = Source::new(display, text);
    report.add_source(&source);
    let before = report.diagnostics.iter().filter(|d| d.is_error()).count();
    let mut diags = Vec::new();
    if let Some(doc) = skill::parse(&source, &name, &mut diags) {
        crate::agent::skills::check_allowed(&source, &doc, callable, &mut diags);
    }
    report.diagnostics.extend(diags);
    let files = list_files(folder, &shown, report);
    let after = report.diagnostics.iter().filter(|d| d.is_error()).count();
    Ok((after == before).then_some(Staged { name, from: folder.to_path_buf(), files }))
}

/// The regular files of a skill folder, refusing what an agent folder may not hold.
fn list_files(folder: &Path, shown: &str, report: &mut Report) -> Vec<(String, bool)> {
    let mut files = Vec::new();
    let mut total = 0u64;
    for entry in walkdir::WalkDir::new(folder).follow_links(false).sort_by_file_name() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                report.push(Diagnostic::error(Code::IoError, shown, e.to_string()));
                continue;
            }
        };
        let rel = entry.path().strip_prefix(folder).unwrap_or(entry.path());
        let Some(rel) = rel.to_str().map(|r| r.replace(std::path::MAIN_SEPARATOR, "/")) else {
            report.push(Diagnostic::error(Code::UnsafePath, shown, format!("{}: not a UTF-8 name", rel.display())));
            continue;
        };
        let t = entry.file_type();
        if t.is_dir() {
            continue;
        }
        if !t.is_file() {
            report.push(
                Diagnostic::error(
                    Code::UnsupportedFileType,
                    format!("{shown}/{rel}"),
                    "not a regular file (symbolic links are never copied)",
                )
                .with_help("replace it with the file it points to, or remove it"),
            );
            continue;
        }
        if rel.chars().any(char::is_control) {
            report.push(Diagnostic::error(Code::UnsafePath, shown, format!("{rel:?}: a control character in a name")));
            continue;
        }
        let meta = entry.metadata().ok();
        total += meta.as_ref().map_or(0, |m| m.len());
        files.push((rel, meta.is_some_and(|m| is_executable(&m))));
    }
    if files.len() > MAX_SKILL_FILES || total > MAX_SKILL_IMPORT_BYTES {
        report.push(Diagnostic::error(
            Code::LimitExceeded,
            shown,
            format!("the skill has {} files, {total} bytes: more than {MAX_SKILL_FILES} files or {MAX_SKILL_IMPORT_BYTES} bytes", files.len()),
        ));
    }
    files
}

#[cfg(unix)]
fn is_executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_: &std::fs::Metadata) -> bool {
    false
}

/// Copies a staged skill into a new folder beside its target, then renames it into place
/// (replacing an older skill of the name, which `--force` allowed).
fn install(s: &Staged, root: &Path) -> Result<()> {
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{}.import-", s.name))
        .tempdir_in(root)
        .map_err(|e| Error::io(root, e))?;
    for (rel, executable) in &s.files {
        let from = s.from.join(rel);
        let to = staging.path().join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let bytes = regular_file::read(&from, MAX_SKILL_IMPORT_BYTES, Links::Refuse)
            .map_err(|e| Error::io(&from, e.into_io()))?;
        std::fs::write(&to, bytes).map_err(|e| Error::io(&to, e))?;
        set_mode(&to, *executable)?;
    }
    let target = root.join(&s.name);
    let old = root.join(format!(".{}.replaced", s.name));
    let had_old = std::fs::symlink_metadata(&target).is_ok();
    if had_old {
        std::fs::rename(&target, &old).map_err(|e| Error::io(&target, e))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &target).map_err(|e| Error::io(&target, e))?;
    if had_old {
        std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(path: &Path, executable: bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| Error::io(path, e))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: bool) -> Result<()> {
    Ok(())
}
