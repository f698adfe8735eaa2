//! BLAKE3 digests of files, as `b3sum` computes them.
//!
//! Large files are hashed with BLAKE3's own multithreading (rayon) over big read buffers;
//! agents with many files are hashed one file per core (see `ops::lock`). Files are read, not
//! memory-mapped: a file truncated while mapped would crash the process with SIGBUS.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Files at least this large are hashed with all cores.
const PARALLEL_FROM: u64 = 8 << 20;
const CHUNK: usize = 4 << 20;

/// The digest and byte count of a file's contents.
pub fn hash_file(path: &Path) -> io::Result<(blake3::Hash, u64)> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut hasher = blake3::Hasher::new();
    if len < PARALLEL_FROM {
        let size = io::copy(&mut file, &mut hasher)?;
        return Ok((hasher.finalize(), size));
    }
    let mut buf = vec![0u8; CHUNK];
    let mut size = 0u64;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match file.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if filled == 0 {
            break;
        }
        hasher.update_rayon(&buf[..filled]);
        size += filled as u64;
    }
    Ok((hasher.finalize(), size))
}
