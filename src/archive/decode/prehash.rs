//! Entries hashed on the thread that decoded their frame, for a reader that hashes every entry
//! (`bundle verify`): the reading thread then only walks the tar headers and compares digests,
//! and hashing takes its share of every CPU instead of one.
//!
//! Why it cannot change a verdict: a decoding thread does not know where the entries are (that
//! is the tar reader's job, on the reading thread, in stream order). It guesses, assuming its
//! frame starts with a header, as `pack` cuts frames, and records for each entry it finds where
//! the entry's data starts in the frame, its size, and the BLAKE3 of those bytes (for an entry
//! that goes on past the frame, its first whole chunks as subtrees: `blake3_tree::Head`). The
//! reading thread uses a record only when its own parse puts an entry of that very size at that
//! very place of that frame; the record is then the hash of exactly the bytes it would have
//! hashed. A wrong guess (a frame that starts inside an entry, a hostile header) only costs the
//! hashing of bytes nobody asks about, at most once per byte of the frame. The guess reads only
//! the header's checksum and size: the reading thread checks everything else, as before.

use crate::archive::BLOCK;
use crate::archive::field;
use crate::archive::read::parse_octal;
use crate::archive::write::padding_for;
use crate::blake3_tree::{Head, Prehash};

/// Entries a frame's scan records at most (each 48 bytes, allocated by the reading thread):
/// further entries of a frame of many tiny files are hashed by the reading thread.
const MAX_RECORDS: usize = 1024;

/// What a decoding thread found in the frame it decoded (see the module docs).
pub(crate) struct Scan {
    /// Entries wholly in the frame: where their data starts, their size, their hash.
    whole: Vec<(usize, u64, blake3::Hash)>,
    /// The entry that goes on past the frame, if any.
    head: Option<(usize, u64, Head)>,
    /// The first record the reader has not passed.
    next: usize,
}

impl Scan {
    /// An empty scan with room for the records of a frame of `content` bytes; allocated on the
    /// reading thread, so that the decoding thread allocates nothing.
    pub(crate) fn for_frame(content: u64) -> Box<Scan> {
        let room = usize::try_from(content / (2 * BLOCK as u64) + 1).unwrap_or(MAX_RECORDS).min(MAX_RECORDS);
        Box::new(Scan { whole: Vec::with_capacity(room), head: None, next: 0 })
    }

    /// Records the entries of `frame`, guessing that it starts with a header.
    pub(crate) fn run(&mut self, frame: &[u8]) {
        self.whole.clear();
        self.head = None;
        self.next = 0;
        let mut pos = 0;
        while self.whole.len() < self.whole.capacity() {
            let Some(block) = frame.get(pos..pos + BLOCK) else { return };
            let Some(size) = entry_size(block) else { return };
            let data = pos + BLOCK;
            let Some(bytes) = frame.get(data..).filter(|rest| rest.len() as u64 >= size) else {
                self.head = Head::of(&frame[data..], size).map(|head| (data, size, head));
                return;
            };
            let end = data + size as usize;
            self.whole.push((data, size, blake3::hash(&bytes[..size as usize])));
            pos = end + padding_for(size);
        }
    }

    /// The record for an entry of `size` bytes whose data starts at `at` in the frame, if the
    /// scan made one; records before `at` are passed for good.
    pub(crate) fn take(&mut self, at: usize, size: u64) -> Option<Prehash> {
        while let Some(&(data, len, hash)) = self.whole.get(self.next) {
            if data > at {
                break;
            }
            self.next += 1;
            if data == at && len == size {
                return Some(Prehash::Whole(hash));
            }
        }
        match &self.head {
            Some((data, len, _)) if *data == at && *len == size => {
                self.head.take().map(|(.., head)| Prehash::Head(Box::new(head)))
            }
            _ => None,
        }
    }
}

/// The data size a block gives if it looks like a regular file's ustar header (checksum and
/// size field; nothing else is looked at).
fn entry_size(block: &[u8]) -> Option<u64> {
    let typeflag = block[field::TYPEFLAG];
    if typeflag != b'0' && typeflag != 0 {
        return None;
    }
    let stored = parse_octal(&block[field::CHKSUM])?;
    let computed: u64 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| if field::CHKSUM.contains(&i) { u64::from(b' ') } else { u64::from(b) })
        .sum();
    (stored == computed).then(|| parse_octal(&block[field::SIZE])).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::write::tests::pseudo_random;

    /// A tar entry as `pack` writes it: header, data, padding.
    fn entry(path: &str, data: &[u8]) -> Vec<u8> {
        let mut header = tar::Header::new_ustar();
        header.set_path(path).unwrap();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        let mut out = header.as_bytes().to_vec();
        out.extend_from_slice(data);
        out.resize(out.len() + padding_for(data.len() as u64), 0);
        out
    }

    fn whole(pre: Option<Prehash>) -> Option<blake3::Hash> {
        match pre {
            Some(Prehash::Whole(hash)) => Some(hash),
            _ => None,
        }
    }

    #[test]
    fn a_frame_of_entries_gives_each_hash_where_its_data_starts_and_a_head_for_the_last() {
        let (a, b, c) = (pseudo_random(3000, 1), pseudo_random(512, 2), pseudo_random(10_000, 3));
        let mut frame = [entry("a", &a), entry("b", &b)].concat();
        let c_at = frame.len() + BLOCK;
        frame.extend_from_slice(&entry("c", &c)[..BLOCK + 5000]);
        let mut scan = Scan::for_frame(frame.len() as u64);
        scan.run(&frame);
        assert_eq!(whole(scan.take(BLOCK, 3000)), Some(blake3::hash(&a)));
        assert!(scan.take(BLOCK, 3000).is_none(), "each record is given once");
        let b_at = 2 * BLOCK + 3072;
        assert!(scan.take(b_at, 513).is_none(), "another size is another entry");
        let mut scan = Scan::for_frame(frame.len() as u64);
        scan.run(&frame);
        assert!(scan.take(b_at + 1, 512).is_none(), "another place is another entry");
        assert!(scan.take(b_at, 512).is_none(), "records before the reader are passed for good");
        match scan.take(c_at, 10_000) {
            Some(Prehash::Head(head)) => assert_eq!(head.covered(), 4096),
            _ => panic!("no head for the entry that goes on"),
        }
    }

    #[test]
    fn a_frame_that_does_not_start_with_a_header_gives_nothing() {
        let data = pseudo_random(8192, 4);
        let mut frame = entry("a", &data);
        frame.drain(..700);
        let mut scan = Scan::for_frame(frame.len() as u64);
        scan.run(&frame);
        assert!(scan.whole.is_empty() && scan.head.is_none());
        // A damaged header checksum, a directory, a size that is not octal: nothing either.
        for (at, byte) in [(148, b'9'), (156, b'5'), (124, b'x')] {
            let mut frame = entry("a", &data);
            frame[at] = byte;
            scan.run(&frame);
            assert!(scan.whole.is_empty() && scan.head.is_none(), "byte {at}");
        }
    }

    #[test]
    fn a_header_claiming_more_than_the_frame_gives_at_most_a_head_of_the_bytes_there() {
        let data = pseudo_random(4000, 5);
        let mut header = tar::Header::new_ustar();
        header.set_path("huge").unwrap();
        header.set_size(1 << 32);
        header.set_mode(0o644);
        header.set_cksum();
        let frame = [header.as_bytes().as_slice(), &data].concat();
        let mut scan = Scan::for_frame(frame.len() as u64);
        scan.run(&frame);
        match scan.take(BLOCK, 1 << 32) {
            Some(Prehash::Head(head)) => assert_eq!(head.covered(), 3072),
            _ => panic!("no head"),
        }
    }

    #[test]
    fn a_frame_of_many_tiny_entries_records_at_most_its_room() {
        let frame: Vec<u8> = (0..3000).flat_map(|i| entry(&format!("f{i}"), b"x")).collect();
        let mut scan = Scan::for_frame(frame.len() as u64);
        scan.run(&frame);
        assert_eq!(scan.whole.len(), MAX_RECORDS);
        assert_eq!(whole(scan.take(BLOCK, 1)), Some(blake3::hash(b"x")));
    }
}
