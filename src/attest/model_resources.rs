//! The resources of an OpenSSF model signature, computed from a model folder's files: one
//! SHA-256 per file (`files` serialization), or one per shard of `shard_size` bytes named
//! `path:start:end` (`shards`), as `model_signing` 1.1.1 cuts them: shards end at every
//! multiple of the size and at the end of the file, and an empty file has none. The same
//! hasher serves a folder read from disk and a bundle's entries streaming by.

use sha2::{Digest as _, Sha256};

/// How a signature cuts a folder into resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One resource per file, named by its path.
    Files,
    /// One resource per shard of this many bytes (at least 1), named `path:start:end`.
    Shards(u64),
}

impl Layout {
    /// What a `[[models]]` entry's `shard_size` says.
    pub fn of(shard_size: Option<u64>) -> Layout {
        shard_size.map_or(Layout::Files, Layout::Shards)
    }
}

/// Hashes one file's bytes, fed in any chunks, into its resources.
pub struct ResourceHasher {
    name: String,
    layout: Layout,
    hasher: Sha256,
    /// Where the current shard starts, and how many bytes were fed.
    start: u64,
    at: u64,
    done: Vec<(String, [u8; 32])>,
}

impl ResourceHasher {
    /// A hasher for the file at `name` (its `/`-separated path inside the model folder).
    pub fn new(name: &str, layout: Layout) -> ResourceHasher {
        ResourceHasher { name: name.to_owned(), layout, hasher: Sha256::new(), start: 0, at: 0, done: Vec::new() }
    }

    pub fn update(&mut self, mut chunk: &[u8]) {
        let Layout::Shards(size) = self.layout else {
            self.hasher.update(chunk);
            return;
        };
        while !chunk.is_empty() {
            let room = self.start + size - self.at;
            let take = usize::try_from(room).unwrap_or(usize::MAX).min(chunk.len());
            self.hasher.update(&chunk[..take]);
            self.at += take as u64;
            chunk = &chunk[take..];
            if self.at == self.start + size {
                self.close_shard();
            }
        }
    }

    fn close_shard(&mut self) {
        let digest = self.hasher.finalize_reset().into();
        self.done.push((format!("{}:{}:{}", self.name, self.start, self.at), digest));
        self.start = self.at;
    }

    /// The file's resources: its name and SHA-256, or each shard's name and SHA-256.
    pub fn finish(mut self) -> Vec<(String, [u8; 32])> {
        match self.layout {
            Layout::Files => vec![(self.name, self.hasher.finalize().into())],
            Layout::Shards(_) => {
                if self.at > self.start {
                    self.close_shard();
                }
                self.done
            }
        }
    }
}

/// The resources of the file at `path` on disk, named by `name`.
pub fn of_file(path: &std::path::Path, name: &str, layout: Layout) -> std::io::Result<Vec<(String, [u8; 32])>> {
    use std::io::Read as _;
    let mut file = crate::regular_file::open(path, crate::regular_file::Links::Refuse)
        .map_err(crate::regular_file::ReadError::into_io)?;
    let mut hasher = ResourceHasher::new(name, layout);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf)? {
            0 => break,
            n => hasher.update(&buf[..n]),
        }
    }
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(layout: Layout, len: usize, chunk: usize) -> Vec<String> {
        let data = vec![7u8; len];
        let mut h = ResourceHasher::new("w.bin", layout);
        for c in data.chunks(chunk.max(1)) {
            h.update(c);
        }
        h.finish().into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn shards_end_at_every_multiple_and_at_the_end_and_an_empty_file_has_none() {
        assert_eq!(names(Layout::Shards(4), 10, 3), ["w.bin:0:4", "w.bin:4:8", "w.bin:8:10"]);
        assert_eq!(names(Layout::Shards(4), 8, 8), ["w.bin:0:4", "w.bin:4:8"]);
        assert!(names(Layout::Shards(4), 0, 1).is_empty());
        assert_eq!(names(Layout::Files, 0, 1), ["w.bin"]);
    }

    #[test]
    fn a_shard_digest_is_the_sha256_of_its_bytes_whatever_the_chunks() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut h = ResourceHasher::new("f", Layout::Shards(300));
        for c in data.chunks(7) {
            h.update(c);
        }
        let got = h.finish();
        let want: Vec<[u8; 32]> = data.chunks(300).map(|c| Sha256::digest(c).into()).collect();
        assert_eq!(got.iter().map(|(_, d)| *d).collect::<Vec<_>>(), want);
        assert_eq!(got[3].0, "f:900:1000");
    }
}
