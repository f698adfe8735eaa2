//! Random access to a seekable bundle: the bytes of one entry, decoding only the frames that
//! hold it (`bundle cat`, `VerifiedBundle.read`).
//!
//! Why this file exists: the seek table says where each frame starts in the file and in the tar
//! stream, so one entry's frames can be found without decoding the ones before it. The table is
//! not signed and may lie; every frame taken is checked against it as the verifier checks the
//! whole file: its header (format reference §2.1), its blocks walked to exactly the table's
//! compressed size, its content checksum, and its content exactly the table's decompressed size
//! (else `seek_table_mismatch`). The entry's header must then be the one expected, and the
//! caller holds the data to the signed manifest's digest.
//!
//! Memory: one frame at a time, compressed and decoded ([`MAX_BUFFERED_FRAME`] and
//! [`MAX_FRAME_CONTENT`] at most); a table with a larger frame is not used ([`Seekable::open`]
//! gives `None`, and the caller reads the bundle from its start).

use std::io::{Read, Seek, SeekFrom, Write};

use super::decode::{self, Decoded, MAX_BUFFERED_FRAME, MAX_FRAME_CONTENT};
use super::frames::{self, Walker};
use super::read::parse_header;
use super::write::padding_for;
use super::{ArchiveError, BLOCK, SeekTable};

/// A bundle file with a usable seek table.
pub struct Seekable<F> {
    file: F,
    max_window_log: u32,
    /// Per frame: where it starts in the file and in the tar stream, and its two sizes.
    frames: Vec<Span>,
}

#[derive(Debug, Clone, Copy)]
struct Span {
    file_at: u64,
    tar_at: u64,
    compressed: u64,
    decompressed: u64,
}

fn mismatch(reason: String) -> ArchiveError {
    ArchiveError::SeekTable { reason }
}

impl<F: Read + Seek> Seekable<F> {
    /// Reads the seek table at the end of `file`. `Ok(None)` when there is none, or when a
    /// frame is too large to be taken on its own; a malformed table is `seek_table_mismatch`.
    pub fn open(mut file: F, max_window_log: u32) -> Result<Option<Self>, ArchiveError> {
        let io_err = |source| ArchiveError::Io { path: None, source };
        let len = file.seek(SeekFrom::End(0)).map_err(io_err)?;
        let read_at = |at: u64, buf: &mut [u8]| {
            file.seek(SeekFrom::Start(at))?;
            file.read_exact(buf)
        };
        // Each frame takes at least 13 bytes (header, one block header, checksum).
        let Some(table) = SeekTable::read_from(len, read_at, len / 13 + 1)? else { return Ok(None) };
        let mut frames = Vec::with_capacity(table.frames.len());
        let (mut file_at, mut tar_at) = (0u64, 0u64);
        for f in &table.frames {
            let (compressed, decompressed) = (u64::from(f.compressed), u64::from(f.decompressed));
            if compressed > MAX_BUFFERED_FRAME as u64 || decompressed > MAX_FRAME_CONTENT {
                return Ok(None);
            }
            frames.push(Span { file_at, tar_at, compressed, decompressed });
            file_at += compressed;
            tar_at += decompressed;
        }
        Ok(Some(Seekable { file, max_window_log, frames }))
    }

    /// Streams the data of the entry whose header starts at `offset` of the tar stream into
    /// `out` and returns its BLAKE3, after checking that the header there is a valid header of
    /// `path`, `size` bytes, executable or not as given (`malformed_archive` otherwise).
    /// Nothing written to `out` may be used unless the caller then finds the hash it expects.
    pub fn read_entry(
        &mut self,
        offset: u64,
        path: &str,
        size: u64,
        executable: bool,
        out: &mut dyn Write,
    ) -> Result<blake3::Hash, ArchiveError> {
        let end = offset + BLOCK as u64 + size + padding_for(size) as u64;
        let first = self.frames.partition_point(|f| f.tar_at + f.decompressed <= offset);
        let mut header = Vec::with_capacity(BLOCK);
        let mut hasher = blake3::Hasher::new();
        let mut data_left = size;
        let mut at = offset;
        for i in first..self.frames.len() {
            if at >= end {
                break;
            }
            let span = self.frames[i];
            let content = self.frame(i)?;
            let from = (at - span.tar_at) as usize;
            let to = (end.min(span.tar_at + span.decompressed) - span.tar_at) as usize;
            let mut piece = &content[from..to];
            if header.len() < BLOCK {
                let n = piece.len().min(BLOCK - header.len());
                header.extend_from_slice(&piece[..n]);
                piece = &piece[n..];
                if header.len() == BLOCK {
                    self.check_header(&header, path, size, executable)?;
                }
            }
            let n = piece.len().min(data_left as usize);
            hasher.update(&piece[..n]);
            out.write_all(&piece[..n]).map_err(|source| ArchiveError::Io { path: Some(path.to_owned()), source })?;
            data_left -= n as u64;
            at = span.tar_at + to as u64;
        }
        if at < end {
            return Err(mismatch(format!("the seek table's frames end before entry {path:?} does")));
        }
        Ok(hasher.finalize())
    }

    /// Holds every frame before the one that holds tar offset `offset` to the table (each
    /// decoded, one at a time): a read that found other bytes than the signed ones at `offset`
    /// calls this, so that a table that lies about where frames start in the tar stream is
    /// `seek_table_mismatch`, as the verifier that decodes every frame calls it, and not a
    /// damaged entry. Costs a decode from the start, only when a read already failed.
    pub fn check_frames_before(&mut self, offset: u64) -> Result<(), ArchiveError> {
        let first = self.frames.partition_point(|f| f.tar_at + f.decompressed <= offset);
        for i in 0..first {
            self.frame(i)?;
        }
        Ok(())
    }

    fn check_header(&self, block: &[u8], path: &str, size: u64, executable: bool) -> Result<(), ArchiveError> {
        let block: &[u8; BLOCK] = block.try_into().expect("one block");
        let h = parse_header(block)?;
        if h.path != path || h.size != size || h.executable != executable {
            return Err(ArchiveError::malformed(
                Some(path),
                format!("the entry where {path:?} belongs is {:?} ({} bytes)", h.path, h.size),
            ));
        }
        Ok(())
    }

    /// Frame `i`, decoded and checked against the table.
    fn frame(&mut self, i: usize) -> Result<Vec<u8>, ArchiveError> {
        let span = self.frames[i];
        let io_err = |source| ArchiveError::Io { path: None, source };
        let mut bytes = vec![0u8; span.compressed as usize];
        self.file.seek(SeekFrom::Start(span.file_at)).map_err(io_err)?;
        self.file.read_exact(&mut bytes).map_err(io_err)?;
        let n = i + 1;
        if bytes.len() < 4 {
            return Err(mismatch(format!("frame {n} is {} bytes in the seek table", bytes.len())));
        }
        let mut rest = &bytes[4..];
        let header = match frames::read_header(&bytes[..4], &mut rest, 1u64 << self.max_window_log) {
            Ok(h) => h,
            Err(ArchiveError::Malformed { reason, .. }) => {
                return Err(mismatch(format!("frame {n} is not a valid frame where the seek table puts it: {reason}")));
            }
            Err(e) => return Err(e),
        };
        let mut walker = Walker::new(&header);
        let mut scratch = Vec::new();
        let mut walk = Ok(());
        while walk.is_ok() && !walker.done() {
            scratch.clear();
            walk = walker.read_into(&mut rest, &mut scratch, 64 << 10);
        }
        if walk.is_err() || !rest.is_empty() {
            return Err(mismatch(format!("frame {n} does not end where the seek table says")));
        }
        let Decoded { data, fault } =
            decode::decode_whole(&bytes, Vec::new(), &header, self.max_window_log, MAX_FRAME_CONTENT);
        if let Some(fault) = fault {
            return Err(fault.into_error(None, self.max_window_log));
        }
        if data.len() as u64 != span.decompressed {
            return Err(mismatch(format!(
                "frame {n} holds {} bytes; the seek table says {}",
                data.len(),
                span.decompressed
            )));
        }
        Ok(data)
    }
}
