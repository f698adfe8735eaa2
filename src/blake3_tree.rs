//! The BLAKE3 hash of one input from pieces hashed apart: the head of an entry hashed on the
//! thread that decoded it, the rest where the rest is read.
//!
//! Why this file exists: an entry of a seekable bundle may start in one zstd frame and end in
//! another, and the frames are decoded on different threads. BLAKE3 is a tree of 1 KiB chunks, so
//! a piece of the input can be hashed on its own as long as the piece is a subtree of that tree:
//! a power of two of whole chunks, starting at a multiple of its own length (the input's last
//! subtree may be shorter, ending with a short chunk). Each subtree gives a chaining value;
//! merging them as [`blake3::Hasher`] merges its own subtrees gives the same hash as hashing the
//! input in one go. The rules are the `blake3::hazmat` module's (section 2.1 of the BLAKE3
//! paper); the tests compare every split against `blake3::hash`.

use blake3::hazmat::{ChainingValue, HasherExt, Mode, merge_subtrees_non_root, merge_subtrees_root};
use blake3::{CHUNK_LEN, Hasher};

const CHUNK: u64 = CHUNK_LEN as u64;

/// Chaining values a [`Chunks`] holds at most: enough for any run of whole chunks in a frame
/// decoded on another thread (at most 8 MiB: at most 13 subtrees up to the largest, 13 after).
const MAX_CVS: usize = 32;

/// The length of the subtree that starts at `pos` (a multiple of 1 KiB) of an input of `total`
/// bytes and ends at or before `end`: the largest power of two of chunks that `pos` is a multiple
/// of and that fits, never the whole input, or the input's last chunk when `end` is the input's
/// end; 0 when no subtree fits (less than a chunk before an `end` that is not the input's end,
/// or `pos` at the end).
pub(crate) fn next_subtree(pos: u64, end: u64, total: u64) -> u64 {
    debug_assert!(pos.is_multiple_of(CHUNK) && pos <= end && end <= total);
    if end == total && total - pos <= CHUNK {
        return total - pos;
    }
    let room = (end - pos) / CHUNK;
    if room == 0 {
        return 0;
    }
    let mut chunks = 1u64 << (63 - room.leading_zeros());
    if pos > 0 {
        chunks = chunks.min(1 << (pos / CHUNK).trailing_zeros());
    } else if chunks * CHUNK >= total {
        // The whole input is the root, not a subtree.
        chunks /= 2;
    }
    chunks * CHUNK
}

/// The chaining value of `bytes`, a subtree starting `pos` bytes into the input.
fn subtree(pos: u64, bytes: &[u8]) -> ChainingValue {
    let mut hasher = Hasher::new();
    hasher.set_input_offset(pos);
    hasher.update(bytes);
    hasher.finalize_non_root()
}

/// A hash computed ahead, where an entry's bytes were decoded (`archive::decode::prehash`).
pub(crate) enum Prehash {
    /// All of the entry's bytes.
    Whole(blake3::Hash),
    /// The first whole chunks of an entry that goes on in the next frames.
    Head(Box<Chunks>),
}

/// The whole chunks among some bytes of an input, hashed as subtrees: what a decoding thread
/// gives for the part of an entry its frame holds when the entry goes on past the frame (or
/// began before it). Holds its chaining values inline, so that making one allocates nothing.
#[derive(Clone)]
pub(crate) struct Chunks {
    /// The input's bytes covered, `[start, end)`: chunk boundaries (`end` may be the input's
    /// end), never the whole input.
    start: u64,
    end: u64,
    cvs: [ChainingValue; MAX_CVS],
    n: usize,
}

impl Chunks {
    /// The whole chunks of `bytes`, which are the bytes of an input of `total` bytes from
    /// `offset` on: from the first chunk boundary at or after `offset` to the last one at or
    /// before the bytes' end (or to the input's end, if they reach it). `None` when that is no
    /// chunk, or the whole input.
    pub(crate) fn of(bytes: &[u8], offset: u64, total: u64) -> Option<Chunks> {
        let stop = offset.checked_add(bytes.len() as u64).filter(|&s| s <= total)?;
        let start = offset.checked_next_multiple_of(CHUNK)?;
        let end = if stop == total { total } else { stop / CHUNK * CHUNK };
        if start >= end || (start == 0 && end == total) {
            return None;
        }
        let mut chunks = Chunks { start, end, cvs: [[0; 32]; MAX_CVS], n: 0 };
        let mut pos = start;
        while pos < end {
            let size = next_subtree(pos, end, total);
            if size == 0 || chunks.n == MAX_CVS {
                return None;
            }
            let from = (pos - offset) as usize;
            chunks.cvs[chunks.n] = subtree(pos, &bytes[from..from + size as usize]);
            chunks.n += 1;
            pos += size;
        }
        Some(chunks)
    }

    /// Where the covered bytes start in the input.
    #[cfg(test)]
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// Where the covered bytes end in the input.
    #[cfg(test)]
    pub(crate) fn end(&self) -> u64 {
        self.end
    }
}

/// The subtrees' chaining values so far, merged as `blake3::Hasher` merges its own: lazily,
/// so that the last ones can still become the root.
struct Stack {
    cvs: Vec<ChainingValue>,
    /// Chunks pushed so far.
    chunks: u64,
}

impl Stack {
    fn push(&mut self, cv: ChainingValue, len: u64) {
        // As `Hasher::push_cv`: merge what completes a subtree before the new one.
        let keep = self.chunks.count_ones() as usize;
        while self.cvs.len() > keep {
            let right = self.cvs.pop().expect("longer than keep");
            let left = self.cvs.pop().expect("longer than keep");
            self.cvs.push(merge_subtrees_non_root(&left, &right, Mode::Hash));
        }
        self.cvs.push(cv);
        self.chunks += len.div_ceil(CHUNK);
    }

    /// The root: every value merged from the right, the last merge as the root. `None` with
    /// fewer than two values (an input of one subtree has no parent node to be the root).
    fn root(mut self) -> Option<blake3::Hash> {
        let mut right = self.cvs.pop()?;
        let left = loop {
            let left = self.cvs.pop()?;
            if self.cvs.is_empty() {
                break left;
            }
            right = merge_subtrees_non_root(&left, &right, Mode::Hash);
        };
        Some(merge_subtrees_root(&left, &right, Mode::Hash))
    }
}

/// An input of more than one chunk hashed as it comes, in segments (each frame's part of an
/// entry), each segment's whole chunks as subtrees, the chunk that straddles two segments
/// kept until it is whole; a segment whose whole chunks were hashed elsewhere ([`Chunks`])
/// takes their chaining values instead.
pub(crate) struct Rest {
    stack: Stack,
    total: u64,
    /// Bytes of the input given so far.
    pos: u64,
    /// The chunk being gathered across segments (`pos - carry_len` is a chunk boundary).
    carry: [u8; CHUNK_LEN],
    carry_len: usize,
}

impl Rest {
    /// An input of `total` bytes (more than one chunk), from its start.
    pub(crate) fn new(total: u64) -> Rest {
        debug_assert!(total > CHUNK);
        Rest {
            stack: Stack { cvs: Vec::with_capacity(64), chunks: 0 },
            total,
            pos: 0,
            carry: [0; CHUNK_LEN],
            carry_len: 0,
        }
    }

    /// The input of `total` bytes after `head` (its first chunks, which it must be of).
    pub(crate) fn after(head: &Chunks, total: u64) -> Rest {
        let mut rest = Rest::new(total);
        if head.start == 0 {
            rest.take(head);
        }
        rest
    }

    /// Pushes `chunks` if they start where the input stands (a chunk boundary); whether it did.
    fn take(&mut self, chunks: &Chunks) -> bool {
        if self.carry_len != 0 || chunks.start != self.pos || chunks.end > self.total {
            return false;
        }
        let mut pos = self.pos;
        for cv in &chunks.cvs[..chunks.n] {
            let size = next_subtree(pos, chunks.end, self.total);
            self.stack.push(*cv, size);
            pos += size;
        }
        self.pos = chunks.end;
        true
    }

    /// Where the input stands: how many of its bytes were given.
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    /// The next `bytes` of the input (never past its end), one segment; `ahead`, the whole
    /// chunks of this segment hashed elsewhere, if any (ignored unless they start at the
    /// segment's first chunk boundary and end within it).
    pub(crate) fn segment(&mut self, mut bytes: &[u8], ahead: Option<&Chunks>) {
        let stop = self.pos + bytes.len() as u64;
        debug_assert!(stop <= self.total);
        // The chunk that straddles the previous segment and this one.
        if self.carry_len > 0 {
            let n = bytes.len().min(CHUNK_LEN - self.carry_len);
            self.carry[self.carry_len..self.carry_len + n].copy_from_slice(&bytes[..n]);
            self.carry_len += n;
            self.pos += n as u64;
            bytes = &bytes[n..];
            if self.carry_len == CHUNK_LEN || self.pos == self.total {
                let at = self.pos - self.carry_len as u64;
                let cv = subtree(at, &self.carry[..self.carry_len]);
                self.stack.push(cv, self.carry_len as u64);
                self.carry_len = 0;
            }
        }
        if self.carry_len == 0
            && let Some(chunks) = ahead.filter(|c| c.end <= stop)
            && self.take(chunks)
        {
            bytes = &bytes[(bytes.len() - (stop - self.pos) as usize)..];
        }
        // The segment's whole chunks (and the input's last one, at its end).
        let end = if stop == self.total { stop } else { stop / CHUNK * CHUNK };
        while self.carry_len == 0 && self.pos < end {
            let size = next_subtree(self.pos, end, self.total);
            if size == 0 {
                break;
            }
            let cv = subtree(self.pos, &bytes[..size as usize]);
            self.stack.push(cv, size);
            self.pos += size;
            bytes = &bytes[size as usize..];
        }
        // What is left (less than a chunk) starts the next straddling chunk.
        if !bytes.is_empty() {
            self.carry[self.carry_len..self.carry_len + bytes.len()].copy_from_slice(bytes);
            self.carry_len += bytes.len();
            self.pos += bytes.len() as u64;
        }
    }

    /// The input's hash, once all of it was given; `None` if it was not.
    pub(crate) fn finalize(self) -> Option<blake3::Hash> {
        if self.pos != self.total || self.carry_len != 0 {
            return None;
        }
        self.stack.root()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
    }

    /// An input cut into segments at `cuts`, each segment's whole chunks hashed ahead or not
    /// (by the segment's index and `mask`), gives `blake3::hash` of the whole.
    fn hashed_in_segments(data: &[u8], cuts: &[usize], mask: u32) -> Option<blake3::Hash> {
        let total = data.len() as u64;
        let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c > 0 && c < data.len()).collect();
        bounds.sort_unstable();
        bounds.dedup();
        bounds.insert(0, 0);
        bounds.push(data.len());
        let mut rest = Rest::new(total);
        for (k, w) in bounds.windows(2).enumerate() {
            let segment = &data[w[0]..w[1]];
            let ahead = if mask >> (k % 32) & 1 == 1 { Chunks::of(segment, w[0] as u64, total) } else { None };
            rest.segment(segment, ahead.as_ref());
        }
        rest.finalize()
    }

    #[test]
    fn segments_with_and_without_chunks_hashed_ahead_give_the_hash_of_the_whole() {
        let sizes = [1025, 2048, 2049, 3000, 4096, 5120, 65_536, 65_537, 100_000, 1 << 20, (1 << 22) - 512];
        for total in sizes {
            let data = input(total);
            let want = Some(blake3::hash(&data));
            let cut_sets: [Vec<usize>; 6] = [
                vec![],
                vec![total / 2],
                vec![512, 1500, total - 700],
                vec![1024, 4096, 40_000, total - 1],
                (1..total / 3000 + 1).map(|k| k * 3000).collect(),
                (1..8).map(|k| k * total / 8 + 512).collect(),
            ];
            for cuts in &cut_sets {
                for mask in [0, u32::MAX, 0x5555_5555, 0xAAAA_AAAA, 1] {
                    assert_eq!(
                        hashed_in_segments(&data, cuts, mask),
                        want,
                        "total {total} cuts {cuts:?} mask {mask:x}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_head_and_the_rest_give_the_hash_of_the_whole() {
        for total in [1025, 4096, 100_000, (1 << 22) - 512] {
            let data = input(total);
            for split in [1024, 1500, total / 2, total - 1].into_iter().filter(|&s| s < total) {
                let Some(head) = Chunks::of(&data[..split], 0, total as u64) else {
                    assert!(split < 1024, "{total} {split}");
                    continue;
                };
                assert_eq!((head.start(), head.end()), (0, (split / 1024 * 1024) as u64));
                let mut rest = Rest::after(&head, total as u64);
                for part in data[head.end() as usize..].chunks(700) {
                    rest.segment(part, None);
                }
                assert_eq!(rest.finalize(), Some(blake3::hash(&data)), "total {total} split {split}");
            }
        }
    }

    #[test]
    fn chunks_hashed_ahead_that_do_not_fit_are_ignored_and_never_the_whole_input() {
        let data = input(5000);
        assert!(Chunks::of(&data[..1023], 0, 5000).is_none());
        assert!(Chunks::of(&data, 0, 5000).is_none(), "the whole input is the root");
        assert!(Chunks::of(&data[100..1100], 100, 5000).is_none(), "no whole chunk");
        // Chunks for another place of the input: hashed as if there were none.
        let elsewhere = Chunks::of(&data[2048..4096], 2048, 5000).unwrap();
        let mut rest = Rest::new(5000);
        rest.segment(&data[..3000], Some(&elsewhere));
        rest.segment(&data[3000..], None);
        assert_eq!(rest.finalize(), Some(blake3::hash(&data)));
        let mut rest = Rest::new(5000);
        rest.segment(&data[..4000], None);
        assert_eq!(rest.finalize(), None, "not all of it");
    }

    #[test]
    fn subtrees_are_aligned_powers_of_two_and_never_the_whole_input() {
        assert_eq!(next_subtree(0, 4095 * 1024, 4096 * 1024), 2048 * 1024);
        assert_eq!(next_subtree(0, 4096 * 1024, 4096 * 1024), 2048 * 1024);
        assert_eq!(next_subtree(2048 * 1024, 4095 * 1024, 4096 * 1024), 1024 * 1024);
        assert_eq!(next_subtree(3 * 1024, 1 << 20, 1 << 20), 1024);
        assert_eq!(next_subtree(4 * 1024, 1 << 20, 1 << 20), 4 * 1024);
        assert_eq!(next_subtree(2048, 2048 + 512, 2048 + 512), 512);
        assert_eq!(next_subtree(2048, 3000, 5000), 0);
        assert_eq!(next_subtree(5000 / 1024 * 1024, 5000, 5000), 5000 - 4096);
    }
}
