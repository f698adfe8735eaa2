//! Tests of the archive reader: accepted archives, and every way a hostile one is refused.

use super::*;
use crate::archive::ArchiveWriter;
use crate::archive::write::tests::{samples, split_frames, write_samples, write_samples_with};

type Entries = Vec<(String, Vec<u8>, bool, blake3::Hash)>;

fn read_all_with(bundle: &[u8], limits: Limits) -> Result<Entries, ArchiveError> {
    let mut r = ArchiveReader::new(bundle, limits)?;
    let mut out = Vec::new();
    while let Some(mut e) = r.next_entry()? {
        let mut data = Vec::new();
        let hash = e.copy_to(&mut data)?;
        assert_eq!(data.len() as u64, e.size);
        out.push((e.path.clone(), data, e.executable, hash));
    }
    r.finish()?;
    Ok(out)
}

fn read_all(bundle: &[u8]) -> Result<Entries, ArchiveError> {
    read_all_with(bundle, Limits::default())
}

#[track_caller]
fn assert_code(result: Result<impl std::fmt::Debug, ArchiveError>, code: &str) -> ArchiveError {
    match result {
        Ok(v) => panic!("expected {code}, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.code(), code, "wrong code for: {e}");
            e
        }
    }
}

// ---- hand-made archives -------------------------------------------

/// A valid ustar header for a regular file, editable before `seal`.
struct Raw([u8; BLOCK]);

impl Raw {
    fn file(path: &str, size: u64) -> Raw {
        let mut b = [0u8; BLOCK];
        b[..path.len()].copy_from_slice(path.as_bytes());
        b[field::MODE].copy_from_slice(b"0000644\0");
        b[108..116].copy_from_slice(b"0000000\0");
        b[116..124].copy_from_slice(b"0000000\0");
        b[field::SIZE].copy_from_slice(format!("{size:011o}\0").as_bytes());
        b[136..148].copy_from_slice(b"00000000000\0");
        b[field::TYPEFLAG] = b'0';
        b[field::MAGIC].copy_from_slice(b"ustar\0");
        b[field::VERSION].copy_from_slice(b"00");
        Raw(b)
    }
    fn typeflag(mut self, t: u8) -> Raw {
        self.0[field::TYPEFLAG] = t;
        self
    }
    fn mode(mut self, m: &[u8; 8]) -> Raw {
        self.0[field::MODE].copy_from_slice(m);
        self
    }
    fn size_field(mut self, s: &[u8; 12]) -> Raw {
        self.0[field::SIZE].copy_from_slice(s);
        self
    }
    fn magic(mut self, m: &[u8; 8]) -> Raw {
        self.0[257..265].copy_from_slice(m);
        self
    }
    fn raw_name(mut self, n: &[u8]) -> Raw {
        self.0[field::NAME].fill(0);
        self.0[..n.len()].copy_from_slice(n);
        self
    }
    /// Sets the checksum; returns the header block.
    fn seal(mut self) -> Vec<u8> {
        self.0[field::CHKSUM].copy_from_slice(b"        ");
        let sum: u32 = self.0.iter().map(|&b| u32::from(b)).sum();
        self.0[field::CHKSUM].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        self.0.to_vec()
    }
}

fn data_blocks(data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v.resize(data.len() + padding_for(data.len() as u64), 0);
    v
}

fn end() -> Vec<u8> {
    vec![0; 1024]
}

/// A one-file tar around `header`.
fn tar_with(header: Vec<u8>, data: &[u8]) -> Vec<u8> {
    [header, data_blocks(data), end()].concat()
}

/// Compresses like the writer does (checksum on), single-threaded.
fn zst(tar: &[u8]) -> Vec<u8> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    e.include_checksum(true).unwrap();
    e.write_all(tar).unwrap();
    e.finish().unwrap()
}

fn valid_tar() -> Vec<u8> {
    tar_with(Raw::file("ok.txt", 5).seal(), b"hello")
}

// ---- round trip ----------------------------------------------------

#[test]
fn round_trip() {
    let (bundle, hashes) = write_samples();
    let got = read_all(&bundle).unwrap();
    let want = samples();
    assert_eq!(got.len(), want.len());
    for ((path, data, exec, hash), (s, h)) in got.iter().zip(want.iter().zip(&hashes)) {
        assert_eq!(path, &s.path);
        assert_eq!(data, &s.data, "{path}");
        assert_eq!(*exec, s.executable, "{path}");
        assert_eq!(hash, h, "{path}");
    }
}

#[test]
fn skipping_unread_entries() {
    let (bundle, _) = write_samples();
    let mut r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
    let mut paths = Vec::new();
    let mut i = 0;
    while let Some(mut e) = r.next_entry().unwrap() {
        // Read nothing, a few bytes, or everything, in turn.
        match i % 3 {
            0 => {}
            1 => {
                let mut b = [0u8; 7];
                let _ = e.read(&mut b).unwrap();
            }
            _ => {
                let mut v = Vec::new();
                e.read_to_end(&mut v).unwrap();
                assert_eq!(v.len() as u64, e.size);
            }
        }
        paths.push(e.path.clone());
        i += 1;
    }
    assert!(r.next_entry().unwrap().is_none());
    r.finish().unwrap();
    let want: Vec<_> = samples().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, want);
}

#[test]
fn finish_early_validates_the_rest() {
    let (bundle, _) = write_samples();
    let mut r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
    r.next_entry().unwrap().unwrap();
    r.finish().unwrap();

    // ... and catches a bad entry further on.
    let tar = [valid_tar()[..1024].to_vec(), tar_with(Raw::file("x", 0).typeflag(b'2').seal(), b"")].concat();
    let bundle = zst(&tar);
    let r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
    assert_code(r.finish(), "unsupported_entry_type");
}

#[test]
fn accepts_hand_made_and_record_padded_archives() {
    assert_eq!(read_all(&zst(&valid_tar())).unwrap()[0].1, b"hello");
    // GNU tar pads to 10240-byte records; that is tolerated.
    let mut tar = valid_tar();
    tar.resize(10240, 0);
    read_all(&zst(&tar)).unwrap();
    // Typeflag NUL (old-style regular file), prefix split, 755.
    let mut h = Raw::file("name.sh", 2).typeflag(0).mode(b"0000755\0");
    h.0[field::PREFIX][..3].copy_from_slice(b"dir");
    let got = read_all(&zst(&tar_with(h.seal(), b"hi"))).unwrap();
    assert_eq!((got[0].0.as_str(), got[0].2), ("dir/name.sh", true));
}

#[test]
fn entry_read_errors_keep_their_code() {
    // Truncate the frame in the middle of a large entry's data.
    let data = crate::archive::write::tests::pseudo_random(400_000, 9);
    let mut w = ArchiveWriter::new(Vec::new(), 3, 0).unwrap();
    w.append("big", data.len() as u64, false, &mut &data[..]).unwrap();
    let bundle = w.finish().unwrap();
    let cut = &bundle[..bundle.len() / 2];
    let mut r = ArchiveReader::new(cut, Limits::default()).unwrap();
    let mut e = r.next_entry().unwrap().unwrap();
    let err = io::copy(&mut e, &mut io::sink()).unwrap_err();
    let err = ArchiveError::from(err);
    assert_eq!(err.code(), "malformed_archive", "{err}");
    assert!(err.to_string().contains("\"big\""), "{err}");
    // The reader is poisoned afterwards.
    assert_code(r.next_entry().map(|_| ()), "malformed_archive");
}

// ---- hostile archives ----------------------------------------------

#[test]
fn traversal_path() {
    let tar = tar_with(Raw::file("../x", 1).seal(), b"x");
    let e = assert_code(read_all(&zst(&tar)), "unsafe_path");
    assert!(matches!(e, ArchiveError::UnsafePath { problem: PathProblem::DotDotComponent, .. }));
}

#[test]
fn traversal_via_prefix() {
    let mut h = Raw::file("x", 1);
    h.0[field::PREFIX][..2].copy_from_slice(b"..");
    assert_code(read_all(&zst(&tar_with(h.seal(), b"x"))), "unsafe_path");
}

#[test]
fn absolute_path() {
    let tar = tar_with(Raw::file("/etc/x", 1).seal(), b"x");
    let e = assert_code(read_all(&zst(&tar)), "unsafe_path");
    assert!(matches!(e, ArchiveError::UnsafePath { problem: PathProblem::Absolute, .. }));
}

#[test]
fn other_unsafe_paths() {
    for name in [&b"a\\b"[..], b"a//b", b"./a", b"a/", b"a\x1bb", b"\xff\xfe"] {
        let tar = tar_with(Raw::file("x", 0).raw_name(name).seal(), b"");
        assert_code(read_all(&zst(&tar)), "unsafe_path");
    }
    // An empty name.
    let tar = tar_with(Raw::file("x", 0).raw_name(b"").seal(), b"");
    assert_code(read_all(&zst(&tar)), "unsafe_path");
}

#[test]
fn bytes_hidden_after_name_nul() {
    let tar = tar_with(Raw::file("x", 0).raw_name(b"a\0hidden").seal(), b"");
    assert_code(read_all(&zst(&tar)), "malformed_archive");
}

#[test]
fn non_regular_entry_types() {
    for flag in [b'1', b'2', b'3', b'4', b'5', b'6', b'7', b'x', b'g', b'L', b'K', b'S', b'D', b'V', b'Z', 0xff] {
        let tar = tar_with(Raw::file("thing", 0).typeflag(flag).seal(), b"");
        let e = assert_code(read_all(&zst(&tar)), "unsupported_entry_type");
        assert!(matches!(e, ArchiveError::UnsupportedEntryType { typeflag, .. } if typeflag == flag));
    }
}

#[test]
fn symlink_hardlink_directory_fifo_chardev() {
    let cases: [(&str, u8); 5] = [("link", b'2'), ("hard", b'1'), ("dir", b'5'), ("fifo", b'6'), ("tty", b'3')];
    for (name, flag) in cases {
        let mut h = Raw::file(name, 0).typeflag(flag);
        if flag == b'1' || flag == b'2' {
            h.0[157..168].copy_from_slice(b"/etc/passwd");
        }
        let tar = tar_with(h.seal(), b"");
        let e = assert_code(read_all(&zst(&tar)), "unsupported_entry_type");
        assert!(e.to_string().contains(name), "{e}");
    }
}

#[test]
fn pax_header() {
    let record = b"30 path=../../../../etc/passwd\n";
    let pax = Raw::file("PaxHeaders/x", record.len() as u64).typeflag(b'x').seal();
    let tar = [pax, data_blocks(record), valid_tar()].concat();
    let e = assert_code(read_all(&zst(&tar)), "unsupported_entry_type");
    assert!(e.to_string().contains("PAX extended header"), "{e}");
}

#[test]
fn gnu_longname() {
    let long = format!("{}\0", "a/".repeat(80));
    let h = Raw::file("././@LongLink", long.len() as u64).typeflag(b'L').magic(b"ustar  \0").seal();
    let tar = [h, data_blocks(long.as_bytes()), valid_tar()].concat();
    let e = assert_code(read_all(&zst(&tar)), "unsupported_entry_type");
    assert!(e.to_string().contains("GNU long name"), "{e}");
}

#[test]
fn gnu_or_v7_magic_on_regular_file() {
    for magic in [b"ustar  \0", b"\0\0\0\0\0\0\0\0", b"ustar\x0001"] {
        let tar = tar_with(Raw::file("a", 0).magic(magic).seal(), b"");
        assert_code(read_all(&zst(&tar)), "malformed_archive");
    }
}

#[test]
fn setuid_and_other_modes() {
    for mode in [b"0004755\0", b"0002755\0", b"0001644\0", b"0000777\0", b"0000664\0", b"0100644\0", b"0000600\0"] {
        let tar = tar_with(Raw::file("a", 0).mode(mode).seal(), b"");
        assert_code(read_all(&zst(&tar)), "unsafe_mode");
    }
    let tar = tar_with(Raw::file("a", 0).mode(b"06x4\0\0\0\0").seal(), b"");
    assert_code(read_all(&zst(&tar)), "malformed_archive");
    // Leading spaces and space terminators are fine.
    let tar = tar_with(Raw::file("a", 0).mode(b"   644 \0").seal(), b"");
    read_all(&zst(&tar)).unwrap();
}

#[test]
fn bad_header_checksum() {
    let mut h = Raw::file("a.txt", 1).seal();
    h[0] = b'b';
    assert_code(read_all(&zst(&tar_with(h, b"x"))), "malformed_archive");
    // A checksum summing bytes as signed chars is not accepted.
    let mut h = Raw::file("a\u{e9}", 1).seal();
    h[field::CHKSUM].copy_from_slice(b"        ");
    let signed: i64 = h.iter().map(|&b| i64::from(b as i8)).sum();
    h[field::CHKSUM].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
    assert_code(read_all(&zst(&tar_with(h, b"x"))), "malformed_archive");
}

#[test]
fn size_field_garbage() {
    let mut base256 = [0u8; 12];
    base256[0] = 0x80;
    base256[11] = 5;
    for field in [&base256, b"0000000001x\0", b"\0\0\0\0\0\0\0\0\0\0\0\0", b"-0000000001\0", b"0000000 001\0"] {
        let tar = tar_with(Raw::file("a", 5).size_field(field).seal(), b"hello");
        assert_code(read_all(&zst(&tar)), "malformed_archive");
    }
}

#[test]
fn oversized_entry() {
    let limits = Limits { max_entry_size: 4, ..Limits::default() };
    let e = assert_code(read_all_with(&zst(&valid_tar()), limits), "limit_exceeded");
    assert!(e.to_string().contains("\"ok.txt\""), "{e}");
    // The declared size is checked before any data is read: a huge
    // size with no data behind it is still a limit error.
    let tar = tar_with(Raw::file("a", 0).size_field(b"77777777777\0").seal(), b"");
    assert_code(read_all(&zst(&tar)), "limit_exceeded");
}

#[test]
fn total_over_limit() {
    let tar =
        [Raw::file("a", 600).seal(), data_blocks(&[1; 600]), Raw::file("b", 600).seal(), data_blocks(&[2; 600]), end()]
            .concat();
    read_all(&zst(&tar)).unwrap();
    let limits = Limits { max_total_size: 3000, ..Limits::default() };
    let e = assert_code(read_all_with(&zst(&tar), limits), "limit_exceeded");
    assert!(e.to_string().contains("\"b\""), "{e}");
    let limits = Limits { max_entries: 1, ..Limits::default() };
    assert_code(read_all_with(&zst(&tar), limits), "limit_exceeded");
}

#[test]
fn window_larger_than_allowed() {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    e.include_checksum(true).unwrap();
    e.window_log(27).unwrap();
    e.long_distance_matching(true).unwrap();
    e.write_all(&valid_tar()).unwrap();
    let bundle = e.finish().unwrap();
    let err = assert_code(read_all(&bundle), "limit_exceeded");
    assert!(err.to_string().contains("134217728"), "{err}");
    // Accepted when the caller raises the limit.
    let limits = Limits { max_window_log: 27, ..Limits::default() };
    read_all_with(&bundle, limits).unwrap();
}

fn one_frame_samples() -> Vec<u8> {
    write_samples_with(1, 3, false).0
}

#[test]
fn truncated_frame() {
    let bundle = one_frame_samples();
    for cut in [0, 3, 5, 20, bundle.len() / 2, bundle.len() - 4, bundle.len() - 1] {
        assert_code(read_all(&bundle[..cut]), "malformed_archive");
    }
    // Seekable: cut in a data frame, or in the seek table after them.
    let (bundle, _) = write_samples();
    let (frames, _) = split_frames(&bundle);
    let data_end: usize = frames.iter().map(|f| f.len()).sum();
    for cut in [0, 3, 5, 20, data_end / 2, data_end - 1] {
        assert_code(read_all(&bundle[..cut]), "malformed_archive");
    }
    for cut in [data_end + 4, data_end + 8, bundle.len() - 1] {
        assert_code(read_all(&bundle[..cut]), "seek_table_mismatch");
    }
    // Without the table at all, the frames alone are a valid container.
    read_all(&bundle[..data_end]).unwrap();
}

#[test]
fn flipped_content_checksum() {
    let mut bundle = one_frame_samples();
    let last = bundle.len() - 1;
    bundle[last] ^= 0x01;
    let e = assert_code(read_all(&bundle), "malformed_archive");
    assert!(e.to_string().contains("checksum"), "{e}");
    let (mut bundle, _) = write_samples();
    let data_end: usize = split_frames(&bundle).0.iter().map(|f| f.len()).sum();
    bundle[data_end - 1] ^= 0x01;
    let e = assert_code(read_all(&bundle), "malformed_archive");
    assert!(e.to_string().contains("checksum"), "{e}");
}

#[test]
fn frame_without_checksum() {
    let bundle = zstd::stream::encode_all(&valid_tar()[..], 3).unwrap();
    assert_eq!(bundle[4] & 0x04, 0);
    assert_code(read_all(&bundle), "malformed_archive");
}

#[test]
fn not_zstd_or_skippable_first() {
    assert_code(read_all(&valid_tar()), "malformed_archive");
    let mut skippable = vec![0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
    skippable.extend(zst(&valid_tar()));
    assert_code(read_all(&skippable), "malformed_archive");
}

#[test]
fn second_frame_appended() {
    // Frames are read in order as one stream: a second archive after the end marker is data
    // after it.
    let bundle = one_frame_samples();
    let doubled = [bundle.clone(), bundle].concat();
    let e = assert_code(read_all(&doubled), "trailing_data");
    assert!(e.to_string().contains("after the end-of-archive marker"), "{e}");
    let (bundle, _) = write_samples();
    let doubled = [bundle.clone(), bundle].concat();
    let e = assert_code(read_all(&doubled), "trailing_data");
    assert!(e.to_string().contains("after the seek table"), "{e}");
}

#[test]
fn skippable_frame_appended() {
    let mut bundle = one_frame_samples();
    bundle.extend([0x5F, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, b'e', b'v', b'l']);
    let e = assert_code(read_all(&bundle), "trailing_data");
    assert!(e.to_string().contains("skippable"), "{e}");
    let (mut bundle, _) = write_samples();
    bundle.extend([0x5F, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, b'e', b'v', b'l']);
    assert_code(read_all(&bundle), "trailing_data");
}

#[test]
fn garbage_after_frame() {
    let (mut bundle, _) = write_samples();
    bundle.push(0);
    assert_code(read_all(&bundle), "trailing_data");
    bundle.extend(b"garbage");
    assert_code(read_all(&bundle), "trailing_data");
}

#[test]
fn non_zero_after_end_marker() {
    let mut tar = valid_tar();
    tar.extend(b"smuggled");
    assert_code(read_all(&zst(&tar)), "trailing_data");
    // Too many zeros.
    let mut tar = valid_tar();
    tar.resize(tar.len() + MAX_TRAILING_ZEROS as usize + 1, 0);
    assert_code(read_all(&zst(&tar)), "trailing_data");
    // A lone zero block followed by another entry.
    let tar = [Raw::file("a", 0).seal(), vec![0; 512], valid_tar()].concat();
    assert_code(read_all(&zst(&tar)), "trailing_data");
}

#[test]
fn missing_or_short_end_marker() {
    let tar = [Raw::file("a", 1).seal(), data_blocks(b"x")].concat();
    assert_code(read_all(&zst(&tar)), "malformed_archive");
    let tar = [Raw::file("a", 1).seal(), data_blocks(b"x"), vec![0; 512]].concat();
    assert_code(read_all(&zst(&tar)), "malformed_archive");
    let tar = [Raw::file("a", 1).seal(), data_blocks(b"x"), vec![0; 700]].concat();
    assert_code(read_all(&zst(&tar)), "malformed_archive");
}

#[test]
fn truncated_entry_data_and_padding() {
    // Header says 1000 bytes; the stream stops after 10.
    let tar = [Raw::file("a", 1000).seal(), vec![b'x'; 10]].concat();
    assert_code(read_all(&zst(&tar)), "malformed_archive");
    // Non-zero padding.
    let mut tar = valid_tar();
    tar[512 + 5] = b'!';
    assert_code(read_all(&zst(&tar)), "malformed_archive");
}

#[test]
fn partial_header_block() {
    let tar = [valid_tar()[..1024].to_vec(), vec![b'a'; 100]].concat();
    assert_code(read_all(&zst(&tar)), "malformed_archive");
}

#[test]
fn io_errors_are_io() {
    struct Failing;
    impl Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::new(io::ErrorKind::ConnectionReset, "boom"))
        }
    }
    let r = ArchiveReader::new(io::BufReader::new(Failing), Limits::default());
    assert_code(r.map(|_| ()), "io_error");
    // Fails after the frame header.
    let bundle = zst(&valid_tar());
    let input = io::BufReader::with_capacity(8, (&bundle[..10]).chain(Failing));
    let mut r = ArchiveReader::new(input, Limits::default()).unwrap();
    assert_code(r.next_entry().map(|_| ()), "io_error");
}

#[test]
fn bad_limits() {
    let bundle = zst(&valid_tar());
    for max_window_log in [9, 32] {
        let limits = Limits { max_window_log, ..Limits::default() };
        assert_code(ArchiveReader::new(&bundle[..], limits).map(|_| ()), "io_error");
    }
}

#[test]
fn octal_parser() {
    assert_eq!(parse_octal(b"0000644\0"), Some(0o644));
    assert_eq!(parse_octal(b"  644 \0\0"), Some(0o644));
    assert_eq!(parse_octal(b"012345\0 "), Some(0o12345));
    assert_eq!(parse_octal(b"77777777777\0"), Some(0o77777777777));
    assert_eq!(parse_octal(b"777777777777"), Some(0o777777777777));
    assert_eq!(parse_octal(b"\0\0\0\0\0\0\0\0"), None);
    assert_eq!(parse_octal(b"        "), None);
    assert_eq!(parse_octal(b"0008\0\0\0\0"), None);
    assert_eq!(parse_octal(b"06 4\0\0\0\0"), None);
    assert_eq!(parse_octal(&[0x80, 0, 0, 0, 0, 0, 0, 1]), None);
}
