//! BLAKE3 digests of files, as `b3sum` computes them.
//!
//! Large files are hashed with BLAKE3's own multithreading (rayon) over big read buffers;
//! agents with many files are hashed one file per core (see `ops::lock`). Files are read, not
//! memory-mapped: a file truncated while mapped would crash the process with SIGBUS.

use std::fs::{File, Metadata};
use std::io;
use std::path::Path;

use crate::read_full::read_full;

/// Files at least this large are hashed with all cores.
const PARALLEL_FROM: u64 = 8 << 20;
const CHUNK: usize = 4 << 20;

/// The digest and byte count of a file's contents.
pub fn hash_file(path: &Path) -> io::Result<(blake3::Hash, u64)> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    hash_open(file, len)
}

/// A file hashed, with its metadata as opened and as after the last byte was read (the stat
/// cache stores a digest only if the two agree).
pub struct Hashed {
    pub hash: blake3::Hash,
    pub size: u64,
    pub before: Metadata,
    pub after: Metadata,
}

/// Like [`hash_file`], keeping the metadata of the file that was read.
pub fn hash_file_with_metadata(path: &Path) -> io::Result<Hashed> {
    let file = File::open(path)?;
    let before = file.metadata()?;
    let (hash, size) = hash_open(&file, before.len())?;
    let after = file.metadata()?;
    Ok(Hashed { hash, size, before, after })
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
