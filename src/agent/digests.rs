//! The agent's files and their digests: hashed now (`check`, `lock`), or as the manifest
//! claims them (`pack --locked`), and where the two differ.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::stat_cache::{Stat, StatCache};
use crate::diagnostic::{Code, Diagnostic};
use crate::digest;
use crate::fileset::{self, AgentFile, Found};
use crate::manifest::edit::Digests;
use crate::manifest::{Digest, Manifest};
use crate::regular_file::{self, Links};
use crate::{policy, tools};

/// The agent's files and their current digests.
#[derive(Debug)]
pub struct Current {
    pub files: Vec<AgentFile>,
    pub digests: Digests,
    /// The bytes, as hashed, of the files a check reads next (see [`Kept`]).
    pub kept: Kept,
}

/// The bytes of the files hashed now (not taken from the stat cache) that a check parses
/// next: policy.caps, tools.json and the JSON files its schema references may name, by
/// relative path; each at most [`digest::WHOLE_UP_TO`] bytes, together at most [`KEPT_BYTES`].
/// So each is read once, and what is parsed is what was hashed.
pub type Kept = HashMap<String, Vec<u8>>;

/// The most bytes [`Kept`] holds for one agent (a check of many agents has several in flight).
pub const KEPT_BYTES: u64 = 4 << 20;

// A kept file is never over the cap its reader applies, so the bytes need no second check.
const _: () = assert!(
    digest::WHOLE_UP_TO <= crate::limits::MAX_JSON_BYTES && digest::WHOLE_UP_TO <= crate::limits::MAX_POLICY_BYTES
);

/// Whether a file's bytes are kept (see [`Kept`]): the files a check parses, while the
/// budget of [`KEPT_BYTES`] lasts, taken in the order the files are hashed (the files' order,
/// unless they are hashed on several cores).
struct KeptBudget(AtomicU64);

impl KeptBudget {
    fn new() -> KeptBudget {
        KeptBudget(AtomicU64::new(KEPT_BYTES))
    }

    /// Takes `len` bytes of the budget for the file at `path` if it is parsed next and they fit.
    fn take(&self, path: &str, len: u64) -> bool {
        let parsed = path == policy::FILE_NAME || path.ends_with(".json");
        parsed && self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(len)).is_ok()
    }
}

impl Current {
    /// The digest of one file, by relative path.
    pub fn digest_of(&self, path: &str) -> Option<&Digest> {
        match path {
            tools::FILE_NAME => self.digests.tools.as_ref(),
            policy::FILE_NAME => self.digests.policy.as_ref(),
            other => self.digests.files.get(other),
        }
    }
}

/// Whether a file's digest may come from the stat cache (`check` and `lock`; never `pack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hashing {
    /// Read and hash every file.
    Every,
    /// Take the digest of a file whose stat is unchanged from the stat cache, and record the
    /// digests of the files hashed ([`super::stat_cache`]).
    StatCache,
}

/// Lists and hashes the agent's files (with the stat cache when `hashing` says so); problems
/// (symlinks, secrets, bad names, unreadable files) are reported and the affected files left
/// out.
pub fn current_digests(
    dir: &Path,
    prefix: &str,
    manifest: &Manifest,
    diags: &mut Vec<Diagnostic>,
    hashing: Hashing,
) -> Current {
    let found = fileset::walk(dir, prefix, &manifest.allow_secret_files, diags);
    let mut cache = (hashing == Hashing::StatCache).then(|| StatCache::open(dir));
    // Bytes are kept for the parse only by a check (with the cache), never by lock or pack.
    let budget = cache.is_some().then(KeptBudget::new);
    let saves = cache.as_ref().is_some_and(StatCache::saves);
    // The stat after hashing is for the cache to record, and for lock, which writes the digest
    // (a small file that changed while it was read is read on to its end); a check whose cache
    // records nothing judges each file as it was when opened.
    let after = match cache.is_some() && !saves {
        true => digest::After::Skip,
        false => digest::After::Stat,
    };
    let hashed = each_file(&found, |f| {
        let result = cached_or_hashed(cache.as_ref(), f, budget.as_ref(), after);
        let read = match &result {
            Ok(h) if h.read => h.size,
            _ => 0,
        };
        (result, read)
    });
    let mut kept = Kept::new();
    let mut files = Vec::with_capacity(hashed.len());
    let mut digests = Digests::default();
    for (f, result) in found.into_iter().zip(hashed) {
        let h = match result {
            Ok(h) => h,
            Err(e) => {
                diags.push(Diagnostic::error(
                    Code::IoError,
                    format!("{prefix}{}", f.path),
                    format!("cannot read {}: {e}", f.path),
                ));
                continue;
            }
        };
        if let Some(cache) = cache.as_mut().filter(|_| saves) {
            match h.fresh {
                Some((before, after)) if before.size == h.size => cache.record(&f.path, &before, &after, h.hash),
                _ if h.read => {}
                _ => cache.keep(&f.path),
            }
        }
        let file = AgentFile::new(f, &h.meta);
        if let Some(bytes) = h.bytes {
            kept.insert(file.path.clone(), bytes);
        }
        let d = Digest { blake3: h.hash, size: h.size, executable: file.executable };
        match file.path.as_str() {
            tools::FILE_NAME => digests.tools = Some(d),
            policy::FILE_NAME => digests.policy = Some(d),
            other => {
                digests.files.insert(other.to_owned(), d);
            }
        }
        files.push(file);
    }
    if let Some(cache) = cache {
        cache.save();
    }
    Current { files, digests, kept }
}

/// Below both, an agent's files are hashed on the calling thread: waking the thread pool costs
/// more than reading a few small files, and `check` of many agents already keeps every core
/// busy with one agent each (issue 29: idle pool threads spun for 9% of the CPU time).
const SPREAD_FROM_BYTES: u64 = 1 << 20;
const SPREAD_FROM_FILES: usize = 32;

/// `f` of every file, in the files' (sorted) order: one file per core when there is enough
/// to hash for that to pay. `f` also says how many bytes it read: the files are not `stat`ed
/// before, so an agent's size shows as it is hashed, and once the files hashed on this thread
/// reach [`SPREAD_FROM_BYTES`], the rest are spread over the cores.
fn each_file<T: Send>(files: &[Found], f: impl Fn(&Found) -> (T, u64) + Sync + Send) -> Vec<T> {
    use rayon::prelude::*;
    let spread = |rest: &[Found]| rest.par_iter().map(|file| f(file).0).collect::<Vec<T>>();
    if files.len() >= SPREAD_FROM_FILES {
        return spread(files);
    }
    let mut out = Vec::with_capacity(files.len());
    let mut bytes = 0u64;
    for (i, file) in files.iter().enumerate() {
        if bytes >= SPREAD_FROM_BYTES {
            out.extend(spread(&files[i..]));
            break;
        }
        let (result, read) = f(file);
        bytes = bytes.saturating_add(read);
        out.push(result);
    }
    out
}

/// The agent's files with the digests the manifest claims for them, without reading any file:
/// paths, sizes and executable bits are compared now (a difference is returned as stale
/// entries); contents are compared by the caller while it reads the files anyway (`pack
/// --locked` hashes what it archives).
pub fn claimed_digests(
    dir: &Path,
    prefix: &str,
    manifest: &Manifest,
    diags: &mut Vec<Diagnostic>,
) -> (Current, Vec<(String, String)>) {
    let files = fileset::collect(dir, prefix, &manifest.allow_secret_files, diags);
    let listed = manifest.entries();
    let mut stale = Vec::new();
    let mut digests = Digests::default();
    for f in &files {
        let key = manifest_key(&f.path);
        match listed.get(f.path.as_str()) {
            None => stale.push((key, format!("{} is not listed in the manifest", f.path))),
            Some(None) => stale.push((key, format!("{} has no digest in the manifest", f.path))),
            Some(Some(d)) if d.size != f.size || d.executable != f.executable => {
                stale.push((key, format!("{} changed since the manifest was locked", f.path)));
            }
            Some(Some(d)) => match f.path.as_str() {
                tools::FILE_NAME => digests.tools = Some((*d).clone()),
                policy::FILE_NAME => digests.policy = Some((*d).clone()),
                other => {
                    digests.files.insert(other.to_owned(), (*d).clone());
                }
            },
        }
    }
    for path in listed.keys() {
        if !files.iter().any(|f| f.path == *path) {
            stale.push((
                manifest_key(path),
                format!("the manifest lists {path}, which is not in the agent folder (or is ignored)"),
            ));
        }
    }
    (Current { files, digests, kept: Kept::new() }, stale)
}

/// A file's digest: from the stat cache when its stat is the one recorded there, else read and
/// hashed (`read`), with its stat as opened and as after hashing when that was taken (`fresh`,
/// for the cache) and its bytes when the budget keeps them and it was read whole; `meta` is the
/// metadata its size and mode are taken from (the stat compared with the cache's, or the
/// `fstat` as opened).
struct Hashed {
    meta: std::fs::Metadata,
    hash: blake3::Hash,
    size: u64,
    read: bool,
    fresh: Option<(Stat, Stat)>,
    bytes: Option<Vec<u8>>,
}

fn cached_or_hashed(
    cache: Option<&StatCache>,
    f: &Found,
    budget: Option<&KeptBudget>,
    after: digest::After,
) -> std::io::Result<Hashed> {
    // Only a file the cache has a digest for is `stat`ed before it is opened (git, too,
    // compares its index with the stat of its own walk); any other is opened at once, and its
    // `fstat` is its metadata: one `statx` per file fewer for a check without a warm cache.
    // A file changed after this stat is judged as it was, as if the check had run a moment
    // earlier.
    if let Some(cache) = cache.filter(|c| c.has(&f.path)) {
        let meta = std::fs::symlink_metadata(&f.full)?;
        let stat = Stat::of(&meta);
        if meta.is_file()
            && let Some(hash) = cache.lookup(&f.path, &stat)
        {
            return Ok(Hashed { meta, hash, size: stat.size, read: false, fresh: None, bytes: None });
        }
    }
    // Opened as the check reads it (never through a symlink, never waiting on a FIFO), so
    // that bytes kept are what the check would have read.
    let (file, before) =
        regular_file::open_with_metadata(&f.full, Links::Refuse).map_err(regular_file::ReadError::into_io)?;
    let (h, bytes) = digest::hash_open_file(file, before, after)?;
    let fresh = h.after.as_ref().map(|after| (Stat::of(&h.before), Stat::of(after)));
    let bytes = bytes.filter(|b| budget.is_some_and(|budget| budget.take(&f.path, b.len() as u64)));
    Ok(Hashed { meta: h.before, hash: h.hash, size: h.size, read: true, fresh, bytes })
}

fn manifest_key(path: &str) -> String {
    match path {
        tools::FILE_NAME => "artifacts.tools".to_owned(),
        policy::FILE_NAME => "artifacts.policy".to_owned(),
        other => format!("files.{}", toml_edit::Value::from(other)),
    }
}

/// Where the manifest's digests differ from the files: `(manifest key, message)`.
pub fn stale_entries(manifest: &Manifest, current: &Digests) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let named = [
        ("artifacts.tools", tools::FILE_NAME, manifest.tools.as_ref(), current.tools.as_ref()),
        ("artifacts.policy", policy::FILE_NAME, manifest.policy.as_ref(), current.policy.as_ref()),
    ];
    for (key, file, listed, actual) in named {
        match (listed.map(|a| a.digest.as_ref()), actual) {
            (None, Some(_)) => out.push((key.to_owned(), format!("manifest.toml has no [{key}] digest for {file}"))),
            (Some(None), Some(_)) => out.push((key.to_owned(), format!("[{key}] has no digest for {file}"))),
            (Some(Some(l)), Some(a)) if l != a => {
                out.push((key.to_owned(), format!("{file} changed since the manifest was locked")))
            }
            (Some(_), None) => {
                out.push((key.to_owned(), format!("[{key}] lists {file}, which is not in the agent folder")))
            }
            _ => {}
        }
    }
    for (path, actual) in &current.files {
        let key = || format!("files.{}", toml_edit::Value::from(path.as_str()));
        match manifest.files.get(path) {
            None => out.push((key(), format!("{path} is not listed in [files]"))),
            Some(Some(listed)) if listed != actual => {
                out.push((key(), format!("{path} changed since the manifest was locked")))
            }
            Some(None) => out.push((key(), format!("{path} has no digest in [files]"))),
            _ => {}
        }
    }
    for path in manifest.files.keys() {
        if !current.files.contains_key(path) {
            let key = format!("files.{}", toml_edit::Value::from(path.as_str()));
            out.push((key, format!("[files] lists {path}, which is not in the agent folder (or is ignored)")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Source;

    /// An agent of the given files (relative path, contents) with a minimal manifest.
    fn agent(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Manifest) {
        let dir = tempfile::tempdir().unwrap();
        let text = "[bundle]\nformat = 1\n\n[agent]\nname = \"kept\"\nversion = \"0.1.0\"\n";
        std::fs::write(dir.path().join("manifest.toml"), text).unwrap();
        for (path, bytes) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, bytes).unwrap();
        }
        let mut diags = Vec::new();
        let manifest = crate::manifest::parse(&Source::new("manifest.toml", text), &mut diags).unwrap();
        (dir, manifest)
    }

    /// Files hashed now that the check parses next keep the bytes that were hashed; other
    /// files, files over the size read whole, and files past the budget do not.
    #[test]
    fn the_files_a_check_parses_are_kept_as_hashed_within_the_budget() {
        let big = vec![b' '; digest::WHOLE_UP_TO as usize + 1];
        let fill = vec![b' '; digest::WHOLE_UP_TO as usize];
        let mut files: Vec<(String, Vec<u8>)> = vec![
            (tools::FILE_NAME.into(), b"{\"version\": 1, \"tools\": []}".to_vec()),
            (policy::FILE_NAME.into(), b"net.http\n".to_vec()),
            ("schemas/a.json".into(), b"{}".to_vec()),
            ("prompts/system.md".into(), b"hello".to_vec()),
            ("schemas/big.json".into(), big),
        ];
        // Four more of the largest size read whole: the budget holds the small files and three.
        files.extend((0..4).map(|i| (format!("schemas/fill{i}.json"), fill.clone())));
        let borrowed: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
        let (dir, manifest) = agent(&borrowed);
        let mut diags = Vec::new();
        let found = current_digests(dir.path(), "", &manifest, &mut diags, Hashing::StatCache);
        assert!(diags.is_empty(), "{diags:?}");
        for (path, bytes) in &files {
            assert_eq!(found.digest_of(path).unwrap().blake3, blake3::hash(bytes), "{path}");
        }
        let mut kept: Vec<&str> = found.kept.keys().map(String::as_str).collect();
        kept.sort();
        // The files after big.json are hashed on several cores (the agent is larger than is
        // worth one): which three of the four fills the budget holds depends on the order
        // they finish in.
        let (fills, small): (Vec<&str>, Vec<&str>) = kept.iter().partition(|p| p.starts_with("schemas/fill"));
        assert_eq!(small, ["policy.caps", "schemas/a.json", "tools.json"]);
        assert_eq!(fills.len(), 3, "{fills:?}");
        for (path, bytes) in &found.kept {
            assert_eq!(bytes, &files.iter().find(|(p, _)| p == path).unwrap().1, "{path}");
        }
        // Hashing every file (lock, pack) keeps nothing.
        let every = current_digests(dir.path(), "", &manifest, &mut diags, Hashing::Every);
        assert!(every.kept.is_empty());
    }
}
