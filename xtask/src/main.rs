//! Repository tasks (cargo's xtask convention): `cargo run -p xtask -- <task>`.
//!
//! - `make-hostile [DIR]`: regenerate the hostile-bundle corpus (default `testdata/hostile`);
//!   `tests/cli/hostile.rs` checks that the committed corpus is exactly what it makes.
//! - `fuzz-seed [DIR]`: write the seed corpus of the `bundle_reader` fuzz target (default
//!   `fuzz/corpus/bundle_reader`) from the hostile corpus; see fuzz/README.md.

mod hostile;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: cargo run -p xtask -- make-hostile [DIR] | fuzz-seed [DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["make-hostile", rest @ ..] if rest.len() <= 1 => {
            let dir = PathBuf::from(rest.first().copied().unwrap_or("testdata/hostile"));
            let n = hostile::write_corpus(&dir);
            println!("wrote {n} cases to {}", dir.display());
            ExitCode::SUCCESS
        }
        ["fuzz-seed", rest @ ..] if rest.len() <= 1 => {
            let dir = PathBuf::from(rest.first().copied().unwrap_or("fuzz/corpus/bundle_reader"));
            let n = fuzz_seed(&dir);
            println!("wrote {n} seeds to {}", dir.display());
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The `bundle_reader` target reads its first byte as a switch: even, the rest is a bundle
/// file; odd, a tar stream it wraps in a zstd frame. Every hostile case is a seed both ways,
/// named by its case so that reruns replace rather than add. Seeds longer than the runs'
/// `-max_len` (the decompression bombs' tars) are left out.
fn fuzz_seed(dir: &Path) -> usize {
    const MAX_LEN: usize = 65536;
    std::fs::create_dir_all(dir).expect("create the corpus folder");
    let mut n = 0;
    for case in hostile::generate() {
        // Cases whose zstd frame is the point do not decode; their bundle seed is enough.
        let tar = zstd::stream::decode_all(&case.bytes[..]).ok();
        let seeds = [(0x00, Some(case.bytes), ""), (0x01, tar, ".tar")];
        for (switch, bytes, suffix) in seeds {
            let Some(bytes) = bytes.filter(|b| b.len() < MAX_LEN) else { continue };
            let mut seed = vec![switch];
            seed.extend_from_slice(&bytes);
            std::fs::write(dir.join(format!("hostile-{}{suffix}", case.name)), seed).expect("write a seed");
            n += 1;
        }
    }
    n
}
