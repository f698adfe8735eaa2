//! The agent's files and their digests: hashed now (`check`, `lock`), or as the manifest
//! claims them (`pack --locked`), and where the two differ.

use std::path::Path;

use super::stat_cache::{Stat, StatCache};
use crate::diagnostic::{Code, Diagnostic};
use crate::digest;
use crate::fileset::{self, AgentFile};
use crate::manifest::edit::Digests;
use crate::manifest::{Digest, Manifest};
use crate::{policy, tools};

/// The agent's files and their current digests.
#[derive(Debug)]
pub struct Current {
    pub files: Vec<AgentFile>,
    pub digests: Digests,
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
    let files = fileset::collect(dir, prefix, &manifest.allow_secret_files, diags);
    let hashed: Vec<_> = match hashing {
        Hashing::Every => each_file(&files, |f| digest::hash_file(&f.full)),
        Hashing::StatCache => {
            let mut cache = StatCache::open(dir);
            let found = each_file(&files, |f| cached_or_hashed(&cache, f));
            let mut out = Vec::with_capacity(found.len());
            for (f, result) in files.iter().zip(found) {
                out.push(result.map(|(hash, size, fresh)| {
                    if let Some((before, after)) = fresh.filter(|(b, _)| b.size == size) {
                        cache.record(&f.path, &before, &after, hash);
                    } else if fresh.is_none() {
                        cache.keep(&f.path);
                    }
                    (hash, size)
                }));
            }
            cache.save();
            out
        }
    };
    let mut digests = Digests::default();
    for (f, result) in files.iter().zip(hashed) {
        let (hash, size) = match result {
            Ok(x) => x,
            Err(e) => {
                diags.push(Diagnostic::error(
                    Code::IoError,
                    format!("{prefix}{}", f.path),
                    format!("cannot read {}: {e}", f.path),
                ));
                continue;
            }
        };
        let d = Digest { blake3: hash, size, executable: f.executable };
        match f.path.as_str() {
            tools::FILE_NAME => digests.tools = Some(d),
            policy::FILE_NAME => digests.policy = Some(d),
            other => {
                digests.files.insert(other.to_owned(), d);
            }
        }
    }
    Current { files, digests }
}

/// Below both, an agent's files are hashed on the calling thread: waking the thread pool costs
/// more than reading a few small files, and `check` of many agents already keeps every core
/// busy with one agent each (issue 29: idle pool threads spun for 9% of the CPU time).
const SPREAD_FROM_BYTES: u64 = 1 << 20;
const SPREAD_FROM_FILES: usize = 32;

/// `f` of every file, in the files' (sorted) order: one file per core when there is enough
/// to hash for that to pay.
fn each_file<T: Send>(files: &[AgentFile], f: impl Fn(&AgentFile) -> T + Sync + Send) -> Vec<T> {
    use rayon::prelude::*;
    let bytes = files.iter().fold(0u64, |sum, f| sum.saturating_add(f.size));
    if bytes >= SPREAD_FROM_BYTES || files.len() >= SPREAD_FROM_FILES {
        files.par_iter().map(f).collect()
    } else {
        files.iter().map(f).collect()
    }
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
    (Current { files, digests }, stale)
}

/// A file's digest from the cache when its stat is the one recorded, else read and hashed
/// (with its stat as opened and as after hashing, for the cache).
type Found = (blake3::Hash, u64, Option<(Stat, Stat)>);

fn cached_or_hashed(cache: &StatCache, f: &AgentFile) -> std::io::Result<Found> {
    // The stat the listing took moments ago (git, too, compares its index with the stat of
    // its own walk): one `statx` per file fewer. A file changed after the listing is judged as
    // it was when listed, as if the check had run a moment earlier.
    let stat = Stat::of(&f.listed);
    if let Some(hash) = cache.lookup(&f.path, &stat) {
        return Ok((hash, stat.size, None));
    }
    let h = digest::hash_file_with_metadata(&f.full)?;
    Ok((h.hash, h.size, Some((Stat::of(&h.before), Stat::of(&h.after)))))
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
        let key = format!("files.{}", toml_edit::Value::from(path.as_str()));
        match manifest.files.get(path) {
            None => out.push((key, format!("{path} is not listed in [files]"))),
            Some(Some(listed)) if listed != actual => {
                out.push((key, format!("{path} changed since the manifest was locked")))
            }
            Some(None) => out.push((key, format!("{path} has no digest in [files]"))),
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
