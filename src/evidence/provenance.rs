//! The SLSA Provenance v1 predicate (slsa.dev/spec/v1.0/provenance) of a `bundle pack`: what
//! was built (the agent folder, the pack options), from which source (the git commit of the
//! work tree, and whether it was dirty), by which builder (the GitHub Actions workflow run, or
//! a local builder), and when (`SOURCE_DATE_EPOCH`, else no time, so that the same inputs give
//! the same bytes).
//!
//! The identifiers are ours and documented in docs/book/src/guides/attestations.md:
//! [`BUILD_TYPE`], [`LOCAL_BUILDER`]; under GitHub Actions the builder id is the workflow
//! (`<server>/<workflow ref>`) and the invocation id the run attempt's URL, as GitHub's own
//! provenance names them.

use std::path::Path;
use std::process::Command;

use serde_json::{Map, Value, json};

use crate::timestamp::Timestamp;

/// The `buildType` of a `bundle pack`: how to read `externalParameters`.
pub const BUILD_TYPE: &str = "https://agent-bundle.dev/buildtypes/pack/v1";
/// The builder id of a pack outside a known CI system.
pub const LOCAL_BUILDER: &str = "https://agent-bundle.dev/builders/local/v1";

/// What was packed, and how.
#[derive(Debug, Clone)]
pub struct BuildFacts<'a> {
    /// The agent folder as given to `pack`.
    pub agent_dir: &'a Path,
    pub locked: bool,
    /// The zstd level (`None` for `bundle attest`, which cannot know it).
    pub level: Option<i32>,
    pub expires: Option<Timestamp>,
    /// `SOURCE_DATE_EPOCH`, if set: the build's start and end time.
    pub source_date_epoch: Option<u64>,
}

/// The git facts of the folder an agent lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSource {
    /// The `origin` remote's URL, else the work tree's path as a `file://` URL.
    pub repository: String,
    /// `refs/heads/<branch>` when on a branch, else empty (detached).
    pub reference: String,
    pub commit: String,
    pub dirty: bool,
    /// The agent folder relative to the work tree's root (`agents/mailer`).
    pub path: String,
}

/// Reads the variables a predicate depends on; `std::env::var` in use, a table in tests.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The predicate for `facts`, with the source and builder read from `env` and git.
pub fn predicate(facts: &BuildFacts<'_>, env: Env<'_>) -> Value {
    let github = env("GITHUB_ACTIONS").is_some_and(|v| v == "true");
    let git = git_source(facts.agent_dir);
    let agent_path = git.as_ref().map_or_else(|| facts.agent_dir.display().to_string(), |g| g.path.clone());
    let mut external = Map::new();
    external.insert("agent".into(), json!(agent_path));
    external.insert("locked".into(), json!(facts.locked));
    if let Some(level) = facts.level {
        external.insert("level".into(), json!(level));
    }
    if let Some(expires) = facts.expires {
        external.insert("expires".into(), json!(expires.to_string()));
    }
    let mut dependencies = Vec::new();
    if github
        && let (Some(server), Some(repo), Some(sha)) =
            (env("GITHUB_SERVER_URL"), env("GITHUB_REPOSITORY"), env("GITHUB_SHA"))
    {
        let reference = env("GITHUB_REF").unwrap_or_default();
        dependencies.push(json!({
            "uri": source_uri(&format!("{server}/{repo}"), &reference),
            "digest": {"gitCommit": sha},
        }));
    } else if let Some(g) = &git {
        dependencies.push(json!({
            "uri": source_uri(&g.repository, &g.reference),
            "digest": {"gitCommit": g.commit},
            "annotations": {"dirty": g.dirty},
        }));
    }
    let mut build_definition = Map::new();
    build_definition.insert("buildType".into(), json!(BUILD_TYPE));
    build_definition.insert("externalParameters".into(), Value::Object(external));
    if !dependencies.is_empty() {
        build_definition.insert("resolvedDependencies".into(), Value::Array(dependencies));
    }
    let mut metadata = Map::new();
    let builder_id = match (github, env("GITHUB_SERVER_URL"), env("GITHUB_WORKFLOW_REF")) {
        (true, Some(server), Some(workflow)) => {
            if let (Some(repo), Some(run), Some(attempt)) =
                (env("GITHUB_REPOSITORY"), env("GITHUB_RUN_ID"), env("GITHUB_RUN_ATTEMPT"))
            {
                metadata.insert(
                    "invocationId".into(),
                    json!(format!("{server}/{repo}/actions/runs/{run}/attempts/{attempt}")),
                );
            }
            format!("{server}/{workflow}")
        }
        _ => LOCAL_BUILDER.to_owned(),
    };
    if let Some(epoch) = facts.source_date_epoch {
        let at = Timestamp::from_unix(epoch as i64, 0).to_string();
        metadata.insert("startedOn".into(), json!(at));
        metadata.insert("finishedOn".into(), json!(at));
    }
    let mut run_details = Map::new();
    run_details
        .insert("builder".into(), json!({"id": builder_id, "version": {"agent-bundle": env!("CARGO_PKG_VERSION")}}));
    if !metadata.is_empty() {
        run_details.insert("metadata".into(), Value::Object(metadata));
    }
    json!({"buildDefinition": build_definition, "runDetails": run_details})
}

/// `git+<repository>@<ref>` (or without `@` when detached), as SLSA verifiers expect source URIs.
pub fn source_uri(repository: &str, reference: &str) -> String {
    let repository = repository.strip_prefix("git+").unwrap_or(repository);
    if reference.is_empty() { format!("git+{repository}") } else { format!("git+{repository}@{reference}") }
}

/// Splits a source URI into repository (without `git+`) and ref.
pub fn split_source_uri(uri: &str) -> (&str, &str) {
    let uri = uri.strip_prefix("git+").unwrap_or(uri);
    // The ref follows the last `@` after the scheme's `://` (a user@host authority comes first).
    let after_scheme = uri.find("://").map_or(0, |i| i + 3);
    let path_start = uri[after_scheme..].find('/').map_or(uri.len(), |i| after_scheme + i);
    match uri[path_start..].rfind('@') {
        Some(i) => (&uri[..path_start + i], &uri[path_start + i + 1..]),
        None => (uri, ""),
    }
}

/// The git facts of `dir`, or `None` outside a work tree or without git. Runs `git` with a
/// fixed environment (no pager, no user config prompts).
pub fn git_source(dir: &Path) -> Option<GitSource> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim_end_matches('\n').to_owned())
    };
    let commit = git(&["rev-parse", "--verify", "HEAD"])?;
    let root = git(&["rev-parse", "--show-toplevel"])?;
    let prefix = git(&["rev-parse", "--show-prefix"]).unwrap_or_default();
    let repository = git(&["remote", "get-url", "origin"]).unwrap_or_else(|| format!("file://{root}"));
    let reference = git(&["symbolic-ref", "-q", "HEAD"]).unwrap_or_default();
    let dirty = git(&["status", "--porcelain", "--untracked-files=normal", "--", "."]).is_none_or(|s| !s.is_empty());
    Some(GitSource { repository, reference, commit, dirty, path: prefix.trim_end_matches('/').to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_uris_split_at_the_ref() {
        assert_eq!(
            split_source_uri("git+https://github.com/o/r@refs/heads/main"),
            ("https://github.com/o/r", "refs/heads/main")
        );
        assert_eq!(split_source_uri("git+ssh://git@host/o/r@refs/tags/v1"), ("ssh://git@host/o/r", "refs/tags/v1"));
        assert_eq!(split_source_uri("git+file:///src/repo"), ("file:///src/repo", ""));
        assert_eq!(source_uri("https://h/o/r", "refs/heads/x"), "git+https://h/o/r@refs/heads/x");
    }

    #[test]
    fn github_actions_names_the_workflow_and_the_run() {
        let vars = [
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "acme/agents"),
            ("GITHUB_WORKFLOW_REF", "acme/agents/.github/workflows/release.yml@refs/tags/v1"),
            ("GITHUB_RUN_ID", "42"),
            ("GITHUB_RUN_ATTEMPT", "2"),
            ("GITHUB_SHA", "abc"),
            ("GITHUB_REF", "refs/tags/v1"),
        ];
        let env = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        let dir = tempfile::tempdir().unwrap();
        let facts = BuildFacts {
            agent_dir: dir.path(),
            locked: true,
            level: Some(3),
            expires: None,
            source_date_epoch: Some(0),
        };
        let p = predicate(&facts, &env);
        assert_eq!(
            p["runDetails"]["builder"]["id"],
            "https://github.com/acme/agents/.github/workflows/release.yml@refs/tags/v1"
        );
        assert_eq!(
            p["runDetails"]["metadata"]["invocationId"],
            "https://github.com/acme/agents/actions/runs/42/attempts/2"
        );
        assert_eq!(p["runDetails"]["metadata"]["startedOn"], "1970-01-01T00:00:00Z");
        let dep = &p["buildDefinition"]["resolvedDependencies"][0];
        assert_eq!(dep["uri"], "git+https://github.com/acme/agents@refs/tags/v1");
        assert_eq!(dep["digest"]["gitCommit"], "abc");
    }
}
