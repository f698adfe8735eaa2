//! The stat cache of `bundle check` and `bundle lock` (docs/book/src/reference/stat-cache.md):
//! it is used for unchanged files, and a lying, stale, hostile or misplaced cache costs time,
//! never a wrong answer; `pack` never reads it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::{Run, bin, testdata};

/// An agent and a stat cache folder of its own in a temp dir.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    /// A copy of the mailer example, locked, whose files are old enough to be cached: the
    /// cache stores no file changed within 2 s of a run (the racily clean rule).
    fn settled() -> Self {
        let f = Fixture { dir: tempfile::tempdir().unwrap() };
        crate::support::copy_dir(&testdata("agents/mailer"), &f.agent());
        f.run(&["lock", "mailer"]).expect_code(0);
        std::thread::sleep(Duration::from_millis(2100));
        f
    }

    fn agent(&self) -> PathBuf {
        self.dir.path().join("mailer")
    }

    fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    fn command(&self) -> Command {
        let mut c = bin();
        c.current_dir(self.dir.path()).env("BUNDLE_CACHE_DIR", self.cache_dir());
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        self.command().args(args).output().unwrap().into()
    }

    /// The agent's cache file (named by the BLAKE3 of the folder's canonical path).
    fn cache_file(&self) -> PathBuf {
        let canonical = self.agent().canonicalize().unwrap();
        let name = blake3::hash(canonical.as_os_str().as_encoded_bytes()).to_hex();
        self.cache_dir().join("stat-v1").join(&name.as_str()[..32])
    }

    fn cache_text(&self) -> String {
        std::fs::read_to_string(self.cache_file()).expect("check wrote the stat cache")
    }

    /// The cache's text with the digest of `file` replaced by that of `fake`, and a MAC made
    /// with `key`: the cache's own key makes the forgery one the cache accepts.
    fn forged(&self, file: &str, fake: &[u8], key: &[u8; 32]) -> String {
        self.forged_for(&self.agent(), file, fake, key)
    }

    /// [`forged`](Self::forged), with a MAC that names the agent folder `dir`.
    fn forged_for(&self, dir: &std::path::Path, file: &str, fake: &[u8], key: &[u8; 32]) -> String {
        let text = self.cache_text();
        let real = blake3::hash(&std::fs::read(self.agent().join(file)).unwrap()).to_hex().to_string();
        let mut body: String = text.lines().filter(|l| !l.starts_with("mac ")).map(|l| format!("{l}\n")).collect();
        assert!(body.contains(&format!("{real} {file}\n")), "{file} is cached:\n{text}");
        body = body.replace(&format!("{real} {file}\n"), &format!("{} {file}\n", blake3::hash(fake).to_hex()));
        let dir_id = dir.canonicalize().unwrap().to_string_lossy().into_owned();
        let mut mac = blake3::Hasher::new_keyed(key);
        mac.update(&(dir_id.len() as u64).to_le_bytes()).update(dir_id.as_bytes()).update(body.as_bytes());
        format!("{body}mac {}\n", mac.finalize().to_hex())
    }

    fn key(&self) -> [u8; 32] {
        std::fs::read(self.cache_dir().join("stat-v1/key")).unwrap().try_into().unwrap()
    }
}

fn stale_paths(out: &Run) -> Vec<String> {
    let j = out.json();
    j["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "stale_digest")
        .map(|d| d["message"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn check_takes_unchanged_files_from_the_cache_and_pack_never_does() {
    let f = Fixture::settled();
    f.run(&["check", "mailer"]).expect_code(0);
    // A forgery with the cache's own key (what only this user could make) is believed by
    // check: this is how the test sees that check did not read the file.
    let forged = f.forged("prompts/system.md", b"something else", &f.key());
    std::fs::write(f.cache_file(), forged).unwrap();
    let out = f.run(&["check", "--format", "json", "mailer"]);
    out.expect_code(1);
    assert_eq!(stale_paths(&out), ["prompts/system.md changed since the manifest was locked"]);
    // With the cache off, and for pack, which signs: the files themselves.
    f.command()
        .env("BUNDLE_STAT_CACHE", "off")
        .args(["check", "mailer"])
        .output()
        .map(Run::from)
        .unwrap()
        .expect_code(0);
    let key = testdata("keys/test.key").display().to_string();
    f.run(&["pack", "--locked", "mailer", "--key", &key, "-o", "m.agent.bundle"]).expect_code(0);
}

#[test]
fn a_cache_entry_that_lies_about_a_digest_is_ignored_and_replaced() {
    let f = Fixture::settled();
    f.run(&["check", "mailer"]).expect_code(0);
    // Edited by someone without the key: the MAC fails and the whole file is ignored.
    let lie = f.forged("prompts/system.md", b"something else", &[0u8; 32]);
    std::fs::write(f.cache_file(), &lie).unwrap();
    f.run(&["check", "mailer"]).expect_code(0);
    assert_ne!(f.cache_text(), lie, "the run wrote a sound cache in its place");
    // The same for a cache made for another folder, and for one cut short.
    let other = f.dir.path().join("other");
    crate::support::copy_dir(&f.agent(), &other);
    std::fs::write(f.cache_file(), f.forged_for(&other, "prompts/system.md", b"x", &f.key())).unwrap();
    f.run(&["check", "mailer"]).expect_code(0);
    let text = f.forged("prompts/system.md", b"x", &f.key());
    std::fs::write(f.cache_file(), &text[..text.len() - 5]).unwrap();
    f.run(&["check", "mailer"]).expect_code(0);
}

#[test]
fn a_file_changed_within_the_same_mtime_tick_is_hashed_again() {
    let f = Fixture::settled();
    let file = f.agent().join("prompts/system.md");
    let original = std::fs::read(&file).unwrap();
    let mut changed = original.clone();
    changed[0] ^= 1;
    let set_mtime = |to: std::time::SystemTime| {
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(to).unwrap();
    };
    // Racily clean: written, checked and written again (same size, same mtime) at once.
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    std::fs::write(&file, &changed).unwrap();
    set_mtime(mtime);
    f.run(&["check", "mailer"]).expect_code(1);
    std::fs::write(&file, &original).unwrap();
    set_mtime(mtime);
    f.run(&["check", "mailer"]).expect_code(0);
    // A cached, settled file changed with its old size and mtime put back: ctime moved.
    std::thread::sleep(Duration::from_millis(2100));
    f.run(&["check", "mailer"]).expect_code(0);
    assert!(f.cache_text().contains(" prompts/system.md\n"), "settled files are cached");
    std::fs::write(&file, &changed).unwrap();
    set_mtime(mtime);
    let out = f.run(&["check", "--format", "json", "mailer"]);
    out.expect_code(1);
    assert_eq!(stale_paths(&out), ["prompts/system.md changed since the manifest was locked"]);
}

#[cfg(unix)]
#[test]
fn a_cache_file_that_is_a_symlink_or_a_fifo_or_in_a_shared_folder_is_ignored() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::settled();
    f.run(&["check", "mailer"]).expect_code(0);
    let forged = f.forged("prompts/system.md", b"something else", &f.key());
    // A symlink to a believable cache: not followed, and not written through.
    let elsewhere = f.dir.path().join("elsewhere");
    std::fs::write(&elsewhere, &forged).unwrap();
    std::fs::remove_file(f.cache_file()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, f.cache_file()).unwrap();
    f.run(&["check", "mailer"]).expect_code(0);
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), forged);
    // A FIFO: never opened for a blocking read (the run would hang).
    std::fs::remove_file(f.cache_file()).unwrap();
    assert!(Command::new("mkfifo").arg(f.cache_file()).status().unwrap().success());
    f.run(&["check", "mailer"]).expect_code(0);
    // A cache folder others may write to: not trusted at all.
    std::fs::write(f.cache_file(), &forged).unwrap();
    let folder = f.cache_dir().join("stat-v1");
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
    f.run(&["check", "mailer"]).expect_code(0);
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
    f.run(&["check", "mailer"]).expect_code(1);
}

#[test]
fn lock_uses_the_cache_and_writes_what_the_files_hold_once_they_change() {
    let f = Fixture::settled();
    f.run(&["lock", "mailer"]).expect_code(0);
    assert!(f.cache_text().contains(" tools.json\n"));
    let file = f.agent().join("prompts/system.md");
    std::fs::write(&file, b"new prompt\n").unwrap();
    f.run(&["lock", "mailer"]).expect_code(0);
    let manifest = std::fs::read_to_string(f.agent().join("manifest.toml")).unwrap();
    assert!(manifest.contains(&blake3::hash(b"new prompt\n").to_hex().to_string()), "{manifest}");
    f.run(&["check", "mailer"]).expect_code(0);
}

/// What `check` and `lock` show does not depend on the cache, pinned: with a cold cache, a
/// warm one, one whose MAC fails (ignored), and one forged with the cache's own key (believed:
/// the digest it claims is reported stale), human and JSON.
#[test]
fn check_and_lock_show_the_same_with_a_cold_warm_or_ignored_cache() {
    let f = Fixture::settled();
    let shown = |args: &[&str]| {
        let text = crate::snapshot::run_text(&f.run(args));
        format!("$ bundle {}\n{text}", args.join(" "))
    };
    let both = |args: &[&str]| {
        let mut json = args.to_vec();
        json.extend(["--format", "json"]);
        format!("{}\n{}", shown(args), shown(&json))
    };
    let mut out = format!("# cold\n{}", shown(&["check", "mailer"]));
    out.push_str(&format!("# warm\n{}", both(&["check", "mailer"])));
    out.push_str(&both(&["lock", "mailer"]));
    std::fs::write(f.cache_file(), f.forged("prompts/system.md", b"something else", &[0u8; 32])).unwrap();
    out.push_str(&format!("# a cache whose MAC fails: ignored\n{}", both(&["check", "mailer"])));
    std::fs::write(f.cache_file(), f.forged("prompts/system.md", b"something else", &f.key())).unwrap();
    out.push_str(&format!("# forged with the cache's own key: believed\n{}", both(&["check", "mailer"])));
    insta::assert_snapshot!(out);
}
