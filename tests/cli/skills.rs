//! Agent Skills in an agent folder: `check` validates skills/<name>/SKILL.md, `import --from
//! skills` adds skill folders, `inspect` and `diff` show them. The skills are hand-written in
//! the public format (testdata/skills/README.md).

use std::collections::BTreeMap;
use std::path::Path;

use crate::snapshot::{in_env, shown};
use crate::support::{Env, copy_dir, testdata};

/// The mailer agent with the skill fixtures `skills` copied into its skills/ folder.
fn mailer_with(env: &Env, skills: &[&str]) -> std::path::PathBuf {
    let agent = env.copy("agents/mailer", "mailer");
    for s in skills {
        copy_dir(&testdata(&format!("skills/{s}")), &agent.join("skills").join(s));
    }
    agent
}

/// What `find skills/<name> -type f | LC_ALL=C sort | xargs b3sum | b3sum` prints, computed
/// with the blake3 library.
fn b3sum_of_skill(agent: &Path, name: &str) -> String {
    let mut files = BTreeMap::new();
    let mut stack = vec![agent.join("skills").join(name)];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(agent).unwrap().to_str().unwrap().to_owned();
                files.insert(rel, blake3::hash(&std::fs::read(e.path()).unwrap()).to_hex().to_string());
            }
        }
    }
    let lines: String = files.iter().map(|(p, h)| format!("{h}  {p}\n")).collect();
    blake3::hash(lines.as_bytes()).to_hex().to_string()
}

#[test]
fn check_reports_every_skill_problem_with_its_line_and_column() {
    let env = Env::new();
    let agent = mailer_with(&env, &["pdf-report", "bad-fields", "no-front-matter"]);
    let huge = agent.join("skills/huge-front-matter");
    std::fs::create_dir_all(&huge).unwrap();
    let filler: String = (0..3000).map(|i| format!("  key{i}: value number {i}\n")).collect();
    std::fs::write(
        huge.join("SKILL.md"),
        format!("---\nname: huge-front-matter\ndescription: x\nmetadata:\n{filler}---\n"),
    )
    .unwrap();
    std::fs::create_dir_all(agent.join("skills/empty-folder")).unwrap();
    insta::assert_snapshot!(shown(&mut in_env(&env, &["check", "mailer"]), &[env.path()]));
}

#[test]
fn a_valid_skill_with_scripts_and_nested_references_passes_check() {
    let env = Env::new();
    mailer_with(&env, &["pdf-report", "reply-drafting"]);
    env.run(&["lock", "mailer"]).expect_code(0);
    env.run(&["check", "mailer"]).expect_code(0);
}

#[test]
fn import_from_skills_copies_checks_and_relocks() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let skills = testdata("skills");
    let pdf = skills.join("pdf-report");
    let reply = skills.join("reply-drafting");
    let text = shown(
        &mut in_env(
            &env,
            &["import", "--from", "skills", pdf.to_str().unwrap(), reply.to_str().unwrap(), "-o", "mailer"],
        ),
        &[env.path()],
    );
    insta::assert_snapshot!(text);
    let agent = env.path().join("mailer");
    env.run(&["check", "mailer"]).expect_code(0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(agent.join("skills/pdf-report/scripts/fill.py")).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "the script stays executable");
    }
    // A second import of the same skill needs --force.
    env.run(&["import", "--from", "skills", pdf.to_str().unwrap(), "-o", "mailer"]).expect_code(1);
    env.run(&["import", "--from", "skills", pdf.to_str().unwrap(), "-o", "mailer", "--force"]).expect_code(0);
    env.run(&["check", "mailer"]).expect_code(0);
}

#[test]
fn import_from_skills_of_a_bad_skill_changes_nothing() {
    let env = Env::new();
    let agent = env.copy("agents/mailer", "mailer");
    let manifest = std::fs::read(agent.join("manifest.toml")).unwrap();
    let skills = testdata("skills");
    let run = env.run(&["import", "--from", "skills", skills.to_str().unwrap(), "-o", "mailer", "--format", "json"]);
    run.expect_code(1);
    let codes: Vec<String> =
        run.json()["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect();
    for code in ["invalid_skill_name", "invalid_skill_description", "unknown_allowed_tool", "missing_front_matter"] {
        assert!(codes.iter().any(|c| c == code), "{code} in {codes:?}");
    }
    assert!(!agent.join("skills").exists(), "nothing was copied");
    assert_eq!(std::fs::read(agent.join("manifest.toml")).unwrap(), manifest, "nothing was relocked");
}

#[test]
fn inspect_lists_each_skill_with_its_b3sum_digest_and_allowed_tools() {
    let env = Env::new();
    let agent = mailer_with(&env, &["pdf-report", "reply-drafting"]);
    env.pack("mailer", "m.agent.bundle").expect_code(0);
    let run = env.run(&["inspect", "m.agent.bundle", "--format", "json"]);
    run.expect_code(0);
    let skills = run.json()["skills"].clone();
    assert_eq!(skills[0]["name"], "pdf-report");
    assert_eq!(skills[0]["digest"], b3sum_of_skill(&agent, "pdf-report"));
    assert_eq!(skills[0]["allowed_tools"], serde_json::json!(["mail.mailbox_search", "mail.smtp_send"]));
    assert_eq!(skills[0]["files"], 3);
    assert_eq!(skills[1]["digest"], b3sum_of_skill(&agent, "reply-drafting"));
    assert!(skills[1]["description"].as_str().unwrap().contains("日本語"));
    let text = shown(&mut in_env(&env, &["inspect", "m.agent.bundle"]), &[env.path()]);
    let section = text.split("\nskills").nth(1).expect("a skills section");
    insta::assert_snapshot!(section);
}

#[test]
fn diff_holds_a_wider_allowed_tools_as_a_widening() {
    let env = Env::new();
    let agent = mailer_with(&env, &["pdf-report", "reply-drafting"]);
    env.pack("mailer", "old.agent.bundle").expect_code(0);
    let md = agent.join("skills/pdf-report/SKILL.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, text.replace("mail.smtp_send\n", "mail.smtp_send contacts.lookup\n")).unwrap();
    std::fs::remove_dir_all(agent.join("skills/reply-drafting")).unwrap();
    env.run(&["lock", "mailer"]).expect_code(0);
    insta::assert_snapshot!(shown(
        &mut in_env(&env, &["diff", "old.agent.bundle", "mailer", "--fail-on", "widening"]),
        &[env.path()]
    ));
    let run = env.run(&["diff", "old.agent.bundle", "mailer", "--format", "json"]);
    let doc = run.json();
    let kinds: Vec<&str> = doc["skills"].as_array().unwrap().iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["skill_tools_widened", "skill_changed", "skill_removed"]);
}

/// An agent with the weather MCP server pinned (pins/weather.mcp.json, one tool `get_weather`)
/// and a skill `forecast` whose allowed-tools is `allowed`.
fn weather_agent_with_skill(env: &Env, allowed: &str) -> std::path::PathBuf {
    env.run(&["init", "agent"]).expect_code(0);
    let file = testdata("import/mcp/tools-list-response.json").display().to_string();
    let exec = ["--exec", "/opt/bin/mcp-call", "--arg", "{tool}"];
    let mut args = vec!["import", "--from", "mcp", &file, "--pin", "--server", "weather", "-o", "agent/tools.json"];
    args.extend_from_slice(&["--force"]);
    args.extend_from_slice(&exec);
    env.run(&args).expect_code(0);
    let agent = env.path().join("agent");
    let skill = agent.join("skills/forecast");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: forecast\ndescription: Tell the forecast.\nallowed-tools: {allowed}\n---\n\nAsk the server.\n"
        ),
    )
    .unwrap();
    agent
}

/// `allowed-tools` names a tool of a pinned MCP server as Claude Code names MCP tools,
/// `mcp__<server>__<tool>`; check holds each such name to the pin, and refuses a whole server.
#[test]
fn allowed_tools_may_name_a_pinned_mcp_tool_as_mcp_server_tool() {
    let env = Env::new();
    weather_agent_with_skill(&env, "mcp__weather__get_weather");
    env.run(&["lock", "agent"]).expect_code(0);
    env.run(&["check", "agent"]).expect_code(0);
    env.pack("agent", "a.agent.bundle").expect_code(0);
    let run = env.run(&["inspect", "a.agent.bundle", "--format", "json"]);
    assert_eq!(run.json()["skills"][0]["allowed_tools"], serde_json::json!(["mcp__weather__get_weather"]));

    let env = Env::new();
    weather_agent_with_skill(
        &env,
        "mcp__weather__get_wether mcp__weather__* mcp__weather mcp__github__create_issue mcp__weather__delete_all",
    );
    // Lock refuses the agent; check says why (and that it is not locked).
    env.run(&["lock", "agent"]).expect_code(1);
    insta::assert_snapshot!(shown(&mut in_env(&env, &["check", "agent"]), &[env.path()]));
}

#[test]
fn an_mcp_allowed_tool_without_a_pinned_server_is_refused_with_how_to_pin_it() {
    let env = Env::new();
    let agent = mailer_with(&env, &[]);
    let skill = agent.join("skills/issues");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: issues\ndescription: File issues.\nallowed-tools: mcp__github__create_issue\n---\n",
    )
    .unwrap();
    let run = env.run(&["check", "mailer", "--format", "json"]);
    run.expect_code(1);
    let d = run.json()["diagnostics"].as_array().unwrap().iter().find(|d| d["code"] == "unknown_allowed_tool").cloned();
    let d = d.expect("unknown_allowed_tool");
    assert!(d["message"].as_str().unwrap().contains("pins no MCP server"), "{d}");
    assert_eq!((d["line"].as_u64(), d["column"].as_u64()), (Some(4), Some(16)));
}

#[test]
fn import_from_skills_accepts_a_skill_that_names_a_pinned_mcp_tool() {
    let env = Env::new();
    weather_agent_with_skill(&env, "mcp__weather__get_weather");
    env.run(&["lock", "agent"]).expect_code(0);
    let from = env.path().join("incoming/forecast-too");
    std::fs::create_dir_all(&from).unwrap();
    std::fs::write(
        from.join("SKILL.md"),
        "---\nname: forecast-too\ndescription: Again.\nallowed-tools: mcp__weather__get_weather\n---\n",
    )
    .unwrap();
    env.run(&["import", "--from", "skills", from.to_str().unwrap(), "-o", "agent"]).expect_code(0);
    env.run(&["check", "agent"]).expect_code(0);
}

/// Hostile SKILL.md shapes within the documented caps (reference/limits): each refused by
/// `check` with its own code, and none takes the check down (an alias bomb is cut by the YAML
/// reader's repetition limit, nesting by the depth cap before parsing).
#[test]
fn hostile_skills_are_refused_each_with_its_code() {
    let env = Env::new();
    let agent = mailer_with(&env, &[]);
    let write = |name: &str, bytes: &[u8]| {
        let dir = agent.join("skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), bytes).unwrap();
    };
    let mut bomb =
        String::from("---\nname: bomb\ndescription: x\nmetadata:\n  k: v\na: &a [\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for i in 1..9u8 {
        let (p, c) = ((b'a' + i - 1) as char, (b'a' + i) as char);
        bomb.push_str(&format!("{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"));
    }
    write("bomb", format!("{bomb}---\n").as_bytes());
    write(
        "deep",
        format!("---\nname: deep\ndescription: x\nmetadata: {}{}\n---\n", "[".repeat(100), "]".repeat(100)).as_bytes(),
    );
    write("latin", b"---\nname: latin\ndescription: caf\xe9\n---\n");
    write("big", format!("---\nname: big\ndescription: x\n---\n{}", "y".repeat(2 << 20)).as_bytes());
    write(
        "twice",
        b"---\nname: twice\ndescription: x\nallowed-tools: mail.smtp_send\nallowed-tools: contacts.lookup\n---\n",
    );
    write("not-a-map", b"---\n- name\n- description\n---\n");
    #[cfg(unix)]
    {
        let dir = agent.join("skills/link");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(agent.join("tools.json"), dir.join("SKILL.md")).unwrap();
    }
    let run = env.run(&["check", "mailer", "--format", "json"]);
    run.expect_code(1);
    let doc = run.json();
    let code_of = |skill: &str| -> Vec<String> {
        let file = format!("mailer/skills/{skill}/SKILL.md");
        doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["file"] == file.as_str())
            .map(|d| d["code"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(code_of("bomb"), ["invalid_front_matter"]);
    assert_eq!(code_of("deep"), ["limit_exceeded"]);
    assert_eq!(code_of("latin"), ["invalid_utf8"]);
    assert_eq!(code_of("big"), ["limit_exceeded"]);
    assert_eq!(code_of("twice"), ["invalid_front_matter"], "a repeated key is not read twice");
    assert_eq!(code_of("not-a-map"), ["invalid_front_matter"]);
    #[cfg(unix)]
    assert!(code_of("link").iter().all(|c| c == "unsupported_file_type") && !code_of("link").is_empty());
}

/// A skill folder imported, packed and inspected keeps the digest its source folder has
/// (`b3sum` over the same paths): the round trip changes no byte.
#[test]
fn a_skill_keeps_its_digest_through_import_pack_and_inspect() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let source = env.path().join("source");
    copy_dir(&testdata("skills/pdf-report"), &source.join("skills/pdf-report"));
    let want = b3sum_of_skill(&source, "pdf-report");
    let from = source.join("skills/pdf-report");
    env.run(&["import", "--from", "skills", from.to_str().unwrap(), "-o", "mailer"]).expect_code(0);
    env.pack("mailer", "m.agent.bundle").expect_code(0);
    let run = env.run(&["inspect", "m.agent.bundle", "--format", "json"]);
    assert_eq!(run.json()["skills"][0]["digest"], want.as_str());
}

/// The client tools the code-review fixture's `allowed-tools` names, as manifest.toml
/// `[skills] client_tools` declares them.
const CODE_REVIEW_TOOLS: &str = r#"["Read", "Grep", "Glob", "Bash(git diff *)", "Bash(git log:*)", "WebFetch"]"#;

/// Appends `[skills] client_tools = <list>` (TOML) to the manifest of `agent`.
fn declare_client_tools(agent: &Path, list: &str) {
    let path = agent.join("manifest.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!("\n[skills]\nclient_tools = {list}\n"));
    std::fs::write(&path, text).unwrap();
}

/// Issue 38's known gap: a skill written for Claude Code names its built-in tools (`Read`,
/// `Bash(git diff *)`). Undeclared, each is `unknown_allowed_tool` with how to declare it;
/// declared in the signed manifest, the skill passes check, packs, and inspect lists them.
#[test]
fn a_skill_written_for_claude_code_passes_once_its_client_tools_are_declared() {
    let env = Env::new();
    let agent = mailer_with(&env, &["code-review"]);
    let run = env.run(&["check", "mailer", "--format", "json"]);
    run.expect_code(1);
    let unknown: Vec<String> = run.json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "unknown_allowed_tool")
        .map(|d| d["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(unknown.len(), 6, "{unknown:?}");
    assert!(unknown[3].contains("`Bash(git diff *)`"), "a pattern with spaces is one entry: {unknown:?}");

    declare_client_tools(&agent, CODE_REVIEW_TOOLS);
    env.run(&["lock", "mailer"]).expect_code(0);
    env.run(&["check", "mailer"]).expect_code(0);
    env.pack("mailer", "m.agent.bundle").expect_code(0);
    let run = env.run(&["inspect", "m.agent.bundle", "--format", "json"]);
    run.expect_code(0);
    let listed = serde_json::json!(["Read", "Grep", "Glob", "Bash(git diff *)", "Bash(git log:*)", "WebFetch"]);
    assert_eq!(run.json()["skills"][0]["allowed_tools"], listed);
    assert_eq!(run.json()["client_tools"], listed, "inspect shows the signed declaration");
    let text = shown(&mut in_env(&env, &["inspect", "m.agent.bundle"]), &[env.path()]);
    let section = text.split("\nskills").nth(1).expect("a skills section");
    insta::assert_snapshot!(section);
}

/// Declaring client tools does not open the door to every name: a typo, a tool not
/// declared, a bare tool when only one of its patterns is, and another pattern of a declared
/// tool are each refused, with a help line that says what to write.
#[test]
fn undeclared_and_mistyped_client_tools_are_refused_with_how_to_declare_them() {
    let env = Env::new();
    let agent = mailer_with(&env, &["code-review"]);
    declare_client_tools(&agent, r#"["Read", "Grep", "Glob", "Bash(git log:*)", "WebFetch"]"#);
    let md = agent.join("skills/code-review/SKILL.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(
        &md,
        text.replace(
            "allowed-tools: Read Grep Glob Bash(git diff *) Bash(git log:*) WebFetch",
            "allowed-tools: Reed Grep Glob Bash(git diff *) Bash WebSearch Bash(git log:*)\n  WebFetch Bash(git",
        ),
    )
    .unwrap();
    insta::assert_snapshot!(shown(&mut in_env(&env, &["check", "mailer"]), &[env.path()]));
}

/// `[skills] client_tools` is read strictly: each malformed entry, a repeated one, a wrong
/// type and an unknown key of `[skills]` are reported at their place, all at once.
#[test]
fn malformed_client_tool_declarations_are_refused_each_at_its_place() {
    let env = Env::new();
    let agent = mailer_with(&env, &[]);
    declare_client_tools(
        &agent,
        r#"["Read", "Read", "Bash(git", "mcp__github__create_issue", "Web Fetch", "Bash()", 3, "Bash(café)"]
client_tool = ["Grep"]"#,
    );
    insta::assert_snapshot!(shown(&mut in_env(&env, &["check", "mailer"]), &[env.path()]));

    let env = Env::new();
    let agent = mailer_with(&env, &[]);
    let many: Vec<String> = (0..257).map(|i| format!("\"Bash(tool{i})\"")).collect();
    declare_client_tools(&agent, &format!("[{}]", many.join(", ")));
    let run = env.run(&["check", "mailer", "--format", "json"]);
    run.expect_code(1);
    let d = &run.json()["diagnostics"][0];
    assert_eq!((d["code"].as_str(), d["path"].as_str()), (Some("invalid_client_tool"), Some("skills.client_tools")));

    let env = Env::new();
    let agent = mailer_with(&env, &[]);
    declare_client_tools(&agent, r#""Read""#);
    let run = env.run(&["check", "mailer", "--format", "json"]);
    run.expect_code(1);
    assert_eq!(run.json()["diagnostics"][0]["code"], "wrong_type");
}

/// A release that declares one more client tool, and a skill that now allows it: `bundle diff`
/// reports both as widenings (`client_tool_added`, `skill_tools_widened`) and `--fail-on
/// widening` exits 1; taking them back is a narrowing.
#[test]
fn diff_reports_a_newly_declared_client_tool_and_a_skill_that_allows_it_as_widenings() {
    let env = Env::new();
    let agent = mailer_with(&env, &["code-review"]);
    declare_client_tools(&agent, CODE_REVIEW_TOOLS);
    env.pack("mailer", "old.agent.bundle").expect_code(0);
    let manifest = agent.join("manifest.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace(r#""WebFetch"]"#, r#""WebFetch", "Edit"]"#)).unwrap();
    let md = agent.join("skills/code-review/SKILL.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, text.replace("Bash(git log:*) WebFetch\n", "Bash(git log:*) WebFetch Edit\n")).unwrap();
    env.run(&["lock", "mailer"]).expect_code(0);
    env.pack("mailer", "new.agent.bundle").expect_code(0);
    insta::assert_snapshot!(shown(
        &mut in_env(&env, &["diff", "old.agent.bundle", "new.agent.bundle", "--fail-on", "widening"]),
        &[env.path()]
    ));
    let kinds = |old: &str, new: &str| -> Vec<(String, String)> {
        let run = env.run(&["diff", old, new, "--format", "json"]);
        run.json()["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["kind"].as_str().unwrap().to_owned(), c["impact"].as_str().unwrap().to_owned()))
            .collect()
    };
    let pair = |k: &str, i: &str| (k.to_owned(), i.to_owned());
    assert_eq!(
        kinds("old.agent.bundle", "new.agent.bundle"),
        [
            pair("client_tool_added", "widening"),
            pair("skill_tools_widened", "widening"),
            pair("skill_changed", "neutral")
        ]
    );
    assert_eq!(
        kinds("new.agent.bundle", "old.agent.bundle"),
        [
            pair("client_tool_removed", "narrowing"),
            pair("skill_tools_narrowed", "narrowing"),
            pair("skill_changed", "neutral")
        ]
    );
}
