//! Writing the canonical container: ustar headers built from fixed values,
//! streamed through one zstd frame.
//!
//! Why this file exists: `bundle pack` must produce byte-identical output
//! for identical input on any machine, so every byte of every header is
//! decided here (no file-system metadata, no PAX/GNU extensions, no record
//! padding) and the zstd parameters are pinned, including the worker count.
//! It also hashes each file's bytes as they are written, so the hashes the
//! manifest records are those of the bytes actually in the bundle.
//!
//! Headers are built with `tar::Header::new_ustar()` and its setters; the
//! name/prefix split is our own (`split_ustar_path`) because `set_path`
//! would consult `std::path` rules. Numeric fields are only ever given values
//! that fit the octal form, so `tar`'s base-256 fallback is never reached.

use std::io::{self, Read, Write};

use super::pipe::Pipe;
use super::{ArchiveError, BLOCK, LEVELS, MODE_EXECUTABLE, MODE_FILE, check_path, split_ustar_path};

/// zstd worker threads: one per core (at least 1, at most 32).
///
/// zstd's multithreaded ("MT") mode is asynchronous and splits the input
/// into jobs whose size depends only on the compression parameters. The
/// zstd maintainers state that *streaming* MT output is identical for any
/// `nbWorkers >= 1` (facebook/zstd issues #2238 and #2327; the one-shot
/// `ZSTD_e_end`-on-first-call exception in #2327 does not apply to us, since
/// we always stream with `ZSTD_e_continue` first). `zstd.h` itself (1.5.7,
/// `ZSTD_c_nbWorkers`) does not promise it, so a test checks that 1, 2 and
/// 4 workers give the same bytes on a multi-job input; if that test ever
/// fails, pin this to a constant. MT output differs from single-threaded
/// (`nbWorkers == 0`) output, so the value must stay >= 1.
fn zstd_workers() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 32) as u32
}

/// Whether the encoder is fed on a thread of its own: only when more than one CPU is usable
/// (affinity mask or cgroup quota, which `available_parallelism` respects). On one CPU the two
/// threads could only take turns, paying a wake-up per hand-over.
fn second_cpu() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
}

type Encoder<W> = zstd::stream::write::Encoder<'static, W>;

/// Where the tar stream goes: the encoder itself, or a [`Pipe`] to the thread that feeds it.
/// Both give the encoder the same bytes in the same order, so the output is the same.
enum Sink<W: Write> {
    Inline { encoder: Encoder<W>, buf: Vec<u8> },
    Threaded(Pipe<Encoder<W>>),
}

impl<W: Write> Sink<W> {
    /// Reads at most `limit` bytes of `data` into the stream (at least one unless `data` is at
    /// its end) and returns them for hashing. Errors of the stream are returned as they are, so
    /// the caller cannot tell them from read errors; pack tells them apart by its output.
    fn read_from(&mut self, data: &mut dyn Read, limit: usize) -> io::Result<&[u8]> {
        match self {
            Sink::Inline { encoder, buf } => {
                let want = buf.len().min(limit);
                let n = data.read(&mut buf[..want])?;
                encoder.write_all(&buf[..n])?;
                Ok(&buf[..n])
            }
            Sink::Threaded(pipe) => pipe.read_from(data, limit),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Inline { encoder, .. } => encoder.write_all(bytes),
            Sink::Threaded(pipe) => pipe.write_all(bytes),
        }
    }

    fn finish(self) -> io::Result<W> {
        let encoder = match self {
            Sink::Inline { encoder, .. } => encoder,
            Sink::Threaded(pipe) => pipe.finish()?,
        };
        encoder.finish()
    }
}

/// The largest zstd block the writer emits: one byte under zstd's usual 128 KiB.
///
/// libzstd 1.5.7 splits each full 128 KiB block at a guessed boundary before compressing it
/// (`ZSTD_splitBlock`, "pre-block splitting"); that cost `bundle pack` about 0.3 s of CPU per GiB
/// at level 3 for 0.0007% smaller output on the bench agent. zstd only pre-splits full 128 KiB
/// blocks (`ZSTD_optimalBlockSize`), so a smaller maximum turns it off; this is the one way the
/// safe zstd API offers (`ZSTD_c_blockSplitterLevel` has no `CParameter`). Any zstd decoder reads
/// the result (blocks may always be smaller than 128 KiB); it is part of what makes packs
/// byte-identical (docs: format reference, Reproducibility).
pub(crate) const MAX_BLOCK: u32 = (128 << 10) - 1;

/// The size of zstd's multithreaded jobs at `level`, when not libzstd's default.
///
/// Memory (issue 29: pack within 64 MiB): libzstd keeps an input buffer of about
/// `(workers + 3)` jobs and an output buffer per job in flight, and makes jobs four times the
/// window (`ZSTDMT_computeTargetJobLog`): 8 MiB at levels 3 to 8 (2 MiB windows), which took
/// pack to 79-101 MiB of peak memory on 2 CPUs. 4 MiB jobs (still twice the window) halve
/// those buffers; each job re-reads a 256 KiB overlap of the one before, a few percent more
/// match-finding for about 0.01% larger output. Other levels keep the default: levels 1 and 2
/// already have jobs of 2 and 4 MiB, and levels 9 and up, chosen for size, keep theirs.
/// Part of what makes packs byte-identical (docs: format reference, Reproducibility).
pub(crate) fn job_size(level: i32) -> Option<u32> {
    (3..=8).contains(&level).then_some(4 << 20)
}

/// The encoder's output buffer: how much compressed data one call into libzstd may flush.
///
/// Memory (issue 29): the `zstd` crate's default is 32 KiB, and each call flushes at most
/// that much while it may take a whole hand-over buffer (1 MiB) of input. In multithreaded
/// mode the finished jobs' outputs (4 MiB each, up to eight jobs in flight) then waited for
/// the 32 KiB flushes: pack of 1 GiB peaked at 70 MiB. A flush as large as the input offered
/// keeps up with the workers. The compressed bytes do not depend on it.
const ENCODER_OUT_BUF: usize = 1 << 20;

/// Largest value an 11-digit octal ustar field (size, mtime) can hold.
const MAX_OCTAL_11: u64 = 0o777_7777_7777;

/// Size of the copy buffer [`ArchiveWriter::append`] uses when it feeds the encoder itself.
const COPY_BUF: usize = 64 * 1024;

/// Most bytes read from a source at once (when the encoder is fed on its own thread, straight
/// into the hand-over buffer; else at most [`COPY_BUF`]).
const READ_PIECE: usize = 256 * 1024;

static ZEROS: [u8; BLOCK] = [0; BLOCK];

/// Streams entries into an `agent.bundle` container (see the module docs
/// and `docs/book/src/reference/format.md`).
///
/// After any error from [`append`](Self::append) the writer is unusable:
/// further calls fail, and the output must be discarded.
pub struct ArchiveWriter<W: Write> {
    sink: Sink<W>,
    mtime: u64,
    /// Set when an error left a partial entry in the stream.
    broken: bool,
}

impl<W: Write + Send + 'static> ArchiveWriter<W> {
    /// Starts a bundle written to `out`, compressed on a thread of its own when more than one
    /// CPU is usable (see [`Pipe`](super::pipe)).
    ///
    /// `level` must be in 1..=19 (levels 20+ need windows larger than a
    /// default reader accepts); `mtime` is stored in every header and must
    /// fit in 11 octal digits (< 2^33). Both are rejected as
    /// [`ArchiveError::Io`] with kind `InvalidInput`.
    pub fn new(out: W, level: i32, mtime: u64) -> Result<Self, ArchiveError> {
        Self::with_workers(out, level, mtime, zstd_workers(), second_cpu())
    }

    /// [`new`](Self::new) with an explicit worker count and feeding thread; only tests use
    /// anything but [`zstd_workers`] and [`second_cpu`].
    fn with_workers(out: W, level: i32, mtime: u64, workers: u32, threaded: bool) -> Result<Self, ArchiveError> {
        if !LEVELS.contains(&level) {
            return Err(ArchiveError::invalid_argument(format!("compression level {level} is outside 1..=19")));
        }
        if mtime > MAX_OCTAL_11 {
            return Err(ArchiveError::invalid_argument(format!(
                "mtime {mtime} does not fit a ustar header (max {MAX_OCTAL_11})"
            )));
        }
        let io_err = |source| ArchiveError::Io { path: None, source };
        let raw = zstd::stream::raw::Encoder::new(level).map_err(io_err)?;
        let mut encoder = Encoder::with_writer(zstd::stream::zio::Writer::new_with_capacity(out, raw, ENCODER_OUT_BUF));
        encoder.include_checksum(true).map_err(io_err)?;
        // A streaming writer never knows the content size; say so explicitly.
        encoder.include_contentsize(false).map_err(io_err)?;
        encoder.include_dictid(false).map_err(io_err)?;
        encoder.multithread(workers).map_err(io_err)?;
        encoder.set_parameter(zstd::zstd_safe::CParameter::MaxBlockSize(MAX_BLOCK)).map_err(io_err)?;
        if let Some(size) = job_size(level) {
            encoder.set_parameter(zstd::zstd_safe::CParameter::JobSize(size)).map_err(io_err)?;
        }
        let sink = if threaded {
            Sink::Threaded(Pipe::new(encoder).map_err(io_err)?)
        } else {
            Sink::Inline { encoder, buf: vec![0; COPY_BUF] }
        };
        Ok(ArchiveWriter { sink, mtime, broken: false })
    }
}

impl<W: Write> ArchiveWriter<W> {
    /// Writes one entry: header, then exactly `size` bytes read from
    /// `data`, hashing with BLAKE3 exactly the bytes written; returns the
    /// hash. If `data` yields fewer or more than `size` bytes, returns
    /// [`ArchiveError::SourceChanged`] (the caller aborts the pack).
    ///
    /// `path` must pass [`check_path`](super::check_path)
    /// ([`ArchiveError::UnsafePath`]) and fit a ustar header
    /// ([`ArchiveError::PathTooLong`]); `size` must be below 8 GiB
    /// ([`ArchiveError::LimitExceeded`]). Those checks happen before anything
    /// is written, so they leave the writer usable.
    pub fn append(
        &mut self,
        path: &str,
        size: u64,
        executable: bool,
        data: &mut dyn Read,
    ) -> Result<blake3::Hash, ArchiveError> {
        if self.broken {
            return Err(broken_error());
        }
        let header = self.header(path, size, executable)?;
        self.broken = true;
        let hash = self.write_entry(path, &header, size, data)?;
        self.broken = false;
        Ok(hash)
    }

    /// Convenience for small in-memory entries (manifest.toml and its
    /// signature): mode 0o644.
    pub fn append_bytes(&mut self, path: &str, bytes: &[u8]) -> Result<(), ArchiveError> {
        let mut data = bytes;
        self.append(path, bytes.len() as u64, false, &mut data).map(drop)
    }

    /// Writes the tar end marker (two zero blocks), ends the zstd frame
    /// (with its content checksum), flushes and returns the inner writer.
    pub fn finish(mut self) -> Result<W, ArchiveError> {
        if self.broken {
            return Err(broken_error());
        }
        let io_err = |source| ArchiveError::Io { path: None, source };
        self.sink.write_all(&ZEROS).map_err(io_err)?;
        self.sink.write_all(&ZEROS).map_err(io_err)?;
        let mut out = self.sink.finish().map_err(io_err)?;
        out.flush().map_err(io_err)?;
        Ok(out)
    }

    /// Builds the 512-byte header, validating everything first.
    fn header(&self, path: &str, size: u64, executable: bool) -> Result<tar::Header, ArchiveError> {
        check_path(path).map_err(|problem| ArchiveError::UnsafePath { path: path.to_owned(), problem })?;
        let (prefix, name) =
            split_ustar_path(path).ok_or_else(|| ArchiveError::PathTooLong { path: path.to_owned() })?;
        if size > MAX_OCTAL_11 {
            return Err(ArchiveError::LimitExceeded {
                path: Some(path.to_owned()),
                what: "entry size (ustar octal field)",
                value: size,
                limit: MAX_OCTAL_11,
            });
        }

        // new_ustar(): all zero, magic "ustar\0", version "00".
        let mut header = tar::Header::new_ustar();
        {
            let ustar = header.as_ustar_mut().ok_or_else(|| ArchiveError::Io {
                path: Some(path.to_owned()),
                source: io::Error::other("tar::Header::new_ustar() is not a ustar header"),
            })?;
            ustar.name[..name.len()].copy_from_slice(name.as_bytes());
            ustar.prefix[..prefix.len()].copy_from_slice(prefix.as_bytes());
        }
        header.set_mode(if executable { MODE_EXECUTABLE } else { MODE_FILE });
        header.set_uid(0);
        header.set_gid(0);
        header.set_size(size);
        header.set_mtime(self.mtime);
        header.set_entry_type(tar::EntryType::Regular);
        // uname, gname and linkname stay all-NUL (empty). Device numbers are
        // written as octal zero, as GNU tar does for ustar.
        header
            .set_device_major(0)
            .and_then(|()| header.set_device_minor(0))
            .map_err(|source| ArchiveError::Io { path: Some(path.to_owned()), source })?;
        header.set_cksum();
        Ok(header)
    }

    fn write_entry(
        &mut self,
        path: &str,
        header: &tar::Header,
        size: u64,
        data: &mut dyn Read,
    ) -> Result<blake3::Hash, ArchiveError> {
        let io_err = |source| ArchiveError::Io { path: Some(path.to_owned()), source };
        self.sink.write_all(header.as_bytes()).map_err(io_err)?;

        let mut hasher = blake3::Hasher::new();
        let mut remaining = size;
        while remaining > 0 {
            let want = READ_PIECE.min(usize::try_from(remaining).unwrap_or(usize::MAX));
            let chunk = match self.sink.read_from(data, want) {
                Ok([]) => {
                    return Err(ArchiveError::SourceChanged {
                        path: path.to_owned(),
                        reason: format!("expected {size} bytes, it ended after {}", size - remaining),
                    });
                }
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(e)),
            };
            hasher.update(chunk);
            remaining -= chunk.len() as u64;
        }
        // The source must be exhausted now: one more byte means it grew.
        let mut one = [0u8; 1];
        loop {
            match data.read(&mut one) {
                Ok(0) => break,
                Ok(_) => {
                    return Err(ArchiveError::SourceChanged {
                        path: path.to_owned(),
                        reason: format!("expected {size} bytes, it has more"),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(e)),
            }
        }
        let padding = padding_for(size);
        self.sink.write_all(&ZEROS[..padding]).map_err(io_err)?;
        Ok(hasher.finalize())
    }
}

fn broken_error() -> ArchiveError {
    ArchiveError::Io {
        path: None,
        source: io::Error::other("the archive writer failed earlier; its output is incomplete"),
    }
}

/// Zero bytes that follow `size` bytes of data to reach a block boundary.
pub(crate) fn padding_for(size: u64) -> usize {
    // The remainder is < 512, so the cast cannot truncate.
    ((BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64) as usize
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::archive::{ArchiveReader, Limits};
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

    pub(crate) fn write_samples() -> (Vec<u8>, Vec<blake3::Hash>) {
        write_samples_with(zstd_workers(), 3, second_cpu())
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
    fn frame_header_has_checksum_and_no_content_size() {
        let (bundle, _) = write_samples();
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
        match Command::new(tool).args(args).output() {
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
        if let Some((tool, package)) =
            packages.into_iter().find(|(t, _)| run_tool(t, &["--version".as_ref()]).is_none())
        {
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
}
