//! Structure-aware: the fuzzer's bytes become an agent (files, a manifest text, a version, an
//! expiry) whose manifest is *signed with the test key*, so every input gets past the
//! signature and exercises what a trusted signer's mistakes or a compromised build could put
//! in a bundle: the manifest parser, the listing rules, digests, sizes, modes, order, the
//! tools.json re-validation, expiry.
//!
//! The manifest is either generated from the files (with per-file faults: wrong digest, wrong
//! size, flipped executable bit, unlisted, listed but absent) plus arbitrary extra text, or
//! taken whole from the input. The archive is written by the library's `ArchiveWriter`
//! (paths it refuses are dropped), optionally out of order.
//!
//! Properties:
//! - `verify` never panics;
//! - accepted means exactly the written files, with their real digests and modes;
//! - a clean input (generated manifest, no faults, valid names, a valid tools.json, sorted
//!   archive, not expired) is accepted: the gate does not reject good bundles;
//! - the result does not depend on whether the signature is checked, except for signature
//!   codes (the signature is always good here).

#![no_main]

use std::collections::BTreeSet;

use agent_bundle::archive::ArchiveWriter;
use agent_bundle::minisign::{PublicKey, SecretKey};
use agent_bundle::bundle::{SIGNATURE_ENTRY, UNTRUSTED_COMMENT};
use agent_bundle::bundle::verify::{self, Discard, Expect, Trust};
use agent_bundle::timestamp::Timestamp;
use agent_bundle::trust::{TrustedKeys, trusted_comment};
use agent_bundle::{manifest, paths};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

const TEST_KEY: &str = include_str!("../../testdata/keys/test.key");
const TEST_PUB: &str = include_str!("../../testdata/keys/test.pub");
const TOOLS: &[u8] = b"{\"version\":1,\"tools\":[]}\n";

#[derive(Arbitrary, Debug)]
enum Fault {
    None,
    Digest,
    Size(u8),
    ExecBit,
    Unlisted,
    Absent,
}

#[derive(Arbitrary, Debug)]
struct File {
    path: String,
    data: Vec<u8>,
    executable: bool,
    fault: Fault,
}

#[derive(Arbitrary, Debug)]
enum Tools {
    Valid,
    Text(Vec<u8>),
    Missing,
}

#[derive(Arbitrary, Debug)]
enum Manifest {
    /// Generated from the files, with this text appended (empty: none).
    Generated { extra: String, version: String, expires: Option<String> },
    /// This exact text.
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    name: String,
    manifest: Manifest,
    tools: Tools,
    policy: Option<Vec<u8>>,
    files: Vec<File>,
    /// Swap two archive entries (indexes modulo the count).
    swap: Option<(u8, u8)>,
    /// Sign with this trusted comment instead of the right one.
    comment: Option<String>,
}

fn line(path: &str, data: &[u8], size: u64, exec: bool, fault: &Fault) -> String {
    let hash = match fault {
        Fault::Digest => blake3::hash(&[data, b"x"].concat()),
        _ => blake3::hash(data),
    };
    let exec = if matches!(fault, Fault::ExecBit) { !exec } else { exec };
    let x = if exec { ", executable = true" } else { "" };
    format!("{} = {{ blake3 = \"{hash}\", size = {size}{x} }}\n", toml_key(path))
}

fn toml_key(path: &str) -> String {
    // A TOML basic string: escape what must be escaped.
    let mut out = String::from("\"");
    for c in path.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fuzz_target!(|input: Input| {
    let key = SecretKey::from_text(TEST_KEY, None).expect("test.key");
    let keys = TrustedKeys::from_keys([PublicKey::from_text(TEST_PUB).expect("test.pub")]);
    let now = Timestamp::parse("2026-01-01T00:00:00Z").expect("now");

    let name = if input.name.is_empty() { "fuzz".to_owned() } else { input.name.clone() };
    let mut clean = manifest::check_agent_name(&name).is_ok() && input.comment.is_none();

    // The archive's files (path, data, executable) and the manifest lines.
    let mut archive: Vec<(String, Vec<u8>, bool)> = Vec::new();
    let mut listed = String::new();
    let mut seen = BTreeSet::new();
    let mut folded = BTreeSet::new();
    for named in ["tools.json", "policy.caps", "manifest.toml", "manifest.toml.minisig"] {
        folded.insert(named.to_owned());
    }
    let tools = match &input.tools {
        Tools::Valid => Some(TOOLS.to_vec()),
        Tools::Text(t) => {
            clean = false;
            Some(t.clone())
        }
        Tools::Missing => {
            clean = false;
            None
        }
    };
    let mut artifacts = String::new();
    if let Some(t) = &tools {
        artifacts.push_str(&format!(
            "[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"{}\"\nsize = {}\nversion = 1\n\n",
            blake3::hash(t),
            t.len()
        ));
        archive.push(("tools.json".to_owned(), t.clone(), false));
    }
    if let Some(p) = &input.policy {
        // Clean only when the policy is blank lines and comments: any grant may be invalid.
        let comments_only = std::str::from_utf8(p).is_ok_and(|t| {
            !t.starts_with('\u{feff}') && t.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        });
        if !comments_only {
            clean = false;
        }
        artifacts.push_str(&format!(
            "[artifacts.policy]\npath = \"policy.caps\"\nblake3 = \"{}\"\nsize = {}\n\n",
            blake3::hash(p),
            p.len()
        ));
        archive.push(("policy.caps".to_owned(), p.clone(), false));
    }
    for f in input.files.iter().take(64) {
        if f.path.is_empty() || !seen.insert(f.path.clone()) || f.data.len() > 1 << 16 {
            continue;
        }
        let named = ["tools.json", "policy.caps", "manifest.toml", "manifest.toml.minisig"];
        let fine =
            paths::check(&f.path).is_ok()
                && folded.insert(paths::fold_key(&f.path))
                && !seen.iter().map(String::as_str).chain(named).any(|other| {
                    other.starts_with(&format!("{}/", f.path)) || f.path.starts_with(&format!("{other}/"))
                });
        if !fine || !matches!(f.fault, Fault::None) {
            clean = false;
        }
        if f.path.ends_with(".json") || f.path == "policy.caps" {
            // Held for re-validation: fine either way, but keep the oracle simple.
            clean = false;
        }
        let size = match f.fault {
            Fault::Size(d) => f.data.len() as u64 + u64::from(d) + 1,
            _ => f.data.len() as u64,
        };
        if !matches!(f.fault, Fault::Unlisted) {
            listed.push_str(&line(&f.path, &f.data, size, f.executable, &f.fault));
        }
        if !matches!(f.fault, Fault::Absent) {
            archive.push((f.path.clone(), f.data.clone(), f.executable));
        }
    }

    let text = match &input.manifest {
        Manifest::Generated { extra, version, expires } => {
            let version = if version.is_empty() { "1.0.0" } else { version };
            if semver::Version::parse(version).is_err() || !extra.is_empty() {
                clean = false;
            }
            let expires_line = match expires {
                Some(e) => {
                    if Timestamp::parse(e).map_or(true, |t| t <= now) {
                        clean = false;
                    }
                    format!("expires = {}\n", toml_key(e))
                }
                None => String::new(),
            };
            let files_table = if listed.is_empty() { String::new() } else { format!("[files]\n{listed}") };
            format!(
                "[bundle]\nformat = 1\n{expires_line}\n[agent]\nname = {}\nversion = {}\n\n{artifacts}{files_table}{extra}",
                toml_key(&name),
                toml_key(version)
            )
        }
        Manifest::Raw(text) => {
            clean = false;
            text.clone()
        }
    };
    if text.len() > 1 << 20 {
        return;
    }
    let (claimed_name, version) = claimed_agent(&text);
    let comment = input.comment.clone().unwrap_or_else(|| trusted_comment(&claimed_name, &version));
    let Ok(signature) = key.sign(text.as_bytes(), &comment, UNTRUSTED_COMMENT) else { return };

    archive.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    if let Some((i, j)) = input.swap
        && !archive.is_empty()
    {
        let (i, j) = (i as usize % archive.len(), j as usize % archive.len());
        if i != j {
            clean = false;
        }
        archive.swap(i, j);
    }
    let mut writer = ArchiveWriter::new(Vec::new(), 1, 0).expect("writer");
    writer.append_bytes(manifest::FILE_NAME, text.as_bytes()).expect("manifest entry");
    writer.append_bytes(SIGNATURE_ENTRY, signature.to_text().as_bytes()).expect("signature entry");
    let mut written = Vec::new();
    for (path, data, exec) in &archive {
        match writer.append(path, data.len() as u64, *exec, &mut &data[..]) {
            Ok(_) => written.push((path.clone(), data.clone(), *exec)),
            Err(_) => {
                // Refused before writing (unsafe or too long a path): the writer stays usable.
                clean = false;
            }
        }
    }
    let bundle = writer.finish().expect("finish");

    let expect = Expect { now: Some(now), ..Expect::default() };
    // Bytes in memory are always read: every `Err` is a refusal.
    let refusal = |e: verify::VerifyError| e.rejection(std::path::Path::new("in memory")).expect("a refusal");
    let checked = verify::verify(&bundle[..], Trust::Keys(&keys), &expect, &mut Discard).map_err(refusal);
    let unchecked = verify::verify(&bundle[..], Trust::Unchecked, &expect, &mut Discard).map_err(refusal);
    match (&checked, &unchecked) {
        (Ok(_), Err(r)) => panic!("accepted with the key, rejected without: {:?}", r.reason),
        (Err(a), Err(b)) => assert_eq!(a.reason, b.reason, "{a:?} / {b:?}"),
        (Err(a), Ok(_)) => assert!(
            matches!(a.reason.as_str(), "name_mismatch" | "untrusted_key" | "bad_signature"),
            "rejected only with the key checked: {a:?}"
        ),
        (Ok(_), Ok(_)) => {}
    }
    match &checked {
        Ok(v) => {
            let got: Vec<_> = v.files.iter().map(|f| (f.path.clone(), f.blake3.clone(), f.executable)).collect();
            let want: Vec<_> =
                written.iter().map(|(p, d, x)| (p.clone(), blake3::hash(d).to_hex().to_string(), *x)).collect();
            assert_eq!(got, want, "accepted files differ from the archive's");
        }
        Err(r) => assert!(!clean, "a clean bundle was rejected: {} {} ({:?})", r.reason.as_str(), r.message, r.path),
    }
});

/// The `[agent]` name and version the manifest text claims (for the trusted comment), so that
/// raw manifests get past the trusted-comment check too.
fn claimed_agent(text: &str) -> (String, String) {
    let doc = text.parse::<toml_edit::DocumentMut>().ok();
    let get = |key: &str| {
        doc.as_ref().and_then(|d| d.get("agent")?.get(key)?.as_str().map(str::to_owned)).unwrap_or_default()
    };
    (get("name"), get("version"))
}
