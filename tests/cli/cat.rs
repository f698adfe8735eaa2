//! `bundle cat`: one file of a bundle, checked against the signed manifest, decoding only the
//! frames that hold it; refusals with the verifier's codes.

use crate::support::{Env, key, noise, testdata};

/// The mailer agent plus a 9 MiB text file and a 5 MiB incompressible one, packed: several
/// frames, files split across frames and files sharing one.
pub fn big_bundle(env: &Env) -> std::path::PathBuf {
    let agent = env.copy("agents/mailer", "big");
    std::fs::create_dir_all(agent.join("data")).unwrap();
    let text: Vec<u8> = b"a line of the knowledge base\n".iter().copied().cycle().take(9 << 20).collect();
    std::fs::write(agent.join("data/kb.txt"), text).unwrap();
    std::fs::write(agent.join("data/noise.bin"), noise(5 << 20)).unwrap();
    env.pack("big", "big.agent.bundle").expect_code(0);
    env.path().join("big.agent.bundle")
}

#[test]
fn cat_writes_each_file_as_packed_from_a_seekable_bundle_and_from_an_old_one() {
    let env = Env::new();
    let bundle = big_bundle(&env);
    let b = bundle.to_str().unwrap();
    let agent = env.path().join("big");
    let pubkey = key("test.pub");
    for path in [
        "tools.json",
        "data/kb.txt",
        "data/noise.bin",
        "prompts/system.md",
        "policy.caps",
        "schemas/shared/mail.draft.v1.json",
    ] {
        let out = env.path().join("out.bin");
        let run = env.run(&["cat", b, path, "--key", &pubkey, "-o", out.to_str().unwrap(), "--format", "json"]);
        let json = run.expect_code(0).json();
        assert_eq!(json["seekable"], true, "{path}");
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(agent.join(path)).unwrap(), "{path}");
    }
    // To standard output, nothing else on it.
    let run = env.run(&["cat", b, "tools.json", "--key", &pubkey]);
    assert_eq!(run.expect_code(0).stdout, std::fs::read_to_string(agent.join("tools.json")).unwrap());
    // A bundle of an earlier release (one frame, no seek table): decoded from its start.
    let old = testdata("hostile/ok.agent.bundle");
    let run = env.run(&["cat", old.to_str().unwrap(), "tools.json", "--key", &pubkey]);
    assert_eq!(run.expect_code(0).stdout, "{\"version\":1,\"tools\":[]}\n");
}

#[test]
fn cat_refuses_with_the_verifiers_codes_and_writes_nothing() {
    let env = Env::new();
    let bundle = big_bundle(&env);
    let b = bundle.to_str().unwrap();
    let out = env.path().join("never.bin");
    let o = out.to_str().unwrap();
    let other = testdata("keys/minisign-nopw.pub").to_str().unwrap().to_owned();
    let code = |args: &[&str], exit: i32| env.run(args).expect_code(exit).json()["code"].as_str().map(str::to_owned);
    assert_eq!(
        code(&["cat", b, "tools.json", "--key", &other, "-o", o, "--format", "json"], 1).as_deref(),
        Some("untrusted_key")
    );
    let pubkey = key("test.pub");
    assert_eq!(
        code(&["cat", b, "tools.json", "--key", &pubkey, "--name", "other", "-o", o, "--format", "json"], 1).as_deref(),
        Some("name_mismatch")
    );
    // A path the manifest does not list is a usage error.
    env.run(&["cat", b, "nope.txt", "--key", &pubkey]).expect_code(2);
    // Hostile seek tables: the frames are the truth.
    for (case, want) in [
        ("seek_table_mismatch-wrong-size", "seek_table_mismatch"),
        ("seek_table_mismatch-overlapping", "seek_table_mismatch"),
        ("seek_table_mismatch-past-the-end", "seek_table_mismatch"),
        ("seek_table_mismatch-more-frames-than-bytes", "seek_table_mismatch"),
        ("malformed_archive-later-frame-checksum-flipped", "malformed_archive"),
    ] {
        let hostile = testdata(&format!("hostile/{case}.agent.bundle"));
        let h = hostile.to_str().unwrap();
        let got = code(&["cat", h, "data/kb.txt", "--key", &pubkey, "-o", o, "--format", "json"], 1);
        assert_eq!(got.as_deref(), Some(want), "{case}");
    }
    // A byte of data/noise.bin flipped (a stored block, so the frame still decodes): the
    // digest tells.
    let mut damaged = std::fs::read(&bundle).unwrap();
    let at = damaged.len() / 2;
    damaged[at] ^= 0x55;
    let d = env.path().join("damaged.agent.bundle");
    std::fs::write(&d, damaged).unwrap();
    let got = code(&["cat", d.to_str().unwrap(), "data/noise.bin", "--key", &pubkey, "-o", o, "--format", "json"], 1);
    assert!(matches!(got.as_deref(), Some("digest_mismatch" | "malformed_archive")), "{got:?}");
    assert!(!out.exists(), "a refused cat wrote its output");
}
