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

/// Chaining values a [`Head`] holds at most: a head of up to 2^16 chunks (64 MiB; the frames
/// decoded on other threads hold at most 8 MiB).
const MAX_HEAD_CVS: usize = 16;

/// The length of the subtree that starts at `pos` (a multiple of 1 KiB) of an input of `total`
/// bytes and ends at or before `end`: the largest power of two of chunks that `pos` is a multiple
/// of and that fits, or the input's last chunk when `end` is the input's end; 0 when no subtree
/// fits (less than a chunk before an `end` that is not the input's end, or `pos` at the end).
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
    Head(Box<Head>),
}

/// The first bytes of an input, hashed as whole subtrees: what a decoding thread gives for an
/// entry that goes on past its frame. Holds its chaining values inline, so that making one
/// allocates nothing.
#[derive(Clone)]
pub(crate) struct Head {
    /// Bytes covered, from the input's start: a multiple of 1 KiB, less than the input.
    covered: u64,
    cvs: [ChainingValue; MAX_HEAD_CVS],
    n: usize,
}

impl Head {
    /// The head of an input of `total` bytes whose first bytes are `bytes` (fewer than
    /// `total`): as many whole chunks as `bytes` holds. `None` when that is less than one chunk.
    pub(crate) fn of(bytes: &[u8], total: u64) -> Option<Head> {
        let len = bytes.len() as u64;
        if len >= total {
            return None;
        }
        let covered = len / CHUNK * CHUNK;
        let mut head = Head { covered, cvs: [[0; 32]; MAX_HEAD_CVS], n: 0 };
        let mut pos = 0;
        while pos < covered {
            let size = next_subtree(pos, covered, total);
            if size == 0 || head.n == MAX_HEAD_CVS {
                return None;
            }
            head.cvs[head.n] = subtree(pos, &bytes[pos as usize..(pos + size) as usize]);
            head.n += 1;
            pos += size;
        }
        (head.n > 0).then_some(head)
    }

    /// How many of the input's first bytes this head stands for.
    pub(crate) fn covered(&self) -> u64 {
        self.covered
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

/// The rest of an input after a [`Head`], fed in order as it is read, then merged with the head
/// into the input's hash.
pub(crate) struct Rest {
    stack: Stack,
    total: u64,
    pos: u64,
    /// The subtree being hashed, where it starts and where it ends.
    current: Hasher,
    start: u64,
    end: u64,
}

impl Rest {
    /// The input of `total` bytes after `head` (which must be of an input of that size).
    pub(crate) fn after(head: &Head, total: u64) -> Rest {
        let mut stack = Stack { cvs: Vec::with_capacity(64), chunks: 0 };
        let mut pos = 0;
        for cv in &head.cvs[..head.n] {
            let size = next_subtree(pos, head.covered, total);
            stack.push(*cv, size);
            pos += size;
        }
        let mut rest = Rest { stack, total, pos, current: Hasher::new(), start: pos, end: pos };
        rest.start();
        rest
    }

    fn start(&mut self) {
        self.start = self.pos;
        self.end = self.pos + next_subtree(self.pos, self.total, self.total);
        self.current = Hasher::new();
        self.current.set_input_offset(self.pos);
    }

    /// The next bytes of the input (never past its end).
    pub(crate) fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.pos < self.total {
            let n = bytes.len().min(usize::try_from(self.end - self.pos).unwrap_or(usize::MAX));
            self.current.update(&bytes[..n]);
            self.pos += n as u64;
            bytes = &bytes[n..];
            if self.pos == self.end {
                self.stack.push(self.current.finalize_non_root(), self.end - self.start);
                if self.pos < self.total {
                    self.start();
                }
            }
        }
    }

    /// The input's hash, once all of it was given; `None` if it was not.
    pub(crate) fn finalize(self) -> Option<blake3::Hash> {
        if self.pos != self.total {
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

    /// Every split of inputs around the tree's edges gives `blake3::hash`.
    #[test]
    fn head_and_rest_give_the_hash_of_the_whole() {
        let sizes = [1025, 2048, 2049, 3000, 4096, 5120, 65_536, 65_537, 100_000, 1 << 20, (1 << 22) - 512];
        for total in sizes {
            let data = input(total);
            let want = blake3::hash(&data);
            let splits = [1024, 1500, 2047, 4096, 4097, 40_000, 65_536, total / 2, total - 1, total - 512];
            for split in splits.into_iter().filter(|&s| s < total) {
                let Some(head) = Head::of(&data[..split], total as u64) else {
                    assert!(split < 1024, "{total} {split}");
                    continue;
                };
                assert_eq!(head.covered(), (split / 1024 * 1024) as u64);
                for piece in [1, 700, 1024, 64 << 10] {
                    let mut rest = Rest::after(&head, total as u64);
                    for part in data[head.covered() as usize..].chunks(piece) {
                        rest.update(part);
                    }
                    assert_eq!(rest.finalize(), Some(want), "total {total} split {split} piece {piece}");
                }
            }
        }
    }

    #[test]
    fn a_head_needs_a_whole_chunk_and_a_rest() {
        let data = input(5000);
        assert!(Head::of(&data[..1023], 5000).is_none());
        assert!(Head::of(&data, 5000).is_none());
        let head = Head::of(&data[..1024], 5000).expect("one chunk");
        let mut rest = Rest::after(&head, 5000);
        rest.update(&data[1024..4000]);
        assert_eq!(rest.finalize(), None, "not all of it");
    }

    #[test]
    fn subtrees_are_aligned_powers_of_two() {
        assert_eq!(next_subtree(0, 4095 * 1024, 4096 * 1024), 2048 * 1024);
        assert_eq!(next_subtree(2048 * 1024, 4095 * 1024, 4096 * 1024), 1024 * 1024);
        assert_eq!(next_subtree(3 * 1024, 1 << 20, 1 << 20), 1024);
        assert_eq!(next_subtree(4 * 1024, 1 << 20, 1 << 20), 4 * 1024);
        assert_eq!(next_subtree(2048, 2048 + 512, 2048 + 512), 512);
        assert_eq!(next_subtree(2048, 3000, 5000), 0);
        assert_eq!(next_subtree(5000 / 1024 * 1024, 5000, 5000), 5000 - 4096);
    }
}
