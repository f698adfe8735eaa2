//! `bundle unpack`: run the deployment gate and extract into a new folder, atomically. Entries
//! are written into a temp folder beside the target while the bundle streams; only when the
//! whole bundle has passed the gate is the temp folder renamed into place. A rejected
//! bundle leaves nothing behind.
//!
//! With `replace`, an existing target is swapped for the new tree in one step once the bundle
//! has passed: on Linux `renameat2(RENAME_EXCHANGE)` exchanges the two folders atomically, so a
//! reader of the target path sees the old tree or the new one, never a mix, and never nothing;
//! elsewhere (or on a file system without exchange) the old folder is renamed aside and the new
//! one renamed into place, leaving only a moment with no folder at all. The old tree is removed
//! after the swap. A refused bundle leaves the old folder as it was.
//!
//! An unpack killed outright (SIGKILL, power loss) cannot remove its temp folder. While an
//! unpack runs it holds a lock on its temp folder; the next unpack into the same parent removes
//! temp folders that nobody holds and that have not been touched for
//! [`atomic::STALE_AFTER`](crate::atomic::STALE_AFTER).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::bundle::verify::Sink;
use crate::error::{Error, Result};
use crate::ops::gate::{Gate, GateError, Verdict};
use crate::ops::input::{BundleInput, BundleSource};
use crate::progress::Silent;

/// Writes entries into the staging folder; [`Sink::commit`] renames it to the target (or
/// swaps it with the target, with `replace`).
struct FolderSink {
    staging: Option<TempDir>,
    root: PathBuf,
    dest: PathBuf,
    replace: bool,
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
        // The folder's final mode before it is in place, so that no reader meets the temp
        // folder's 0700.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&kept, fs::Permissions::from_mode(0o755)).map_err(|e| {
                let _ = fs::remove_dir_all(&kept);
                Error::io(&self.dest, e)
            })?;
        }
        let placed = if self.replace && fs::symlink_metadata(&self.dest).is_ok() {
            swap(&kept, &self.dest)
        } else {
            fs::rename(&kept, &self.dest)
        };
        placed.map_err(|e| {
            let _ = fs::remove_dir_all(&kept);
            Error::io(&self.dest, e)
        })?;
        Ok(())
    }
}

const STAGING_PREFIX: &str = ".bundle-unpack.";
/// Where the fallback swap puts the old tree for a moment. Not a staging prefix: a killed
/// unpack may leave the only copy of the old tree here, which must not be cleaned up unasked.
const ASIDE_PREFIX: &str = ".bundle-unpack-old.";

/// Puts the tree at `new` in place of the folder `dest`, then removes the old tree (which ends
/// up at `new`'s path or aside). A reader of `dest` sees the old tree or the new one.
fn swap(new: &Path, dest: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, new, CWD, dest, RenameFlags::EXCHANGE) {
            Ok(()) => {
                // `new` now names the old tree.
                let _ = fs::remove_dir_all(new);
                return Ok(());
            }
            // A file system or kernel without RENAME_EXCHANGE: rename aside instead.
            Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {}
            Err(e) => return Err(e.into()),
        }
    }
    let parent = new.parent().unwrap_or(Path::new("."));
    let aside = tempfile::Builder::new().prefix(ASIDE_PREFIX).tempdir_in(parent)?.keep();
    fs::remove_dir(&aside)?;
    fs::rename(dest, &aside)?;
    if let Err(e) = fs::rename(new, dest) {
        // Put the old tree back rather than leave nothing.
        let _ = fs::rename(&aside, dest);
        return Err(e);
    }
    let _ = fs::remove_dir_all(&aside);
    Ok(())
}

/// Removes staging folders of killed unpacks in `parent` (best effort): folders named
/// `.bundle-unpack.*`, not links, unlocked, untouched for a while.
fn remove_stale_staging(parent: &Path) {
    crate::atomic::remove_stale(parent, |name| name.starts_with(STAGING_PREFIX), crate::atomic::Leftover::Folder);
}

/// Runs the deployment gate over the bundle `source` names, extracting it into `dest` only if
/// it passes. `dest` must not exist, unless `replace`: then an existing folder is swapped for
/// the new tree (see the module docs). On any other outcome nothing is left behind: neither
/// the staging folder nor the parent folders this created, and a replaced folder is untouched.
/// The gate passes only a stream it read to its end, so a layer's digest is checked before
/// the folder is renamed into place.
pub fn unpack(source: &BundleSource, dest: &Path, gate: Gate, replace: bool) -> Result<Verdict, GateError> {
    check_dest(dest, replace)?;
    let input = match source.open(&Silent, &gate.wanted())? {
        Ok(input) => input,
        Err(rejection) => return Ok(Verdict::refused(rejection)),
    };
    stage_and_run(input, dest, gate, replace)
}

/// `dest` must not exist, or with `replace` be a folder of its own.
fn check_dest(dest: &Path, replace: bool) -> Result<(), GateError> {
    if replace && dest.file_name().is_none() {
        return Err(Error::Usage(format!(
            "{} names no folder of its own; --replace needs the path of the folder to swap",
            dest.display()
        ))
        .into());
    }
    match fs::symlink_metadata(dest) {
        Err(_) => {}
        Ok(_) if !replace => {
            return Err(Error::Usage(format!(
                "{} already exists; unpack creates a new folder (add --replace to redeploy over it)",
                dest.display()
            ))
            .into());
        }
        Ok(meta) if !meta.is_dir() => {
            return Err(Error::Usage(format!(
                "{} is not a folder{}; --replace swaps a folder for the new tree",
                dest.display(),
                if meta.file_type().is_symlink() { " (a symbolic link)" } else { "" }
            ))
            .into());
        }
        Ok(_) => {}
    }
    Ok(())
}

fn stage_and_run(input: BundleInput<'_>, dest: &Path, gate: Gate, replace: bool) -> Result<Verdict, GateError> {
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
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
    let mut sink = FolderSink { staging: Some(staging), root, dest: dest.to_path_buf(), replace };
    let verdict = gate.judge(input, &mut sink);
    if sink.staging.is_some() {
        // Not committed: dropping the staging folder removes everything written so far.
        drop(sink);
        remove_created();
    }
    verdict
}
