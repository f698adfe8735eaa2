//! Bundles large enough to be read ahead on a thread of their own (issue 29): verify judges
//! them as it judges everything else, whether a second CPU is usable or not (`taskset`), and a
//! bundle cut short or damaged far from its start gets the same code either way.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Env, bin, key, noise, require_tool};

/// How long one verify of a read-ahead bundle may take: a pipeline whose threads wait for each
/// other forever (the way read-ahead can fail, on one CPU or two) fails the test instead of
/// hanging it.
const DEADLINE: Duration = Duration::from_secs(120);

/// `bundle verify BUNDLE --key test.pub --format json`, on one CPU (`taskset -c 0`) or on all,
/// killed and failed past [`DEADLINE`].
fn verify(env: &Env, bundle: &str, one_cpu: bool) -> (i32, serde_json::Value) {
    let plain = bin();
    let mut cmd = Command::new("taskset");
    if one_cpu {
        cmd.args(["-c", "0"]).arg(plain.get_program());
        for (k, v) in plain.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
    } else {
        cmd = plain;
    }
    cmd.current_dir(env.path()).args(["verify", bundle, "--key", &key("test.pub"), "--format", "json"]);
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout.read_to_end(&mut bytes).map(|_| bytes)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{bundle}, one CPU: {one_cpu}: verify did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = reader.join().unwrap().unwrap();
    (status.code().unwrap(), serde_json::from_slice(&stdout).unwrap())
}

#[test]
fn large_bundles_are_judged_alike_with_and_without_a_second_cpu() {
    if !require_tool("taskset") {
        return;
    }
    let env = Env::new();
    let agent = env.copy("agents/mailer", "big");
    std::fs::write(agent.join("prompts/noise.bin"), noise(12 << 20)).unwrap();
    env.run(&["lock", "big"]).expect_code(0);
    env.run(&["pack", "big", "--locked", "--key", &key("test.key"), "-o", "big.agent.bundle"]).expect_code(0);
    let bytes = std::fs::read(env.path().join("big.agent.bundle")).unwrap();
    assert!(bytes.len() > 8 << 20, "the bundle ({} bytes) is too small to be read ahead", bytes.len());
    for one_cpu in [false, true] {
        let (code, json) = verify(&env, "big.agent.bundle", one_cpu);
        assert_eq!((code, &json["ok"]), (0, &serde_json::Value::Bool(true)), "one CPU: {one_cpu}: {json}");
    }
    // Cut short after 6 MiB, and one byte changed at 7 MiB: refused, with the same code on one
    // CPU as on two.
    std::fs::write(env.path().join("cut.agent.bundle"), &bytes[..6 << 20]).unwrap();
    let mut damaged = bytes.clone();
    damaged[7 << 20] ^= 0x40;
    std::fs::write(env.path().join("damaged.agent.bundle"), damaged).unwrap();
    for bundle in ["cut.agent.bundle", "damaged.agent.bundle"] {
        let (code, json) = verify(&env, bundle, false);
        let (pinned_code, pinned) = verify(&env, bundle, true);
        assert_eq!(code, 1, "{bundle}: {json}");
        assert!(json["code"].is_string(), "{bundle}: {json}");
        assert_eq!((pinned_code, &pinned["code"]), (code, &json["code"]), "{bundle}: one CPU judged otherwise");
    }
}
