//! `bundle unpack`: verify and extract into a new folder, atomically. Entries are written into
//! a temp folder beside the target while the bundle streams; only when the whole bundle has
//! verified is the temp folder renamed into place. A rejected bundle leaves nothing behind.
//!
//! An unpack killed outright (SIGKILL, power loss) cannot remove its temp folder. While an
//! unpack runs it holds a lock on its temp folder; the next unpack into the same parent removes
//! temp folders that nobody holds and that have not been touched for
//! [`atomic::STALE_AFTER`](crate::atomic::STALE_AFTER).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};

use crate::bundle::verify::{self, Expect, Rejection, Sink, Trust, Verified};
use crate::error::{Error, Result};
use crate::trust::TrustedKeys;

struct FolderSink {
    root: PathBuf,
}

impl Sink for FolderSink {
    fn open(&mut self, path: &str, executable: bool) -> io::Result<Box<dyn Write + '_>> {
        // The archive reader has already rejected absolute paths, `..`, and anything but
        // regular files, so `path` stays inside `root`; the folder is new, so no link can
        // redirect a write.
        let target = self.root.join(path);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(if executable { 0o755 } else { 0o644 });
        }
        #[cfg(not(unix))]
        let _ = executable;
        Ok(Box::new(io::BufWriter::new(options.open(target)?)))
    }
}

const STAGING_PREFIX: &str = ".bundle-unpack.";

/// Removes staging folders of killed unpacks in `parent` (best effort): folders named
/// `.bundle-unpack.*`, not links, unlocked, untouched for a while.
fn remove_stale_staging(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_str().is_some_and(|n| n.starts_with(STAGING_PREFIX)) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        let untouched =
            meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|age| age >= crate::atomic::STALE_AFTER);
        if !meta.is_dir() || !untouched {
            continue;
        }
        let Ok(dir) = File::open(&path) else { continue };
        if dir.try_lock().is_ok() {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// The outcome: extracted, or rejected (with nothing left behind).
pub enum Unpacked {
    Done(Box<Verified>),
    Rejected(Rejection),
}

pub fn unpack(bundle: &Path, dest: &Path, keys: &TrustedKeys, expect: &Expect<'_>) -> Result<Unpacked> {
    if dest.exists() {
        return Err(Error::Usage(format!("{} already exists; unpack creates a new folder", dest.display())));
    }
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file = File::open(bundle).map_err(|e| Error::io(bundle, e))?;
    // Missing parent folders (a deploy job's `deploy/<name>`) are created, and removed again
    // if the bundle is rejected, so that a rejection still leaves nothing behind.
    let created = parent.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists()).count();
    fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let remove_created = || {
        for dir in parent.ancestors().take(created) {
            let _ = fs::remove_dir(dir);
        }
    };
    remove_stale_staging(&parent);
    let staged = tempfile::Builder::new().prefix(STAGING_PREFIX).tempdir_in(&parent).and_then(|t| {
        let lock = File::open(t.path())?;
        lock.lock()?;
        Ok((t, lock))
    });
    // `_lock` is held until the process ends (also after the folder became `dest`).
    let (temp, _lock) = match staged {
        Ok(t) => t,
        Err(e) => {
            remove_created();
            return Err(Error::io(&parent, e));
        }
    };
    let mut sink = FolderSink { root: temp.path().to_path_buf() };
    match verify::verify(BufReader::with_capacity(1 << 20, file), Trust::Keys(keys), expect, &mut sink) {
        Ok(verified) => {
            let kept = temp.keep();
            fs::rename(&kept, dest).map_err(|e| {
                let _ = fs::remove_dir_all(&kept);
                Error::io(dest, e)
            })?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(dest, fs::Permissions::from_mode(0o755)).map_err(|e| Error::io(dest, e))?;
            }
            Ok(Unpacked::Done(Box::new(verified)))
        }
        // Dropping `temp` removes everything written so far.
        Err(r) => {
            drop(temp);
            remove_created();
            Ok(Unpacked::Rejected(r))
        }
    }
}
