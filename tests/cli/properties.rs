//! Property tests (proptest), through the library for speed:
//! - pack then verify accepts any small valid agent, with exactly its files;
//! - any single mutated byte of a bundle is rejected, or verifies to byte-identical content
//!   (the agent's files, their modes and the signed manifest; the signature file may differ
//!   only in its untrusted comment, which nothing signs and nobody reads).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::OnceLock;

use agent_bundle::bundle::verify::{self, Expect, Sink, Trust};
use agent_bundle::keys::Signer;
use agent_bundle::minisign::{PublicKey, SecretKey};
use agent_bundle::ops::pack::{self, PackOptions};
use agent_bundle::timestamp::Timestamp;
use agent_bundle::trust::TrustedKeys;
use proptest::prelude::*;

use crate::support::testdata;

/// An agent, or what verify handed out: relative path -> (bytes, executable).
type Files = BTreeMap<String, (Vec<u8>, bool)>;

fn keys() -> (Signer, TrustedKeys) {
    let secret = SecretKey::from_text(&std::fs::read_to_string(testdata("keys/test.key")).unwrap(), None).unwrap();
    let public = PublicKey::from_text(&std::fs::read_to_string(testdata("keys/test.pub")).unwrap()).unwrap();
    (Signer::File(secret), TrustedKeys::from_keys([public]))
}

/// Paths of 1–3 lowercase segments with a harmless extension; no path is also a folder.
fn agents() -> impl Strategy<Value = Files> {
    let segment = "[a-z][a-z0-9_]{0,7}";
    let path = (prop::collection::vec(segment, 1..=3), prop::sample::select(vec!["md", "txt", "bin", "sh"]))
        .prop_map(|(segments, ext)| format!("{}.{ext}", segments.join("/")));
    let file = (prop::collection::vec(any::<u8>(), 0..2048), any::<bool>());
    prop::collection::btree_map(path, file, 0..8).prop_map(|files| {
        let paths: Vec<String> = files.keys().cloned().collect();
        files
            .into_iter()
            .filter(|(p, _)| !paths.iter().any(|q| q.starts_with(&format!("{p}/"))))
            .filter(|(p, _)| !p.split('/').any(|s| s.starts_with("id_")))
            .collect()
    })
}

/// Writes the agent (plus tools.json, policy.caps and an unlocked manifest) and packs it.
fn pack_agent(dir: &Path, files: &Files, secret: &mut Signer) -> Vec<u8> {
    let agent = dir.join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("manifest.toml"),
        "[bundle]\nformat = 1\n\n[agent]\nname = \"prop\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("tools.json"), "{\"version\": 1, \"tools\": []}\n").unwrap();
    std::fs::write(agent.join("policy.caps"), "# nothing granted\n").unwrap();
    for (path, (data, exec)) in files {
        let full = agent.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, data).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(if *exec { 0o755 } else { 0o644 })).unwrap();
    }
    let out = dir.join("out.agent.bundle");
    let opts = PackOptions {
        output: Some(out.clone()),
        locked: false,
        level: 3,
        mtime: 0,
        source_date_epoch: None,
        now: Timestamp::now(),
        expires: None,
        force: true,
        attest: false,
        trusted_root: None,
    };
    match pack::pack(&agent, secret, &opts, &agent_bundle::progress::Silent) {
        Ok(_) => std::fs::read(out).unwrap(),
        Err(pack::PackFailure::Rejected(r)) => panic!("pack rejected {files:?}: {:?}", r.diagnostics),
        Err(pack::PackFailure::Error(e)) => panic!("pack failed: {e}"),
    }
}

/// Every entry verify hands out: path -> (bytes, executable).
#[derive(Default)]
struct Capture(Files);

impl Sink for Capture {
    fn open(&mut self, path: &str, executable: bool) -> io::Result<Box<dyn Write + '_>> {
        let slot = self.0.entry(path.to_owned()).or_default();
        *slot = (Vec::new(), executable);
        Ok(Box::new(&mut slot.0))
    }
}

fn verify_capture(bundle: &[u8], keys: &TrustedKeys) -> Result<Capture, verify::Rejection> {
    let mut capture = Capture::default();
    let expect = Expect { now: Some(Timestamp::now()), ..Expect::default() };
    verify::verify(bundle, Trust::Keys(keys), &expect, &mut capture)
        .map(|_| capture)
        .map_err(|e| e.rejection(std::path::Path::new("in memory")).expect("bytes in memory are always read"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn pack_then_verify_accepts_with_exactly_the_files(files in agents()) {
        let (mut secret, keys) = keys();
        let dir = tempfile::tempdir().unwrap();
        let bundle = pack_agent(dir.path(), &files, &mut secret);
        let got = verify_capture(&bundle, &keys).map_err(|r| TestCaseError::fail(format!("{:?}: {}", r.reason, r.message)))?;
        for (path, (data, exec)) in &files {
            prop_assert_eq!(got.0.get(path), Some(&(data.clone(), *exec)), "{}", path);
        }
        let extra: Vec<&String> = got.0.keys().filter(|p| !files.contains_key(*p)).collect();
        prop_assert_eq!(extra, vec!["manifest.toml", "manifest.toml.minisig", "policy.caps", "tools.json"]);
    }
}

/// One packed bundle of a fixed agent, and what verifying it yields.
fn reference() -> &'static (Vec<u8>, Files) {
    static REFERENCE: OnceLock<(Vec<u8>, Files)> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let (mut secret, keys) = keys();
        let files: Files = [
            ("bin/run.sh".to_owned(), (b"#!/bin/sh\necho hi\n".to_vec(), true)),
            ("prompts/system.md".to_owned(), (b"You are careful.\n".to_vec(), false)),
            ("data/table.bin".to_owned(), ((0..=255u8).collect(), false)),
        ]
        .into_iter()
        .collect();
        let dir = tempfile::tempdir().unwrap();
        let bundle = pack_agent(dir.path(), &files, &mut secret);
        let content = verify_capture(&bundle, &keys).unwrap_or_else(|r| panic!("{:?}", r.reason)).0;
        (bundle, content)
    })
}

/// The property for one mutated bundle: rejected, or the same content.
fn rejected_or_identical(mutated: &[u8], at: usize) -> Result<bool, String> {
    let (_, original) = reference();
    let (_, keys) = keys();
    let Ok(got) = verify_capture(mutated, &keys) else { return Ok(false) };
    for (path, entry) in original {
        let same = match got.0.get(path) {
            Some(e) if path == "manifest.toml.minisig" => {
                // Only the untrusted comment (line 1) may differ.
                let tail = |b: &[u8]| b.splitn(2, |c| *c == b'\n').nth(1).map(<[u8]>::to_vec);
                tail(&e.0) == tail(&entry.0)
            }
            Some(e) => e == entry,
            None => false,
        };
        if !same {
            return Err(format!("byte {at} mutated: `{path}` verified with other content"));
        }
    }
    if got.0.len() != original.len() {
        return Err(format!("byte {at} mutated: verified with other entries: {:?}", got.0.keys()));
    }
    Ok(true)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_single_mutated_byte_is_rejected_or_harmless(at in any::<prop::sample::Index>(), xor in 1u8..=255) {
        let (bundle, _) = reference();
        let at = at.index(bundle.len());
        let mut mutated = bundle.clone();
        mutated[at] ^= xor;
        rejected_or_identical(&mutated, at).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn every_single_bit_flip_of_a_bundle_is_rejected_or_harmless() {
    // Exhaustive over positions: byte i gets bit i % 8 flipped.
    let (bundle, _) = reference();
    let mut accepted = Vec::new();
    for at in 0..bundle.len() {
        let mut mutated = bundle.clone();
        mutated[at] ^= 1 << (at % 8);
        if rejected_or_identical(&mutated, at).unwrap() {
            accepted.push(at);
        }
    }
    // What may survive: zstd framing that does not change the decompressed bytes (such as the
    // window descriptor), never the content.
    eprintln!(
        "{} single-bit flips of a {}-byte bundle: {} still verified, all with identical content (at bytes {accepted:?})",
        bundle.len(),
        bundle.len(),
        accepted.len()
    );
}
