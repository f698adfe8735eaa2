//! Crash safety and concurrency: `bundle pack` and `bundle lock` killed (SIGKILL) at random
//! points leave either the old file or the complete new one, never a torn one; the temp files
//! a killed process cannot remove are recognisable, ignored, and removed by the next run; two
//! packers on one agent both succeed; a read-only folder and a full disk give clear errors and
//! leave no temp files.
//!
//! Run with `--nocapture` to see the figures (runs, where the kills landed).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Env, Run, bin, key, testdata};

/// A small deterministic generator (xorshift64*), seeded per test and printed, so a failing
/// run can be repeated with `BUNDLE_CRASH_SEED`.
struct Rng(u64);

impl Rng {
    fn seeded(test: &str) -> Rng {
        let seed = std::env::var("BUNDLE_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        });
        eprintln!("{test}: BUNDLE_CRASH_SEED={seed}");
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n.div_ceil(8)).flat_map(|_| self.next().to_le_bytes()).take(n).collect()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The minimal agent plus `files` incompressible files of `size` bytes, locked.
fn big_agent(env: &Env, dir: &str, files: usize, size: usize, rng: &mut Rng) -> PathBuf {
    let agent = env.copy("agents/minimal", dir);
    std::fs::create_dir_all(agent.join("data")).unwrap();
    for i in 0..files {
        std::fs::write(agent.join(format!("data/blob-{i:02}.bin")), rng.bytes(size)).unwrap();
    }
    run_in(&agent, &["lock", "."]).expect_code(0);
    agent
}

fn run_in(dir: &Path, args: &[&str]) -> Run {
    bin().current_dir(dir).args(args).output().unwrap().into()
}

/// Names of leftover temp files (`.*.tmp`) in `dir`, recursively.
fn temp_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in walk(dir) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".tmp") {
            out.push(entry.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    out
}

/// Makes every leftover temp file under `dir` stale.
fn age_leftovers(dir: &Path) {
    for rel in temp_files(dir) {
        crate::support::make_old(&dir.join(rel));
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Runs `args` in `dir`, kills it after a random delay below `window`; returns whether it had
/// already exited by itself.
fn kill_at_random(dir: &Path, args: &[&str], window: Duration, rng: &mut Rng) -> bool {
    let mut child = bin().current_dir(dir).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let delay = Duration::from_micros(rng.below(window.as_micros() as u64));
    std::thread::sleep(delay);
    let finished = child.try_wait().unwrap().is_some();
    let _ = child.kill();
    child.wait().unwrap();
    finished
}

/// How long one uninterrupted run takes (the best of three, so the kill window covers it).
fn duration_of(dir: &Path, args: &[&str], reset: &dyn Fn()) -> Duration {
    (0..3)
        .map(|_| {
            reset();
            let start = Instant::now();
            let out = run_in(dir, args);
            assert!(out.code == 0, "{args:?}: {}{}", out.stdout, out.stderr);
            start.elapsed()
        })
        .min()
        .unwrap()
}

#[test]
fn killed_pack_leaves_the_old_or_the_complete_new_bundle_and_manifest() {
    let mut rng = Rng::seeded("killed_pack");
    let env = Env::new();
    let agent = big_agent(&env, "agent", 24, 256 << 10, &mut rng);
    let out = env.path().join("out.agent.bundle");
    // --force: the same version is packed again with other bytes, on purpose (issue 23 item 12).
    let pack = ["pack", ".", "--key", &key("test.key"), "-o", out.to_str().unwrap(), "--force"];

    // Old: a bundle of the agent as locked. New: after one file changed, pack relocks.
    run_in(&agent, &pack).expect_code(0);
    let (old_manifest, old_bundle) =
        (std::fs::read(agent.join("manifest.toml")).unwrap(), std::fs::read(&out).unwrap());
    std::fs::write(agent.join("data/blob-07.bin"), rng.bytes(256 << 10)).unwrap();
    let reset = || {
        std::fs::write(agent.join("manifest.toml"), &old_manifest).unwrap();
        std::fs::write(&out, &old_bundle).unwrap();
    };
    let window = duration_of(&agent, &pack, &reset).mul_f64(1.3);
    let (new_manifest, new_bundle) =
        (std::fs::read(agent.join("manifest.toml")).unwrap(), std::fs::read(&out).unwrap());
    assert_ne!(old_manifest, new_manifest);
    assert_ne!(old_bundle, new_bundle);

    const RUNS: usize = 50;
    let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
    let mut max_leftovers = 0;
    for run in 0..RUNS {
        reset();
        let finished = kill_at_random(&agent, &pack, window, &mut rng);
        let manifest = std::fs::read(agent.join("manifest.toml")).unwrap();
        let bundle = std::fs::read(&out).unwrap();
        let m = if manifest == old_manifest {
            "old manifest"
        } else if manifest == new_manifest {
            "new manifest"
        } else {
            panic!(
                "run {run}: manifest.toml is neither the old nor the new one:\n{}",
                String::from_utf8_lossy(&manifest)
            )
        };
        let b = if bundle == old_bundle {
            "old bundle"
        } else if bundle == new_bundle {
            "new bundle"
        } else {
            panic!("run {run}: the bundle is neither the old nor the new one ({} bytes)", bundle.len())
        };
        assert!(!(m == "old manifest" && b == "new bundle"), "run {run}: a new bundle of an old manifest");
        assert!(!finished || b == "new bundle", "run {run}: finished without writing the bundle");
        *outcomes
            .entry(match (finished, m, b) {
                (true, ..) => "finished before the kill",
                (false, "old manifest", _) => "killed before the manifest was written",
                (false, _, "old bundle") => "killed after the manifest, before the bundle",
                _ => "killed after both were written",
            })
            .or_default() += 1;
        max_leftovers = max_leftovers.max(temp_files(env.path()).len());
    }
    let leftovers = temp_files(env.path());
    eprintln!(
        "killed_pack: {RUNS} runs, kill window {window:?}: {outcomes:?}; temp files left by killed packs: {} (at most {max_leftovers} at once)",
        leftovers.len()
    );
    // Every one verifies as the old or the new bundle, so a deployment never sees a torn one.
    run_in(&agent, &["verify", out.to_str().unwrap(), "--key", &key("test.pub")]).expect_code(0);

    // Leftovers are ignored by check (they match `.*.tmp`): with the new manifest in place
    // the agent is clean. The next pack removes them once they are stale.
    std::fs::write(agent.join("manifest.toml"), &new_manifest).unwrap();
    run_in(&agent, &["check", "."]).expect_code(0);
    age_leftovers(env.path());
    reset();
    run_in(&agent, &pack).expect_code(0);
    assert_eq!(temp_files(env.path()), Vec::<String>::new(), "the next pack removes leftovers");
    assert_eq!(std::fs::read(&out).unwrap(), new_bundle);
}

#[test]
fn killed_lock_leaves_the_old_or_the_complete_new_manifest() {
    let mut rng = Rng::seeded("killed_lock");
    let env = Env::new();
    let agent = big_agent(&env, "agent", 40, 128 << 10, &mut rng);
    let old_manifest = std::fs::read(agent.join("manifest.toml")).unwrap();
    for i in [3, 17, 29] {
        std::fs::write(agent.join(format!("data/blob-{i:02}.bin")), rng.bytes(128 << 10)).unwrap();
    }
    std::fs::write(agent.join("data/new.txt"), "a file lock must add\n").unwrap();
    let reset = || std::fs::write(agent.join("manifest.toml"), &old_manifest).unwrap();
    let window = duration_of(&agent, &["lock", "."], &reset).mul_f64(1.3);
    let new_manifest = std::fs::read(agent.join("manifest.toml")).unwrap();
    assert_ne!(old_manifest, new_manifest);

    const RUNS: usize = 50;
    let (mut old, mut new, mut finished_count) = (0, 0, 0);
    for run in 0..RUNS {
        reset();
        let finished = kill_at_random(&agent, &["lock", "."], window, &mut rng);
        let manifest = std::fs::read(agent.join("manifest.toml")).unwrap();
        if manifest == old_manifest {
            assert!(!finished, "run {run}: lock finished without writing");
            old += 1;
        } else if manifest == new_manifest {
            new += 1;
        } else {
            panic!("run {run}: manifest.toml is torn:\n{}", String::from_utf8_lossy(&manifest));
        }
        finished_count += usize::from(finished);
    }
    let leftovers = temp_files(&agent);
    eprintln!(
        "killed_lock: {RUNS} runs, kill window {window:?}: old manifest {old}, new manifest {new} ({finished_count} had finished); temp files left: {}",
        leftovers.len()
    );
    // A leftover is not a file of the agent: a check of the restored new manifest is clean.
    std::fs::write(agent.join("manifest.toml"), &new_manifest).unwrap();
    run_in(&agent, &["check", "."]).expect_code(0);
    age_leftovers(&agent);
    reset();
    run_in(&agent, &["lock", "."]).expect_code(0);
    assert_eq!(temp_files(&agent), Vec::<String>::new(), "the next lock removes leftovers");
}

#[test]
fn a_live_writers_temp_file_is_not_taken_for_a_leftover() {
    // A temp file that is locked (a writer is alive) or fresh is left alone, however old.
    let env = Env::new();
    let agent = env.copy("agents/minimal", "agent");
    let live = agent.join(".manifest.toml.Ab12Cd.tmp");
    let stale = agent.join(".manifest.toml.Zz99Yy.tmp");
    let other = agent.join(".manifest.toml.notes.tmp");
    for p in [&live, &stale, &other] {
        std::fs::write(p, "partial").unwrap();
    }
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for p in [&live, &stale, &other] {
        std::fs::File::options().write(true).open(p).unwrap().set_modified(old).unwrap();
    }
    let holder = std::fs::File::open(&live).unwrap();
    holder.lock().unwrap();
    std::fs::write(agent.join("notes.md"), "new\n").unwrap();
    run_in(&agent, &["lock", "."]).expect_code(0);
    assert!(live.exists(), "a locked temp file belongs to a live writer");
    assert!(!stale.exists(), "an unlocked, old temp file is a leftover");
    assert!(other.exists(), "only names the writer makes (6 random characters) are candidates");
    drop(holder);
}

#[test]
fn two_packers_on_one_agent_both_succeed_with_the_same_bundle() {
    let mut rng = Rng::seeded("two_packers");
    let env = Env::new();
    let agent = big_agent(&env, "agent", 16, 256 << 10, &mut rng);
    let stale = std::fs::read(agent.join("manifest.toml")).unwrap();
    std::fs::write(agent.join("data/blob-03.bin"), rng.bytes(256 << 10)).unwrap();
    let out = env.path().join("out.agent.bundle");
    let pack = ["pack", ".", "--key", &key("test.key"), "-o", out.to_str().unwrap()];
    run_in(&agent, &pack).expect_code(0);
    let (manifest, bundle) = (std::fs::read(agent.join("manifest.toml")).unwrap(), std::fs::read(&out).unwrap());

    const ROUNDS: usize = 10;
    for round in 0..ROUNDS {
        // Both relock a stale manifest and write the same output.
        std::fs::write(agent.join("manifest.toml"), &stale).unwrap();
        std::fs::remove_file(&out).unwrap();
        let children: Vec<_> = (0..2)
            .map(|_| bin().current_dir(&agent).args(pack).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap())
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "round {round}: {}", String::from_utf8_lossy(&o.stderr));
        }
        assert_eq!(std::fs::read(agent.join("manifest.toml")).unwrap(), manifest, "round {round}");
        assert_eq!(std::fs::read(&out).unwrap(), bundle, "round {round}");
        assert_eq!(temp_files(env.path()), Vec::<String>::new(), "round {round}");
    }
    run_in(env.path(), &["verify", "out.agent.bundle", "--key", &key("test.pub")]).expect_code(0);
    eprintln!("two_packers: {ROUNDS} rounds of two concurrent packs, all succeeded with identical bundles");
}

/// A tmpfs mounted for one test, unmounted when dropped. `None` (and a SKIPPED line) where
/// mounting is not allowed (not root, no CAP_SYS_ADMIN).
pub(crate) struct Mount(PathBuf);

impl Mount {
    pub(crate) fn tmpfs(at: &Path, size: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Mounting needs root with CAP_SYS_ADMIN, which is a property of the machine, not a
            // tool CI can install: .ci/run sets BUNDLE_REQUIRE_MOUNT only where it can mount.
            crate::support::skip(
                &format!("a tmpfs mount at {}", at.display()),
                "run as root, with CAP_SYS_ADMIN",
                "BUNDLE_REQUIRE_MOUNT",
            );
            return None;
        }
        Some(Mount(at.to_path_buf()))
    }

    fn read_only(&self) {
        let ok = Command::new("mount").args(["-o", "remount,ro"]).arg(&self.0).status().unwrap().success();
        assert!(ok, "remount read-only");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Whether this process can write into a folder whose mode forbids it (root can).
fn permissions_bind_us() -> bool {
    let env = Env::new();
    let dir = env.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    set_mode(&dir, 0o555);
    let blocked = std::fs::write(dir.join("probe"), "x").is_err();
    set_mode(&dir, 0o755);
    blocked
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_read_only_agent_folder_gives_a_clear_error_and_no_temp_files() {
    let env = Env::new();
    // As a normal user, chmod 0555 makes a folder read-only; root may write there anyway, so
    // as root the folders sit on a tmpfs remounted read-only.
    let mount = if permissions_bind_us() {
        None
    } else {
        let Some(mount) = Mount::tmpfs(&env.path().join("ro"), "1m") else { return };
        Some(mount)
    };
    let root = if mount.is_some() { env.path().join("ro") } else { env.path().to_path_buf() };
    let (stale, locked) = (root.join("stale"), root.join("locked"));
    crate::support::copy_dir(&testdata("agents/minimal"), &stale);
    crate::support::copy_dir(&testdata("agents/minimal"), &locked);
    std::fs::write(stale.join("notes.md"), "needs locking\n").unwrap();
    let before = std::fs::read(stale.join("manifest.toml")).unwrap();
    match &mount {
        Some(m) => m.read_only(),
        None => {
            set_mode(&stale, 0o555);
            set_mode(&locked, 0o555);
        }
    }

    let lock = run_in(&stale, &["lock", "."]);
    lock.expect_code(2);
    assert!(lock.stderr.contains("cannot write manifest.toml"), "{}", lock.stderr);
    assert!(
        lock.stderr.contains("Read-only file system") || lock.stderr.contains("Permission denied"),
        "{}",
        lock.stderr
    );
    let out = env.path().join("out.agent.bundle");
    let pack = run_in(&stale, &["pack", ".", "--key", &key("test.key"), "-o", out.to_str().unwrap()]);
    pack.expect_code(2);
    assert!(pack.stderr.contains("cannot write manifest.toml"), "{}", pack.stderr);
    assert!(!out.exists());
    assert_eq!(std::fs::read(stale.join("manifest.toml")).unwrap(), before);
    assert_eq!(temp_files(&root), Vec::<String>::new());

    // Nothing needs writing into a locked agent's folder: it packs from a read-only checkout.
    run_in(&locked, &["pack", ".", "--locked", "--key", &key("test.key"), "-o", out.to_str().unwrap()]).expect_code(0);
    // ... but not into it.
    let into = run_in(&locked, &["pack", ".", "--locked", "--key", &key("test.key"), "-o", "x.agent.bundle"]);
    into.expect_code(2);
    assert_eq!(temp_files(&root), Vec::<String>::new());
    if mount.is_none() {
        set_mode(&stale, 0o755);
        set_mode(&locked, 0o755);
    }
    eprintln!("read-only folder: lock: {}", lock.stderr.trim());
    eprintln!("read-only folder: pack -o inside: {}", into.stderr.trim());
}

#[test]
fn a_full_disk_gives_a_clear_error_and_no_temp_files() {
    let mut rng = Rng::seeded("full_disk");
    let env = Env::new();
    let agent = big_agent(&env, "agent", 8, 256 << 10, &mut rng);
    let Some(_small) = Mount::tmpfs(&env.path().join("small"), "512k") else { return };

    // pack: the 2 MiB bundle does not fit in 512 KiB.
    let out = env.path().join("small/out.agent.bundle");
    let pack = run_in(&agent, &["pack", ".", "--key", &key("test.key"), "-o", out.to_str().unwrap()]);
    pack.expect_code(2);
    assert!(pack.stderr.contains("No space left on device"), "{}", pack.stderr);
    assert!(!out.exists());
    assert_eq!(temp_files(&env.path().join("small")), Vec::<String>::new());

    // lock: an agent on a disk that is full to the last byte.
    let on_disk = env.path().join("small/agent");
    crate::support::copy_dir(&testdata("agents/minimal"), &on_disk);
    let before = std::fs::read(on_disk.join("manifest.toml")).unwrap();
    std::fs::write(on_disk.join("notes.md"), "needs locking\n").unwrap();
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(env.path().join("small/filler")).unwrap();
        let chunk = vec![0u8; 4096];
        while filler.write_all(&chunk).is_ok() {}
        while filler.write_all(&chunk[..1]).is_ok() {}
    }
    let lock = run_in(&on_disk, &["lock", "."]);
    lock.expect_code(2);
    assert!(lock.stderr.contains("No space left on device"), "{}", lock.stderr);
    assert_eq!(std::fs::read(on_disk.join("manifest.toml")).unwrap(), before);
    assert_eq!(temp_files(&env.path().join("small")), Vec::<String>::new());
    eprintln!("full disk: pack: {}", pack.stderr.trim());
    eprintln!("full disk: lock: {}", lock.stderr.trim());
}

/// Issue 35: an unpack onto a full disk is no verdict on the bundle: exit 2 and one JSON error
/// document with `io_error`, the entry and the operating system's cause (it was a rejection
/// whose reason was `io_error`, in the verdict's shape), and nothing is left behind.
#[test]
fn unpack_onto_a_full_disk_is_an_io_error_not_a_rejection() {
    let env = Env::new();
    env.copy("agents/minimal", "agent");
    run_in(env.path(), &["pack", "agent", "--key", &key("test.key"), "-o", "a.agent.bundle"]).expect_code(0);
    let Some(_small) = Mount::tmpfs(&env.path().join("small"), "64k") else { return };
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(env.path().join("small/filler")).unwrap();
        let chunk = vec![0u8; 4096];
        while filler.write_all(&chunk).is_ok() {}
        while filler.write_all(&chunk[..1]).is_ok() {}
    }
    let k = key("test.pub");
    let unpack = |format: &str| {
        run_in(env.path(), &["unpack", "a.agent.bundle", "small/deploy", "--key", &k, "--format", format])
    };
    let out = unpack("json");
    let doc = out.expect_code(2).json();
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["ok", "code", "message", "causes"], "the error document: {}", out.stdout);
    assert_eq!(doc["code"], "io_error");
    let message = doc["message"].as_str().unwrap();
    assert!(message.starts_with("cannot write `manifest.toml`: No space left on device"), "{message}");
    let human = unpack("human");
    human.expect_code(2);
    assert!(human.stderr.starts_with("error: cannot write `manifest.toml`: "), "{}", human.stderr);
    assert!(!human.stderr.contains("rejected"), "{}", human.stderr);
    let left: Vec<_> = std::fs::read_dir(env.path().join("small")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["filler"], "the staging folder is removed");
}

#[test]
fn pack_never_renames_over_a_device_fifo_or_folder() {
    // A FIFO stands in for `-o /dev/null` or `-o /dev/stdout`: the rename that makes the
    // write atomic would replace the node itself.
    let env = Env::new();
    env.copy("agents/minimal", "agent");
    let fifo = env.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::fs::create_dir(env.path().join("folder")).unwrap();
    let run = env.run(&["pack", "agent", "--key", &key("test.key"), "-o", "fifo"]);
    run.expect_code(2);
    assert!(run.stderr.contains("is a FIFO, not a regular file"), "{}", run.stderr);
    // An existing folder is not replaced either: the bundle goes inside it, under its default name.
    env.run(&["pack", "agent", "--key", &key("test.key"), "-o", "folder"]).expect_code(0);
    assert!(env.path().join("folder/minimal-1.0.0.agent.bundle").is_file());
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(temp_files(env.path()), Vec::<String>::new());
}
