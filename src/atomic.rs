//! Writing files so that readers see either the old file or the complete new one, never a
//! half-written one: a temp file in the same folder, fsync, rename over the target, fsync
//! the folder. A failure at any step leaves the target untouched and removes the temp file.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use tempfile::NamedTempFile;

/// Opens a temp file next to `target` (same folder, so the final rename is atomic). It gets
/// the permissions of the file it will replace, or 0644 for a new file (tempfile's own 0600
/// would silently make manifests and bundles private).
pub fn temp_beside(target: &Path) -> io::Result<NamedTempFile> {
    let dir = parent_dir(target);
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".tmp").tempfile_in(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let perms = match std::fs::metadata(target) {
            Ok(m) => m.permissions(),
            Err(_) => std::fs::Permissions::from_mode(0o644),
        };
        temp.as_file().set_permissions(perms)?;
    }
    Ok(temp)
}

/// Flushes `temp` to disk and renames it to `target`; with `overwrite = false`, fails with
/// `AlreadyExists` instead of replacing an existing file.
pub fn commit(temp: NamedTempFile, target: &Path, overwrite: bool) -> io::Result<()> {
    temp.as_file().sync_all()?;
    if overwrite {
        temp.persist(target).map_err(|e| e.error)?;
    } else {
        temp.persist_noclobber(target).map_err(|e| e.error)?;
    }
    sync_dir(parent_dir(target))
}

/// Writes `bytes` to `target` atomically, preserving nothing of the old file but its name.
pub fn write(target: &Path, bytes: &[u8], overwrite: bool) -> io::Result<()> {
    let mut temp = temp_beside(target)?;
    temp.write_all(bytes)?;
    commit(temp, target, overwrite)
}

fn parent_dir(target: &Path) -> &Path {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}
