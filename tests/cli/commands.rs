//! The success and common-failure output of every command that changes something (`pack`,
//! `lock`, `init`, `tool add/list/remove`, `push`, `pull`, `unpack`, `export`, `import`,
//! `keygen`, `pubkey`), pinned by snapshots: what a user sees after each step of a release.
//! `check`, `verify`, `inspect` and `diff` have their matrices in tests/cli/output.rs.

use crate::registry::{self, Setup};
use crate::snapshot::{assert_run_snapshot, run_text};
use crate::support::{Env, key, testdata};

#[test]
fn pack_success_and_failures() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    assert_run_snapshot!("pack_ok", env.pack("mailer", "m.agent.bundle"));
    assert_run_snapshot!(
        "pack_ok_json",
        env.run(&["pack", "mailer", "--key", &key("test.key"), "-o", "j.agent.bundle", "--format", "json"])
    );
    assert_run_snapshot!("pack_public_key", env.run(&["pack", "mailer", "--key", &key("test.pub"), "-o", "x.bundle"]));
    assert_run_snapshot!("pack_missing_folder", env.run(&["pack", "nothere", "--key", &key("test.key")]));
    env.copy("invalid/duplicate_id", "broken");
    assert_run_snapshot!("pack_invalid_agent", env.pack("broken", "b.agent.bundle"));
    assert!(!env.path().join("b.agent.bundle").exists());
}

#[test]
fn lock_success_and_failures() {
    let env = Env::new();
    let dir = env.copy("agents/mailer", "mailer");
    assert_run_snapshot!("lock_up_to_date", env.run(&["lock", "mailer"]));
    std::fs::write(dir.join("prompts/system.md"), "edited\n").unwrap();
    std::fs::write(dir.join("prompts/new.md"), "new\n").unwrap();
    assert_run_snapshot!("lock_updated", env.run(&["lock", "mailer"]));
    assert_run_snapshot!("lock_up_to_date_json", env.run(&["lock", "mailer", "--format", "json"]));
    env.copy("invalid/invalid_toml-unquoted-string", "broken");
    assert_run_snapshot!("lock_broken_manifest", env.run(&["lock", "broken"]));
}

#[test]
fn init_success_and_failures() {
    let env = Env::new();
    assert_run_snapshot!("init_ok", env.run(&["init", "clock"]));
    assert_run_snapshot!("init_exists", env.run(&["init", "clock"]));
    // A folder name that is not an agent name gives one derived from it.
    assert_run_snapshot!("init_name_from_folder", env.run(&["init", "Bad Name"]));
    env.run(&["check", "clock"]).expect_code(0);
}

#[test]
fn tool_add_list_remove_success_and_failures() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    let add = ["tool", "add", "mailer", "--id", "kb.search", "--description", "Search the knowledge base."];
    assert_run_snapshot!("tool_add_ok", env.run(&[&add[..], &["--exec", "/usr/bin/kb"]].concat()));
    assert_run_snapshot!("tool_add_duplicate", env.run(&[&add[..], &["--exec", "/usr/bin/kb"]].concat()));
    assert_run_snapshot!(
        "tool_add_bad_id",
        env.run(&["tool", "add", "mailer", "--id", "Bad Id", "--description", "x", "--exec", "/usr/bin/kb"])
    );
    assert_run_snapshot!("tool_list", env.run(&["tool", "list", "mailer"]));
    assert_run_snapshot!("tool_list_json", env.run(&["tool", "list", "mailer", "--format", "json"]));
    assert_run_snapshot!("tool_list_missing_folder", env.run(&["tool", "list", "nothere"]));
    assert_run_snapshot!("tool_remove_ok", env.run(&["tool", "remove", "mailer", "kb.search"]));
    assert_run_snapshot!("tool_remove_unknown", env.run(&["tool", "remove", "mailer", "mail.smtp_snd"]));
}

#[test]
fn unpack_success_and_failures() {
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    let unpack = |to: &str, key_name: &str| env.run(&["unpack", "m.agent.bundle", to, "--key", &key(key_name)]);
    assert_run_snapshot!("unpack_ok", unpack("deploy/mailer", "test.pub"));
    assert_run_snapshot!("unpack_exists", unpack("deploy/mailer", "test.pub"));
    assert_run_snapshot!("unpack_untrusted_key", unpack("deploy/other", "minisign-nopw.pub"));
    assert!(!env.path().join("deploy/other").exists());
}

#[test]
fn export_success_and_failures() {
    let env = Env::new();
    env.copy("agents/mailer", "mailer");
    assert_run_snapshot!("export_openai", env.run(&["export", "mailer", "--to", "openai", "-o", "openai.json"]));
    assert_run_snapshot!("export_mcp_stdout", env.run(&["export", "mailer", "--to", "mcp"]));
    env.copy("invalid/duplicate_id", "broken");
    assert_run_snapshot!("export_invalid_agent", env.run(&["export", "broken", "--to", "openai"]));
}

#[test]
fn import_success_and_failures() {
    let env = Env::new();
    let path = |rel: &str| testdata(rel).display().to_string();
    env.run(&["init", "clock"]).expect_code(0);
    assert_run_snapshot!(
        "import_openai",
        env.run(&[
            "import",
            "--from",
            "openai",
            &path("import/openai/responses.json"),
            "--exec",
            "/usr/local/bin/{tool}",
            "-o",
            "clock/tools.json",
            "--force",
        ])
    );
    assert_run_snapshot!(
        "import_exists",
        env.run(&[
            "import",
            "--from",
            "openai",
            &path("import/openai/responses.json"),
            "--exec",
            "/usr/local/bin/{tool}",
            "-o",
            "clock/tools.json",
        ])
    );
    assert_run_snapshot!(
        "import_invalid",
        env.run(&["import", "--from", "openai", &path("import/openai/invalid.json")])
    );
}

#[test]
fn keygen_and_pubkey_success_and_failures() {
    let env = Env::new();
    let made = env.run(&["keygen", "release"]);
    let public = std::fs::read_to_string(env.path().join("release.pub")).unwrap();
    // A new key has a new id every time: shown as [KEYID].
    let id = public.lines().next().unwrap().rsplit(' ').next().unwrap().to_owned();
    let hide = |text: String| text.replace(&id, "[KEYID]");
    insta::assert_snapshot!("keygen_ok", hide(run_text(&made)));
    insta::assert_snapshot!("keygen_exists", hide(run_text(&env.run(&["keygen", "release"]))));
    assert_run_snapshot!("pubkey_ok", env.run(&["pubkey", &key("test.key")]));
    assert_run_snapshot!("pubkey_of_a_public_key", env.run(&["pubkey", &key("test.pub")]));
    assert_run_snapshot!("pubkey_missing_file", env.run(&["pubkey", "nothere.key"]));
}

#[test]
fn push_and_pull_success_and_failures() {
    let Some(reg) = registry::start(Setup::Plain) else { return };
    let env = Env::new();
    env.packed_mailer("mailer", "m.agent.bundle");
    let reference = format!("oci://{}/team/mailer:1.0.0", reg.host());
    let pubkey = key("test.pub");
    assert_run_snapshot!("push_ok", env.run(&["push", "m.agent.bundle", &reference, "--key", &pubkey, "--plain-http"]));
    assert_run_snapshot!("push_over_tls_to_plain", env.run(&["push", "m.agent.bundle", &reference, "--key", &pubkey]));
    assert_run_snapshot!(
        "pull_ok",
        env.run(&["pull", &reference, "--key", &pubkey, "-o", "pulled.agent.bundle", "--plain-http"])
    );
    let missing = format!("oci://{}/team/mailer:9.9.9", reg.host());
    assert_run_snapshot!(
        "pull_missing_tag",
        env.run(&["pull", &missing, "--key", &pubkey, "-o", "missing.agent.bundle", "--plain-http"])
    );
    assert!(!env.path().join("missing.agent.bundle").exists());
}
