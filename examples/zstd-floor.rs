//! The floors for `bundle pack` and `bundle verify`: compresses stdin to stdout with the same
//! zstd library and the same frame settings as the bundle writer (level 3, content checksum, no
//! content size, all cores, blocks under 128 KiB, jobs of 4 MiB), or with `-d` decompresses stdin and discards
//! the output, and nothing else: no reading of agent files, no tar framing, no hashing, no
//! signing.
//! With `--read-decode-hash FILE` it does on one thread the least `bundle verify` must do with
//! a bundle of independent frames: read each frame whole from the file, decode it in one call
//! (its content checksum checked, as the format requires) into a buffer kept from frame to
//! frame, and BLAKE3 what it decoded; no tar, no manifest, no signature. Run pinned to one CPU
//! it is the floor of `bundle verify` pinned.
//! With `--parallel FILE` it does the same on every usable CPU, each thread reading its own
//! frames (`pread`) after one thread found where they are by reading only the frame and block
//! headers: the floor of a verifier whose decoding threads read their own frames. It prints the
//! BLAKE3 of the frames' BLAKE3s in order (not `b3sum` of the content).
//! `scripts/bench.py` times it beside `zstd -3 -T0` and `zstd -dc`, whose version (the
//! system's) may differ from the one linked here.
//!
//! usage: zstd-floor < agent.tar > agent.tar.zst; zstd-floor -d < agent.bundle;
//! zstd-floor --read-decode-hash agent.bundle; zstd-floor --parallel agent.bundle

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read};

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("--read-decode-hash") {
        let path = args.next().ok_or_else(|| io::Error::other("usage: zstd-floor --read-decode-hash FILE"))?;
        let hash = read_decode_hash(File::open(path)?)?;
        println!("{hash}");
        return Ok(());
    }
    if first.as_deref() == Some("--parallel") {
        let path = args.next().ok_or_else(|| io::Error::other("usage: zstd-floor --parallel FILE"))?;
        println!("{}", parallel(File::open(path)?)?);
        return Ok(());
    }
    if first.as_deref() == Some("-d") {
        let input = BufReader::with_capacity(1 << 20, io::stdin().lock());
        let mut decoder = zstd::stream::read::Decoder::with_buffer(input)?;
        io::copy(&mut decoder, &mut io::sink())?;
        return Ok(());
    }
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let mut encoder = zstd::stream::write::Encoder::new(out, 3)?;
    encoder.include_checksum(true)?;
    encoder.include_contentsize(false)?;
    encoder.include_dictid(false)?;
    encoder.multithread(workers)?;
    // As src/archive/write.rs MAX_BLOCK: no pre-block splitting.
    encoder.set_parameter(zstd::zstd_safe::CParameter::MaxBlockSize((128 << 10) - 1))?;
    // As src/archive/write.rs job_size(3): jobs of 4 MiB.
    encoder.set_parameter(zstd::zstd_safe::CParameter::JobSize(4 << 20))?;
    io::copy(&mut BufReader::with_capacity(1 << 20, io::stdin().lock()), &mut encoder)?;
    encoder.finish()?;
    Ok(())
}

/// Reads, decodes and hashes every data frame of `file` (skippable frames skipped), each frame
/// read whole by walking its block headers, as the verifier does; the BLAKE3 of all content.
fn read_decode_hash(file: File) -> io::Result<blake3::Hash> {
    const ZSTD_MAGIC: u32 = 0xFD2F_B528;
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let mut input = BufReader::with_capacity(8 << 10, file);
    let mut decoder = zstd::bulk::Decompressor::new()?;
    let mut hasher = blake3::Hasher::new();
    let (mut frame, mut out) = (Frame::default(), Vec::new());
    loop {
        let mut magic = [0u8; 4];
        match input.read_exact(&mut magic) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            other => other?,
        }
        let magic = u32::from_le_bytes(magic);
        if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
            let mut len = [0u8; 4];
            input.read_exact(&mut len)?;
            io::copy(&mut (&mut input).take(u32::from_le_bytes(len).into()), &mut io::sink())?;
            continue;
        }
        if magic != ZSTD_MAGIC {
            return Err(bad("not a zstd frame"));
        }
        frame.start(magic);
        frame.read_more(&mut input, 1)?;
        let d = frame.buf[4];
        let size_bytes = match d >> 6 {
            0 => usize::from(d & 0x20 != 0),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let header_rest = usize::from(d & 0x20 == 0) + [0, 1, 2, 4][usize::from(d & 3)] + size_bytes;
        frame.read_more(&mut input, header_rest)?;
        let content = zstd::zstd_safe::get_frame_content_size(frame.bytes())
            .ok()
            .flatten()
            .ok_or_else(|| bad("a frame without its content size"))?;
        loop {
            let at = frame.len;
            frame.read_more(&mut input, 3)?;
            let block = u32::from_le_bytes([frame.buf[at], frame.buf[at + 1], frame.buf[at + 2], 0]);
            let body = if (block >> 1) & 3 == 1 { 1 } else { (block >> 3) as usize };
            frame.read_more(&mut input, body)?;
            if block & 1 == 1 {
                break;
            }
        }
        if d & 4 != 0 {
            frame.read_more(&mut input, 4)?;
        }
        out.clear();
        out.reserve(usize::try_from(content).map_err(|_| bad("a frame too large"))?);
        decoder.decompress_to_buffer(frame.bytes(), &mut out)?;
        hasher.update(&out);
    }
    Ok(hasher.finalize())
}

/// Where each data frame of `file` is (offset, compressed length, content size), found by
/// reading only the headers, while the usable CPUs each read, decode and hash the frames found
/// so far; the BLAKE3 of the frames' BLAKE3s, in frame order.
#[cfg(unix)]
fn parallel(file: File) -> io::Result<blake3::Hash> {
    use std::os::unix::fs::FileExt;
    use std::sync::{Arc, Mutex, mpsc};
    const ZSTD_MAGIC: u32 = 0xFD2F_B528;
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let file = Arc::new(file);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (jobs, queue) = mpsc::sync_channel::<(usize, u64, usize, usize)>(4 * threads);
    let queue = Arc::new(Mutex::new(queue));
    let (done, results) = mpsc::channel::<io::Result<(usize, blake3::Hash)>>();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (file, queue, done) = (Arc::clone(&file), Arc::clone(&queue), done.clone());
            std::thread::spawn(move || {
                let mut decoder = zstd::bulk::Decompressor::new().expect("a zstd context");
                let (mut input, mut out) = (Vec::new(), Vec::new());
                loop {
                    let next = queue.lock().expect("not poisoned").recv();
                    let Ok((index, at, len, content)) = next else { return };
                    input.resize(len, 0);
                    let result = file.read_exact_at(&mut input, at).and_then(|()| {
                        out.clear();
                        out.reserve(content);
                        decoder.decompress_to_buffer(&input[..], &mut out)?;
                        Ok((index, blake3::hash(&out)))
                    });
                    if done.send(result).is_err() {
                        return;
                    }
                }
            })
        })
        .collect();
    drop(done);
    let mut at = 0u64;
    let mut index = 0;
    let mut head = [0u8; 18];
    loop {
        let n = file.read_at(&mut head, at)?;
        if n == 0 {
            break;
        }
        // The shortest frame, skippable or not, is 8 bytes.
        if n < 8 {
            return Err(bad("a truncated frame"));
        }
        let magic = u32::from_le_bytes(head[..4].try_into().expect("four bytes"));
        if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
            at += 8 + u64::from(u32::from_le_bytes(head[4..8].try_into().expect("four bytes")));
            continue;
        }
        if magic != ZSTD_MAGIC {
            return Err(bad("not a zstd frame"));
        }
        let d = head[4];
        let size_bytes = match d >> 6 {
            0 => usize::from(d & 0x20 != 0),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let header = 5 + usize::from(d & 0x20 == 0) + [0, 1, 2, 4][usize::from(d & 3)] + size_bytes;
        let content = zstd::zstd_safe::get_frame_content_size(&head[..header.min(n)])
            .ok()
            .flatten()
            .ok_or_else(|| bad("a frame without its content size"))?;
        let start = at;
        at += header as u64;
        loop {
            let mut block = [0u8; 3];
            file.read_exact_at(&mut block, at)?;
            let block = u32::from_le_bytes([block[0], block[1], block[2], 0]);
            let body = if (block >> 1) & 3 == 1 { 1 } else { u64::from(block >> 3) };
            at += 3 + body;
            if block & 1 == 1 {
                break;
            }
        }
        if d & 4 != 0 {
            at += 4;
        }
        let len = usize::try_from(at - start).map_err(|_| bad("a frame too large"))?;
        let content = usize::try_from(content).map_err(|_| bad("a frame too large"))?;
        jobs.send((index, start, len, content)).map_err(|_| bad("a decoding thread failed"))?;
        index += 1;
    }
    drop(jobs);
    let mut hashes = vec![blake3::Hash::from_bytes([0; 32]); index];
    for result in results {
        let (i, hash) = result?;
        hashes[i] = hash;
    }
    for w in workers {
        w.join().map_err(|_| bad("a decoding thread panicked"))?;
    }
    let mut all = blake3::Hasher::new();
    for h in &hashes {
        all.update(h.as_bytes());
    }
    Ok(all.finalize())
}

#[cfg(not(unix))]
fn parallel(_file: File) -> io::Result<blake3::Hash> {
    Err(io::Error::other("--parallel needs positioned reads (unix)"))
}

/// A frame's compressed bytes in a buffer kept from frame to frame and never zeroed again once
/// grown (as the verifier's frame buffers).
#[derive(Default)]
struct Frame {
    buf: Vec<u8>,
    len: usize,
}

impl Frame {
    /// Empties the buffer down to a new frame's magic number.
    fn start(&mut self, magic: u32) {
        self.len = 0;
        self.read_more(&mut &magic.to_le_bytes()[..], 4).expect("four bytes from a slice of four");
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Appends the next `n` bytes of `input`.
    fn read_more(&mut self, input: &mut impl Read, n: usize) -> io::Result<()> {
        let at = self.len;
        if self.buf.len() < at + n {
            self.buf.resize(at + n, 0);
        }
        input.read_exact(&mut self.buf[at..at + n])?;
        self.len += n;
        Ok(())
    }
}
