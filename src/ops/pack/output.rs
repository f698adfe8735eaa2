//! The bundle file `pack` writes: a temporary file beside the output, compared on the way with
//! the bundle already at the output, and held back while it is the same.
//!
//! Why held back: a pack over its own previous output (the same agent, locked, at the same
//! level) gives the same bytes, and the old bundle is then left in place ("unchanged"). Writing
//! the new bytes anyway (728 MB for the 1 GiB bench agent) into fresh page-cache pages, asking
//! for their writeback, and deleting them made that pack cost 1.61 × a pack to a new path on the
//! 2-vCPU Xeon (3.33 s against 2.06 s, 1.5 s more system time, bench of 2026-11-28). Now the
//! new bytes go to the temporary file only from the first difference on, and only when they are
//! to replace the old bundle (`--force`; without it a difference fails the pack, so from there
//! on nothing is written at all): the bytes before it (the same as the old bundle's) are copied
//! from the old bundle first, read from the same open file and checked against a BLAKE3 of what
//! was compared, so that an old bundle changed while packing over it gives an error, never a
//! new bundle with someone else's bytes in it. Without `--force` those bytes are never copied,
//! so they are not hashed: 728 MB of BLAKE3 less in every pack over an unchanged bundle.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest as _, Sha256};

use crate::atomic;

/// How much written bundle to gather before asking for it to go to disk.
const WRITEBACK_CHUNK: u64 = 32 << 20;

/// The bundle file being written, remembering whether a write to it failed, so that a full
/// disk is reported against the bundle rather than the agent file being archived. Writeback
/// starts every [`WRITEBACK_CHUNK`] so that it overlaps compression instead of following it.
/// It is written on the archive writer's writing thread, so it owns its handle.
pub(super) struct BundleOutput {
    file: File,
    failed: Arc<AtomicBool>,
    writeback: atomic::Writeback,
    unsynced: u64,
    /// The SHA-256 of the bundle's bytes as they go by (the subject digest of its
    /// attestations), not in a second pass; only when attesting: for a 728 MB bundle it cost
    /// 0.43 s of CPU (6.8% of a pack's samples on the 2-vCPU Xeon) that nothing then read.
    sha256: Option<Sha256>,
    /// The bundle already at the output, while the bytes so far are the same as its first
    /// ones (held back, not written).
    existing: Option<Compare>,
    /// What a difference from the bundle at the output means. Kept (no `--force`), it fails
    /// the pack: from the first one on nothing is written, and the bytes held back are never
    /// copied, so they are not hashed either.
    on_difference: OnDifference,
    /// The bytes differ from the bundle at the output, which is kept: nothing is written.
    differs: bool,
}

/// What `pack` does with a bundle already at the output whose bytes differ from the new ones.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum OnDifference {
    /// Replace it (`--force`): every byte goes to the temporary file.
    Replace,
    /// Keep it and fail: nothing needs to be written.
    Keep,
}

impl BundleOutput {
    /// Writes to `file` (the temporary file), comparing with `existing` (the bundle at the
    /// output, if any, and what a difference from it means) and hashing with SHA-256 when
    /// `sha256`.
    pub fn new(file: File, failed: Arc<AtomicBool>, existing: Option<(File, OnDifference)>, sha256: bool) -> Self {
        let writeback = atomic::Writeback::new(&file);
        let on_difference = existing.as_ref().map_or(OnDifference::Replace, |(_, on)| *on);
        BundleOutput {
            file,
            failed,
            writeback,
            unsynced: 0,
            sha256: sha256.then(Sha256::new),
            // Attesting, the SHA-256 of the bytes so far is the check of the bytes held back;
            // kept, they are never copied.
            existing: existing.map(|(file, _)| Compare::new(file, !sha256 && on_difference == OnDifference::Replace)),
            on_difference,
            differs: false,
        }
    }

    /// After the last byte: whether the bundle at the output holds exactly these bytes (then
    /// nothing was written; else every byte is in the temporary file), and their SHA-256 when
    /// asked for.
    pub fn finish(mut self) -> io::Result<(bool, Option<[u8; 32]>)> {
        let unchanged = match self.existing.take() {
            Some(mut old) => {
                let same = old.at_end();
                if !same {
                    self.differ(old)?;
                }
                same
            }
            None => false,
        };
        self.flush()?;
        Ok((unchanged, self.sha256.map(|h| h.finalize().into())))
    }

    /// At the first difference from the old bundle: the bytes held back go first, or, when the
    /// old bundle is kept, nothing is written from now on.
    fn differ(&mut self, old: Compare) -> io::Result<()> {
        match self.on_difference {
            OnDifference::Keep => {
                self.differs = true;
                Ok(())
            }
            OnDifference::Replace => self.write_held(old),
        }
    }

    /// Writes the bytes held back: the old bundle's first bytes, read again from the same open
    /// file, checked against what was compared: its BLAKE3, or when attesting the SHA-256 of
    /// the bytes so far (exactly those: this runs before the next bytes are hashed).
    fn write_held(&mut self, mut old: Compare) -> io::Result<()> {
        old.file.rewind()?;
        let (expected, mut copied) = match old.hash.take() {
            Some(blake3) => (Check::Blake3(Box::new(blake3)), Check::Blake3(Box::default())),
            None => {
                let so_far = self.sha256.clone().ok_or_else(|| io::Error::other("no digest of the bytes compared"))?;
                (Check::Sha256(so_far), Check::Sha256(Sha256::new()))
            }
        };
        let mut left = old.held;
        let mut buf = std::mem::take(&mut old.buf);
        buf.resize(1 << 20, 0);
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            old.file.read_exact(&mut buf[..n]).map_err(|e| changed(&e.to_string()))?;
            copied.update(&buf[..n]);
            self.write_out(&buf[..n])?;
            left -= n as u64;
        }
        if copied.finish() != expected.finish() {
            return Err(changed("its bytes are not those compared"));
        }
        Ok(())
    }

    fn write_out(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes).inspect_err(|_| self.failed.store(true, Ordering::Relaxed))?;
        self.unsynced += bytes.len() as u64;
        if self.unsynced >= WRITEBACK_CHUNK {
            self.writeback.request();
            self.unsynced = 0;
        }
        Ok(())
    }
}

fn changed(how: &str) -> io::Error {
    io::Error::other(format!(
        "the bundle already at the output changed while packing over it ({how}); pack again when nothing else writes it"
    ))
}

impl Write for BundleOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(old) = self.existing.as_mut()
            && !old.next(buf)
        {
            // The first difference: what was held back goes first (or nothing, kept).
            let old = self.existing.take().expect("checked above");
            self.differ(old)?;
        }
        if let Some(sha256) = self.sha256.as_mut() {
            sha256.update(buf);
        }
        if self.existing.is_none() && !self.differs {
            self.write_out(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush().inspect_err(|_| self.failed.store(true, Ordering::Relaxed))
    }
}

/// Compares a file with a stream of bytes, read alongside it: one read of the old bundle while
/// the new one is made, instead of reading both again afterwards (which, with the old one's
/// cache dropped before the pack, was a second full read from disk per repack).
///
/// The old bundle's cache is kept: when it is left in place (the same bytes), the gate that
/// reads it next finds it cached (dropping it made the next `verify` of a 728 MB bundle read
/// from disk, 0.72 s -> 0.9-1.2 s).
struct Compare {
    file: File,
    buf: Vec<u8>,
    /// The stream's bytes so far, all the same as the file's first ones: their BLAKE3 (none
    /// when the output's SHA-256 covers them), and how many.
    hash: Option<blake3::Hasher>,
    held: u64,
}

/// A digest of the bytes held back, to check their copy against.
enum Check {
    Blake3(Box<blake3::Hasher>),
    Sha256(Sha256),
}

impl Check {
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Check::Blake3(h) => {
                h.update(bytes);
            }
            Check::Sha256(h) => h.update(bytes),
        }
    }

    fn finish(self) -> Vec<u8> {
        match self {
            Check::Blake3(h) => h.finalize().as_bytes().to_vec(),
            Check::Sha256(h) => h.finalize().to_vec(),
        }
    }
}

impl Compare {
    /// `hashed`: keep a BLAKE3 of the bytes compared (else the caller has a digest of them).
    fn new(file: File, hashed: bool) -> Self {
        Compare { file, buf: Vec::new(), hash: hashed.then(blake3::Hasher::new), held: 0 }
    }

    /// The next `bytes` of the stream: whether they are the file's next bytes too (a read
    /// error counts as a difference).
    fn next(&mut self, bytes: &[u8]) -> bool {
        self.buf.resize(bytes.len(), 0);
        let same = crate::read_full::read_full(&mut self.file, &mut self.buf).is_ok_and(|n| n == bytes.len())
            && self.buf == bytes;
        if same {
            if let Some(hash) = self.hash.as_mut() {
                hash.update(bytes);
            }
            self.held += bytes.len() as u64;
        }
        same
    }

    /// Whether nothing is left of the file after the bytes compared.
    fn at_end(&mut self) -> bool {
        self.file.read(&mut [0u8; 1]).is_ok_and(|n| n == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::{BundleOutput, OnDifference};
    use std::io::{Seek, Write};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    /// What packing `pieces` over a bundle holding `old` gives: whether it was the same, and
    /// the temporary file's bytes.
    fn over(old: &[u8], pieces: &[&[u8]], on_difference: OnDifference) -> (bool, Vec<u8>) {
        let plain = over_with(old, pieces, false, on_difference);
        assert_eq!(plain, over_with(old, pieces, true, on_difference), "attesting changed what was written");
        plain
    }

    fn over_with(old: &[u8], pieces: &[&[u8]], sha256: bool, on_difference: OnDifference) -> (bool, Vec<u8>) {
        let mut existing = tempfile::tempfile().unwrap();
        existing.write_all(old).unwrap();
        existing.rewind().unwrap();
        let temp = tempfile::NamedTempFile::new().unwrap();
        let file = temp.reopen().unwrap();
        let mut out =
            BundleOutput::new(file, Arc::new(AtomicBool::new(false)), Some((existing, on_difference)), sha256);
        pieces.iter().for_each(|p| out.write_all(p).unwrap());
        let (same, _) = out.finish().unwrap();
        (same, std::fs::read(temp.path()).unwrap())
    }

    #[test]
    fn the_same_bytes_write_nothing_and_any_difference_writes_them_all_or_none() {
        for on_difference in [OnDifference::Replace, OnDifference::Keep] {
            assert_eq!(over(b"abcdef", &[b"abc", b"def"], on_difference), (true, Vec::new()));
            assert_eq!(over(b"", &[], on_difference), (true, Vec::new()));
        }
        for (old, why) in [
            (&b"abcdefg"[..], "the old file is longer"),
            (b"abcde", "the old file is shorter"),
            (b"abcdEf", "one byte differs in the last piece"),
            (b"abXdef", "a difference early stays a difference"),
        ] {
            let replaced = over(old, &[b"abc", b"def"], OnDifference::Replace);
            assert_eq!(replaced, (false, b"abcdef".to_vec()), "{why}");
            // Kept, the pack fails: nothing was worth writing.
            assert_eq!(over(old, &[b"abc", b"def"], OnDifference::Keep), (false, Vec::new()), "{why}");
        }
    }

    #[test]
    fn an_old_bundle_changed_while_packing_over_it_is_an_error_not_its_bytes() {
        for sha256 in [false, true] {
            let mut existing = tempfile::NamedTempFile::new().unwrap();
            existing.write_all(b"abcdef").unwrap();
            let temp = tempfile::NamedTempFile::new().unwrap();
            let failed = Arc::new(AtomicBool::new(false));
            let old = Some((existing.reopen().unwrap(), OnDifference::Replace));
            let mut out = BundleOutput::new(temp.reopen().unwrap(), failed, old, sha256);
            out.write_all(b"abc").unwrap();
            // Someone rewrites the old bundle's first bytes after they were compared.
            std::fs::write(existing.path(), b"XYZdef").unwrap();
            let err = out.write_all(b"dXf").unwrap_err();
            assert!(err.to_string().contains("changed while packing over it"), "{err} (sha256: {sha256})");
            assert!(std::fs::read(temp.path()).unwrap().len() <= 3, "nothing after the check");
        }
    }
}
