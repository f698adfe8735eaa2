//! The pre-commit hooks of `.pre-commit-hooks.yaml`, run by the real `pre-commit` in a
//! throwaway git repository.
//!
//! The published hooks use `language: rust`, for which pre-commit builds `bundle` with
//! `cargo install` (minutes, once per hook revision). The test runs the very same hook
//! definitions as a `repo: local` hook with `language: system`, and the binary under test first
//! on PATH: what is tested is the hooks' ids, entries, file filter and behaviour, in seconds.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{Env, repo, require_tool};

/// `.pre-commit-config.yaml` for a repository that uses this checkout's hooks locally.
fn local_config() -> String {
    let hooks = std::fs::read_to_string(repo().join(".pre-commit-hooks.yaml")).unwrap();
    assert_eq!(
        hooks.lines().filter(|l| l.trim() == "language: rust").count(),
        2,
        "both hooks are published as language: rust"
    );
    let mut config = String::from("repos:\n  - repo: local\n    hooks:\n");
    for line in hooks.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        config.push_str("      ");
        config.push_str(&line.replace("language: rust", "language: system"));
        config.push('\n');
    }
    config
}

struct Repo<'e> {
    dir: &'e Path,
    cache: std::path::PathBuf,
    path: std::ffi::OsString,
}

impl Repo<'_> {
    fn cmd(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .current_dir(self.dir)
            .env("PATH", &self.path)
            .env("PRE_COMMIT_HOME", &self.cache)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .env_remove("NO_COLOR")
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    #[track_caller]
    fn ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.cmd(program, args);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{program} {args:?} failed:\n{text}");
        text
    }

    /// `git add -A && git commit`; the commit's success and everything printed.
    fn commit(&self, message: &str) -> (bool, String, Duration) {
        self.ok("git", &["add", "-A"]);
        let start = Instant::now();
        let out = self.cmd("git", &["commit", "-q", "-m", message]);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text, start.elapsed())
    }
}

#[test]
fn pre_commit_hooks_pass_a_good_agent_block_a_broken_one_and_relock_a_stale_one() {
    if !require_tool("pre-commit") || !require_tool("git") {
        return;
    }
    let env = Env::new();
    let dir = env.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_bundle")).parent().unwrap().to_path_buf();
    let mut paths = vec![bin_dir];
    paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    let repo =
        Repo { dir: &dir, cache: env.path().join("pre-commit-cache"), path: std::env::join_paths(paths).unwrap() };
    repo.ok("git", &["init", "-q"]);
    std::fs::write(dir.join(".pre-commit-config.yaml"), local_config()).unwrap();
    repo.ok("pre-commit", &["install"]);
    repo.ok("bundle", &["init", "agents/mailer"]);
    std::fs::write(dir.join("README.md"), "not an agent\n").unwrap();

    // A good agent commits.
    let (ok, text, took) = repo.commit("add the mailer agent");
    assert!(ok, "{text}");
    assert!(text.contains("bundle check") && text.contains("Passed"), "{text}");
    eprintln!("hook run for a good commit: {took:?}");

    // A change outside agents/ does not run the hooks.
    std::fs::write(dir.join("README.md"), "still not an agent\n").unwrap();
    let (ok, text, _) = repo.commit("docs");
    assert!(ok && text.contains("(no files to check)Skipped"), "{text}");

    // A broken tools.json is blocked, with the diagnostic shown.
    let tools = dir.join("agents/mailer/tools.json");
    let good_tools = std::fs::read_to_string(&tools).unwrap();
    std::fs::write(&tools, good_tools.replace("\"tools\": []", "\"tools\": [], \"tool\": []")).unwrap();
    let (ok, text, _) = repo.commit("break it");
    assert!(!ok, "a broken tools.json must not commit:\n{text}");
    assert!(text.contains("error[unknown_field]: unknown field `tool`"), "{text}");
    assert!(text.contains("agents/mailer/tools.json:"), "{text}");
    repo.ok("git", &["reset", "-q", "--hard"]);

    // A stale manifest is blocked by bundle-check; bundle-lock fixes it, so the commit passes
    // once the fixed manifest is staged.
    std::fs::write(dir.join("agents/mailer/notes.md"), "shipped with the agent\n").unwrap();
    let (ok, text, _) = repo.commit("add notes");
    assert!(!ok, "a stale manifest must not commit:\n{text}");
    assert!(text.contains("error[stale_digest]") && text.contains("notes.md is not listed in [files]"), "{text}");
    assert!(text.contains("- hook id: bundle-lock") && text.contains("files were modified by this hook"), "{text}");
    let manifest = std::fs::read_to_string(dir.join("agents/mailer/manifest.toml")).unwrap();
    assert!(manifest.contains("\"notes.md\""), "bundle-lock wrote the digest:\n{manifest}");
    let (ok, text, _) = repo.commit("add notes");
    assert!(ok, "after re-staging the commit passes:\n{text}");
    let log = repo.ok("git", &["log", "--oneline"]);
    assert_eq!(log.lines().count(), 3, "{log}");
    repo.ok("bundle", &["check"]);
}
