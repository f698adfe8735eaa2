//! `bundle unpack`: run the deployment gate and extract into a new folder, atomically. Entries
//! are written into a temp folder beside the target while the bundle streams; only when the
//! whole bundle has passed the gate is the temp folder renamed into place. A rejected
//! bundle leaves nothing behind.
//!
//! An unpack killed outright (SIGKILL, power loss) cannot remove its temp folder. While an
//! unpack runs it holds a lock on its temp folder; the next unpack into the same parent removes
//! temp folders that nobody holds and that have not been touched for
//! [`atomic::STALE_AFTER`](crate::atomic::STALE_AFTER).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::bundle::verify::Sink;
use crate::error::{Error, Result};
use crate::ops::gate::{Gate, GateError, Verdict};

/// Writes entries into the staging folder; [`Sink::commit`] renames it to the target.
struct FolderSink {
    staging: Option<TempDir>,
    root: PathBuf,
    dest: PathBuf,
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

    fn commit(&mut self) -> Result<()> {
        let Some(staging) = self.staging.take() else { return Ok(()) };
        let kept = staging.keep();
        fs::rename(&kept, &self.dest).map_err(|e| {
            let _ = fs::remove_dir_all(&kept);
            Error::io(&self.dest, e)
        })?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&self.dest, fs::Permissions::from_mode(0o755)).map_err(|e| Error::io(&self.dest, e))?;
        }
        Ok(())
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

/// Runs the deployment gate over `bundle`, extracting it into `dest` (which must not exist)
/// only if it passes. On any other outcome nothing is left behind: neither the staging folder
/// nor the parent folders this created.
pub fn unpack(bundle: &Path, dest: &Path, gate: Gate) -> Result<Verdict, GateError> {
    if dest.exists() {
        return Err(Error::Usage(format!("{} already exists; unpack creates a new folder", dest.display())).into());
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
    // `_lock` is held until the unpack returns (also after the folder became `dest`).
    let (staging, _lock) = match staged {
        Ok(t) => t,
        Err(e) => {
            remove_created();
            return Err(Error::io(&parent, e).into());
        }
    };
    let root = staging.path().to_path_buf();
    let mut sink = FolderSink { staging: Some(staging), root, dest: dest.to_path_buf() };
    let verdict = gate.run(BufReader::with_capacity(1 << 20, file), bundle, &mut sink);
    if sink.staging.is_some() {
        // Not committed: dropping the staging folder removes everything written so far.
        drop(sink);
        remove_created();
    }
    verdict
}
