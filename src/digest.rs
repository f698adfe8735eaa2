//! BLAKE3 digests of files, as `b3sum` computes them.

use std::fs::File;
use std::io;
use std::path::Path;

/// The digest and byte count of a file's contents.
pub fn hash_file(path: &Path) -> io::Result<(blake3::Hash, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = blake3::Hasher::new();
    let size = io::copy(&mut file, &mut hasher)?;
    Ok((hasher.finalize(), size))
}

/// The digest of bytes already in memory.
pub fn hash_bytes(bytes: &[u8]) -> blake3::Hash {
    blake3::hash(bytes)
}
