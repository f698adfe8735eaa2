//! Checking one agent folder: tools.json, policy.caps, manifest.toml and its pins, every
//! problem at once. `check`, `pack`, `diff` and `export` all start from this.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{
    FolderFiles, Hashing, Kept, current_digests, display_prefix, models, pins, read_source, read_source_kept,
    stale_entries,
};
use crate::admission::{Admission, Permit};
use crate::diagnostic::{Code, Diagnostic, Report};
use crate::manifest::{self, Manifest};
use crate::policy::{self, Policy};
use crate::tools::{self, ValidTools};

/// An agent folder that passed every check: what later steps need is there by type.
#[derive(Debug)]
pub struct CheckedAgent {
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// The manifest's text as read.
    pub manifest_text: Arc<str>,
    /// tools.json, valid; [`ValidTools::model`] types it.
    pub tools: ValidTools,
    pub policy: Policy,
    /// Warnings only: a checked agent has no errors.
    pub report: Report,
    /// The schema files tools.json's validation read (relative paths).
    pub schema_files: Vec<String>,
    /// The skills in `skills/`, in folder-name order.
    pub skills: Vec<crate::skill::facts::SkillFacts>,
    /// The vendor-signed models of `[[models]]`, each checked against its key.
    pub models: Vec<crate::attest::model_verify::ModelFacts>,
}

/// An agent folder with at least one error.
#[derive(Debug)]
pub struct AgentProblems {
    pub dir: PathBuf,
    /// The manifest, when it parsed (it names the agent in `check`'s summary).
    pub manifest: Option<Manifest>,
    /// Every problem found; at least one is an error.
    pub report: Report,
}

/// The outcome of checking one agent folder.
pub type AgentCheck = Result<CheckedAgent, AgentProblems>;

/// The parts every outcome has, for commands that report them alike: the folder, its manifest
/// (when it parsed) and the report.
pub fn into_parts(check: AgentCheck) -> (PathBuf, Option<Manifest>, Report) {
    match check {
        Ok(a) => (a.dir, Some(a.manifest), a.report),
        Err(p) => (p.dir, p.manifest, p.report),
    }
}

/// What a check does besides validating the files.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// Hash the files and compare them with the manifest (`pack` without `--locked` skips
    /// it, because it locks right after).
    pub digests: bool,
    /// Fetch every pinned URL and start every pinned stdio MCP server, and report drift
    /// (`bundle check --refresh`; network, other programs).
    pub refresh: Option<&'a pins::Refresh>,
    /// The Sigstore trusted root a `[[models]]` identity is judged against (`--trusted-root`);
    /// without one such a model is refused (`model_trusted_root_missing`).
    pub trusted_root: Option<&'a crate::keyless::TrustedRoot>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options { digests: true, refresh: None, trusted_root: None }
    }
}

/// Checks one agent folder as `opts` says.
pub fn check_agent_with(dir: &Path, opts: Options<'_>) -> AgentCheck {
    check_agent_admitted(dir, opts, None).0
}

/// Agents whose JSON (tools.json and the listed `.json` files) is at most this many bytes are
/// parsed without taking a share of an [`Admission`]: each costs well under a megabyte, and
/// the check of 20,000 small agents does not queue on one lock.
pub const ADMITTED_FROM: u64 = 64 << 10;

/// [`check_agent_with`], parsing the agent's JSON only once `admission` gives a share of its
/// budget for the JSON's bytes (if the agent has more than [`ADMITTED_FROM`]); the share, when
/// taken, comes back with the result, for the caller to give back once done with it (the
/// typed model it holds is part of what the share stands for).
pub fn check_agent_admitted<'a>(
    dir: &Path,
    opts: Options<'_>,
    admission: Option<&'a Admission>,
) -> (AgentCheck, Option<Permit<'a>>) {
    let prefix = display_prefix(dir);
    let mut report = Report::default();
    let mut diags = Vec::new();

    let manifest = read_source(dir, &prefix, manifest::FILE_NAME, true, &mut report)
        .and_then(|src| manifest::parse(&src, &mut diags).map(|m| (m, src)));
    let manifest_text = manifest.as_ref().map(|(_, src)| src.text.clone());
    // Digests are compared only when the manifest itself is sound: lock cannot fix them
    // before the manifest is fixed, and the noise would hide the real problem.
    let manifest_sound = !diags.iter().any(|d| d.is_error());
    let mut kept = Kept::new();
    // The listed JSON files, tools.json included (what its schema references may read too).
    let mut listed_json = None;
    if let Some((m, src)) = manifest.as_ref().filter(|_| opts.digests && manifest_sound) {
        // A check never signs anything: unchanged files may keep their cached digests.
        let mut found = current_digests(dir, &prefix, m, &mut diags, Hashing::StatCache);
        kept = std::mem::take(&mut found.kept);
        listed_json =
            Some(found.files.iter().filter(|f| f.path.ends_with(".json")).map(|f| f.size).fold(0, u64::saturating_add));
        for (key, message) in stale_entries(m, &found.digests) {
            // An artifact the manifest names that is gone: lock cannot lock without it.
            let gone = match key.as_str() {
                "artifacts.tools" => found.digests.tools.is_none().then_some(tools::FILE_NAME),
                "artifacts.policy" => found.digests.policy.is_none().then_some(policy::FILE_NAME),
                _ => None,
            };
            let help = match gone {
                Some(file) => format!(
                    "restore {file} (`git checkout -- {prefix}{file}` where it is committed); `bundle lock` cannot \
                     lock an agent without it"
                ),
                None => "run `bundle lock` to update the digests".to_owned(),
            };
            diags.push(Diagnostic::error(Code::StaleDigest, &src.name, message).at_path(key).with_help(help));
        }
    }
    let mut mcp_pins = Vec::new();
    let mut model_facts = Vec::new();
    if let Some((m, src)) = manifest.as_ref() {
        mcp_pins = pins::check(dir, &prefix, m, &src.name, &mut diags);
        model_facts = models::check(dir, &prefix, m, opts.trusted_root, &mut diags);
        if let Some(with) = opts.refresh {
            pins::refresh(with, dir, &prefix, m, &src.name, &mut diags);
        }
    }
    let manifest = manifest.map(|(m, _)| m);

    let policy = read_source_kept(dir, &prefix, policy::FILE_NAME, false, &mut report, &mut kept)
        .map(|src| Policy::parse(&src, &mut diags))
        .unwrap_or_default();

    let mut valid = None;
    let mut schema_files = Vec::new();
    // Before tools.json is read when the listing gave its size, else once it is read.
    let admit = |json: u64| admission.filter(|_| json > ADMITTED_FROM).map(|a| a.enter(json));
    let mut permit = listed_json.and_then(admit);
    if let Some(src) = read_source_kept(dir, &prefix, tools::FILE_NAME, true, &mut report, &mut kept) {
        if listed_json.is_none() {
            permit = admit(src.text.len() as u64);
        }
        let files = FolderFiles { dir: dir.to_path_buf(), kept: kept.into() };
        let validated = tools::validate(&src, &files, &prefix, &policy, &mut diags);
        for s in &validated.sources {
            report.add_source(s);
        }
        valid = validated.valid;
        schema_files = validated.schema_files;
    }
    let client_tools = manifest.as_ref().map(|m| m.client_tools.as_slice()).unwrap_or_default();
    let callable =
        valid.as_ref().map(|v| super::skills::Callable::new(v.ids.iter().map(String::as_str), &mcp_pins, client_tools));
    let skills = super::skills::check(dir, &prefix, callable.as_ref(), &mut report, &mut diags);
    report.diagnostics.extend(diags);
    let dir = dir.to_path_buf();
    let check = match (manifest, manifest_text, valid) {
        (Some(manifest), Some(manifest_text), Some(valid)) if !report.has_errors() => Ok(CheckedAgent {
            dir,
            manifest,
            manifest_text,
            tools: valid,
            policy,
            report,
            schema_files,
            skills,
            models: model_facts,
        }),
        (manifest, ..) => {
            // Each missing part has reported an error; this keeps the invariant if one did not.
            if !report.has_errors() {
                report.push(Diagnostic::error(
                    Code::IoError,
                    format!("{prefix}{}", tools::FILE_NAME),
                    "the agent could not be read",
                ));
            }
            Err(AgentProblems { dir, manifest, report })
        }
    };
    (check, permit)
}
