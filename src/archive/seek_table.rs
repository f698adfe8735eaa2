//! The seek table: zstd's seekable format (facebook/zstd `contrib/seekable_format`, version
//! 0.1.0), a skippable frame after the data frames that gives each frame's compressed and
//! decompressed size, so a reader can find the frame holding a given offset of the tar stream
//! without decoding the ones before it.
//!
//! Why this file exists: the writer appends the table, the verifier checks it against the
//! frames it walked (the frames are the truth; a table that disagrees is
//! `seek_table_mismatch`), and `bundle cat` reads it from the end of the file to jump to one
//! entry. Layout (all little-endian): magic `0x184D2A5E`, Frame_Size, then per frame
//! Compressed_Size u32 and Decompressed_Size u32 (and a u32 checksum when the descriptor's bit 7
//! is set), then the footer: Number_Of_Frames u32, Seek_Table_Descriptor u8, magic
//! `0x8F92EAB1`. Our writer never sets the checksum flag: each frame carries its own content
//! checksum already.

use std::io::{self, Read};

use super::ArchiveError;
use super::frames::le32;

/// The skippable-frame magic number the seekable format uses.
pub(crate) const SEEK_TABLE_MAGIC: u32 = 0x184D_2A5E;
/// The last four bytes of a seekable file.
pub(crate) const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
/// Number_Of_Frames u32, Seek_Table_Descriptor u8, Seekable_Magic_Number u32.
pub(crate) const FOOTER: usize = 9;
/// Checksum_Flag in Seek_Table_Descriptor.
const CHECKSUM_FLAG: u8 = 0x80;
/// Reserved_Bits: must be zero.
const RESERVED: u8 = 0x7C;

/// One frame as the table (or the walk) sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameEntry {
    pub compressed: u32,
    pub decompressed: u32,
}

/// The whole table frame for `frames`, without checksums.
pub(crate) fn encode(frames: &[FrameEntry]) -> Vec<u8> {
    let size = frames.len() * 8 + FOOTER;
    let mut out = Vec::with_capacity(8 + size);
    out.extend_from_slice(&SEEK_TABLE_MAGIC.to_le_bytes());
    out.extend_from_slice(&(size as u32).to_le_bytes());
    for f in frames {
        out.extend_from_slice(&f.compressed.to_le_bytes());
        out.extend_from_slice(&f.decompressed.to_le_bytes());
    }
    out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    out.push(0);
    out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
    out
}

fn mismatch(reason: impl Into<String>) -> ArchiveError {
    ArchiveError::SeekTable { reason: reason.into() }
}

/// What the verifier saw of the frames it walked, in constant memory: their number and a hash
/// of their sizes (and of their content checksums, for a table that carries them).
#[derive(Default)]
pub(crate) struct Walked {
    pub frames: u64,
    sizes: blake3::Hasher,
    with_checksums: blake3::Hasher,
    /// A frame too large for the table's 32-bit fields.
    pub oversized: bool,
}

impl Walked {
    pub fn add(&mut self, compressed: u64, decompressed: u64, checksum: [u8; 4]) {
        self.frames += 1;
        match (u32::try_from(compressed), u32::try_from(decompressed)) {
            (Ok(c), Ok(d)) => {
                let mut entry = [0u8; 12];
                entry[..4].copy_from_slice(&c.to_le_bytes());
                entry[4..8].copy_from_slice(&d.to_le_bytes());
                entry[8..].copy_from_slice(&checksum);
                self.sizes.update(&entry[..8]);
                self.with_checksums.update(&entry);
            }
            _ => self.oversized = true,
        }
    }

    /// Checks the table frame that follows the data frames, its 4-byte magic already read, and
    /// that nothing follows it. Reads only as much as a table for the frames walked can hold.
    pub fn check<R: Read>(&self, input: &mut R) -> Result<(), ArchiveError> {
        let io_err = |source| ArchiveError::Io { path: None, source };
        let mut size = [0u8; 4];
        read_or(input, &mut size, "the seek table frame is cut short")?;
        let size = u64::from(le32(&size));
        let plain = self.frames * 8 + FOOTER as u64;
        let checked = self.frames * 12 + FOOTER as u64;
        if self.oversized || (size != plain && size != checked) {
            return Err(mismatch(format!(
                "the seek table frame is {size} bytes; for the {} frames of the bundle it would be {plain}",
                self.frames
            )));
        }
        let entry_len = if size == plain { 8 } else { 12 };
        let mut hasher = blake3::Hasher::new();
        let mut chunk = vec![0u8; 64 * 1024 / entry_len * entry_len];
        let mut left = self.frames * entry_len as u64;
        while left > 0 {
            let n = (chunk.len() as u64).min(left) as usize;
            read_or(input, &mut chunk[..n], "the seek table frame is cut short")?;
            hasher.update(&chunk[..n]);
            left -= n as u64;
        }
        let mut footer = [0u8; FOOTER];
        read_or(input, &mut footer, "the seek table frame is cut short")?;
        let (count, descriptor, magic) = (le32(&footer[..4]), footer[4], le32(&footer[5..]));
        if magic != SEEKABLE_MAGIC {
            return Err(mismatch("the seek table does not end with the seekable magic number 0x8F92EAB1"));
        }
        if descriptor & RESERVED != 0 {
            return Err(mismatch("the seek table descriptor sets reserved bits"));
        }
        if u64::from(count) != self.frames {
            return Err(mismatch(format!("the seek table lists {count} frames; the bundle has {}", self.frames)));
        }
        if (descriptor & CHECKSUM_FLAG != 0) != (entry_len == 12) {
            return Err(mismatch("the seek table's checksum flag does not fit its size"));
        }
        let walked = if entry_len == 8 { &self.sizes } else { &self.with_checksums };
        if hasher.finalize() != walked.finalize() {
            return Err(mismatch("the seek table's frame sizes are not those of the bundle's frames"));
        }
        let mut one = [0u8; 1];
        loop {
            match input.read(&mut one) {
                Ok(0) => return Ok(()),
                Ok(_) => {
                    return Err(ArchiveError::TrailingData { reason: "bytes after the seek table".into() });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(e)),
            }
        }
    }
}

fn read_or<R: Read>(input: &mut R, buf: &mut [u8], short: &str) -> Result<(), ArchiveError> {
    input.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            mismatch(short)
        } else {
            ArchiveError::Io { path: None, source: e }
        }
    })
}

/// A seek table read from the end of a file (by `bundle cat`): untrusted until each frame it
/// points to is decoded and found to be what it says.
#[derive(Debug)]
pub struct SeekTable {
    pub frames: Vec<FrameEntry>,
    /// Where the table frame starts: the compressed frames must fill the file up to there.
    pub table_offset: u64,
}

impl SeekTable {
    /// Reads the table of a file of `file_len` bytes through `read_at(offset, buf)`. `Ok(None)`
    /// when the file does not end with the seekable magic (a bundle of one frame, from an
    /// earlier release). At most `max_frames` entries are read.
    pub fn read_from(
        file_len: u64,
        mut read_at: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
        max_frames: u64,
    ) -> Result<Option<SeekTable>, ArchiveError> {
        let io_err = |source| ArchiveError::Io { path: None, source };
        if file_len < (8 + FOOTER) as u64 {
            return Ok(None);
        }
        let mut footer = [0u8; FOOTER];
        read_at(file_len - FOOTER as u64, &mut footer).map_err(io_err)?;
        if le32(&footer[5..]) != SEEKABLE_MAGIC {
            return Ok(None);
        }
        let (count, descriptor) = (u64::from(le32(&footer[..4])), footer[4]);
        if descriptor & RESERVED != 0 {
            return Err(mismatch("the seek table descriptor sets reserved bits"));
        }
        if count > max_frames {
            return Err(mismatch(format!("the seek table lists {count} frames, more than {max_frames}")));
        }
        let entry_len: u64 = if descriptor & CHECKSUM_FLAG != 0 { 12 } else { 8 };
        let size = count * entry_len + FOOTER as u64;
        let Some(table_offset) = file_len.checked_sub(size + 8) else {
            return Err(mismatch("the seek table is longer than the file"));
        };
        let mut raw = vec![0u8; (size + 8) as usize];
        read_at(table_offset, &mut raw).map_err(io_err)?;
        if le32(&raw[..4]) != SEEK_TABLE_MAGIC || u64::from(le32(&raw[4..8])) != size {
            return Err(mismatch("the seek table frame's header does not fit its footer"));
        }
        let frames: Vec<FrameEntry> = raw[8..8 + (count * entry_len) as usize]
            .chunks_exact(entry_len as usize)
            .map(|e| FrameEntry { compressed: le32(&e[..4]), decompressed: le32(&e[4..8]) })
            .collect();
        let total: u64 = frames.iter().map(|f| u64::from(f.compressed)).sum();
        if total != table_offset {
            return Err(mismatch(format!(
                "the seek table's frames add up to {total} bytes; the frames before it are {table_offset}"
            )));
        }
        Ok(Some(SeekTable { frames, table_offset }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_table_checks_against_the_same_frames_and_reads_back() {
        let frames =
            [FrameEntry { compressed: 100, decompressed: 4096 }, FrameEntry { compressed: 7, decompressed: 0 }];
        let table = encode(&frames);
        let mut walked = Walked::default();
        for f in &frames {
            walked.add(u64::from(f.compressed), u64::from(f.decompressed), [0; 4]);
        }
        walked.check(&mut &table[4..]).unwrap();
        let mut file = vec![0u8; 107];
        file.extend_from_slice(&table);
        let read_at = |at: u64, buf: &mut [u8]| {
            buf.copy_from_slice(&file[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        let read = SeekTable::read_from(file.len() as u64, read_at, 1000).unwrap().unwrap();
        assert_eq!(read.frames, frames);
        assert_eq!(read.table_offset, 107);

        let mut other = Walked::default();
        other.add(100, 4095, [0; 4]);
        other.add(7, 1, [0; 4]);
        assert_eq!(other.check(&mut &table[4..]).unwrap_err().code(), "seek_table_mismatch");
        let mut fewer = Walked::default();
        fewer.add(100, 4096, [0; 4]);
        assert_eq!(fewer.check(&mut &table[4..]).unwrap_err().code(), "seek_table_mismatch");
        let mut longer = table[4..].to_vec();
        longer.push(0);
        assert_eq!(walked.check(&mut &longer[..]).unwrap_err().code(), "trailing_data");
    }
}
