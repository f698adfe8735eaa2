//! BLAKE3 digests of files, as `b3sum` computes them.
//!
//! Large files are hashed with BLAKE3's own multithreading (rayon) over big read buffers;
//! agents with many files are hashed one file per core (see `ops::lock`). Files are read, not
//! memory-mapped: a file truncated while mapped would crash the process with SIGBUS.

use std::fs::{File, Metadata};
use std::io;

use crate::read_full::read_full;

/// Files at least this large are hashed with all cores.
const PARALLEL_FROM: u64 = 8 << 20;
const CHUNK: usize = 4 << 20;

/// A file hashed, with its metadata as opened and, when asked for ([`After::Stat`]), as after
/// the last byte was read (the stat cache stores a digest only if the two agree).
pub struct Hashed {
    pub hash: blake3::Hash,
    pub size: u64,
    pub before: Metadata,
    pub after: Option<Metadata>,
}

/// Whether [`hash_open_file`] takes the file's metadata again after reading it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum After {
    /// `fstat` again after the last byte (for the stat cache, which records a digest only for
    /// a file that did not change while it was hashed); a small file whose size then differs
    /// from the bytes read is read on to its end.
    Stat,
    /// No second `fstat`: a small file is the bytes of the size it had when opened (one that
    /// grew since is read as it was, one that shrank ends early), as
    /// [`regular_file::read`](crate::regular_file::read) reads a file. For a check without
    /// the stat cache: 5 of its 54 system calls per agent of the rich example.
    Skip,
}

/// Files up to this size are read whole by [`hash_open_file`]: one `read` of the size `fstat`
/// gave, no second one to find the end (the size after the read confirms it), and the caller
/// may keep the bytes. `bundle check` of 20,000 small agents made 21 of its 80 system calls per
/// agent finding ends and reading again the files it had just hashed.
pub const WHOLE_UP_TO: u64 = 1 << 20;

/// Hashes an open file whose metadata as opened is `before`, keeping it and, with
/// [`After::Stat`], the metadata as after the last byte was read.
/// A file of at most [`WHOLE_UP_TO`] bytes is read whole and its bytes are returned too, when
/// they are the whole file as far as the metadata after reading tells (else it is read on to
/// its end, hashed as any other, and no bytes are returned); with [`After::Skip`], the bytes of
/// the size it had when opened are the file.
pub fn hash_open_file(mut file: File, before: Metadata, after: After) -> io::Result<(Hashed, Option<Vec<u8>>)> {
    let stat_after = |file: &File| match after {
        After::Stat => file.metadata().map(Some),
        After::Skip => Ok(None),
    };
    let len = before.len();
    if len == 0 || len > WHOLE_UP_TO {
        let (hash, size) = hash_open(&file, len)?;
        let after = stat_after(&file)?;
        return Ok((Hashed { hash, size, before, after }, None));
    }
    let mut bytes = vec![0; len as usize];
    let n = read_full(&mut file, &mut bytes)?;
    bytes.truncate(n);
    let after = stat_after(&file)?;
    if after.as_ref().is_none_or(|a| a.len() == n as u64) {
        let hash = blake3::hash(&bytes);
        return Ok((Hashed { hash, size: n as u64, before, after }, Some(bytes)));
    }
    // It changed while it was read: what it holds now, to its end.
    let mut hasher = blake3::Hasher::new();
    hasher.update(&bytes);
    let more = io::copy(&mut file, &mut hasher)?;
    let after = stat_after(&file)?;
    Ok((Hashed { hash: hasher.finalize(), size: n as u64 + more, before, after }, None))
}

fn hash_open(mut file: impl io::Read, len: u64) -> io::Result<(blake3::Hash, u64)> {
    let mut hasher = blake3::Hasher::new();
    if len < PARALLEL_FROM {
        let size = io::copy(&mut file, &mut hasher)?;
        return Ok((hasher.finalize(), size));
    }
    let mut buf = vec![0u8; CHUNK];
    let mut size = 0u64;
    loop {
        let filled = read_full(&mut file, &mut buf)?;
        if filled == 0 {
            break;
        }
        hasher.update_rayon(&buf[..filled]);
        size += filled as u64;
    }
    Ok((hasher.finalize(), size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashed(path: &std::path::Path, after: After) -> (Hashed, Option<Vec<u8>>) {
        let file = File::open(path).unwrap();
        let before = file.metadata().unwrap();
        hash_open_file(file, before, after).unwrap()
    }

    #[test]
    fn a_file_hashes_the_same_with_or_without_the_stat_after_reading() {
        let dir = tempfile::tempdir().unwrap();
        for (name, len) in [("empty", 0usize), ("small", 4828), ("large", WHOLE_UP_TO as usize + 1)] {
            let path = dir.path().join(name);
            let content: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, &content).unwrap();
            let (stat, stat_bytes) = hashed(&path, After::Stat);
            let (skip, skip_bytes) = hashed(&path, After::Skip);
            assert_eq!(stat.hash, blake3::hash(&content), "{name}");
            assert_eq!(skip.hash, stat.hash, "{name}");
            assert_eq!((skip.size, stat.size), (len as u64, len as u64), "{name}");
            assert_eq!(stat.after.map(|m| m.len()), Some(len as u64), "{name}");
            assert!(skip.after.is_none(), "{name}");
            assert_eq!(skip_bytes, stat_bytes, "{name}");
            assert_eq!(skip_bytes.is_some(), len > 0 && len as u64 <= WHOLE_UP_TO, "{name}");
        }
    }
}
