//! The container layer of an `agent.bundle`: zstd frames (and the seek table
//! after them) holding one POSIX ustar archive of regular files.
//!
//! Why this module exists: packing and verifying both need the exact same
//! byte-level rules, and the verifier must treat every bundle as hostile.
//! Keeping the container code in one place, apart from the manifest and
//! signature code, means the rules are written once and tested against
//! hand-crafted hostile archives.
//!
//! Files:
//! - `mod.rs` (this file): the types shared by both directions: the error
//!   type with its stable reason codes, the safe-path rules
//!   ([`check_path`], also used by the manifest code at lock time), the
//!   ustar field layout and the name/prefix split.
//! - `write.rs`: [`ArchiveWriter`], which produces the canonical,
//!   byte-reproducible form.
//! - `pipe.rs`: the thread the writer feeds zstd on, so that reading and
//!   hashing the files overlaps compression.
//! - `read.rs`: [`ArchiveReader`], a streaming, bounded-memory reader that
//!   validates every header before handing out an entry.
//! - `compress.rs`: the frames the writer cuts at entry boundaries and
//!   compresses on up to four cores; `seek_table.rs`: the seek table after them.
//! - `frames.rs`: zstd frame and block headers, walked from the bytes;
//!   `decode.rs`: the frames decoded in order, on every core, with the same
//!   bytes and faults as on one.
//! - `seek.rs`: one entry of a seekable bundle, decoding only its frames.
//!
//! The byte format itself is specified in `docs/book/src/reference/format.md`.

use std::fmt;
use std::io;

mod bundle_read;
mod compress;
mod decode;
mod frames;
mod pipe;
mod read;
mod seek;
mod seek_table;
mod write;

pub use bundle_read::{BundleRead, FileAt, InOrder};
pub use compress::FRAME_SIZE;
pub(crate) use decode::Decoding;
pub use read::{ArchiveReader, Entry, Limits, MAX_TRAILING_ZEROS};
pub use seek::Seekable;
pub use seek_table::{FrameEntry, SeekTable};
pub use write::ArchiveWriter;

/// Size of a tar block; headers, data padding and the end marker all use it.
pub const BLOCK: usize = 512;

/// Longest path (in bytes) that [`check_path`] accepts.
pub const MAX_PATH_LEN: usize = 255;

/// Compression levels [`ArchiveWriter::new`] accepts.
pub const LEVELS: std::ops::RangeInclusive<i32> = 1..=19;

/// The compression level used when the caller has no preference.
pub const DEFAULT_LEVEL: i32 = 3;

/// Mode of a non-executable entry.
pub const MODE_FILE: u32 = 0o644;

/// Mode of an executable entry.
pub const MODE_EXECUTABLE: u32 = 0o755;

/// Byte ranges of the ustar header fields (POSIX.1-1988 / pax "ustar").
pub(crate) mod field {
    use std::ops::Range;
    pub const NAME: Range<usize> = 0..100;
    pub const MODE: Range<usize> = 100..108;
    pub const SIZE: Range<usize> = 124..136;
    pub const CHKSUM: Range<usize> = 148..156;
    pub const TYPEFLAG: usize = 156;
    pub const MAGIC: Range<usize> = 257..263;
    pub const VERSION: Range<usize> = 263..265;
    pub const PREFIX: Range<usize> = 345..500;
}

/// Length limits of the two ustar path fields.
pub(crate) const NAME_LEN: usize = 100;
pub(crate) const PREFIX_LEN: usize = 155;

/// Why a path is not acceptable inside a bundle. See [`check_path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathProblem {
    /// The path is the empty string.
    #[error("the path is empty")]
    Empty,
    /// The path is longer than [`MAX_PATH_LEN`] bytes.
    #[error("the path is {0} bytes long (at most 255 allowed)")]
    TooLong(usize),
    /// The path bytes stored in the archive are not UTF-8.
    #[error("the path is not valid UTF-8")]
    NotUtf8,
    /// The path starts with `/`.
    #[error("the path is absolute")]
    Absolute,
    /// The path ends with `/`.
    #[error("the path ends with '/'")]
    TrailingSlash,
    /// The path contains `\` (a separator on Windows, ambiguous elsewhere).
    #[error("the path contains a backslash")]
    Backslash,
    /// The path contains NUL or another control character.
    #[error("the path contains a control character")]
    ControlCharacter,
    /// The path contains `//`.
    #[error("the path has an empty component")]
    EmptyComponent,
    /// A component is `.`.
    #[error("the path has a '.' component")]
    DotComponent,
    /// A component is `..`.
    #[error("the path has a '..' component")]
    DotDotComponent,
}

/// Checks that `path` is a safe relative path for a bundle entry.
///
/// Accepted: non-empty, at most 255 bytes, relative, `/`-separated, no
/// empty, `.` or `..` components, no backslash, no control characters
/// (this includes NUL), no trailing slash. UTF-8 is guaranteed by `&str`.
///
/// Not checked here (the caller's job): Unicode NFC normalisation,
/// duplicates and case collisions between entries.
pub fn check_path(path: &str) -> Result<(), PathProblem> {
    if path.is_empty() {
        return Err(PathProblem::Empty);
    }
    if path.len() > MAX_PATH_LEN {
        return Err(PathProblem::TooLong(path.len()));
    }
    if path.chars().any(char::is_control) {
        return Err(PathProblem::ControlCharacter);
    }
    if path.contains('\\') {
        return Err(PathProblem::Backslash);
    }
    if path.starts_with('/') {
        return Err(PathProblem::Absolute);
    }
    if path.ends_with('/') {
        return Err(PathProblem::TrailingSlash);
    }
    for component in path.split('/') {
        match component {
            "" => return Err(PathProblem::EmptyComponent),
            "." => return Err(PathProblem::DotComponent),
            ".." => return Err(PathProblem::DotDotComponent),
            _ => {}
        }
    }
    Ok(())
}

/// Splits a path into the ustar `(prefix, name)` fields.
///
/// Paths of at most 100 bytes go entirely into `name` (prefix empty).
/// Longer paths are split at the last `/` that leaves a prefix of at most
/// 155 bytes (the longest possible prefix, as GNU tar does); the split is
/// valid if the remaining name is 1..=100 bytes. The longest prefix gives the
/// shortest name, so if this split fails no other split can succeed.
/// Returns `None` if the path cannot be represented.
pub(crate) fn split_ustar_path(path: &str) -> Option<(&str, &str)> {
    if path.len() <= NAME_LEN {
        return Some(("", path));
    }
    let bytes = path.as_bytes();
    // The separator may sit at index PREFIX_LEN at most (prefix = [..PREFIX_LEN]).
    let window = &bytes[..bytes.len().min(PREFIX_LEN + 1)];
    let slash = window.iter().rposition(|&b| b == b'/')?;
    let (prefix, name) = (&path[..slash], &path[slash + 1..]);
    if prefix.is_empty() || name.is_empty() || name.len() > NAME_LEN {
        return None;
    }
    Some((prefix, name))
}

/// Displays an untrusted path inside an error message: quoted, with control
/// characters, bidi overrides and other invisible characters escaped
/// (`str::escape_debug`), so a hostile name cannot forge terminal output.
pub(crate) struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.0.escape_debug())
    }
}

/// `" in entry \"path\""` when the entry is known, else nothing.
fn at(path: &Option<String>) -> String {
    match path {
        Some(p) => format!(" in entry {}", Shown(p)),
        None => String::new(),
    }
}

/// Human-readable name of a tar typeflag, for error messages.
pub(crate) fn typeflag_name(flag: u8) -> &'static str {
    match flag {
        b'0' | 0 => "regular file",
        b'1' => "hard link",
        b'2' => "symbolic link",
        b'3' => "character device",
        b'4' => "block device",
        b'5' => "directory",
        b'6' => "FIFO",
        b'7' => "contiguous file",
        b'x' => "PAX extended header",
        b'g' => "PAX global header",
        b'L' => "GNU long name",
        b'K' => "GNU long link name",
        b'S' => "GNU sparse file",
        b'D' => "GNU dump directory",
        b'M' => "GNU multi-volume continuation",
        b'V' => "GNU volume label",
        _ => "unknown type",
    }
}

/// Shows a typeflag byte as `'c' (name)` or `0xNN (name)`.
fn shown_flag(flag: &u8) -> String {
    let flag = *flag;
    let name = typeflag_name(flag);
    if flag.is_ascii_graphic() { format!("'{}' ({name})", flag as char) } else { format!("0x{flag:02x} ({name})") }
}

/// Everything that can go wrong writing or reading the container.
///
/// [`ArchiveError::code`] gives a stable machine-readable reason code.
/// Paths in messages are quoted and escaped (see `Shown`).
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The input is not a well-formed bundle container: not a zstd frame,
    /// no content checksum, corrupt or truncated compressed data, checksum
    /// mismatch, bad header checksum, wrong ustar magic, unparsable numeric
    /// field, non-zero padding, truncated entry or missing end marker.
    #[error("malformed archive{}: {reason}", at(.path))]
    Malformed {
        /// The entry being read, when known.
        path: Option<String>,
        /// What was wrong.
        reason: String,
    },
    /// A header whose typeflag is not a regular file (`'0'` or NUL).
    #[error(
        "unsupported entry type {} for entry {}: only regular files are allowed",
        shown_flag(.typeflag), Shown(.path)
    )]
    UnsupportedEntryType {
        /// The header's path, lossily decoded; not validated.
        path: String,
        /// The raw typeflag byte.
        typeflag: u8,
    },
    /// An entry path that breaks the rules of [`check_path`].
    #[error("unsafe path {}: {problem}", Shown(.path))]
    UnsafePath {
        /// The path (lossily decoded if it was not UTF-8).
        path: String,
        /// Which rule it breaks.
        problem: PathProblem,
    },
    /// An entry mode other than exactly 0o644 or 0o755.
    #[error("unsafe mode {mode:#o} for entry {}: only 0o644 and 0o755 are allowed", Shown(.path))]
    UnsafeMode {
        /// The entry path.
        path: String,
        /// The mode found in the header.
        mode: u64,
    },
    /// A size, count or zstd window beyond the configured [`Limits`], or a
    /// value the ustar format cannot represent when writing (entry of 8 GiB
    /// or more).
    #[error("limit exceeded{}: {what} is {value}, the limit is {limit}", at(.path))]
    LimitExceeded {
        /// The entry concerned, when there is one.
        path: Option<String>,
        /// Which quantity.
        what: &'static str,
        /// The value found (or the smallest value known to be reached).
        value: u64,
        /// The largest value allowed.
        limit: u64,
    },
    /// Bytes after the end of the archive: non-zero or too many bytes after
    /// the tar end marker inside the frame, or anything (a second frame, a
    /// skippable frame, garbage) after the zstd frame.
    #[error("trailing data after the archive: {reason}")]
    TrailingData {
        /// What was found.
        reason: String,
    },
    /// The seek table after the frames disagrees with the frames themselves (their number or
    /// sizes), or is not a well-formed table. The frames are what is read; a table is only an
    /// index, and one that misleads is refused.
    #[error("the seek table disagrees with the zstd frames: {reason}")]
    SeekTable {
        /// What disagreed.
        reason: String,
    },
    /// The path cannot be stored in a ustar header without extensions (no
    /// `/` splits it into a prefix of at most 155 bytes and a name of at
    /// most 100 bytes). Reported with the same code as an unsafe path.
    #[error(
        "path {} cannot be stored in a ustar header (needs a '/' splitting it into <=155 + <=100 bytes)",
        Shown(.path)
    )]
    PathTooLong {
        /// The path.
        path: String,
    },
    /// While packing, a source file yielded a different number of bytes
    /// than the size given for it (it changed while being packed).
    #[error("source file {} changed while packing: {reason}", Shown(.path))]
    SourceChanged {
        /// The entry path.
        path: String,
        /// What differed.
        reason: String,
    },
    /// An I/O error from the underlying reader or writer, or an invalid
    /// argument (compression level, mtime, limits).
    #[error("I/O error{}: {source}", at(.path))]
    Io {
        /// The entry concerned, when known.
        path: Option<String>,
        /// The underlying error.
        source: io::Error,
    },
}

impl ArchiveError {
    /// Stable reason code, suitable for machine-readable output.
    pub fn code(&self) -> &'static str {
        match self {
            ArchiveError::Malformed { .. } => "malformed_archive",
            ArchiveError::UnsupportedEntryType { .. } => "unsupported_entry_type",
            ArchiveError::UnsafePath { .. } => "unsafe_path",
            ArchiveError::UnsafeMode { .. } => "unsafe_mode",
            ArchiveError::LimitExceeded { .. } => "limit_exceeded",
            ArchiveError::TrailingData { .. } => "trailing_data",
            ArchiveError::SeekTable { .. } => "seek_table_mismatch",
            ArchiveError::PathTooLong { .. } => "unsafe_path",
            ArchiveError::SourceChanged { .. } => "source_changed",
            ArchiveError::Io { .. } => "io_error",
        }
    }

    pub(crate) fn malformed(path: Option<&str>, reason: impl Into<String>) -> Self {
        ArchiveError::Malformed { path: path.map(str::to_owned), reason: reason.into() }
    }

    pub(crate) fn invalid_argument(reason: String) -> Self {
        ArchiveError::Io { path: None, source: io::Error::new(io::ErrorKind::InvalidInput, reason) }
    }
}

/// Recovers an [`ArchiveError`] that travelled through an `io::Error` (as
/// [`Entry`]'s `Read` impl does); any other `io::Error` becomes
/// [`ArchiveError::Io`]. So `io::copy(&mut entry, ..).map_err(ArchiveError::from)`
/// keeps the precise reason code.
impl From<io::Error> for ArchiveError {
    fn from(e: io::Error) -> Self {
        if !e.get_ref().is_some_and(|inner| inner.is::<ArchiveError>()) {
            return ArchiveError::Io { path: None, source: e };
        }
        let kind = e.kind();
        match e.into_inner().map(|inner| inner.downcast::<ArchiveError>()) {
            Some(Ok(inner)) => *inner,
            // Unreachable after the `is` check above, kept total anyway.
            Some(Err(other)) => ArchiveError::Io { path: None, source: io::Error::new(kind, other) },
            None => ArchiveError::Io { path: None, source: io::Error::from(kind) },
        }
    }
}

/// Reading or writing an archive failed under a command (a bundle that is judged gets a
/// rejection instead): the file system's fault, or a source that changed while packed.
impl crate::error_code::Coded for ArchiveError {
    fn code(&self) -> crate::error_code::ErrorCode {
        crate::error_code::ErrorCode::IoError
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_path_accepts_ordinary_paths() {
        for ok in [
            "a",
            "manifest.toml",
            "src/agent.py",
            "a/b/c/d.txt",
            ".hidden",
            "..x/y..",
            "dir/.config",
            "ünïcødé/文件.md",
            &"x".repeat(255),
        ] {
            assert_eq!(check_path(ok), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn check_path_rejects_each_rule() {
        let long = "x".repeat(256);
        let cases: &[(&str, PathProblem)] = &[
            ("", PathProblem::Empty),
            (&long, PathProblem::TooLong(256)),
            ("/etc/passwd", PathProblem::Absolute),
            ("/", PathProblem::Absolute),
            ("a/", PathProblem::TrailingSlash),
            ("a\\b", PathProblem::Backslash),
            ("a\0b", PathProblem::ControlCharacter),
            ("a\nb", PathProblem::ControlCharacter),
            ("a\u{7f}", PathProblem::ControlCharacter),
            ("a\u{85}", PathProblem::ControlCharacter),
            ("a//b", PathProblem::EmptyComponent),
            ("./a", PathProblem::DotComponent),
            ("a/./b", PathProblem::DotComponent),
            ("..", PathProblem::DotDotComponent),
            ("../x", PathProblem::DotDotComponent),
            ("a/../../x", PathProblem::DotDotComponent),
            ("a/..", PathProblem::DotDotComponent),
        ];
        for (path, want) in cases {
            assert_eq!(check_path(path), Err(*want), "{path:?}");
        }
    }

    #[test]
    fn split_fits_short_paths_in_name() {
        let p = "a".repeat(100);
        assert_eq!(split_ustar_path(&p), Some(("", p.as_str())));
    }

    #[test]
    fn split_uses_longest_prefix() {
        let p = format!("{}/{}/{}", "a".repeat(60), "b".repeat(60), "c".repeat(30));
        let (prefix, name) = split_ustar_path(&p).unwrap();
        assert_eq!(prefix, format!("{}/{}", "a".repeat(60), "b".repeat(60)));
        assert_eq!(name, "c".repeat(30));
    }

    #[test]
    fn split_limits() {
        // Prefix of exactly 155 bytes and name of exactly 100 bytes.
        let p = format!("{}/{}", "p".repeat(155), "n".repeat(100));
        assert_eq!(p.len(), 256);
        let (prefix, name) = split_ustar_path(&p).unwrap();
        assert_eq!((prefix.len(), name.len()), (155, 100));
        // Prefix of 156 bytes: the only slash is too far.
        let p = format!("{}/{}", "p".repeat(156), "n");
        assert_eq!(split_ustar_path(&p), None);
        // Name of 101 bytes.
        let p = format!("{}/{}", "p".repeat(10), "n".repeat(101));
        assert_eq!(split_ustar_path(&p), None);
        // No slash at all.
        assert_eq!(split_ustar_path(&"x".repeat(101)), None);
    }

    #[test]
    fn codes_are_stable() {
        let e = ArchiveError::PathTooLong { path: "x".into() };
        assert_eq!(e.code(), "unsafe_path");
        let e = ArchiveError::malformed(None, "x");
        assert_eq!(e.code(), "malformed_archive");
    }

    #[test]
    fn messages_escape_hostile_paths() {
        let e = ArchiveError::UnsafeMode { path: "evil\u{1b}[31m\u{202e}txt.sh\n".into(), mode: 0o4755 };
        let msg = e.to_string();
        assert!(!msg.chars().any(|c| c.is_control()), "{msg:?}");
        assert!(!msg.contains('\u{202e}'), "{msg:?}");
        assert!(msg.contains("\\u{1b}[31m\\u{202e}txt.sh\\n"), "{msg:?}");
        assert!(msg.contains("0o4755"), "{msg:?}");
    }

    #[test]
    fn archive_error_survives_io_error_round_trip() {
        let inner = ArchiveError::TrailingData { reason: "x".into() };
        let io = io::Error::other(inner);
        assert_eq!(ArchiveError::from(io).code(), "trailing_data");
        let plain = io::Error::new(io::ErrorKind::PermissionDenied, "nope");
        let e = ArchiveError::from(plain);
        assert_eq!(e.code(), "io_error");
        assert!(e.to_string().contains("nope"));
    }
}
