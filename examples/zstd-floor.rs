//! The floors for `bundle pack` and `bundle verify`: compresses stdin to stdout with the same
//! zstd library and the same frame settings as the bundle writer (level 3, content checksum, no
//! content size, all cores, blocks under 128 KiB, jobs of 4 MiB), or with `-d` decompresses stdin and discards
//! the output, and nothing else: no reading of agent files, no tar framing, no hashing, no
//! signing.
//! `scripts/bench.py` times it beside `zstd -3 -T0` and `zstd -dc`, whose version (the
//! system's) may differ from the one linked here.
//!
//! usage: zstd-floor < agent.tar > agent.tar.zst; zstd-floor -d < agent.bundle

use std::io::{self, BufReader, BufWriter};

fn main() -> io::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("-d") {
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
