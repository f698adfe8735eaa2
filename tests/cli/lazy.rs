//! The API's lazy open (`Bundle::open_lazy`, Python's `open_verified(…, lazy=True)`): the
//! signature and manifest judged at open, then each read decodes only its file's frames and is
//! held to the signed BLAKE3; a bundle changed after open gives a refusal, never other bytes.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use agent_bundle::api::{Bundle, LazyBundle, TrustedKeys, VerifyOptions};
use agent_bundle::archive::SeekTable;

use crate::cat::big_bundle;
use crate::support::{Env, key, testdata};

fn options() -> VerifyOptions {
    VerifyOptions::new(TrustedKeys::read(key("test.pub")).expect("the test key"))
}

fn open(path: &Path, options: &VerifyOptions) -> Result<LazyBundle, agent_bundle::api::Error> {
    Bundle::open(path).and_then(|b| b.open_lazy(options))
}

/// Every listed file read lazily is the packed file, with the digest the library lists for it.
fn assert_reads_every_file(lazy: &mut LazyBundle, agent: Option<&Path>) {
    let files = lazy.files().to_vec();
    assert!(!files.is_empty());
    for f in &files {
        let bytes = lazy.read(&f.path).expect("reads").expect("listed");
        assert_eq!(blake3::hash(&bytes).to_hex().as_str(), f.blake3, "{}", f.path);
        assert_eq!(bytes.len() as u64, f.size, "{}", f.path);
        if let Some(agent) = agent {
            assert_eq!(bytes, std::fs::read(agent.join(&f.path)).unwrap(), "{}", f.path);
        }
    }
}

#[test]
fn lazy_open_reads_one_file_at_a_time_held_to_the_signed_digest() {
    let env = Env::new();
    let bundle = big_bundle(&env);
    let mut lazy = open(&bundle, &options()).expect("opens");
    assert!(lazy.is_seekable());
    assert_eq!(lazy.agent().name, "mailer");
    assert_reads_every_file(&mut lazy, Some(&env.path().join("big")));
    // Not listed: None, as VerifiedAgent::file gives.
    assert!(lazy.read("nope.txt").expect("not an error").is_none());
    assert!(!lazy.read_to("nope.txt", &mut Vec::new()).expect("not an error"));
    // Streamed: the same bytes.
    let mut out = Vec::new();
    assert!(lazy.read_to("data/kb.txt", &mut out).expect("reads"));
    assert_eq!(blake3::hash(&out).to_hex().as_str(), lazy.file("data/kb.txt").unwrap().blake3);
    // max_loaded_bytes caps one read held in memory, not the bundle.
    let mut capped = open(&bundle, &options().max_loaded_bytes(1 << 20)).expect("opens");
    assert!(capped.read("tools.json").expect("small").is_some());
    assert_eq!(capped.read("data/kb.txt").expect_err("over the cap").code(), "limit_exceeded");
    assert!(capped.read_to("data/kb.txt", &mut std::io::sink()).expect("streams"));
}

/// The frame that holds stored (incompressible) bytes, latest first: its place in the file, the
/// offset of a byte of it in the frame, and the frame's content.
fn a_stored_byte_in_a_later_frame(bytes: &[u8]) -> (std::ops::Range<usize>, usize, Vec<u8>) {
    let len = bytes.len() as u64;
    let table = SeekTable::read_from(
        len,
        |at, buf| {
            buf.copy_from_slice(&bytes[at as usize..at as usize + buf.len()]);
            Ok(())
        },
        len,
    )
    .expect("a table")
    .expect("seekable");
    let mut starts = Vec::new();
    let mut at = 0usize;
    for f in &table.frames {
        starts.push(at..at + f.compressed as usize);
        at += f.compressed as usize;
    }
    for range in starts.into_iter().rev() {
        let frame = &bytes[range.clone()];
        let content = zstd::decode_all(frame).expect("a frame");
        let c = content.len() / 2;
        let Some(window) = content.get(c..c + 64) else { continue };
        let found: Vec<usize> = frame.windows(64).enumerate().filter(|(_, w)| *w == window).map(|(i, _)| i).collect();
        if let [one] = found[..] {
            let mut changed = content.clone();
            changed[c] ^= 0x55;
            return (range, one, changed);
        }
    }
    panic!("no frame stores its bytes");
}

/// The content checksum zstd ends a frame of `content` with.
fn checksum(content: &[u8]) -> [u8; 4] {
    let mut e = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    e.include_checksum(true).unwrap();
    e.write_all(content).unwrap();
    let frame = e.finish().unwrap();
    frame[frame.len() - 4..].try_into().unwrap()
}

/// Overwrites `path` in place (same inode, same length), as a swap under an open handle.
fn rewrite_in_place(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn a_bundle_rewritten_after_open_gives_digest_mismatch_never_other_bytes() {
    let env = Env::new();
    let bundle = big_bundle(&env);
    let original = std::fs::read(&bundle).unwrap();
    let mut lazy = open(&bundle, &options()).expect("opens");
    // One byte of noise flipped in a later frame, its checksum made right again: the frame
    // decodes, and only the signed digest can tell.
    let (frame, at, changed) = a_stored_byte_in_a_later_frame(&original);
    assert!(frame.start > 0, "a later frame, not the one of the manifest");
    let mut swapped = original.clone();
    swapped[frame.start + at] ^= 0x55;
    swapped[frame.end - 4..frame.end].copy_from_slice(&checksum(&changed));
    assert_eq!(swapped.len(), original.len());
    rewrite_in_place(&bundle, &swapped);
    let refused = lazy.read("data/noise.bin").expect_err("changed after open");
    assert_eq!(refused.code(), "digest_mismatch", "{refused}");
    assert_eq!(
        refused.verdict().and_then(|v| v.reasons().first()).and_then(|r| r.path.as_deref()),
        Some("data/noise.bin")
    );
    let mut streamed = Vec::new();
    assert_eq!(lazy.read_to("data/noise.bin", &mut streamed).expect_err("changed").code(), "digest_mismatch");
    // Files in other frames still read, each checked.
    assert!(lazy.read("tools.json").expect("untouched").is_some());
    // The byte flipped without the checksum: the frame itself is refused, as verify refuses it.
    swapped[frame.end - 4..frame.end].copy_from_slice(&original[frame.end - 4..frame.end]);
    rewrite_in_place(&bundle, &swapped);
    assert_eq!(lazy.read("data/noise.bin").expect_err("damaged").code(), "malformed_archive");
    // Put back: the same handle reads the signed bytes again.
    rewrite_in_place(&bundle, &original);
    assert_eq!(
        lazy.read("data/noise.bin").expect("restored").unwrap(),
        std::fs::read(env.path().join("big/data/noise.bin")).unwrap()
    );
}

#[test]
fn an_old_one_frame_bundle_is_read_from_its_start() {
    let mut lazy = open(&testdata("hostile/ok.agent.bundle"), &options()).expect("opens");
    assert!(!lazy.is_seekable(), "no seek table: each read decodes from the start");
    assert_reads_every_file(&mut lazy, None);
}

#[test]
fn a_seek_table_that_lies_is_refused_with_the_verifiers_code() {
    for (case, want) in [
        ("seek_table_mismatch-wrong-size", "seek_table_mismatch"),
        ("seek_table_mismatch-overlapping", "seek_table_mismatch"),
        ("seek_table_mismatch-past-the-end", "seek_table_mismatch"),
        ("seek_table_mismatch-more-frames-than-bytes", "seek_table_mismatch"),
        ("seek_table_mismatch-fewer-frames", "seek_table_mismatch"),
        ("malformed_archive-later-frame-checksum-flipped", "malformed_archive"),
    ] {
        let mut lazy = match open(&testdata(&format!("hostile/{case}.agent.bundle")), &options()) {
            Ok(lazy) => lazy,
            Err(e) => {
                assert_eq!(e.code(), want, "{case}: {e}");
                continue;
            }
        };
        let mut refused = Vec::new();
        for f in lazy.files().to_vec() {
            match lazy.read(&f.path) {
                Ok(bytes) => assert_eq!(blake3::hash(&bytes.expect("listed")).to_hex().as_str(), f.blake3),
                Err(e) => refused.push(e.code()),
            }
        }
        assert!(!refused.is_empty(), "{case}: every file read");
        assert!(refused.iter().all(|c| *c == want), "{case}: {refused:?}");
    }
}

#[test]
fn lazy_open_refuses_what_only_a_whole_pass_can_judge() {
    let env = Env::new();
    let bundle = env.packed_mailer("mailer", "mailer.agent.bundle");
    let usage = |o: VerifyOptions| open(&bundle, &o).expect_err("refused").code();
    assert_eq!(usage(options().state(env.path().join("state.json"))), "usage");
    assert_eq!(usage(options().baseline(env.path().join("approved.toml"))), "usage");
    assert_eq!(usage(options().attestation(env.path().join("a.sigstore.json"))), "usage");
    assert_eq!(usage(options().require_provenance(true)), "usage");
    let bytes = std::fs::read(&bundle).unwrap();
    assert_eq!(Bundle::from_bytes(bytes).open_lazy(&options()).expect_err("bytes").code(), "usage");
    // Attestations beside the bundle are judged eagerly, or knowingly left alone.
    std::fs::write(env.path().join("mailer.agent.bundle.provenance.sigstore.json"), "{}").unwrap();
    assert_eq!(usage(options()), "usage");
    assert!(open(&bundle, &options().discover_attestations(false)).is_ok());
    // The gate's checks at open, with its codes.
    let other = TrustedKeys::read(testdata("keys/minisign-nopw.pub")).unwrap();
    let o = VerifyOptions::new(other).discover_attestations(false);
    assert_eq!(open(&bundle, &o).expect_err("untrusted").code(), "untrusted_key");
    let o = options().discover_attestations(false).name("other");
    assert_eq!(open(&bundle, &o).expect_err("name").code(), "name_mismatch");
    let o = options().discover_attestations(false).min_version("99.0.0");
    assert_eq!(open(&bundle, &o).expect_err("floor").code(), "rollback");
}
