//! The skills of an agent (`skills/<name>/SKILL.md` and the files beside it): each checked by
//! the Agent Skills rules (`formats::skill`) and against tools.json, and summed up as
//! [`SkillFacts`] — what `inspect`, `diff` and the contract predicate show.
//!
//! A skill's digest covers every file of its folder, so that a changed script beside the
//! SKILL.md is a changed skill: it is the BLAKE3 of the lines `b3sum` prints for the skill's
//! files in byte order of their paths (`<hex>  skills/<name>/<path>\n`), so that
//! `find skills/x -type f | LC_ALL=C sort | xargs b3sum | b3sum` gives the same digest.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::Serialize;

use crate::diagnostic::{Code, Diagnostic, Report, Source};
use crate::formats::skill::{self, SkillDoc};
use crate::limits::{MAX_SKILL_BYTES, MAX_SKILL_FILES};
use crate::regular_file::{self, Links, ReadError};

/// What an agent's skill is, in every command that shows one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillFacts {
    pub name: String,
    /// BLAKE3 over the skill's files (module docs).
    pub digest: String,
    pub description: String,
    /// The tools.json ids its `allowed-tools` names, in file order.
    pub allowed_tools: Vec<String>,
    /// How many files the skill folder holds (SKILL.md included).
    pub files: usize,
}

/// The digest of a skill from its files' BLAKE3s, keyed by bundle path.
pub fn digest(files: &BTreeMap<String, String>) -> String {
    let mut hasher = blake3::Hasher::new();
    for (path, hex) in files {
        hasher.update(format!("{hex}  {path}\n").as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// Checks the skills of the agent in `dir` (nothing to do without a `skills/` folder). `tools`:
/// the ids of tools.json when it was valid (allowed tools are checked only then).
pub fn check(
    dir: &Path,
    prefix: &str,
    tools: Option<&BTreeSet<&str>>,
    report: &mut Report,
    diags: &mut Vec<Diagnostic>,
) -> Vec<SkillFacts> {
    let root = dir.join(skill::DIR);
    let Ok(meta) = std::fs::symlink_metadata(&root) else { return Vec::new() };
    if !meta.is_dir() {
        return Vec::new();
    }
    let shown = format!("{prefix}{}", skill::DIR);
    let mut entries: Vec<_> = match std::fs::read_dir(&root) {
        Ok(rd) => rd.filter_map(Result::ok).collect(),
        Err(e) => {
            diags.push(Diagnostic::error(Code::IoError, &shown, format!("cannot read {}: {e}", skill::DIR)));
            return Vec::new();
        }
    };
    if entries.len() > MAX_SKILL_FILES {
        diags.push(Diagnostic::error(
            Code::LimitExceeded,
            &shown,
            format!("more than {MAX_SKILL_FILES} entries in {}/", skill::DIR),
        ));
        return Vec::new();
    }
    entries.sort_by_key(|e| e.file_name());
    let mut facts = Vec::new();
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        // Symlinks and other files are the agent check's business (unsupported_file_type).
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let rel = format!("{}/{name}/{}", skill::DIR, skill::FILE_NAME);
        let display = format!("{prefix}{rel}");
        let Some(source) = read_skill(&dir.join(&rel), &display, diags) else { continue };
        report.add_source(&source);
        let Some(doc) = skill::parse(&source, &name, diags) else { continue };
        if let Some(tools) = tools {
            check_allowed(&source, &doc, tools, diags);
        }
        match folder_digest(dir, &name) {
            Ok((digest, files)) => facts.push(facts_of(&doc, digest, files)),
            Err(message) => diags.push(Diagnostic::error(Code::LimitExceeded, &display, message)),
        }
    }
    facts
}

fn facts_of(doc: &SkillDoc, digest: String, files: usize) -> SkillFacts {
    SkillFacts {
        name: doc.name.clone(),
        digest,
        description: doc.description.clone(),
        allowed_tools: doc.allowed_tool_names(),
        files,
    }
}

fn check_allowed(source: &Source, doc: &SkillDoc, tools: &BTreeSet<&str>, diags: &mut Vec<Diagnostic>) {
    for (name, span) in &doc.allowed_tools {
        if !tools.contains(name.as_str()) {
            let close = tools.iter().find(|t| strsim::jaro_winkler(t, name) > 0.85);
            let help = match close {
                Some(t) => format!("did you mean `{t}`? allowed-tools names tools.json ids"),
                None => "name a tool of tools.json, or add the tool to tools.json".to_owned(),
            };
            diags.push(
                Diagnostic::error(
                    Code::UnknownAllowedTool,
                    &source.name,
                    format!("allowed tool `{name}` is not a tool of tools.json"),
                )
                .at_path("allowed-tools")
                .at_span(source, span.clone())
                .with_help(help),
            );
        }
    }
}

fn read_skill(path: &Path, display: &str, diags: &mut Vec<Diagnostic>) -> Option<Source> {
    match regular_file::read(path, MAX_SKILL_BYTES, Links::Refuse) {
        Ok(bytes) => match crate::json::decode_utf8(display, bytes) {
            Ok(text) => Some(Source::new(display, text)),
            Err(d) => {
                diags.push(d);
                None
            }
        },
        Err(ReadError::NotFound) => {
            diags.push(
                Diagnostic::error(Code::MissingSkillFile, display, "the skill folder has no SKILL.md")
                    .with_help("add a SKILL.md with `name` and `description`, or move the folder out of skills/"),
            );
            None
        }
        Err(ReadError::TooLarge { limit }) => {
            diags.push(Diagnostic::error(
                Code::LimitExceeded,
                display,
                format!("SKILL.md is larger than {limit} bytes"),
            ));
            None
        }
        Err(ReadError::NotRegular { what }) => {
            diags.push(Diagnostic::error(
                Code::UnsupportedFileType,
                display,
                format!("SKILL.md is {what}; it must be a regular file"),
            ));
            None
        }
        Err(ReadError::Io(e)) => {
            diags.push(Diagnostic::error(Code::IoError, display, format!("cannot read SKILL.md: {e}")));
            None
        }
    }
}

/// The digest and file count of `skills/<name>/` in the agent folder `dir` (symlinks are not
/// followed; the agent check reports them).
fn folder_digest(dir: &Path, name: &str) -> Result<(String, usize), String> {
    let mut files = BTreeMap::new();
    let base = dir.join(skill::DIR).join(name);
    for entry in walkdir::WalkDir::new(&base).follow_links(false) {
        let entry = entry.map_err(|e| e.to_string())?;
        if !entry.file_type().is_file() {
            continue;
        }
        if files.len() >= MAX_SKILL_FILES {
            return Err(format!("the skill has more than {MAX_SKILL_FILES} files"));
        }
        let rel = entry.path().strip_prefix(dir).map_err(|e| e.to_string())?;
        let rel: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let mut hasher = blake3::Hasher::new();
        let file = std::fs::File::open(entry.path()).map_err(|e| format!("{}: {e}", entry.path().display()))?;
        hasher.update_reader(file).map_err(|e| format!("{}: {e}", entry.path().display()))?;
        files.insert(rel.join("/"), hasher.finalize().to_hex().to_string());
    }
    let count = files.len();
    Ok((digest(&files), count))
}

/// The skills of a verified bundle: its files' digests and the SKILL.md texts it holds. A
/// SKILL.md that does not parse is shown with an empty description (verify does not judge
/// skills; `bundle check` did before packing).
pub fn from_bundle<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
    held: &HashMap<String, Vec<u8>>,
) -> Vec<SkillFacts> {
    let mut by_skill: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
    for (path, blake3) in files {
        if let Some(rest) = path.strip_prefix("skills/")
            && let Some((name, _)) = rest.split_once('/')
        {
            by_skill.entry(name).or_default().insert(path.to_owned(), blake3.to_owned());
        }
    }
    by_skill
        .into_iter()
        .filter_map(|(name, files)| {
            let md = format!("{}/{name}/{}", skill::DIR, skill::FILE_NAME);
            let text = std::str::from_utf8(held.get(&md)?).ok()?;
            let doc = skill::parse(&Source::new(md, text), name, &mut Vec::new());
            let doc = doc.unwrap_or(SkillDoc {
                name: name.to_owned(),
                description: String::new(),
                license: None,
                allowed_tools: Vec::new(),
            });
            Some(facts_of(&doc, digest(&files), files.len()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_b3sum_of_b3sum_lines() {
        let files = BTreeMap::from([("skills/x/SKILL.md".to_owned(), "ab".repeat(32))]);
        let want = blake3::hash(format!("{}  skills/x/SKILL.md\n", "ab".repeat(32)).as_bytes());
        assert_eq!(digest(&files), want.to_hex().to_string());
    }
}
