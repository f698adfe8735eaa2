//! The compression floor for `bundle pack`: compresses stdin to stdout with the same zstd
//! library and the same frame settings as the bundle writer (level 3, content checksum, no
//! content size, all cores), and nothing else: no reading of agent files, no tar framing, no
//! hashing, no signing. `scripts/bench.py` times it beside `zstd -3 -T0`, whose version (the
//! system's) may differ from the one linked here.
//!
//! usage: cargo run --release --example zstd-floor < agent.tar > agent.tar.zst

use std::io::{self, BufReader, BufWriter};

fn main() -> io::Result<()> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let mut encoder = zstd::stream::write::Encoder::new(out, 3)?;
    encoder.include_checksum(true)?;
    encoder.include_contentsize(false)?;
    encoder.include_dictid(false)?;
    encoder.multithread(workers)?;
    io::copy(&mut BufReader::with_capacity(1 << 20, io::stdin().lock()), &mut encoder)?;
    encoder.finish()?;
    Ok(())
}
