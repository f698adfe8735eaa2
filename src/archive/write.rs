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

use super::compress::FrameSink;
// Whether the encoder is fed on a thread of its own (on one CPU the two threads could only
// take turns, paying a wake-up per hand-over).
use super::pipe::Pipe;
use super::{ArchiveError, BLOCK, LEVELS, MODE_EXECUTABLE, MODE_FILE, check_path, split_ustar_path};
use crate::handoff::second_cpu;

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
    crate::workers::usable_cpus().clamp(1, 32) as u32
}

type Encoder<W> = zstd::stream::write::Encoder<'static, W>;

/// Where the tar stream goes: the encoder itself, or a [`Pipe`] to the thread that feeds it.
/// Both give the encoder the same bytes in the same order, so the output is the same.
enum Sink<W: Write> {
    Inline {
        encoder: Encoder<W>,
        buf: Vec<u8>,
    },
    Threaded(Pipe<Encoder<W>>),
    /// Independent frames cut at entry boundaries, and the seek table.
    Frames(FrameSink<W>),
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
            Sink::Frames(frames) => frames.read_from(data, limit),
        }
    }

    /// An entry of `len` tar bytes starts (where frames may be cut).
    fn entry(&mut self, len: u64) -> io::Result<()> {
        match self {
            Sink::Frames(frames) => frames.entry(len),
            _ => Ok(()),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Inline { encoder, .. } => encoder.write_all(bytes),
            Sink::Threaded(pipe) => pipe.write_all(bytes),
            Sink::Frames(frames) => frames.write_all(bytes),
        }
    }

    fn finish(self) -> io::Result<W> {
        let encoder = match self {
            Sink::Inline { encoder, .. } => encoder,
            Sink::Threaded(pipe) => pipe.finish()?,
            Sink::Frames(frames) => return frames.finish(),
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
    /// Starts a bundle written to `out`: independent zstd frames cut at entry boundaries and
    /// compressed on every usable CPU (at most four), then the seek table (see [`compress`](super::compress)).
    ///
    /// `level` must be in 1..=19 (levels 20+ need windows larger than a
    /// default reader accepts); `mtime` is stored in every header and must
    /// fit in 11 octal digits (< 2^33). Both are rejected as
    /// [`ArchiveError::Io`] with kind `InvalidInput`.
    pub fn new(out: W, level: i32, mtime: u64) -> Result<Self, ArchiveError> {
        Self::seekable(out, level, mtime, second_cpu())
    }

    /// [`new`](Self::new), compressing on the calling thread (`threaded` false) or on threads
    /// of its own: the same bytes either way.
    pub(crate) fn seekable(out: W, level: i32, mtime: u64, threaded: bool) -> Result<Self, ArchiveError> {
        check_arguments(level, mtime)?;
        Ok(ArchiveWriter { sink: Sink::Frames(FrameSink::new(out, level, threaded)), mtime, broken: false })
    }

    /// Starts a bundle in the layout of releases before seekable bundles: the whole archive in
    /// one zstd frame (multithreaded zstd, fed on a thread of its own when more than one CPU is
    /// usable; see [`Pipe`](super::pipe)), no seek table. Readers still accept it; only the
    /// tests and the hostile corpus write it.
    pub fn one_frame(out: W, level: i32, mtime: u64) -> Result<Self, ArchiveError> {
        Self::with_workers(out, level, mtime, zstd_workers(), second_cpu())
    }

    /// [`one_frame`](Self::one_frame) with an explicit worker count and feeding thread; only
    /// tests use anything but [`zstd_workers`] and [`second_cpu`].
    fn with_workers(out: W, level: i32, mtime: u64, workers: u32, threaded: bool) -> Result<Self, ArchiveError> {
        check_arguments(level, mtime)?;
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

fn check_arguments(level: i32, mtime: u64) -> Result<(), ArchiveError> {
    if !LEVELS.contains(&level) {
        return Err(ArchiveError::invalid_argument(format!("compression level {level} is outside 1..=19")));
    }
    if mtime > MAX_OCTAL_11 {
        return Err(ArchiveError::invalid_argument(format!(
            "mtime {mtime} does not fit a ustar header (max {MAX_OCTAL_11})"
        )));
    }
    Ok(())
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
        let len = BLOCK as u64 + size + padding_for(size) as u64;
        self.sink.entry(len).map_err(io_err)?;
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
pub(crate) mod tests;
