//! The bundle reader on raw bytes: `verify` with the test key must never panic, hang or
//! allocate without bound, whatever the input, and must agree with itself.
//!
//! The first input byte picks what the rest is:
//! - even: the bundle file itself (the zstd layer is exercised, and little else, since random
//!   bytes rarely decompress);
//! - odd: the decompressed tar stream, which the target wraps in a checksummed zstd frame, so
//!   the fuzzer reaches the tar, manifest and signature layers directly.
//!
//! Properties checked besides "no panic":
//! - a bundle accepted with the trusted key is also accepted with the signature unchecked
//!   (`inspect` without `--key`), with the same files;
//! - an accepted bundle's files are exactly what the archive holds (re-read with
//!   `ArchiveReader`, whose entries must have the same paths, sizes, digests and modes).

#![no_main]

use std::io::Write as _;

use agent_bundle::archive::{ArchiveReader, Limits};
use agent_bundle::minisign::PublicKey;
use agent_bundle::bundle::verify::{self, Discard, Expect, Trust};
use agent_bundle::timestamp::Timestamp;
use agent_bundle::trust::TrustedKeys;
use libfuzzer_sys::fuzz_target;

const TEST_PUB: &str = include_str!("../../testdata/keys/test.pub");

fn frame(tar: &[u8]) -> Vec<u8> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("encoder");
    e.include_checksum(true).expect("checksum");
    e.write_all(tar).expect("compress");
    e.finish().expect("compress")
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let bundle = if mode % 2 == 0 { rest.to_vec() } else { frame(rest) };
    let keys = TrustedKeys::from_keys([PublicKey::from_text(TEST_PUB).expect("test.pub")]);
    let now = Timestamp::parse("2026-01-01T00:00:00Z").ok();
    let expect = Expect { now, ..Expect::default() };

    let checked = verify::verify(&bundle[..], Trust::Keys(&keys), &expect, &mut Discard);
    let unchecked = verify::verify(&bundle[..], Trust::Unchecked, &expect, &mut Discard);
    if let Ok(v) = &checked {
        let u = unchecked.as_ref().expect("accepted with the key, so accepted without it");
        assert_eq!(v.files.len(), u.files.len());

        // Re-read the archive on its own: it must hold the manifest, its signature, and
        // exactly the verified files.
        let limits = Limits { max_window_log: 24, ..Limits::default() };
        let mut reader = ArchiveReader::new(&bundle[..], limits).expect("an accepted bundle opens");
        let mut seen = Vec::new();
        while let Some(mut entry) = reader.next_entry().expect("an accepted bundle reads") {
            let (path, size, executable) = (entry.path.clone(), entry.size, entry.executable);
            let hash = entry.hash().expect("an accepted entry reads");
            seen.push((path, size, hash.to_hex().to_string(), executable));
        }
        reader.finish().expect("an accepted bundle ends cleanly");
        assert_eq!(seen[0].0, "manifest.toml");
        assert_eq!(seen[1].0, "manifest.toml.minisig");
        let files: Vec<_> = v.files.iter().map(|f| (f.path.clone(), f.size, f.blake3.clone(), f.executable)).collect();
        assert_eq!(seen[2..], files[..]);
    }
});
