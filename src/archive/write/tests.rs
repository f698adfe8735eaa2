use super::*;
use crate::archive::{ArchiveReader, Limits};
use crate::archive::{FRAME_SIZE, FrameEntry, SeekTable};
use std::process::Command;

/// Deterministic, moderately compressible test data.
pub(crate) fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Limited alphabet so zstd has something to do.
        out.push(b"abcdefgh \n"[(x % 10) as usize]);
    }
    out
}

pub(crate) struct Sample {
    pub path: String,
    pub data: Vec<u8>,
    pub executable: bool,
}

pub(crate) fn samples() -> Vec<Sample> {
    let long_path = format!("{}/{}/{}.txt", "deep".repeat(20), "er".repeat(30), "f".repeat(90));
    assert!(long_path.len() > 100 && long_path.len() <= 255);
    let s = |path: &str, data: Vec<u8>, executable: bool| Sample { path: path.to_owned(), data, executable };
    vec![
        s("manifest.toml", b"name = \"demo\"\n".to_vec(), false),
        s("empty.txt", Vec::new(), false),
        s("exact/512.bin", pseudo_random(512, 1), false),
        s("exact/1024.bin", pseudo_random(1024, 2), false),
        s("odd/513.bin", pseudo_random(513, 3), false),
        s("bin/run.sh", b"#!/bin/sh\necho hi\n".to_vec(), true),
        s(&long_path, pseudo_random(3000, 4), false),
        s("big/data.bin", pseudo_random(300_000, 5), false),
        s(&"n".repeat(100), b"exactly 100 byte name".to_vec(), false),
        s("ünïcødé/文件.md", "héllo".as_bytes().to_vec(), false),
    ]
}

/// Writes `samples()` and returns the bundle bytes and the hashes.
pub(crate) fn write_samples_with(workers: u32, level: i32, threaded: bool) -> (Vec<u8>, Vec<blake3::Hash>) {
    let mut w = ArchiveWriter::with_workers(Vec::new(), level, 1_700_000_000, workers, threaded).unwrap();
    let mut hashes = Vec::new();
    for s in samples() {
        let h = w.append(&s.path, s.data.len() as u64, s.executable, &mut &s.data[..]).unwrap();
        hashes.push(h);
    }
    (w.finish().unwrap(), hashes)
}

/// `samples()` through the seekable writer (frames and seek table).
pub(crate) fn write_samples() -> (Vec<u8>, Vec<blake3::Hash>) {
    write_seekable(&samples(), second_cpu())
}

pub(crate) fn write_seekable(samples: &[Sample], threaded: bool) -> (Vec<u8>, Vec<blake3::Hash>) {
    let mut w = ArchiveWriter::seekable(Vec::new(), 3, 1_700_000_000, threaded).unwrap();
    let hashes =
        samples.iter().map(|s| w.append(&s.path, s.data.len() as u64, s.executable, &mut &s.data[..]).unwrap());
    let hashes = hashes.collect();
    (w.finish().unwrap(), hashes)
}

/// The data frames of a seekable bundle (their bytes) and its seek table's entries.
pub(crate) fn split_frames(bundle: &[u8]) -> (Vec<&[u8]>, Vec<FrameEntry>) {
    let read_at = |at: u64, buf: &mut [u8]| {
        buf.copy_from_slice(&bundle[at as usize..at as usize + buf.len()]);
        Ok(())
    };
    let table = SeekTable::read_from(bundle.len() as u64, read_at, 1 << 20).unwrap().expect("a seek table");
    let mut frames = Vec::new();
    let mut at = 0;
    while at < table.table_offset as usize {
        let len = zstd::zstd_safe::find_frame_compressed_size(&bundle[at..]).unwrap();
        frames.push(&bundle[at..at + len]);
        at += len;
    }
    (frames, table.frames)
}

#[test]
fn seekable_frames_are_cut_at_entry_boundaries_and_listed_in_the_table() {
    let (bundle, _) = write_samples();
    let (frames, table) = split_frames(&bundle);
    assert_eq!(frames.len(), table.len());
    let mut tar = Vec::new();
    for (frame, entry) in frames.iter().zip(&table) {
        assert_eq!(frame.len(), entry.compressed as usize);
        let fhd = frame[4];
        assert_eq!(fhd & 0x04, 0x04, "content checksum flag");
        assert_eq!(fhd & 0x03, 0, "no dictionary id");
        let content = zstd::stream::decode_all(*frame).unwrap();
        assert!(matches!(zstd::zstd_safe::get_frame_content_size(frame), Ok(Some(n)) if n == content.len() as u64));
        assert_eq!(content.len(), entry.decompressed as usize);
        tar.extend_from_slice(&content);
    }
    assert_eq!(tar, tar_bytes(&bundle));
    // Small entries share a frame: the samples (under 4 MiB in all) are one frame.
    assert_eq!(frames.len(), 1);
}

#[test]
fn large_entries_are_cut_every_frame_size_and_small_ones_start_a_frame_when_they_do_not_fit() {
    let f = FRAME_SIZE;
    let s =
        |path: &str, len: usize| Sample { path: path.into(), data: pseudo_random(len, len as u64), executable: false };
    // 512 + 3 MiB fits; the next (512 + 2 MiB) does not fit in what is left; the large one
    // (2.5 frames) starts a frame of its own and is cut every FRAME_SIZE; the small one after
    // it joins its last piece.
    let samples = [s("a", 3 << 20), s("b", 2 << 20), s("c", 2 * f + f / 2), s("d", 1000)];
    let (one, _) = write_seekable(&samples, false);
    let (frames, table) = split_frames(&one);
    let sizes: Vec<u32> = table.iter().map(|e| e.decompressed).collect();
    let entry = |len: usize| (512 + len + padding_for(len as u64)) as u32;
    let c = entry(2 * f + f / 2);
    assert_eq!(
        sizes,
        [entry(3 << 20), entry(2 << 20), f as u32, f as u32, c - 2 * f as u32 + entry(1000) + 1024],
        "{frames:?}"
    );
    // The same bytes whether frames are compressed on other threads or not.
    assert!(one == write_seekable(&samples, true).0, "threads changed the output");
    let mut r = ArchiveReader::new(&one[..], Limits::default()).unwrap();
    while let Some(mut e) = r.next_entry().unwrap() {
        let want = samples.iter().find(|s| s.path == e.path).unwrap();
        assert_eq!(e.hash().unwrap(), blake3::hash(&want.data));
    }
    r.finish().unwrap();
}

fn tar_bytes(bundle: &[u8]) -> Vec<u8> {
    zstd::stream::decode_all(bundle).unwrap()
}

#[test]
fn headers_are_canonical_ustar() {
    let (bundle, _) = write_samples();
    let tar = tar_bytes(&bundle);
    let h = &tar[..512];
    assert_eq!(&h[..13], b"manifest.toml");
    assert!(h[13..100].iter().all(|&b| b == 0));
    assert_eq!(&h[100..108], b"0000644\0"); // mode
    assert_eq!(&h[108..116], b"0000000\0"); // uid
    assert_eq!(&h[116..124], b"0000000\0"); // gid
    assert_eq!(&h[124..136], b"00000000016\0"); // size 14
    assert_eq!(&h[136..148], format!("{:011o}\0", 1_700_000_000u64).as_bytes());
    assert_eq!(h[156], b'0');
    assert!(h[157..257].iter().all(|&b| b == 0)); // linkname
    assert_eq!(&h[257..263], b"ustar\0");
    assert_eq!(&h[263..265], b"00");
    assert!(h[265..329].iter().all(|&b| b == 0)); // uname, gname
    assert_eq!(&h[329..337], b"0000000\0"); // devmajor
    assert_eq!(&h[337..345], b"0000000\0"); // devminor
    assert!(h[345..512].iter().all(|&b| b == 0)); // prefix, pad
    // The stream ends with exactly two zero blocks, no record padding.
    let total: usize =
        samples().iter().map(|s| 512 + s.data.len() + padding_for(s.data.len() as u64)).sum::<usize>() + 1024;
    assert_eq!(tar.len(), total);
    assert!(tar[tar.len() - 1024..].iter().all(|&b| b == 0));
}

#[test]
fn executable_and_prefix_headers() {
    let (bundle, _) = write_samples();
    let tar = tar_bytes(&bundle);
    let mut off = 0;
    let mut seen_exec = false;
    let mut seen_prefix = false;
    for s in samples() {
        let h = &tar[off..off + 512];
        if s.executable {
            assert_eq!(&h[100..108], b"0000755\0");
            seen_exec = true;
        }
        if s.path.len() > 100 {
            let (prefix, name) = split_ustar_path(&s.path).unwrap();
            assert_eq!(&h[345..345 + prefix.len()], prefix.as_bytes());
            assert_eq!(&h[..name.len()], name.as_bytes());
            seen_prefix = true;
        }
        off += 512 + s.data.len() + padding_for(s.data.len() as u64);
    }
    assert!(seen_exec && seen_prefix);
}

#[test]
fn one_frame_header_has_checksum_and_no_content_size() {
    let (bundle, _) = write_samples_with(zstd_workers(), 3, second_cpu());
    assert_eq!(&bundle[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
    let fhd = bundle[4];
    assert_eq!(fhd >> 6, 0, "no frame content size");
    assert_eq!(fhd & 0x20, 0, "not single-segment");
    assert_eq!(fhd & 0x04, 0x04, "content checksum flag");
    assert_eq!(fhd & 0x03, 0, "no dictionary id");
    assert!(matches!(zstd::zstd_safe::get_frame_content_size(&bundle), Ok(None)));
}

#[test]
fn reproducible() {
    let (a, ha) = write_samples();
    let (b, hb) = write_samples();
    assert_eq!(a, b);
    assert_eq!(ha, hb);
}

#[test]
fn reproducible_across_worker_counts() {
    // At level 1 a zstd MT job is 2 MiB, so 7 MiB of input makes four jobs.
    let data = pseudo_random(7 << 20, 42);
    let write_with = |workers, threaded| {
        let mut w = ArchiveWriter::with_workers(Vec::new(), 1, 0, workers, threaded).unwrap();
        w.append("big.bin", data.len() as u64, false, &mut &data[..]).unwrap();
        w.append_bytes("small.txt", b"x").unwrap();
        w.finish().unwrap()
    };
    let write = |workers| write_with(workers, false);
    let one = write(1);
    // Fed on the calling thread or on a thread of its own: the same bytes.
    assert!(one == write_with(1, true), "a feeding thread changed the output");
    assert!(one == write_with(2, true), "a feeding thread changed the output");
    assert_eq!(one, write(2));
    assert_eq!(one, write(4));
    assert_eq!(one, write(zstd_workers()));
    // Single-threaded mode (0 workers) is a different encoder: this shows the
    // comparison above really exercised multithreaded mode.
    assert_ne!(one, write(0));
    assert_eq!(zstd::stream::decode_all(&one[..]).unwrap().len(), 512 + data.len() + 512 + 512 + 1024);
    // The smaller samples too, at another level.
    assert_eq!(write_samples_with(1, 7, false).0, write_samples_with(3, 7, false).0);
    assert_eq!(write_samples_with(1, 7, false), write_samples_with(2, 7, true));
}

#[test]
fn blocks_stay_under_128_kib_so_zstd_does_not_pre_split_them() {
    // Incompressible bytes go into raw blocks, whose headers give their full size.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let data: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut w = ArchiveWriter::with_workers(Vec::new(), 3, 0, 1, false).unwrap();
    w.append("random.bin", data.len() as u64, false, &mut &data[..]).unwrap();
    let bundle = w.finish().unwrap();
    // Frame header: magic, descriptor, window byte (no dictionary ID, no content size).
    let mut at = 6;
    let mut raw = Vec::new();
    loop {
        let header = u32::from_le_bytes([bundle[at], bundle[at + 1], bundle[at + 2], 0]);
        let (last, kind, size) = (header & 1 == 1, (header >> 1) & 3, (header >> 3) as usize);
        // Raw blocks hold `size` bytes, RLE blocks one, compressed blocks `size`.
        at += 3 + if kind == 1 { 1 } else { size };
        if kind == 0 {
            raw.push(size);
        }
        if last {
            break;
        }
    }
    assert_eq!(bundle.len(), at + 4, "the content checksum ends the frame and the file");
    assert!(raw.iter().all(|&s| s <= MAX_BLOCK as usize), "{raw:?}");
    assert!(raw.contains(&(MAX_BLOCK as usize)), "{raw:?}");
}

#[test]
fn hash_covers_written_bytes() {
    let (_, hashes) = write_samples();
    for (s, h) in samples().iter().zip(&hashes) {
        assert_eq!(*h, blake3::hash(&s.data), "{}", s.path);
    }
}

#[test]
fn source_shorter_or_longer_is_source_changed() {
    let mut w = ArchiveWriter::new(Vec::new(), 3, 0).unwrap();
    let e = w.append("a.txt", 10, false, &mut &b"short"[..]).unwrap_err();
    assert_eq!(e.code(), "source_changed", "{e}");
    assert!(e.to_string().contains("\"a.txt\""), "{e}");
    // The writer refuses to go on after a partial entry.
    assert_eq!(w.append_bytes("b", b"").unwrap_err().code(), "io_error");
    assert_eq!(w.finish().unwrap_err().code(), "io_error");

    let mut w = ArchiveWriter::new(Vec::new(), 3, 0).unwrap();
    let e = w.append("a.txt", 3, false, &mut &b"longer"[..]).unwrap_err();
    assert_eq!(e.code(), "source_changed", "{e}");
}

/// Takes `room` bytes, then fails as a full disk does.
struct FullDisk(usize);

impl Write for FullDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0 == 0 {
            return Err(io::Error::from_raw_os_error(28));
        }
        let n = buf.len().min(self.0);
        self.0 -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_disk_is_reported_as_such_whether_or_not_a_thread_feeds_zstd() {
    let data = pseudo_random(24 << 20, 9);
    for threaded in [false, true] {
        let mut w = ArchiveWriter::with_workers(FullDisk(1000), 1, 0, 1, threaded).unwrap();
        let err = w
            .append("big.bin", data.len() as u64, false, &mut &data[..])
            .map(drop)
            .and_then(|()| w.finish().map(drop))
            .unwrap_err();
        let ArchiveError::Io { source, .. } = &err else { panic!("threaded {threaded}: {err}") };
        assert_eq!(source.raw_os_error(), Some(28), "threaded {threaded}: {err}");
    }
}

#[test]
fn rejected_paths_leave_writer_usable() {
    let mut w = ArchiveWriter::new(Vec::new(), 3, 0).unwrap();
    let e = w.append_bytes("../escape", b"x").unwrap_err();
    assert_eq!(e.code(), "unsafe_path");
    let e = w.append_bytes(&"x".repeat(101), b"x").unwrap_err();
    assert!(matches!(e, ArchiveError::PathTooLong { .. }), "{e}");
    assert_eq!(e.code(), "unsafe_path");
    let e = w.append("huge", MAX_OCTAL_11 + 1, false, &mut io::empty()).unwrap_err();
    assert_eq!(e.code(), "limit_exceeded");
    w.append_bytes("ok.txt", b"fine").unwrap();
    let bundle = w.finish().unwrap();
    let mut r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
    assert_eq!(r.next_entry().unwrap().unwrap().path, "ok.txt");
    assert!(r.next_entry().unwrap().is_none());
    r.finish().unwrap();
}

#[test]
fn bad_arguments() {
    for level in [0, 20, 22, -1] {
        let e = ArchiveWriter::new(Vec::new(), level, 0).err().unwrap();
        assert_eq!(e.code(), "io_error");
    }
    let e = ArchiveWriter::new(Vec::new(), 3, MAX_OCTAL_11 + 1).err().unwrap();
    assert_eq!(e.code(), "io_error");
    ArchiveWriter::new(Vec::new(), 19, MAX_OCTAL_11).unwrap();
}

#[test]
fn empty_archive() {
    let w = ArchiveWriter::new(Vec::new(), 3, 0).unwrap();
    let bundle = w.finish().unwrap();
    assert_eq!(tar_bytes(&bundle), vec![0; 1024]);
    let mut r = ArchiveReader::new(&bundle[..], Limits::default()).unwrap();
    assert!(r.next_entry().unwrap().is_none());
    r.finish().unwrap();
}

/// Runs a stock tool on `args`; `Ok(None)` if it is not installed.
fn run_tool(tool: &str, args: &[&std::ffi::OsStr]) -> Option<std::process::Output> {
    // A UTF-8 locale whatever the caller's environment: without one (`env -i`), GNU tar escapes
    // non-ASCII names in its listing as octal.
    match Command::new(tool).args(args).env("LC_ALL", "C.UTF-8").output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => panic!("running {tool}: {e}"),
    }
}

/// GNU tar, bsdtar and zstd accept the output and extract the same bytes and modes. A missing
/// tool fails under `BUNDLE_REQUIRE_TOOLS` and is a visible skip elsewhere (as in tests/cli).
#[test]
fn stock_tools_accept_output() {
    let packages = [("zstd", "zstd"), ("tar", "tar"), ("bsdtar", "libarchive-tools")];
    if let Some((tool, package)) = packages.into_iter().find(|(t, _)| run_tool(t, &["--version".as_ref()]).is_none()) {
        assert!(std::env::var_os("BUNDLE_REQUIRE_TOOLS").is_none(), "`{tool}` is required but missing");
        let (test, fix) = ("archive::write::tests::stock_tools_accept_output", format!("apt install {package}"));
        io::stderr().write_all(format!("SKIPPED {test}: tool {tool} missing ({fix})\n").as_bytes()).unwrap();
        if let Some(log) = std::env::var_os("BUNDLE_SKIP_LOG") {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
            f.write_all(format!("tool {tool}\t{fix}\t{test}\n").as_bytes()).unwrap();
        }
        return;
    }
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("test.agent.bundle");
    std::fs::write(&bundle, write_samples().0).unwrap();
    let b = bundle.as_os_str();
    let os = |s: &'static str| std::ffi::OsStr::new(s);

    let tools: [(&str, Vec<&std::ffi::OsStr>); 3] = [
        ("zstd", vec![os("-q"), os("-t"), b]),
        ("tar", vec![os("--zstd"), os("-tvf"), b]),
        ("bsdtar", vec![os("-tvf"), b]),
    ];
    for (tool, args) in &tools {
        let out = run_tool(tool, args).unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{tool} failed: {stderr}");
        assert!(stderr.trim().is_empty(), "{tool} warned: {stderr}");
        if *tool != "zstd" {
            for s in samples() {
                assert!(stdout.contains(&s.path), "{tool} listing lacks {}:\n{stdout}", s.path);
            }
        }
    }

    for (tool, extra) in [("tar", Some("--zstd")), ("bsdtar", None)] {
        let dest = dir.path().join(format!("x-{tool}"));
        std::fs::create_dir(&dest).unwrap();
        let mut args = vec![os("-xf"), b, os("-C"), dest.as_os_str()];
        if let Some(extra) = extra {
            args.insert(0, os(extra));
        }
        let out = run_tool(tool, &args).unwrap();
        assert!(out.status.success(), "{tool} -x: {}", String::from_utf8_lossy(&out.stderr));
        for s in samples() {
            let p = dest.join(&s.path);
            assert_eq!(std::fs::read(&p).unwrap(), s.data, "{tool}: {}", s.path);
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o100 != 0, s.executable, "{tool}: {} mode {mode:o}", s.path);
        }
    }
}
