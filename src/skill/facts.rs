//! What a skill is, in every command that shows one (`inspect`, `diff`, the contract
//! predicate, agent cards): its name, digest and allowed tools.
//!
//! A skill's digest covers every file of its folder, so that a changed script beside the
//! SKILL.md is a changed skill: it is the BLAKE3 of the lines `b3sum` prints for the skill's
//! files in byte order of their paths (`<hex>  skills/<name>/<path>\n`), so that
//! `find skills/x -type f | LC_ALL=C sort | xargs b3sum | b3sum` gives the same digest.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::SkillDoc;
use crate::diagnostic::Source;

/// What an agent's skill is, in every command that shows one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillFacts {
    pub name: String,
    /// BLAKE3 over the skill's files (module docs).
    pub digest: String,
    pub description: String,
    /// What its `allowed-tools` names, in file order: tools.json ids, and pinned MCP tools as
    /// `mcp__<server>__<tool>`.
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

impl SkillFacts {
    pub fn of(doc: &SkillDoc, digest: String, files: usize) -> SkillFacts {
        SkillFacts {
            name: doc.name.clone(),
            digest,
            description: doc.description.clone(),
            allowed_tools: doc.allowed_tool_names(),
            files,
        }
    }
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
            let md = format!("{}/{name}/{}", super::DIR, super::FILE_NAME);
            let text = std::str::from_utf8(held.get(&md)?).ok()?;
            let doc = super::parse(&Source::new(md, text), name, &mut Vec::new());
            let doc = doc.unwrap_or(SkillDoc {
                name: name.to_owned(),
                description: String::new(),
                license: None,
                allowed_tools: Vec::new(),
            });
            Some(SkillFacts::of(&doc, digest(&files), files.len()))
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
