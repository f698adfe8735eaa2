//! Reading a file as hostile input: only a regular file, never more than a cap.
//!
//! A FIFO would block `open` or `read` forever, a symlink to `/dev/zero` would be read until
//! memory runs out, and a symlink inside an agent folder would pull in a file from outside
//! it. So files of an agent folder are opened without following a symlink (`O_NOFOLLOW`) and
//! without waiting for a writer (`O_NONBLOCK`), then `fstat`ed: anything but a regular file is
//! refused before one byte is read, and the read stops one byte past the cap. Files named on
//! the command line may be symlinks (the user chose them), but must still be regular files.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no such file")]
    NotFound,
    /// The file is `what` (a symbolic link, a FIFO, a device, a folder, a socket).
    #[error("it is {what}, not a regular file")]
    NotRegular { what: &'static str },
    #[error("it is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("{0}")]
    Io(io::Error),
}

impl ReadError {
    /// As an `io::Error` (for callers that only report a message).
    pub fn into_io(self) -> io::Error {
        match self {
            ReadError::Io(e) => e,
            ReadError::NotFound => io::Error::new(io::ErrorKind::NotFound, "no such file"),
            other => io::Error::other(other.to_string()),
        }
    }
}

/// Whether a symlink at the final component is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Refused: files inside an agent folder.
    Refuse,
    /// Followed: files the user named on the command line.
    Follow,
}

/// Opens `path` for reading if it is a regular file.
pub fn open(path: &Path, links: Links) -> Result<File, ReadError> {
    open_with_len(path, links).map(|(file, _)| file)
}

/// [`open`], with the size the file claims (from the same `fstat`).
fn open_with_len(path: &Path, links: Links) -> Result<(File, u64), ReadError> {
    open_with_metadata(path, links).map(|(file, meta)| (file, meta.len()))
}

/// [`open`], with the file's metadata (from the `fstat` that found it regular).
pub fn open_with_metadata(path: &Path, links: Links) -> Result<(File, std::fs::Metadata), ReadError> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let nofollow = if links == Links::Refuse { libc::O_NOFOLLOW } else { 0 };
        options.custom_flags(libc::O_NONBLOCK | nofollow);
    }
    #[cfg(not(unix))]
    if links == Links::Refuse
        && let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_symlink()
    {
        return Err(ReadError::NotRegular { what: "a symbolic link" });
    }
    let file = options.open(path).map_err(|e| classify_open_error(path, e, links))?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular { what: describe(&meta.file_type()) });
    }
    Ok((file, meta))
}

fn classify_open_error(path: &Path, e: io::Error, links: Links) -> ReadError {
    if e.kind() == io::ErrorKind::NotFound {
        return ReadError::NotFound;
    }
    #[cfg(unix)]
    if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) {
        return ReadError::NotRegular { what: "a symbolic link" };
    }
    // O_NONBLOCK on a FIFO without a reader can fail (ENXIO) for writers only; a socket or a
    // device that refuses to open is still not a file we read.
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && !meta.is_file()
    {
        return ReadError::NotRegular { what: describe(&meta.file_type()) };
    }
    let _ = links;
    ReadError::Io(e)
}

/// In words, for messages.
pub fn describe(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Reads a regular file of at most `limit` bytes.
pub fn read(path: &Path, limit: u64, links: Links) -> Result<Vec<u8>, ReadError> {
    let (file, claimed) = open_with_len(path, links)?;
    read_claimed(file, claimed, limit)
}

/// Reads an open file of at most `limit` bytes: the bytes it claims to have (refused when over
/// `limit`), or when it claims none, what it has up to one byte past the limit.
pub fn read_from(file: File, limit: u64) -> Result<Vec<u8>, ReadError> {
    let claimed = file.metadata().map(|m| m.len()).unwrap_or(0);
    read_claimed(file, claimed, limit)
}

/// [`read_from`] of a file whose claimed size is known (no second `fstat`: `bundle check`
/// reads tens of thousands of small files).
fn read_claimed(mut file: File, claimed: u64, limit: u64) -> Result<Vec<u8>, ReadError> {
    if claimed > limit {
        return Err(ReadError::TooLarge { limit });
    }
    if claimed > 0 {
        // The size `fstat` gave, read in full, is the file: no read to find the end (a quarter
        // of the reads of `bundle check` of many small agents). A file that grew since is read
        // as it was; one that shrank ends early.
        let mut bytes = vec![0; claimed as usize];
        let n = crate::read_full::read_full(&mut file, &mut bytes).map_err(ReadError::Io)?;
        bytes.truncate(n);
        return Ok(bytes);
    }
    // A file that claims no size may still have contents (a file of `/proc`): read to its end.
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(bytes)
}

/// Reads a regular UTF-8 text file of at most `limit` bytes.
pub fn read_to_string(path: &Path, limit: u64, links: Links) -> Result<String, ReadError> {
    let bytes = read(path, limit, links)?;
    String::from_utf8(bytes).map_err(|_| ReadError::Io(io::Error::new(io::ErrorKind::InvalidData, "not UTF-8")))
}

impl crate::error_code::Coded for ReadError {
    fn code(&self) -> crate::error_code::ErrorCode {
        crate::error_code::ErrorCode::IoError
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn refuses_links_fifos_and_devices_and_caps_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read(&file, 5, Links::Refuse).unwrap(), b"12345");
        assert!(matches!(read(&file, 4, Links::Refuse), Err(ReadError::TooLarge { limit: 4 })));
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(matches!(read(&link, 5, Links::Refuse), Err(ReadError::NotRegular { what: "a symbolic link" })));
        assert_eq!(read(&link, 5, Links::Follow).unwrap(), b"12345");
        let zero = dir.path().join("z");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(read(&zero, 5, Links::Follow), Err(ReadError::NotRegular { what: "a device" })));
        let fifo = dir.path().join("p");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(matches!(read(&fifo, 5, Links::Refuse), Err(ReadError::NotRegular { what: "a FIFO" })));
        assert!(matches!(read(&dir.path().join("none"), 5, Links::Refuse), Err(ReadError::NotFound)));
    }

    /// `/proc` files claim no size but have contents: read to their end, within the cap.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_that_claims_no_size_is_read_to_its_end_within_the_cap() {
        let status = Path::new("/proc/self/status");
        assert_eq!(std::fs::metadata(status).unwrap().len(), 0, "/proc/self/status claims a size");
        let text = read(status, 1 << 20, Links::Follow).unwrap();
        assert!(text.starts_with(b"Name:"), "{}", String::from_utf8_lossy(&text));
        assert!(matches!(read(status, 4, Links::Follow), Err(ReadError::TooLarge { limit: 4 })));
    }
}
