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

/// A file hashed, with its metadata as opened and as after the last byte was read (the stat
/// cache stores a digest only if the two agree).
pub struct Hashed {
    pub hash: blake3::Hash,
    pub size: u64,
    pub before: Metadata,
    pub after: Metadata,
}

/// Files up to this size are read whole by [`hash_open_file`]: one `read` of the size `fstat`
/// gave, no second one to find the end (the size after the read confirms it), and the caller
/// may keep the bytes. `bundle check` of 20,000 small agents made 21 of its 80 system calls per
/// agent finding ends and reading again the files it had just hashed.
pub const WHOLE_UP_TO: u64 = 1 << 20;

/// Hashes an open file whose metadata as opened is `before`, keeping it and the metadata as
/// after the last byte was read.
/// A file of at most [`WHOLE_UP_TO`] bytes is read whole and its bytes are returned too, when
/// they are the whole file as far as the metadata after reading tells (else it is read on to
/// its end, hashed as any other, and no bytes are returned).
pub fn hash_open_file(mut file: File, before: Metadata) -> io::Result<(Hashed, Option<Vec<u8>>)> {
    let len = before.len();
    if len == 0 || len > WHOLE_UP_TO {
        let (hash, size) = hash_open(&file, len)?;
        let after = file.metadata()?;
        return Ok((Hashed { hash, size, before, after }, None));
    }
    let mut bytes = vec![0; len as usize];
    let n = read_full(&mut file, &mut bytes)?;
    bytes.truncate(n);
    let after = file.metadata()?;
    if after.len() == n as u64 {
        let hash = blake3::hash(&bytes);
        return Ok((Hashed { hash, size: after.len(), before, after }, Some(bytes)));
    }
    // It changed while it was read: what it holds now, to its end.
    let mut hasher = blake3::Hasher::new();
    hasher.update(&bytes);
    let more = io::copy(&mut file, &mut hasher)?;
    let after = file.metadata()?;
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
