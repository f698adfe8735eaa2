//! The parallel decoder against the sequential one: on every damaged or hostile bundle, the
//! same entries, then the same error (code and message), whatever the number of threads.

use crate::archive::frames::{self, Fault, FrameBuf, FrameBytes, Walker};
use crate::archive::write::tests::{Sample, pseudo_random, split_frames, write_seekable};
use crate::archive::{ArchiveError, ArchiveReader, BundleRead, Decoding, FileAt, Limits, seek_table};

/// Each entry's path and hash, then `Ok` or the error's code and message.
type Outcome = (Vec<(String, blake3::Hash)>, Result<(), (String, String)>);

/// What reading a bundle gives.
fn outcome(bundle: &[u8], decoding: Decoding) -> Outcome {
    let mut seen = Vec::new();
    let result = (|| -> Result<(), ArchiveError> {
        let mut r = ArchiveReader::with_decoding(bundle, Limits::default(), decoding)?;
        while let Some(mut e) = r.next_entry()? {
            let hash = e.hash()?;
            seen.push((e.path.clone(), hash));
        }
        r.finish()
    })();
    (seen, result.map_err(|e| (e.code().to_owned(), e.to_string())))
}

/// What reading `input` gives as `bundle verify` reads it: entries hashed on the decoding
/// threads where they can be (`prehash`), the rest on this one.
fn read_prehashed(input: impl BundleRead) -> Outcome {
    let mut seen = Vec::new();
    let result = (|| -> Result<(), ArchiveError> {
        let mut r = ArchiveReader::with_decoding(input, Limits::default(), Decoding::Parallel)?;
        r.prehash_entries();
        while let Some(mut e) = r.next_entry()? {
            let hash = e.hash_ahead(|_| Ok(())).map_err(ArchiveError::from)?;
            seen.push((e.path.clone(), hash));
        }
        r.finish()
    })();
    (seen, result.map_err(|e| (e.code().to_owned(), e.to_string())))
}

/// [`read_prehashed`] of a bundle in memory, and how many entries were hashed ahead.
fn outcome_prehashed(bundle: &[u8]) -> (Outcome, usize) {
    super::PREHASHED.set(0);
    let outcome = read_prehashed(bundle);
    (outcome, super::PREHASHED.get())
}

/// [`read_prehashed`] of a bundle file, as `bundle verify` reads one: the frames read by
/// position by the decoding threads (`FileAt`); and how many frames were.
fn outcome_by_position(bundle: &[u8]) -> (Outcome, usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("a.agent.bundle");
    std::fs::write(&path, bundle).expect("written");
    let file = std::fs::File::open(&path).expect("opened");
    super::BY_POSITION.set(0);
    let outcome = read_prehashed(FileAt::new(file, bundle.len() as u64));
    (outcome, super::BY_POSITION.get())
}

/// A bundle of several frames: small entries grouped, two split across frames.
fn multi_frame() -> Vec<u8> {
    let s =
        |path: &str, len: usize, seed| Sample { path: path.into(), data: pseudo_random(len, seed), executable: false };
    let samples = [
        s("a.txt", 1000, 1),
        s("big/one.bin", 5 << 20, 2),
        s("big/two.bin", 3 << 20, 3),
        s("c.txt", 70_000, 4),
        s("d/e.bin", 5 << 20, 5),
        s("z.txt", 10, 6),
    ];
    write_seekable(&samples, false).0
}

#[track_caller]
fn same_either_way(bundle: &[u8], what: &str) -> Result<(), (String, String)> {
    let one = outcome(bundle, Decoding::ThisThread);
    for run in 0..3 {
        let many = outcome(bundle, Decoding::Parallel);
        assert!(many == one, "{what}, run {run}: threaded {:?} / one thread {:?}", many.1, one.1);
    }
    let streamed = outcome(bundle, Decoding::Streaming);
    assert!(streamed == one, "{what}: streamed {:?} / read whole {:?}", streamed.1, one.1);
    let (prehashed, _) = outcome_prehashed(bundle);
    assert!(prehashed == one, "{what}: hashed ahead {:?} / one thread {:?}", prehashed.1, one.1);
    let (by_position, _) = outcome_by_position(bundle);
    assert!(by_position == one, "{what}: read by position {:?} / one thread {:?}", by_position.1, one.1);
    one.1
}

#[test]
fn entries_hashed_where_their_frame_was_decoded_give_blake3_of_their_bytes() {
    let s =
        |path: &str, len: usize, seed| Sample { path: path.into(), data: pseudo_random(len, seed), executable: false };
    // Whole entries, entries that go on past their frame (a head of whole chunks, the rest
    // hashed by the reader), one ending on a chunk boundary, one under a chunk past a frame.
    let samples = [
        s("a.txt", 1000, 1),
        s("b.bin", (4 << 20) - 600, 2),
        s("big/one.bin", 5 << 20, 3),
        s("big/two.bin", (3 << 20) + 1024, 4),
        s("c.txt", 70_000, 5),
        s("d/e.bin", 9 << 20, 6),
        s("e/f.bin", (21 << 20) + 700, 8),
        s("z.txt", 10, 7),
    ];
    let (bundle, hashes) = write_seekable(&samples, false);
    for (s, h) in samples.iter().zip(&hashes) {
        assert_eq!(*h, blake3::hash(&s.data), "{}", s.path);
    }
    let want: Vec<_> = samples.iter().zip(&hashes).map(|(s, h)| (s.path.clone(), *h)).collect();
    // How far hashing ahead reaches depends on timing: a frame handed to a decoding thread
    // before the reader met the entry it lies in is hashed as plain bytes (correctly, by the
    // reader). Under load that happened to a frame or two more, so the reach is the best of a
    // few readings; every reading must give the right entries.
    let (mut middles, mut ahead) = (0, 0);
    for _ in 0..4 {
        super::MIDDLES.set(0);
        let ((seen, result), prehashed) = outcome_prehashed(&bundle);
        assert_eq!(result, Ok(()));
        assert_eq!(seen, want);
        middles = middles.max(super::MIDDLES.get());
        ahead = ahead.max(prehashed);
        if middles >= 5 && ahead >= 5 {
            break;
        }
    }
    // The frames inside the large entries (after their first) were hashed ahead as such.
    assert!(middles >= 5, "only {middles} frames inside entries were hashed ahead");
    // Every entry that starts a frame or follows one in it was hashed ahead.
    assert!(ahead >= 5, "only {ahead} of {} entries were hashed ahead", samples.len());
}

#[test]
fn an_intact_multi_frame_bundle_reads_the_same_on_one_thread_and_many() {
    let bundle = multi_frame();
    assert!(split_frames(&bundle).0.len() >= 5);
    assert_eq!(same_either_way(&bundle, "intact"), Ok(()));
}

#[test]
fn the_decoding_threads_read_a_files_frames_by_position() {
    let bundle = multi_frame();
    let frames = split_frames(&bundle).0.len();
    let ((entries, result), by_position) = outcome_by_position(&bundle);
    assert_eq!(result, Ok(()));
    assert_eq!(entries, outcome(&bundle, Decoding::ThisThread).0);
    // Every data frame declares its content (at most 4 MiB): each is read by position.
    assert_eq!(by_position, frames, "of {frames} frames");
}

/// A bundle file whose walk sees `walked` while the decoding threads read `read`: a file that
/// changed between the two.
struct Changed {
    walked: FileAt,
    read: std::sync::Arc<std::fs::File>,
}

impl std::io::Read for Changed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.walked.read(buf)
    }
}

impl std::io::BufRead for Changed {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.walked.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.walked.consume(amt);
    }
}

impl BundleRead for Changed {
    fn file(&self) -> Option<&std::sync::Arc<std::fs::File>> {
        Some(&self.read)
    }

    fn position(&self) -> u64 {
        self.walked.position()
    }

    fn skip(&mut self, n: usize) -> std::io::Result<usize> {
        self.walked.skip(n)
    }

    fn rewind(&mut self, at: u64) -> std::io::Result<()> {
        self.walked.rewind(at)
    }
}

#[test]
fn a_file_that_shrank_after_its_frames_were_walked_is_an_io_error_never_a_verdict() {
    let bundle = multi_frame();
    let dir = tempfile::tempdir().expect("temp dir");
    let (whole, short) = (dir.path().join("whole"), dir.path().join("short"));
    std::fs::write(&whole, &bundle).expect("written");
    std::fs::write(&short, &bundle[..bundle.len() / 2]).expect("written");
    let open = |path| std::fs::File::open(path).expect("opened");
    let input = Changed { walked: FileAt::new(open(&whole), bundle.len() as u64), read: open(&short).into() };
    let result = (|| -> Result<(), ArchiveError> {
        let mut r = ArchiveReader::with_decoding(input, Limits::default(), Decoding::Parallel)?;
        while let Some(mut e) = r.next_entry()? {
            e.hash()?;
        }
        r.finish()
    })();
    let e = result.expect_err("a file read short");
    assert_eq!(e.code(), "io_error", "{e}");
    assert!(e.to_string().contains("changed while read"), "{e}");
}

#[test]
fn damage_anywhere_gives_the_same_error_on_one_thread_and_many() {
    let bundle = multi_frame();
    let step = bundle.len() / 29;
    for at in (0..bundle.len()).step_by(step).chain([bundle.len() - 1, bundle.len() - 10, bundle.len() - 30]) {
        let mut flipped = bundle.clone();
        flipped[at] ^= 0x40;
        let result = same_either_way(&flipped, &format!("byte {at} flipped"));
        assert!(result.is_err(), "byte {at} flipped was accepted");
        let _ = same_either_way(&bundle[..at], &format!("cut at {at}"));
    }
}

/// Replaces the seek table of `bundle` with `table` (a whole table frame).
fn with_table(bundle: &[u8], table: &[u8]) -> Vec<u8> {
    let data_end: usize = split_frames(bundle).0.iter().map(|f| f.len()).sum();
    [&bundle[..data_end], table].concat()
}

#[test]
fn a_hostile_seek_table_never_changes_what_is_read_only_adds_its_own_code() {
    let bundle = multi_frame();
    let (_, entries) = split_frames(&bundle);
    let good = same_either_way(&bundle, "intact");
    assert_eq!(good, Ok(()));
    let mut cases: Vec<(&str, Vec<seek_table::FrameEntry>)> = Vec::new();
    let mut wrong_size = entries.clone();
    wrong_size[1].decompressed += 1;
    cases.push(("a decompressed size off by one", wrong_size));
    let mut overlapping = entries.clone();
    overlapping[2].compressed += 100;
    overlapping[3].compressed -= 100;
    cases.push(("frames overlapping", overlapping));
    let mut past_end = entries.clone();
    past_end.last_mut().unwrap().compressed += 1 << 20;
    cases.push(("past the end", past_end));
    let mut more = entries.clone();
    more.extend(std::iter::repeat_n(seek_table::FrameEntry { compressed: 0, decompressed: 0 }, 1000));
    cases.push(("more frames than bytes", more));
    cases.push(("fewer frames", entries[..entries.len() - 1].to_vec()));
    let mut swapped = entries.clone();
    swapped.swap(0, 1);
    cases.push(("two frames swapped", swapped));
    for (what, table) in cases {
        let hostile = with_table(&bundle, &seek_table::encode(&table));
        let (seen, result) = outcome(&hostile, Decoding::ThisThread);
        // Every entry read, and the same ones: the frames are the truth.
        assert_eq!(seen, outcome(&bundle, Decoding::ThisThread).0, "{what}");
        let (code, _) = same_either_way(&hostile, what).unwrap_err();
        assert_eq!(code, "seek_table_mismatch", "{what}: {result:?}");
    }
    // A table frame that claims more bytes than the file has, and one with reserved bits.
    let mut huge = seek_table::encode(&entries);
    huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(same_either_way(&with_table(&bundle, &huge), "huge").unwrap_err().0, "seek_table_mismatch");
    let mut reserved = seek_table::encode(&entries);
    let at = reserved.len() - 5;
    reserved[at] = 0x04;
    assert_eq!(same_either_way(&with_table(&bundle, &reserved), "reserved").unwrap_err().0, "seek_table_mismatch");
}

/// A reader that gives at most 7 bytes per call and is interrupted before every other one.
struct Stutter<'a> {
    bytes: &'a [u8],
    calls: usize,
}

impl std::io::Read for Stutter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(2) {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(7).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// Reads the first `cut` bytes of `frame` through a stuttering reader: its header, then its
/// blocks into `out` (after the header's bytes when `header_too`).
fn walk_frame<O: FrameBytes>(frame: &[u8], out: &mut O, header_too: bool) -> (usize, Result<(), Fault>) {
    let mut input = std::io::BufReader::with_capacity(16, Stutter { bytes: frame, calls: 0 });
    let magic = frames::read_magic(&mut input).unwrap().unwrap();
    let header = frames::read_header(&magic, &mut input, 1 << 24).unwrap();
    if header_too {
        out.push(header.bytes());
    }
    (header.len, Walker::new(&header).read_into(&mut input, out, usize::MAX))
}

/// Frames read straight into a kept buffer ([`FrameBuf`]) hold the bytes a `Vec` would, over
/// any reads, frame after frame in the same buffer; a cut frame is `Truncated` either way.
#[test]
fn a_frame_read_into_kept_room_holds_what_a_vec_would() {
    let bundle = multi_frame();
    let (frames, _) = split_frames(&bundle);
    let mut room = Vec::new();
    for frame in frames.iter().take(4) {
        for cut in [frame.len(), frame.len() - 1] {
            let mut vec = Vec::new();
            let (header_len, by_vec) = walk_frame(&frame[..cut], &mut vec, false);
            let mut buf = FrameBuf::with_room(std::mem::take(&mut room), 16);
            let (_, by_room) = walk_frame(&frame[..cut], &mut buf, true);
            assert_eq!(by_vec.is_ok(), by_room.is_ok(), "cut at {cut}");
            assert_eq!(&buf.bytes()[header_len..], &vec[..]);
            if cut == frame.len() {
                assert_eq!(buf.bytes(), *frame);
            } else {
                assert!(matches!(by_room, Err(Fault::Truncated)), "cut at {cut}");
            }
            room = buf.into_room();
            assert!(room.len() >= cut, "the room is kept for the next frame");
        }
    }
}

/// Only a bundle whose first frame is read whole gets the small-buffer input.
#[test]
fn a_bundle_is_read_straight_into_its_frames_only_when_they_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::File::open(path).unwrap()
    };
    assert!(super::frames_read_whole(&file("seekable", &multi_frame())));
    // One frame of unknown size, as earlier releases wrote (the streaming encoder).
    let mut old = Vec::new();
    let mut encoder = zstd::stream::write::Encoder::new(&mut old, 3).unwrap();
    std::io::Write::write_all(&mut encoder, &[0u8; 4096]).unwrap();
    encoder.finish().unwrap();
    assert!(!super::frames_read_whole(&file("one-frame", &old)));
    assert!(!super::frames_read_whole(&file("empty", b"")));
    assert!(!super::frames_read_whole(&file("text", b"not a bundle at all")));
}

#[test]
fn a_stream_starts_at_most_max_decoding_threads_whatever_the_cpus() {
    use super::{FrameStream, MAX_DECODING_THREADS, QUEUE_BYTES_PER_SLOT};
    let bundle = multi_frame();
    for (cpus, threads) in [(2, 2), (MAX_DECODING_THREADS, MAX_DECODING_THREADS), (64, MAX_DECODING_THREADS)] {
        crate::workers::PRETEND_CPUS.set(Some(cpus));
        let mut stream = FrameStream::new(&bundle[..], 24, Decoding::Parallel).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        while stream.read(&mut buf).unwrap() > 0 {}
        crate::workers::PRETEND_CPUS.set(None);
        assert_eq!(stream.pool.as_ref().map(|p| p.len()), Some(threads), "{cpus} CPUs");
        // What the queue may hold follows the threads, not the CPUs.
        assert_eq!((stream.in_flight, stream.budget), (4 * threads + 2, (threads + 2) * QUEUE_BYTES_PER_SLOT));
    }
    assert_eq!(outcome(&bundle, Decoding::Parallel), outcome(&bundle, Decoding::ThisThread));
}
