//! Entries hashed on the thread that decoded their frame, for a reader that hashes every entry
//! (`bundle verify`): the reading thread then only walks the tar headers and compares digests,
//! and hashing takes its share of every CPU instead of one.
//!
//! Why it cannot change a verdict: a decoding thread does not know where the entries are (that
//! is the tar reader's job, on the reading thread, in stream order). It guesses, assuming its
//! frame starts with a header, as `pack` cuts frames, or inside an entry that a [`Spans`] says
//! goes on past an earlier frame (told by the reading thread when it starts an entry, and by
//! the scans of earlier frames), and records for each entry it finds where the entry's data
//! starts in the frame, its size, and the BLAKE3 of those bytes (for an entry that goes on past
//! the frame, or began before it, its whole chunks there as subtrees: `blake3_tree::Chunks`). The
//! reading thread uses a record only when its own parse puts an entry of that very size at that
//! very place of that frame; the record is then the hash of exactly the bytes it would have
//! hashed. A wrong guess (a frame that starts inside an entry, a hostile header) only costs the
//! hashing of bytes nobody asks about, at most once per byte of the frame. The guess reads only
//! the header's checksum and size: the reading thread checks everything else, as before.

use crate::archive::BLOCK;
use crate::archive::field;
use crate::archive::read::parse_octal;
use crate::archive::write::padding_for;
use crate::blake3_tree::{Chunks, Prehash};

/// Entries a frame's scan records at most (each 48 bytes, allocated by the reading thread):
/// further entries of a frame of many tiny files are hashed by the reading thread.
const MAX_RECORDS: usize = 1024;

/// What a decoding thread found in the frame it decoded (see the module docs).
pub(crate) struct Scan {
    /// Entries wholly in the frame: where their data starts, their size, their hash.
    whole: Vec<(usize, u64, blake3::Hash)>,
    /// The entry that goes on past the frame, if any: where its data starts, its size, its
    /// first whole chunks.
    head: Option<(usize, u64, Chunks)>,
    /// For a frame that starts inside an entry (the reading thread's hint): the entry's offset
    /// at the frame's start, its size, and its whole chunks in the frame.
    middle: Option<(u64, u64, Chunks)>,
    /// The first record the reader has not passed.
    next: usize,
}

impl Scan {
    /// An empty scan with room for the records of a frame of `content` bytes; allocated on the
    /// reading thread, so that the decoding thread allocates nothing.
    pub(crate) fn for_frame(content: u64) -> Box<Scan> {
        let room = usize::try_from(content / (2 * BLOCK as u64) + 1).unwrap_or(MAX_RECORDS).min(MAX_RECORDS);
        Box::new(Scan { whole: Vec::with_capacity(room), head: None, middle: None, next: 0 })
    }

    /// Records the entries of `frame`, guessing that it starts with a header, or, with `inside`
    /// (an entry's offset at the frame's start and its size, as the reading thread expects
    /// them), inside that entry's data, and with a header after it.
    pub(crate) fn run(&mut self, frame: &[u8], inside: Option<(u64, u64)>) {
        self.whole.clear();
        self.head = None;
        self.middle = None;
        self.next = 0;
        let mut pos = 0;
        if let Some((at, size)) = inside.filter(|&(at, size)| at < size) {
            let left = size - at;
            let here = usize::try_from(left).unwrap_or(usize::MAX).min(frame.len());
            self.middle = Chunks::of(&frame[..here], at, size).map(|chunks| (at, size, chunks));
            if (here as u64) < left {
                return;
            }
            pos = here + padding_for(size);
        }
        while self.whole.len() < self.whole.capacity() {
            let Some(block) = frame.get(pos..pos + BLOCK) else { return };
            let Some(size) = entry_size(block) else { return };
            let data = pos + BLOCK;
            let Some(bytes) = frame.get(data..).filter(|rest| rest.len() as u64 >= size) else {
                self.head = Chunks::of(&frame[data..], 0, size).map(|head| (data, size, head));
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

    /// The entry this scan found going on past the frame: where its data starts in the frame,
    /// and its size.
    pub(crate) fn opened(&self) -> Option<(usize, u64)> {
        self.head.as_ref().map(|(data, size, _)| (*data, *size))
    }

    /// The whole chunks of an entry of `size` bytes hashed here, if this frame starts `at`
    /// bytes into that entry's data and was scanned as such.
    pub(crate) fn take_middle(&mut self, at: u64, size: u64) -> Option<Chunks> {
        match &self.middle {
            Some((from, len, _)) if *from == at && *len == size => self.middle.take().map(|(.., chunks)| chunks),
            _ => None,
        }
    }
}

/// Entries known to go on past a frame, by where their data starts in the decompressed stream
/// and their size: told by the reading thread as it starts an entry, and by each decoding
/// thread for the entry its frame's scan found going on, so that a later frame that starts
/// inside one is scanned as such ([`Scan::run`]'s `inside`). Guesses as much as the scans are:
/// the reading thread uses what they give only where it agrees with its own parse.
#[derive(Clone)]
pub(crate) struct Spans(std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<(u64, u64)>>>);

/// Spans kept (the latest): more than the frames in flight on a few CPUs.
const KEPT_SPANS: usize = 16;

impl Spans {
    /// Made on the reading thread, with room for all it keeps (a decoding thread allocates
    /// nothing).
    pub(crate) fn new() -> Spans {
        Spans(std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::with_capacity(KEPT_SPANS))))
    }

    /// An entry whose data starts at `start` in the stream and holds `size` bytes.
    pub(crate) fn add(&self, start: u64, size: u64) {
        let Ok(mut spans) = self.0.lock() else { return };
        if spans.len() == KEPT_SPANS {
            spans.pop_front();
        }
        spans.push_back((start, size));
    }

    /// For a frame starting at `start` in the stream: the latest entry it starts inside, as
    /// the offset there and the entry's size.
    pub(crate) fn inside(&self, start: u64) -> Option<(u64, u64)> {
        let spans = self.0.lock().ok()?;
        spans.iter().rev().find(|&&(e, z)| e <= start && start - e < z).map(|&(e, z)| (start - e, z))
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
        scan.run(&frame, None);
        assert_eq!(whole(scan.take(BLOCK, 3000)), Some(blake3::hash(&a)));
        assert!(scan.take(BLOCK, 3000).is_none(), "each record is given once");
        let b_at = 2 * BLOCK + 3072;
        assert!(scan.take(b_at, 513).is_none(), "another size is another entry");
        let mut scan = Scan::for_frame(frame.len() as u64);
        scan.run(&frame, None);
        assert!(scan.take(b_at + 1, 512).is_none(), "another place is another entry");
        assert!(scan.take(b_at, 512).is_none(), "records before the reader are passed for good");
        match scan.take(c_at, 10_000) {
            Some(Prehash::Head(head)) => assert_eq!(head.end(), 4096),
            _ => panic!("no head for the entry that goes on"),
        }
    }

    #[test]
    fn a_frame_that_does_not_start_with_a_header_gives_nothing() {
        let data = pseudo_random(8192, 4);
        let mut frame = entry("a", &data);
        frame.drain(..700);
        let mut scan = Scan::for_frame(frame.len() as u64);
        scan.run(&frame, None);
        assert!(scan.whole.is_empty() && scan.head.is_none());
        // A damaged header checksum, a directory, a size that is not octal: nothing either.
        for (at, byte) in [(148, b'9'), (156, b'5'), (124, b'x')] {
            let mut frame = entry("a", &data);
            frame[at] = byte;
            scan.run(&frame, None);
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
        scan.run(&frame, None);
        match scan.take(BLOCK, 1 << 32) {
            Some(Prehash::Head(head)) => assert_eq!(head.end(), 3072),
            _ => panic!("no head"),
        }
    }

    #[test]
    fn a_frame_of_many_tiny_entries_records_at_most_its_room() {
        let frame: Vec<u8> = (0..3000).flat_map(|i| entry(&format!("f{i}"), b"x")).collect();
        let mut scan = Scan::for_frame(frame.len() as u64);
        scan.run(&frame, None);
        assert_eq!(scan.whole.len(), MAX_RECORDS);
        assert_eq!(whole(scan.take(BLOCK, 1)), Some(blake3::hash(b"x")));
    }
}
