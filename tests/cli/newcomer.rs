//! What a newcomer hits (issue 24): the messages for common mistakes say what is wrong and
//! what to do, once, and the commands take the inputs the others take. Each case is a
//! snapshot of what the user sees.

use crate::snapshot::{bundle_snapshot, in_env};
use crate::support::{Env, testdata};

/// Two agents, `kb` and `mailer`, packed into dist/ with the test key.
fn two_agents() -> Env {
    let env = Env::new();
    env.run(&["init", "agents/kb"]).expect_code(0);
    env.run(&["init", "agents/mailer"]).expect_code(0);
    let key = testdata("keys/test.key").display().to_string();
    env.run(&["pack", "agents/", "--key", &key, "-o", "dist/"]).expect_code(0);
    env
}

fn pubkey() -> String {
    testdata("keys/test.pub").display().to_string()
}

#[test]
fn verify_with_a_missing_baseline_folder_says_how_to_make_it_once() {
    let env = two_agents();
    let (temp, key) = (env.path(), pubkey());
    let args = ["verify", "dist/kb-0.1.0.agent.bundle", "dist/mailer-0.1.0.agent.bundle", "--key", &key];
    let mut with = args.to_vec();
    with.extend(["--baseline", "baselines/"]);
    bundle_snapshot!("newcomer_missing_baseline_folder", in_env(&env, &with), [temp]);
    let mut other = args.to_vec();
    other.extend(["--baseline", "approved/"]);
    bundle_snapshot!("newcomer_missing_baseline_other_folder", in_env(&env, &other), [temp]);
}

#[test]
fn verify_with_a_missing_baseline_file_says_how_to_make_it() {
    let env = two_agents();
    let (temp, key) = (env.path(), pubkey());
    bundle_snapshot!(
        "newcomer_missing_baseline_file",
        in_env(&env, &["verify", "dist/kb-0.1.0.agent.bundle", "--key", &key, "--baseline", "approved.toml"]),
        [temp]
    );
}

#[test]
fn baseline_snapshot_takes_a_folder_of_agents_and_writes_one_file_per_agent() {
    let env = two_agents();
    let temp = env.path();
    bundle_snapshot!("newcomer_baseline_snapshot_agents", in_env(&env, &["baseline", "snapshot", "agents/"]), [temp]);
    for agent in ["kb", "mailer"] {
        assert!(temp.join(format!("baselines/{agent}.toml")).is_file(), "{agent}");
    }
    // What it wrote is what verify holds the bundles to.
    let key = pubkey();
    let verify = ["verify", "dist/kb-0.1.0.agent.bundle", "dist/mailer-0.1.0.agent.bundle", "--key", &key];
    let mut with = verify.to_vec();
    with.extend(["--baseline", "baselines/"]);
    env.run(&with).expect_code(0);
    // Again without --force: each file is refused, and the run fails (exit 2).
    bundle_snapshot!(
        "newcomer_baseline_snapshot_agents_again",
        in_env(&env, &["baseline", "snapshot", "agents/"]),
        [temp]
    );
}

#[test]
fn baseline_snapshot_takes_many_bundles_into_a_folder() {
    let env = two_agents();
    let temp = env.path();
    let args =
        ["baseline", "snapshot", "dist/kb-0.1.0.agent.bundle", "dist/mailer-0.1.0.agent.bundle", "-o", "approved"];
    bundle_snapshot!("newcomer_baseline_snapshot_bundles", in_env(&env, &args), [temp]);
    assert!(temp.join("approved/kb.toml").is_file());
    assert!(temp.join("approved/mailer.toml").is_file());
}

#[test]
fn verify_of_a_folder_says_verify_takes_a_bundle() {
    let env = two_agents();
    let (temp, key) = (env.path(), pubkey());
    bundle_snapshot!("newcomer_verify_a_folder", in_env(&env, &["verify", "agents/kb", "--key", &key]), [temp]);
    bundle_snapshot!("newcomer_inspect_a_folder", in_env(&env, &["inspect", "agents/kb"]), [temp]);
    bundle_snapshot!(
        "newcomer_unpack_a_folder",
        in_env(&env, &["unpack", "agents/kb", "deploy/kb", "--key", &key]),
        [temp]
    );
    assert!(!temp.join("deploy").exists());
}

#[test]
fn pack_of_a_missing_folder_says_it_does_not_exist() {
    let env = two_agents();
    let temp = env.path();
    let key = testdata("keys/test.key").display().to_string();
    bundle_snapshot!(
        "newcomer_pack_a_missing_folder",
        in_env(&env, &["pack", "agents/knowledge", "--key", &key]),
        [temp]
    );
    bundle_snapshot!("newcomer_check_a_missing_folder", in_env(&env, &["check", "agents/knowledge"]), [temp]);
}

#[test]
fn lock_refuses_to_lock_an_agent_whose_check_fails_and_writes_nothing() {
    let env = two_agents();
    let temp = env.path();
    std::fs::write(temp.join("agents/kb/tools.json"), "{\n  \"version\": 1,\n  \"tools\": [\n").unwrap();
    std::fs::write(temp.join("agents/mailer/notes.md"), "stale\n").unwrap();
    let before = std::fs::read(temp.join("agents/kb/manifest.toml")).unwrap();
    bundle_snapshot!("newcomer_lock_a_broken_agent", in_env(&env, &["lock"]), [temp]);
    assert_eq!(std::fs::read(temp.join("agents/kb/manifest.toml")).unwrap(), before, "kb must not be relocked");
    // The other agent was locked: one broken agent does not stop the rest.
    env.run(&["check", "agents/mailer"]).expect_code(0);
}

#[test]
fn lock_is_quiet_about_agents_it_left_as_they_were() {
    let env = two_agents();
    let temp = env.path();
    bundle_snapshot!("newcomer_lock_nothing_changed", in_env(&env, &["lock"]), [temp]);
    std::fs::write(temp.join("agents/mailer/notes.md"), "new\n").unwrap();
    bundle_snapshot!("newcomer_lock_one_changed", in_env(&env, &["lock"]), [temp]);
}
