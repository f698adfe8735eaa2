//! The stat cache: `bundle check` and `bundle lock` skip re-hashing files that have not
//! changed since an earlier run, as git's index does (docs/book/src/reference/stat-cache.md).
//!
//! Why: both commands hash every file of the agent, which costs seconds per commit for an
//! agent of several GiB when run as a pre-commit hook. A file whose device, inode, size,
//! mtime and ctime (nanoseconds) are those recorded beside its BLAKE3 digest gets that digest
//! back without being read.
//!
//! What it trusts, and why that is safe:
//! - Nothing for signing: `pack` never opens the cache; it hashes what it writes.
//! - A file's stat, as git does. ctime cannot be set from user space, so `touch -d` with an
//!   old date is still a change. A change in the same timestamp tick as the hash (the "racily
//!   clean" case) is caught by storing only entries whose mtime and ctime are older than the
//!   start of the run by [`RACY_MARGIN_NS`], more than the coarsest timestamp granularity of
//!   a supported file system: any later write gets a newer ctime. A file whose stat changed
//!   while it was hashed is not stored either.
//! - The cache file only when its keyed BLAKE3 MAC verifies, with a random key kept in the
//!   cache folder (mode 0600), and only when that folder is a real folder owned by the user and
//!   writable by nobody else. A cache file edited by hand (an entry that lies about a
//!   digest), truncated, made for another folder, a symlink, a FIFO or larger than
//!   [`MAX_CACHE_BYTES`] is ignored as a whole: the files are hashed, it can only cost time.
//!
//! Where: `$BUNDLE_CACHE_DIR`, else `$XDG_CACHE_HOME/agent-bundle`, else
//! `$HOME/.cache/agent-bundle`; one file per agent folder under `stat-v1/`, named by the
//! BLAKE3 of the folder's canonical path. Never inside the agent folder, so never packed.
//! `BUNDLE_STAT_CACHE=off` turns it off.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::regular_file::{self, Links};

/// Entries whose mtime or ctime is this close to the start of the run are not stored (git's
/// "racily clean" problem): 2 s, the granularity of FAT, the coarsest file system we support.
pub const RACY_MARGIN_NS: i128 = 2_000_000_000;
pub use crate::limits::MAX_STAT_CACHE_BYTES as MAX_CACHE_BYTES;
/// The cache folder's subfolder; a new format gets a new name.
const SUBDIR: &str = "stat-v1";
const MAGIC: &str = "agent-bundle stat cache 1";
const KEY_FILE: &str = "key";

/// What identifies a file's contents without reading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl Stat {
    #[cfg(unix)]
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        use std::os::unix::fs::MetadataExt;
        Stat {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }

    /// Without inode numbers and ctime there is nothing safe to compare: never matches.
    #[cfg(not(unix))]
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        Stat { dev: 0, ino: 0, size: meta.len(), mtime_ns: -1, ctime_ns: -1 }
    }

    fn usable(&self) -> bool {
        cfg!(unix) && self.mtime_ns >= 0 && self.ctime_ns >= 0
    }
}

/// The cache of one agent folder, loaded at the start of a run and saved at its end.
#[derive(Debug)]
pub struct StatCache {
    /// The cache file; `None` when there is no usable cache folder (then nothing is saved).
    file: Option<PathBuf>,
    key: [u8; 32],
    /// Identifies the agent folder inside the MAC.
    dir_id: String,
    started_ns: i128,
    old: HashMap<String, (Stat, blake3::Hash)>,
    new: HashMap<String, (Stat, blake3::Hash)>,
}

impl StatCache {
    /// The cache of `agent_dir`, empty when the cache is off, missing, unusable or not ours.
    /// Never fails: a cache can only save time.
    pub fn open(agent_dir: &Path) -> StatCache {
        let started_ns = now_ns();
        let mut cache = StatCache {
            file: None,
            key: [0; 32],
            dir_id: String::new(),
            started_ns,
            old: HashMap::new(),
            new: HashMap::new(),
        };
        let Some((folder, key)) = folder_and_key() else { return cache };
        let Ok(canonical) = agent_dir.canonicalize() else { return cache };
        cache.dir_id = canonical.to_string_lossy().into_owned();
        let name = blake3::hash(canonical.as_os_str().as_encoded_bytes()).to_hex();
        let file = folder.join(&name.as_str()[..32]);
        cache.key = *key;
        if let Ok(bytes) = regular_file::read(&file, MAX_CACHE_BYTES, Links::Refuse) {
            cache.old = parse(&bytes, key, &cache.dir_id).unwrap_or_default();
        }
        cache.file = Some(file);
        cache
    }

    /// A cache that neither reads nor saves anything.
    #[cfg(test)]
    fn disabled() -> StatCache {
        StatCache {
            file: None,
            key: [0; 32],
            dir_id: String::new(),
            started_ns: now_ns(),
            old: HashMap::new(),
            new: HashMap::new(),
        }
    }

    /// Whether a digest is recorded for `path` (else its stat need not be taken to look it up).
    pub fn has(&self, path: &str) -> bool {
        self.old.contains_key(path)
    }

    /// The digest recorded for `path` if its stat is the one recorded with it.
    pub fn lookup(&self, path: &str, stat: &Stat) -> Option<blake3::Hash> {
        match self.old.get(path) {
            Some((s, hash)) if s == stat && stat.usable() => Some(*hash),
            _ => None,
        }
    }

    /// Keeps the entry [`lookup`](Self::lookup) found for `path` in the cache saved.
    pub fn keep(&mut self, path: &str) {
        if let Some(entry) = self.old.get(path) {
            self.new.insert(path.to_owned(), *entry);
        }
    }

    /// Whether this run's entries are saved (there is a usable cache folder): when not,
    /// recording them would only cost time.
    pub fn saves(&self) -> bool {
        self.file.is_some()
    }

    /// Records a digest: `before` and `after` are the file's stat when opened and when hashed.
    /// Stored only if the file did not change meanwhile and is not racily clean.
    pub fn record(&mut self, path: &str, before: &Stat, after: &Stat, hash: blake3::Hash) {
        let settled = self.started_ns - RACY_MARGIN_NS;
        if before == after && before.usable() && before.mtime_ns < settled && before.ctime_ns < settled {
            self.new.insert(path.to_owned(), (*before, hash));
        }
    }

    /// Writes the entries recorded in this run (and only those: files gone since are dropped),
    /// unless they are what was read. Best effort: a failure costs the next run time.
    pub fn save(self) {
        let Some(file) = self.file else { return };
        if self.new == self.old {
            return;
        }
        let text = serialize(&self.new, &self.key, &self.dir_id);
        let _ = replace(&file, text.as_bytes());
    }
}

/// Writes `bytes` to a temp file beside `file` and renames it over `file` (never writing
/// through a symlink or into a FIFO there). Without fsync: a cache cut short by a crash fails
/// its MAC and is ignored, and a check of 20,000 agents should not wait for 20,000 fsyncs.
fn replace(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let folder = file.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new().prefix(".tmp").tempfile_in(folder)?;
    temp.write_all(bytes)?;
    temp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

/// The cache folder and its key, found once per process (`check` of many agents opens one
/// cache per agent).
fn folder_and_key() -> Option<&'static (PathBuf, [u8; 32])> {
    static FOUND: std::sync::OnceLock<Option<(PathBuf, [u8; 32])>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let folder = private_folder(&cache_root()?.join(SUBDIR))?;
            let key = load_or_make_key(&folder)?;
            Some((folder, key))
        })
        .as_ref()
}

/// Whether the cache is on, and where it lives.
fn cache_root() -> Option<PathBuf> {
    if std::env::var_os("BUNDLE_STAT_CACHE").is_some_and(|v| v == "off" || v == "0") {
        return None;
    }
    let nonempty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = nonempty("BUNDLE_CACHE_DIR") {
        return Some(dir);
    }
    if let Some(dir) = nonempty("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
        return Some(dir.join("agent-bundle"));
    }
    nonempty("HOME").map(|h| h.join(".cache").join("agent-bundle"))
}

/// `dir`, created if missing (mode 0700), if it is a real folder owned by this user and
/// writable by no one else; otherwise `None` (someone else could plant entries).
fn private_folder(dir: &Path) -> Option<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
        let meta = std::fs::symlink_metadata(dir).ok()?;
        let me = rustix::process::geteuid().as_raw();
        (meta.is_dir() && meta.uid() == me && meta.mode() & 0o022 == 0).then(|| dir.to_path_buf())
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// The MAC key, made on first use (32 random bytes, mode 0600, never overwritten).
fn load_or_make_key(folder: &Path) -> Option<[u8; 32]> {
    let path = folder.join(KEY_FILE);
    if let Ok(bytes) = regular_file::read(&path, 32, Links::Refuse) {
        return bytes.try_into().ok();
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).ok()?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&path).ok()?;
    file.write_all(&key).ok()?;
    file.sync_all().ok()?;
    Some(key)
}

fn now_ns() -> i128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128)
}

/// The cache file: a header, one line per entry (`dev ino size mtime ctime blake3 path`, the
/// path last so it may hold spaces) and a last line with the keyed BLAKE3 of everything
/// before it and of the agent folder's path.
fn serialize(entries: &HashMap<String, (Stat, blake3::Hash)>, key: &[u8; 32], dir_id: &str) -> String {
    let mut paths: Vec<&String> = entries.keys().filter(|p| !p.contains(['\n', '\r'])).collect();
    paths.sort();
    let mut body = format!("{MAGIC}\n");
    for p in paths {
        let (s, h) = &entries[p];
        body.push_str(&format!("{} {} {} {} {} {} {p}\n", s.dev, s.ino, s.size, s.mtime_ns, s.ctime_ns, h.to_hex()));
    }
    let mac = mac(key, dir_id, body.as_bytes());
    body.push_str(&format!("mac {}\n", mac.to_hex()));
    body
}

fn mac(key: &[u8; 32], dir_id: &str, body: &[u8]) -> blake3::Hash {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(&(dir_id.len() as u64).to_le_bytes());
    h.update(dir_id.as_bytes());
    h.update(body);
    h.finalize()
}

/// The entries of a cache file, or `None` if anything about it is wrong.
fn parse(bytes: &[u8], key: &[u8; 32], dir_id: &str) -> Option<HashMap<String, (Stat, blake3::Hash)>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let body_end = text.strip_suffix('\n')?.rfind('\n')? + 1;
    let (body, last) = text.split_at(body_end);
    let claimed = blake3::Hash::from_hex(last.strip_prefix("mac ")?.trim_end_matches('\n')).ok()?;
    // Hash's equality is constant-time.
    if mac(key, dir_id, body.as_bytes()) != claimed {
        return None;
    }
    let mut lines = body.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let mut out = HashMap::new();
    for line in lines {
        let mut f = line.splitn(7, ' ');
        let stat = Stat {
            dev: f.next()?.parse().ok()?,
            ino: f.next()?.parse().ok()?,
            size: f.next()?.parse().ok()?,
            mtime_ns: f.next()?.parse().ok()?,
            ctime_ns: f.next()?.parse().ok()?,
        };
        let hash = blake3::Hash::from_hex(f.next()?).ok()?;
        out.insert(f.next()?.to_owned(), (stat, hash));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(n: i128) -> Stat {
        Stat { dev: 1, ino: 2, size: 3, mtime_ns: n, ctime_ns: n }
    }

    #[test]
    fn a_file_round_trips_and_any_edit_voids_it() {
        let key = [7u8; 32];
        let mut entries = HashMap::new();
        entries.insert("a b/c.txt".to_owned(), (stat(10), blake3::hash(b"x")));
        entries.insert("d".to_owned(), (stat(20), blake3::hash(b"y")));
        let text = serialize(&entries, &key, "/agents/x");
        assert_eq!(parse(text.as_bytes(), &key, "/agents/x"), Some(entries));
        assert_eq!(parse(text.as_bytes(), &key, "/agents/y"), None, "made for another folder");
        assert_eq!(parse(text.as_bytes(), &[8u8; 32], "/agents/x"), None, "another key");
        let lie = text.replace(blake3::hash(b"x").to_hex().as_str(), blake3::hash(b"z").to_hex().as_str());
        assert_eq!(parse(lie.as_bytes(), &key, "/agents/x"), None, "an entry that lies about a digest");
        assert_eq!(parse(&text.as_bytes()[..text.len() - 10], &key, "/agents/x"), None, "truncated");
        assert_eq!(parse(b"", &key, "/agents/x"), None);
    }

    #[test]
    fn racily_clean_and_changing_files_are_not_stored() {
        let mut c = StatCache::disabled();
        let now = c.started_ns;
        let old = stat(now - 10 * RACY_MARGIN_NS);
        c.record("old", &old, &old, blake3::hash(b"1"));
        let racy = stat(now - RACY_MARGIN_NS / 2);
        c.record("racy", &racy, &racy, blake3::hash(b"2"));
        let racy_ctime = Stat { ctime_ns: now, ..old };
        c.record("touched", &racy_ctime, &racy_ctime, blake3::hash(b"3"));
        c.record("changed", &old, &Stat { size: 4, ..old }, blake3::hash(b"4"));
        assert_eq!(c.new.keys().collect::<Vec<_>>(), ["old"]);
    }
}
