//! Fitting the places users run `bundle`: GitHub Actions annotations from every judging
//! command, colors that follow `--color` and `NO_COLOR`, shell completions, the man page and
//! `--help` examples.

use std::process::{Command, Stdio};

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, bin, key, require_tool, run, testdata};

fn hostile(case: &str) -> String {
    format!("testdata/hostile/{case}.agent.bundle")
}

/// The first workflow command on stdout.
#[track_caller]
fn first_annotation(stdout: &str) -> &str {
    stdout.lines().find(|l| l.starts_with("::")).unwrap_or_else(|| panic!("no annotation in:\n{stdout}"))
}

#[test]
fn every_judging_command_prints_github_annotations() {
    let env = Env::new();
    env.copy("invalid/duplicate_id", "broken");

    let out = env.run(&["check", "--format", "github", "broken"]);
    out.expect_code(1);
    assert!(first_annotation(&out.stdout).starts_with("::error file=broken/tools.json,line="), "{}", out.stdout);
    assert_run_snapshot!(out);

    let out = env.run(&["pack", "broken", "--key", &key("test.key"), "--format", "github"]);
    out.expect_code(1);
    assert!(first_annotation(&out.stdout).starts_with("::error file=broken/tools.json,line="), "{}", out.stdout);

    let locked = env.copy("agents/minimal", "secretive");
    std::fs::write(locked.join(".env"), "TOKEN=x\n").unwrap();
    let out = env.run(&["lock", "--format", "github", "secretive"]);
    out.expect_code(1);
    assert!(
        first_annotation(&out.stdout).starts_with("::error file=secretive/.env,title=secret_file::"),
        "{}",
        out.stdout
    );

    let stale = env.copy("agents/minimal", "stale");
    std::fs::write(stale.join("notes.md"), "new\n").unwrap();
    let out = env.run(&["lock", "--format", "github", "stale"]);
    out.expect_code(0);
    assert_eq!(
        first_annotation(&out.stdout),
        "::notice file=stale/manifest.toml,title=locked::manifest.toml was updated; commit it"
    );
    // From the repository root, file names are as GitHub shows them: `agents/...`, no `./`.
    let root = Env::new();
    let stale = root.copy("agents/minimal", "agents/minimal");
    std::fs::write(stale.join("notes.md"), "new\n").unwrap();
    let out = root.run(&["check", "--format", "github"]);
    assert!(first_annotation(&out.stdout).starts_with("::error file=agents/minimal/manifest.toml,"), "{}", out.stdout);
    let out = root.run(&["lock", "--format", "github"]);
    assert!(first_annotation(&out.stdout).starts_with("::notice file=agents/minimal/manifest.toml,"), "{}", out.stdout);

    let tampered = hostile("bad_signature-manifest-tampered");
    let out = run(&["verify", &tampered, "--key", &key("test.pub"), "--format", "github"]);
    out.expect_code(1);
    assert!(first_annotation(&out.stdout).starts_with(&format!("::error file={tampered},title=bad_signature::")));

    let replaced = hostile("digest_mismatch-prompt-replaced");
    let out = run(&["inspect", &replaced, "--format", "github"]);
    out.expect_code(1);
    assert!(first_annotation(&out.stdout).starts_with(&format!("::error file={replaced},title=digest_mismatch::")));

    let out = env.run(&[
        "unpack",
        &crate::support::repo().join(&tampered).display().to_string(),
        "nested/out",
        "--key",
        &key("test.pub"),
        "--format",
        "github",
    ]);
    out.expect_code(1);
    assert!(first_annotation(&out.stdout).contains(",title=bad_signature::"), "{}", out.stdout);
    assert!(!env.path().join("nested").exists(), "a rejected unpack leaves no folder behind");

    let out = env.run(&[
        "tool",
        "add",
        "stale",
        "--id",
        "Bad",
        "--description",
        "x",
        "--exec",
        "/bin/true",
        "--format",
        "github",
    ]);
    out.expect_code(1);
    assert!(first_annotation(&out.stdout).starts_with("::error file=stale/tools.json,line="), "{}", out.stdout);
    assert_run_snapshot!(out);
}

#[test]
fn successes_are_notices_and_run_errors_are_annotations_too() {
    let env = Env::new();
    env.copy("agents/minimal", "minimal");
    let out = env.run(&["pack", "minimal", "--key", &key("test.key"), "-o", "m.agent.bundle", "--format", "github"]);
    out.expect_code(0);
    assert!(first_annotation(&out.stdout).starts_with("::notice file=m.agent.bundle,title=packed::packed minimal"));
    let out = env.run(&["verify", "m.agent.bundle", "--key", &key("test.pub"), "--format", "github"]);
    out.expect_code(0);
    assert!(first_annotation(&out.stdout).starts_with("::notice file=m.agent.bundle,title=verified::minimal"));

    // A missing signing key stops the run (exit 2); CI still gets an annotation saying why.
    let out = env.run(&["pack", "minimal", "--format", "github"]);
    out.expect_code(2);
    assert!(first_annotation(&out.stdout).starts_with("::error title=bundle::no signing key"), "{}", out.stdout);
    assert_run_snapshot!(out);
}

#[test]
fn annotation_text_is_escaped() {
    let env = Env::new();
    let dir = env.copy("agents/minimal", "a,b");
    std::fs::write(dir.join("tools.json"), "{\"version\": 1, \"tools\": [], \"x%\\ny\": 1}").unwrap();
    let out = env.run(&["check", "--format", "github", "a,b"]);
    out.expect_code(1);
    let line = out.stdout.lines().find(|l| l.contains("title=unknown_field")).expect(&out.stdout);
    assert!(line.starts_with("::error file=a%2Cb/tools.json,"), "{line}");
    assert!(line.contains("x%25"), "{line}");
    assert!(out.stdout.lines().all(|l| l.starts_with("::")), "a newline in a message must not start a new command");
}

fn has_escape(s: &str) -> bool {
    s.contains('\u{1b}')
}

#[test]
fn color_never_and_no_color_print_no_escape_codes_and_always_does() {
    let broken = "testdata/invalid/duplicate_id";
    let never = run(&["check", "--color", "never", broken]);
    assert!(!has_escape(&never.stderr), "{:?}", never.stderr);
    let no_color: crate::support::Run =
        bin().env("NO_COLOR", "1").args(["check", broken]).current_dir(crate::support::repo()).output().unwrap().into();
    assert!(!has_escape(&no_color.stderr), "{:?}", no_color.stderr);
    let always = run(&["check", "--color", "always", broken]);
    assert!(has_escape(&always.stderr), "{:?}", always.stderr);
    let explicit: crate::support::Run = bin()
        .env("NO_COLOR", "1")
        .args(["check", "--color=always", broken])
        .current_dir(crate::support::repo())
        .output()
        .unwrap()
        .into();
    assert!(has_escape(&explicit.stderr), "--color always wins over NO_COLOR: {:?}", explicit.stderr);
    // Usage errors come from clap, and follow --color too.
    let usage = run(&["check", "--color", "always", "--format", "yaml"]);
    usage.expect_code(2);
    assert!(has_escape(&usage.stderr), "{:?}", usage.stderr);
    let usage = run(&["check", "--color", "never", "--format", "yaml"]);
    assert!(!has_escape(&usage.stderr), "{:?}", usage.stderr);
}

/// Runs `bundle ARGS` on a pseudo-terminal (util-linux `script`), where `--color auto` colors.
fn on_terminal(args: &str, no_color: bool) -> Option<String> {
    if !require_tool("script") {
        return None;
    }
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &format!("{} {args}", env!("CARGO_BIN_EXE_bundle")), "/dev/null"])
        .current_dir(crate::support::repo())
        .stdin(Stdio::null())
        // A terminal type whatever the caller's environment: without TERM (`env -i`), or with
        // TERM=dumb, `--color auto` rightly does not color.
        .env("TERM", "xterm")
        .env_remove("NO_COLOR");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().expect("run script");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn on_a_terminal_auto_colors_unless_no_color_is_set() {
    let Some(colored) = on_terminal("check testdata/invalid/duplicate_id", false) else { return };
    assert!(colored.contains("duplicate_id") && has_escape(&colored), "{colored:?}");
    let plain = on_terminal("check testdata/invalid/duplicate_id", true).unwrap();
    assert!(plain.contains("duplicate_id") && !has_escape(&plain), "{plain:?}");
    let plain = on_terminal("check --color never testdata/invalid/duplicate_id", false).unwrap();
    assert!(plain.contains("duplicate_id") && !has_escape(&plain), "{plain:?}");
    let help = on_terminal("--help", true).unwrap();
    assert!(help.contains("Usage") && !has_escape(&help), "clap's help follows NO_COLOR: {help:?}");
}

#[test]
fn quiet_prints_only_errors() {
    let env = Env::new();
    env.copy("agents/minimal", "a");
    let out = env.run(&["--quiet", "check", "a"]);
    out.expect_code(0);
    assert_eq!(out.stderr, "");
    let out = env.run(&["check", "-q", "--color", "never", &testdata("invalid/duplicate_id").display().to_string()]);
    out.expect_code(1);
    assert_run_snapshot!(out);
}

#[test]
fn bash_completions_know_the_subcommands_and_load() {
    let out = run(&["completions", "bash"]);
    out.expect_code(0);
    for word in ["pack", "verify", "check", "lock", "--format", "github"] {
        assert!(out.stdout.contains(word), "{word}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = run(&["completions", shell]);
        out.expect_code(0);
        assert!(out.stdout.contains("verify"), "{shell}");
    }
    run(&["completions", "tcsh"]).expect_code(2);
    if require_tool("bash") {
        let env = Env::new();
        std::fs::write(env.path().join("bundle.bash"), run(&["completions", "bash"]).stdout).unwrap();
        let loaded = Command::new("bash")
            .args(["-c", "source ./bundle.bash && complete -p bundle"])
            .current_dir(env.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&loaded.stdout);
        assert!(
            loaded.status.success() && text.contains("-F _bundle"),
            "{text}{}",
            String::from_utf8_lossy(&loaded.stderr)
        );
    }
}

#[test]
fn man_page_is_roff_from_the_clap_definitions() {
    let out = run(&["man"]);
    out.expect_code(0);
    assert!(out.stdout.lines().any(|l| l.starts_with(".TH bundle 1")), "{}", &out.stdout[..200.min(out.stdout.len())]);
    for word in ["pack", "verify", "completions", "tool"] {
        assert!(out.stdout.contains(word), "{word}");
    }
    let env = Env::new();
    env.run(&["man", "--dir", "man1"]).expect_code(0);
    for page in ["bundle.1", "bundle-check.1", "bundle-pack.1", "bundle-tool-add.1"] {
        let text =
            std::fs::read_to_string(env.path().join("man1").join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page}");
    }
}

/// The subcommand names listed under "Commands:" in a help text.
fn commands_in(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_subcommand_help_has_examples() {
    let top = run(&["--help"]);
    top.expect_code(0);
    assert_run_snapshot!(top);
    let mut todo: Vec<Vec<String>> = commands_in(&top.stdout).into_iter().map(|c| vec![c]).collect();
    assert!(todo.len() >= 11, "{todo:?}");
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = run(&args);
        out.expect_code(0);
        assert!(
            out.stdout.contains("Examples:\n  bundle "),
            "`bundle {}` has no examples:\n{}",
            path.join(" "),
            out.stdout
        );
        for sub in commands_in(&out.stdout) {
            let mut deeper = path.clone();
            deeper.push(sub);
            todo.push(deeper);
        }
        seen += 1;
    }
    assert!(seen >= 12, "{seen}");
}

/// The `run:` scripts of each job of a workflow file, in order (a small reader for the plain
/// block style docs/book/src/guides/github-actions.yml uses).
fn workflow_scripts(yaml: &str) -> Vec<(String, Vec<String>)> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut jobs: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_jobs = false;
    let lines: Vec<&str> = yaml.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line == "jobs:" {
            in_jobs = true;
            continue;
        }
        if in_jobs && indent(line) == 2 && line.trim_end().ends_with(':') && !line.trim().starts_with('#') {
            jobs.push((line.trim().trim_end_matches(':').to_owned(), Vec::new()));
            continue;
        }
        let trimmed = line.trim_start().trim_start_matches("- ");
        let Some(value) = trimmed.strip_prefix("run: ") else { continue };
        let key_indent = line.len() - trimmed.len();
        let script = if value.trim() == "|" {
            let mut block = Vec::new();
            while i < lines.len() && (lines[i].trim().is_empty() || indent(lines[i]) > key_indent) {
                block.push(lines[i].get(key_indent + 2..).unwrap_or("").to_owned());
                i += 1;
            }
            block.join("\n")
        } else {
            value.to_owned()
        };
        jobs.last_mut().expect("a run: inside a job").1.push(script);
    }
    jobs
}

/// Runs the workflow's scripts as the runner would (bash -e, from the repository root), with
/// the binary under test as the installed `bundle` and the test key as the secret.
#[test]
fn github_actions_workflow_checks_packs_verifies_and_gates_the_deploy() {
    if !require_tool("bash") {
        return;
    }
    let yaml = std::fs::read_to_string(crate::support::repo().join("docs/book/src/guides/github-actions.yml")).unwrap();
    let jobs = workflow_scripts(&yaml);
    let names: Vec<&str> = jobs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["check", "release", "deploy"]);
    assert!(yaml.contains("BUNDLE_SIGNING_KEY: ${{ secrets.BUNDLE_SIGNING_KEY }}"));

    let env = Env::new();
    env.copy("agents/mailer", "agents/mailer");
    env.copy("agents/minimal", "agents/minimal");
    std::fs::copy(key("test.pub"), env.path().join("release.pub")).unwrap();
    for agent in ["agents/mailer", "agents/minimal"] {
        env.run(&["baseline", "snapshot", agent]).expect_code(0);
    }
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_bundle")).parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let signing_key = std::fs::read_to_string(key("test.key")).unwrap();
    let run_job = |job: &str| -> (bool, String) {
        let scripts = &jobs.iter().find(|(n, _)| n == job).unwrap().1;
        let mut all = String::new();
        for script in scripts {
            let out = Command::new("bash")
                .args(["-e", "-c", script])
                .current_dir(env.path())
                .env("PATH", &path)
                .env("BUNDLE_PUBLIC_KEY", "release.pub")
                .env("BUNDLE_BASELINES", "baselines")
                .env("BUNDLE_STATE", "state/bundle-state.json")
                .env("BUNDLE_SIGNING_KEY", &signing_key)
                .env("BUNDLE_GIT", "unused")
                .env("BUNDLE_REV", "unused")
                .output()
                .unwrap();
            all.push_str(&String::from_utf8_lossy(&out.stdout));
            all.push_str(&String::from_utf8_lossy(&out.stderr));
            if !out.status.success() {
                return (false, all);
            }
        }
        (true, all)
    };

    let (ok, out) = run_job("check");
    assert!(ok, "{out}");
    let (ok, out) = run_job("release");
    assert!(ok, "{out}");
    assert!(out.contains("::notice file=dist/mailer-1.0.0.agent.bundle,title=packed::"), "{out}");
    assert!(out.contains("title=verified::minimal"), "{out}");
    let (ok, out) = run_job("deploy");
    assert!(ok, "{out}");
    assert!(env.path().join("deploy/mailer/tools.json").is_file(), "{out}");
    assert!(std::fs::read_to_string(env.path().join("state/bundle-state.json")).unwrap().contains("\"mailer\""));
    // The next deploy of the same release replaces the running copy.
    let (ok, out) = run_job("deploy");
    assert!(ok, "{out}");
    let deployed = std::fs::read(env.path().join("deploy/mailer/tools.json")).unwrap();

    // A bundle swapped on the way to the deploy job is stopped at the gate, and the running
    // copy stays as it was.
    std::fs::copy(
        crate::support::repo().join(hostile("bad_signature-manifest-tampered")),
        env.path().join("dist/mailer-1.0.0.agent.bundle"),
    )
    .unwrap();
    let (ok, out) = run_job("deploy");
    assert!(!ok && out.contains("title=bad_signature::"), "{out}");
    assert_eq!(std::fs::read(env.path().join("deploy/mailer/tools.json")).unwrap(), deployed);

    // On a pull request, a stale manifest fails the check job with an annotation on it (a fresh
    // runner: no tampered bundle of the deploy step left in dist/, which pack would refuse to
    // replace with other bytes).
    std::fs::remove_file(env.path().join("dist/mailer-1.0.0.agent.bundle")).unwrap();
    std::fs::write(env.path().join("agents/minimal/notes.md"), "new\n").unwrap();
    let (ok, out) = run_job("check");
    assert!(!ok && out.contains("::error file=agents/minimal/manifest.toml,title=stale_digest::"), "{out}");
    // And a release from it would refuse to pack it (--locked) instead of relocking.
    let (ok, out) = run_job("release");
    assert!(!ok && out.contains("title=stale_digest"), "{out}");
}
