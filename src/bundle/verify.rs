//! The one reader of bundles (behind `verify`, `inspect`, `unpack`, `diff`, `export`): one
//! streaming pass over a bundle that trusts nothing the signature does not cover.
//!
//! Order: entry 1 (manifest.toml) and entry 2 (its minisign signature) are read under small
//! caps; the signature is checked against the trusted keys, the trusted comment against the
//! manifest, then the versions; then every entry is streamed and hashed, rejecting at the
//! first that is unsafe, unlisted, duplicated, oversized or mismatched; finally anything
//! listed but absent, and any bytes after the tar end or the zstd frame. tools.json is
//! validated again, against the bundle's own schema files and policy.caps.

mod error;

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read, Write};

use serde::Serialize;

pub use self::error::{IoDirection, VerifyError, VerifyIoError};
pub use super::refused::Refused;
use super::signature::{authenticate, check_signature, check_signed_for, judge_signers, parse_signature};
pub use super::signature::{count_for, policy_rejection, reason_of};
use super::{MAX_JSON_BYTES, MAX_MANIFEST_BYTES, MAX_SIGNATURE_BYTES, SIGNATURE_ENTRY, is_held};
use crate::archive::{ArchiveError, ArchiveReader, BundleRead, Entry, Limits};
use crate::diagnostic::{Code, Source};
use crate::hasher::EntryHasher;
use crate::manifest::{self, Manifest};
use crate::minisign::Signature;
use crate::policy::{self, Policy};
pub use crate::rejection::{Reason, Rejection};
use crate::state::State;
use crate::timestamp::Timestamp;
use crate::tools::{self, ToolsFile};
use crate::trust::TrustedKeys;
use crate::trust_policy::{self, Authenticated, SignersVerdict, TrustPolicy};

/// How signatures are treated.
#[derive(Clone, Copy)]
pub enum Trust<'a> {
    /// Require a signature from one of these keys (verify, unpack).
    Keys(&'a TrustedKeys),
    /// Judge the pack signature and these co-signatures under a trust policy.
    Policy(PolicyTrust<'a>),
    /// Read the signature but do not check it (inspect without keys).
    Unchecked,
}

/// A trust policy and the co-signatures found beside the bundle (minisign signatures over
/// manifest.toml, see [`crate::trust_policy::signatures`]).
#[derive(Clone, Copy)]
pub struct PolicyTrust<'a> {
    pub policy: &'a TrustPolicy,
    pub cosignatures: &'a [Signature],
    /// The clock key windows are judged at.
    pub now: Timestamp,
    /// Refuse a bundle whose signatures do not meet the rules. `bundle cosign` judges without
    /// enforcing (adding the missing signature is its purpose); it still needs one signature
    /// by a key of the policy before it believes the manifest.
    pub enforce: bool,
    /// Keyless signatures over the bundle file, verified over the digest they name before the
    /// file is read.
    pub keyless: &'a [trust_policy::KeylessOffer],
    /// The file's SHA-256 when it is known before the file is read (a registry layer's
    /// descriptor binds it): keyless signatures are bound to it at once. Otherwise the caller
    /// binds them once the file is read ([`Verified::unbound`]).
    pub file_sha256: Option<&'a [u8; 32]>,
}

/// What the caller requires of a bundle beyond a trusted signature and intact content. The
/// checks run once the manifest is authenticated, before any file's data is read.
#[derive(Debug, Default, Clone, Copy)]
pub struct Expect<'a> {
    /// The agent name the bundle must have (`--name`).
    pub name: Option<&'a str>,
    /// The time `[bundle] expires` is judged against: the system clock, or an injected one in
    /// tests. `None` skips the expiry check; only `inspect`, which shows the expiry instead,
    /// passes `None`.
    pub now: Option<Timestamp>,
    /// The versions accepted before (`--state`): an older one is a rollback.
    pub state: Option<&'a State>,
    /// The lowest version accepted (`--min-version`).
    pub min_version: Option<&'a semver::Version>,
    /// A refusal already decided on other evidence (a registry's attestations, judged before
    /// the layer), given only once the signature and the checks above have passed: the reader
    /// hears of a wrong key before the evidence that key also fails to vouch for, and no file's
    /// data is read.
    pub refuse_after_signature: Option<&'a Rejection>,
    /// The Sigstore trusted root a `[[models]]` identity is judged against; without one such a
    /// model is refused (`model_trusted_root_missing`).
    pub model_root: Option<&'a crate::keyless::TrustedRoot>,
}

/// One file of a verified bundle.
#[derive(Debug, Clone, Serialize)]
pub struct VerifiedFile {
    pub path: String,
    pub size: u64,
    pub blake3: String,
    pub executable: bool,
}

/// What a bundle holds, once read to the end.
#[derive(Debug)]
pub struct Verified {
    pub manifest: Manifest,
    pub key_id: String,
    pub trusted_comment: String,
    /// Whether the signature was checked against trusted keys.
    pub signature_checked: bool,
    pub files: Vec<VerifiedFile>,
    pub tools: Option<ToolsFile>,
    /// The entries held in memory for re-validation (step 13 of docs/book/src/reference/format.md
    /// §6): tools.json, policy.caps and the JSON files within the limits, so that callers can
    /// resolve the schemas tools.json references without reading the bundle again.
    pub held: HashMap<String, Vec<u8>>,
    /// The BLAKE3 of the signed manifest's bytes: what a state file records.
    pub manifest_blake3: blake3::Hash,
    /// The signed manifest's bytes (what co-signatures sign).
    pub manifest_bytes: Vec<u8>,
    /// With a trust policy: what became of each signature, and each rule's tally.
    pub signers: Option<SignersVerdict>,
    /// With a trust policy, when keyless signatures were offered before the file's SHA-256
    /// was known: the signatures as authenticated, for the caller to bind to the file and
    /// count again once it is read (`signers` took the keyless ones at their word until then).
    pub unbound: Option<Authenticated>,
    /// The vendor-signed models of `[[models]]`, each checked against its key.
    pub models: Vec<crate::attest::model_verify::ModelFacts>,
}

/// Where verified entries go: nowhere (verify), or a folder (unpack).
pub trait Sink {
    /// A writer for the entry's bytes.
    fn open(&mut self, path: &str, executable: bool) -> io::Result<Box<dyn Write + '_>>;

    /// Puts what was written into use (unpack renames its staging folder into place). The
    /// verifier never calls this; the deployment gate (`ops::gate`) calls it once, after the
    /// bundle passed every check and before the acceptance is recorded in the state file.
    fn commit(&mut self) -> crate::Result<()> {
        Ok(())
    }
}

/// Discards entries.
pub struct Discard;

impl Sink for Discard {
    fn open(&mut self, _: &str, _: bool) -> io::Result<Box<dyn Write + '_>> {
        Ok(Box::new(io::sink()))
    }
}

/// Verifies a bundle read from `input`, writing entries to `sink` as they stream by. Nothing
/// written to the sink may be used unless this returns `Ok`. A bundle that cannot be read, or
/// an entry the sink cannot take, is [`VerifyError::Io`]: no verdict on the bundle. `input` may
/// be a file whose frames the decoding threads read by position ([`BundleRead`]; any stream:
/// [`InOrder`](crate::archive::InOrder)), with the same verdict either way.
pub fn verify(
    input: impl BundleRead,
    trust: Trust<'_>,
    expect: &Expect<'_>,
    sink: &mut dyn Sink,
) -> Result<Verified, VerifyError> {
    let mut signer = None;
    let mut agent = None;
    let result = run(input, trust, expect, sink, &mut signer, &mut agent);
    result.map_err(|e| e.learned(agent, signer))
}

fn read_small(entry: &mut dyn Read, size: u64) -> Result<Vec<u8>, VerifyError> {
    let mut buf = Vec::with_capacity(size as usize);
    entry.read_to_end(&mut buf).map_err(ArchiveError::from)?;
    Ok(buf)
}

/// The limits every reader of a whole bundle applies (format reference §2.8).
pub(crate) const LIMITS: Limits =
    Limits { max_window_log: 24, max_entry_size: u64::MAX >> 1, max_total_size: u64::MAX >> 1, max_entries: 1_000_000 };

fn run(
    input: impl BundleRead,
    trust: Trust<'_>,
    expect: &Expect<'_>,
    sink: &mut dyn Sink,
    signer: &mut Option<String>,
    agent: &mut Option<(String, String)>,
) -> Result<Verified, VerifyError> {
    let mut reader = ArchiveReader::new(input, LIMITS)?;
    let Head {
        manifest_bytes,
        signature_text,
        signature,
        signature_checked,
        signers,
        unbound,
        manifest,
        manifest_blake3,
    } = head(&mut reader, trust, expect, signer, agent)?;
    if let Some(refusal) = expect.refuse_after_signature {
        return Err(Refused { rejection: refusal.clone(), signers: signers.map(Box::new) }.into());
    }

    // The manifest and its signature go to the sink too (an unpacked agent keeps them).
    for (path, bytes) in [(manifest::FILE_NAME, &manifest_bytes), (SIGNATURE_ENTRY, &signature_text)] {
        let io_err = |e: io::Error| VerifyIoError::write(path, e);
        let mut out = sink.open(path, false).map_err(io_err)?;
        out.write_all(bytes).and_then(|()| out.flush()).map_err(io_err)?;
    }
    let Streamed { files, kept, models } = stream_entries(&mut reader, &manifest, sink)?;
    reader.finish()?;

    let tools = validate_tools(&kept)?;
    let models = super::models::check(&manifest, &models, expect.model_root)?;
    Ok(Verified {
        manifest,
        key_id: signature.key_id_hex(),
        trusted_comment: signature.trusted_comment().to_owned(),
        signature_checked,
        files,
        tools,
        held: kept,
        manifest_blake3,
        manifest_bytes,
        signers,
        unbound,
        models,
    })
}

/// Entries 1 and 2 of a bundle, the signature checked and the manifest believed.
pub(crate) struct Head {
    pub manifest_bytes: Vec<u8>,
    pub signature_text: Vec<u8>,
    pub signature: Signature,
    /// Whether the signature was checked against trusted keys.
    pub signature_checked: bool,
    pub signers: Option<SignersVerdict>,
    pub unbound: Option<Authenticated>,
    pub manifest: Manifest,
    pub manifest_blake3: blake3::Hash,
}

/// Reads entries 1 and 2, checks the signature, then the manifest and what `expect` asks; the
/// signer and agent are noted as soon as known (for the rejection).
pub(crate) fn head<R: BundleRead>(
    reader: &mut ArchiveReader<R>,
    trust: Trust<'_>,
    expect: &Expect<'_>,
    signer: &mut Option<String>,
    agent: &mut Option<(String, String)>,
) -> Result<Head, VerifyError> {
    let manifest_bytes = read_manifest_entry(reader)?;
    let signature_text = read_signature_entry(reader)?;
    let signature = parse_signature(&signature_text)?;
    *signer = Some(signature.key_id_hex());
    // The signature, before anything in the manifest is believed.
    let (verified_by, authenticated) = match trust {
        Trust::Keys(keys) => (Some(check_signature(keys, &signature, &manifest_bytes)?), None),
        Trust::Policy(p) => (None, Some(authenticate(&p, &signature, &manifest_bytes)?)),
        Trust::Unchecked => (None, None),
    };
    // The manifest, now authenticated (or knowingly unchecked).
    let manifest = parse_manifest(&manifest_bytes)?;
    *agent = Some((manifest.name.clone(), manifest.version.to_string()));
    check_signed_for(&signature, verified_by.as_deref(), &manifest, expect)?;
    let (signers, unbound) = match (trust, authenticated) {
        (Trust::Policy(p), Some(auth)) => {
            let (verdict, unbound) = judge_signers(&p, auth, &manifest)?;
            (Some(verdict), unbound)
        }
        _ => (None, None),
    };
    let manifest_blake3 = blake3::hash(&manifest_bytes);
    freshness(&manifest, &signature.key_id_hex(), &manifest_blake3, expect)?;
    Ok(Head {
        manifest_bytes,
        signature_text,
        signature_checked: verified_by.is_some(),
        signature,
        signers,
        unbound,
        manifest,
        manifest_blake3,
    })
}

/// Entry 1: the manifest, under a small cap.
fn read_manifest_entry<R: BundleRead>(reader: &mut ArchiveReader<R>) -> Result<Vec<u8>, VerifyError> {
    let Some(mut entry) = reader.next_entry()? else {
        return Err(Rejection::new(
            Reason::MalformedManifest,
            None,
            "the bundle is empty: entry 1 must be manifest.toml",
        )
        .into());
    };
    if entry.path != manifest::FILE_NAME {
        return Err(Rejection::new(
            Reason::MalformedManifest,
            Some(&entry.path),
            format!("entry 1 is `{}`; it must be manifest.toml", entry.path),
        )
        .into());
    }
    if entry.size > MAX_MANIFEST_BYTES {
        return Err(Rejection::new(
            Reason::LimitExceeded,
            Some(manifest::FILE_NAME),
            format!("manifest.toml is {} bytes; at most {MAX_MANIFEST_BYTES} are accepted", entry.size),
        )
        .into());
    }
    let size = entry.size;
    read_small(&mut entry, size)
}

/// Entry 2: the signature, under a smaller cap.
fn read_signature_entry<R: BundleRead>(reader: &mut ArchiveReader<R>) -> Result<Vec<u8>, VerifyError> {
    let Some(mut entry) = reader.next_entry()? else {
        return Err(Rejection::new(
            Reason::MissingSignature,
            None,
            "the bundle ends after manifest.toml: entry 2 must be manifest.toml.minisig",
        )
        .into());
    };
    if entry.path != SIGNATURE_ENTRY {
        return Err(Rejection::new(
            Reason::MissingSignature,
            Some(&entry.path),
            format!("entry 2 is `{}`; it must be {SIGNATURE_ENTRY}", entry.path),
        )
        .into());
    }
    if entry.size > MAX_SIGNATURE_BYTES {
        return Err(Rejection::new(
            Reason::LimitExceeded,
            Some(SIGNATURE_ENTRY),
            format!("the signature is {} bytes; at most {MAX_SIGNATURE_BYTES} are accepted", entry.size),
        )
        .into());
    }
    let size = entry.size;
    read_small(&mut entry, size)
}

/// The entries after the signature, as streamed: the files, and the ones held in memory.
struct Streamed {
    files: Vec<VerifiedFile>,
    kept: HashMap<String, Vec<u8>>,
    /// The SHA-256 of model files, and the models' signatures and keys.
    models: super::models::ModelInputs,
}

/// Every entry after the signature, streamed into the sink and hashed, each checked against
/// the manifest as it passes; then anything the manifest lists that did not come.
fn stream_entries<R: BundleRead>(
    reader: &mut ArchiveReader<R>,
    manifest: &Manifest,
    sink: &mut dyn Sink,
) -> Result<Streamed, VerifyError> {
    // With frames decoded on other threads, this thread hashes (it would otherwise wait for
    // them); when it is the decoder, large entries are hashed beside it if a CPU is free.
    let ahead = reader.decodes_elsewhere();
    let mut hasher = if ahead { EntryHasher::with_thread(false) } else { EntryHasher::new() };
    // Frames decoded on other threads get their entries hashed there too.
    reader.prehash_entries();
    let mut digests = Unchecked::default();
    let streamed = stream_all(reader, manifest, sink, (&mut hasher, ahead), &mut digests);
    // Whatever ended the stream, a digest that does not match is reported first: it is what
    // comparing each hash before reading on would have found.
    digests.compare(&mut hasher, true)?;
    let (streamed, seen_paths) = streamed?;
    if let Some(path) = manifest.entries().into_keys().find(|p| !seen_paths.contains(*p)) {
        return Err(Rejection::new(
            Reason::MissingEntry,
            Some(path),
            format!("the manifest lists `{path}`, which is not in the bundle"),
        )
        .into());
    }
    Ok(streamed)
}

/// The entries whose hash [`EntryHasher`] may still be computing, in order, each with the
/// digest the manifest gives it.
#[derive(Default)]
struct Unchecked(VecDeque<(String, blake3::Hash)>);

impl Unchecked {
    /// Compares every hash that is ready (all of them, waiting for each, when `wait`) with its
    /// entry's digest.
    fn compare(&mut self, hasher: &mut EntryHasher, wait: bool) -> Result<(), VerifyError> {
        while !self.0.is_empty() {
            let next = if wait { hasher.wait() } else { hasher.ready() };
            let hash = match next {
                Ok(Some(hash)) => hash,
                Ok(None) => return Ok(()),
                Err(e) => return Err(ArchiveError::from(e).into()),
            };
            let Some((path, expected)) = self.0.pop_front() else { return Ok(()) };
            if hash != expected {
                return Err(Rejection::new(
                    Reason::DigestMismatch,
                    Some(&path),
                    format!("`{path}` has BLAKE3 {}, the manifest says {}", hash.to_hex(), expected.to_hex()),
                )
                .into());
            }
        }
        Ok(())
    }
}

/// The loop of [`stream_entries`]: each entry is checked against the manifest and hashed, but
/// its digest may be compared only after this returns (`digests`). Also returns the paths seen.
fn stream_all<R: BundleRead>(
    reader: &mut ArchiveReader<R>,
    manifest: &Manifest,
    sink: &mut dyn Sink,
    (hasher, ahead): (&mut EntryHasher, bool),
    digests: &mut Unchecked,
) -> Result<(Streamed, HashSet<String>), VerifyError> {
    let listed = manifest.entries();
    let mut seen: Vec<VerifiedFile> = Vec::with_capacity(listed.len());
    // Membership by set: a bundle may hold a million entries.
    let mut seen_paths: HashSet<String> = HashSet::with_capacity(listed.len());
    let mut kept: HashMap<String, Vec<u8>> = HashMap::new();
    let mut kept_total = 0;
    let mut models = super::models::ModelInputs::default();
    let mut previous: Option<String> = None;
    while let Some(mut entry) = reader.next_entry()? {
        let path = entry.path.clone();
        let here = Some(path.as_str());
        if path == manifest::FILE_NAME || path == SIGNATURE_ENTRY || seen_paths.contains(&path) {
            return Err(
                Rejection::new(Reason::DuplicateEntry, here, format!("`{path}` appears twice in the bundle")).into()
            );
        }
        let Some(Some(expected)) = listed.get(path.as_str()) else {
            return Err(Rejection::new(
                Reason::UnlistedEntry,
                here,
                format!("`{path}` is in the bundle but not in the signed manifest"),
            )
            .into());
        };
        if let Some(prev) = &previous
            && prev.as_bytes() >= path.as_bytes()
        {
            return Err(Rejection::new(
                Reason::MalformedArchive,
                here,
                format!("`{path}` comes after `{prev}`: entries must be in byte-wise sorted order"),
            )
            .into());
        }
        if entry.executable != expected.executable {
            return Err(Rejection::new(
                Reason::ModeMismatch,
                here,
                format!(
                    "`{path}` is {} in the archive, the manifest says {}",
                    mode_name(entry.executable),
                    mode_name(expected.executable)
                ),
            )
            .into());
        }
        if entry.size != expected.size {
            return Err(Rejection::new(
                Reason::SizeMismatch,
                here,
                format!("`{path}` is {} bytes in the archive, the manifest says {}", entry.size, expected.size),
            )
            .into());
        }
        let named = path == tools::FILE_NAME || path == policy::FILE_NAME;
        let keep = is_held(&path, entry.size, kept_total);
        let executable = entry.executable;
        let model_file = super::models::to_hold(manifest, &path, entry.size);
        let mut resources = super::models::hasher(manifest, &path);
        let copy = copy_entry((hasher, ahead), &mut entry, &path, keep || model_file, resources.as_mut(), sink)?;
        if let Some(resources) = resources {
            models.resources.insert(path.clone(), resources.finish());
        }
        if let Some(bytes) = copy {
            if model_file {
                models.held.insert(path.clone(), bytes.clone());
            }
            if keep {
                if !named {
                    kept_total += bytes.len() as u64;
                }
                kept.insert(path.clone(), bytes);
            }
        }
        digests.0.push_back((path.clone(), expected.blake3));
        digests.compare(hasher, false)?;
        seen_paths.insert(path.clone());
        // Nothing returns `Ok` before this digest was compared with the hash.
        seen.push(VerifiedFile {
            path: path.clone(),
            size: expected.size,
            blake3: expected.blake3.to_hex().to_string(),
            executable,
        });
        previous = Some(path);
    }
    Ok((Streamed { files: seen, kept, models }, seen_paths))
}

/// Streams one entry into the sink while hashing it (its hash is queued in `hasher`; with
/// `ahead`, finished from what the decoding threads hashed); returns a copy of the bytes when
/// `keep`.
fn copy_entry<R: BundleRead>(
    (hasher, ahead): (&mut EntryHasher, bool),
    entry: &mut Entry<'_, R>,
    path: &str,
    keep: bool,
    mut resources: Option<&mut crate::attest::model_resources::ResourceHasher>,
    sink: &mut dyn Sink,
) -> Result<Option<Vec<u8>>, VerifyError> {
    let mut out = sink.open(path, entry.executable).map_err(|e| VerifyIoError::write(path, e))?;
    let mut copy = keep.then(Vec::new);
    let size = entry.size;
    let each = |chunk: &[u8]| {
        if let Some(c) = &mut copy {
            c.extend_from_slice(chunk);
        }
        if let Some(h) = &mut resources {
            h.update(chunk);
        }
        out.write_all(chunk).map_err(SinkError::wrap)
    };
    // Frames decoded on other threads were hashed there: the entry's hash is finished here.
    let hashed = match ahead {
        true => entry.hash_ahead(each).map(|hash| hasher.queue(hash)),
        false => hasher.hash(size, entry, each),
    };
    hashed.map_err(|e| match SinkError::unwrap(e) {
        Ok(sink) => VerifyIoError::write(path, sink).into(),
        Err(archive) => VerifyError::from(ArchiveError::from(archive)),
    })?;
    out.flush().map_err(|e| VerifyIoError::write(path, e))?;
    Ok(copy)
}

/// Freeze and rollback: the signed expiry is not past, and the version is not older than
/// what the caller accepted before.
fn freshness(m: &Manifest, key_id: &str, manifest_blake3: &blake3::Hash, expect: &Expect<'_>) -> Result<(), Rejection> {
    let here = Some(manifest::FILE_NAME);
    if let (Some(expires), Some(now)) = (m.expires, expect.now)
        && now >= expires
    {
        return Err(Rejection::new(
            Reason::Expired,
            here,
            format!(
                "{} {} expired at {expires} (now {now}); ask its publisher for a current release",
                m.name, m.version
            ),
        ));
    }
    if let Some(min) = expect.min_version
        && m.version.cmp_precedence(min).is_lt()
    {
        return Err(Rejection::new(
            Reason::Rollback,
            here,
            format!("{} {} is older than the minimum version {min}", m.name, m.version),
        ));
    }
    if let Some(state) = expect.state {
        state
            .check(&m.name, key_id, &m.version, manifest_blake3)
            .map_err(|r| Rejection::new(Reason::Rollback, here, r.message))?;
    }
    Ok(())
}

/// Tells a failed write to the sink apart from a failed read of the archive, both of which
/// come back from the hashing pipeline as `io::Error`.
#[derive(Debug)]
struct SinkError(io::Error);

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SinkError {}

impl SinkError {
    fn wrap(e: io::Error) -> io::Error {
        io::Error::other(SinkError(e))
    }

    /// `Ok(sink error)` or `Err(the original error)`.
    fn unwrap(e: io::Error) -> Result<io::Error, io::Error> {
        if e.get_ref().is_some_and(|inner| inner.is::<SinkError>()) {
            match e.into_inner().map(|inner| inner.downcast::<SinkError>()) {
                Some(Ok(sink)) => Ok(sink.0),
                _ => Err(io::Error::other("sink error")),
            }
        } else {
            Err(e)
        }
    }
}

fn mode_name(executable: bool) -> &'static str {
    if executable { "executable (0755)" } else { "not executable (0644)" }
}

fn parse_manifest(bytes: &[u8]) -> Result<Manifest, Rejection> {
    let here = Some(manifest::FILE_NAME);
    let text = crate::json::decode_utf8(manifest::FILE_NAME, bytes.to_vec())
        .map_err(|d| Rejection::new(Reason::MalformedManifest, here, format!("manifest.toml: {}", d.message)))?;
    let mut diags = Vec::new();
    let parsed = manifest::parse(&Source::new(manifest::FILE_NAME, text), &mut diags);
    // An unsupported version explains every other problem, so it is reported first.
    let first =
        diags.iter().find(|d| d.code == Code::UnsupportedVersion).or_else(|| diags.iter().find(|d| d.is_error()));
    if let Some(d) = first {
        let reason = match d.code {
            Code::UnsupportedVersion => Reason::UnsupportedVersion,
            Code::LimitExceeded => Reason::LimitExceeded,
            _ => Reason::MalformedManifest,
        };
        let at = d.path.as_deref().map(|p| format!(" at `{p}`")).unwrap_or_default();
        return Err(Rejection::new(reason, here, format!("manifest.toml{at}: {}", d.message)));
    }
    let m = parsed.ok_or_else(|| Rejection::new(Reason::MalformedManifest, here, "manifest.toml could not be read"))?;
    if m.tools.is_none() {
        return Err(Rejection::new(Reason::MalformedManifest, here, "manifest.toml has no [artifacts.tools]"));
    }
    if let Some((path, _)) = m.entries().into_iter().find(|(_, d)| d.is_none()) {
        return Err(Rejection::new(
            Reason::MalformedManifest,
            here,
            format!("manifest.toml has no digest for `{path}`"),
        ));
    }
    Ok(m)
}

fn validate_tools(kept: &HashMap<String, Vec<u8>>) -> Result<Option<ToolsFile>, Rejection> {
    let here = Some(tools::FILE_NAME);
    let Some(bytes) = kept.get(tools::FILE_NAME) else {
        return Err(Rejection::new(
            Reason::LimitExceeded,
            here,
            format!("tools.json is larger than {MAX_JSON_BYTES} bytes"),
        ));
    };
    let invalid = |d: &crate::diagnostic::Diagnostic| {
        let at = match (&d.path, d.line) {
            (Some(p), Some(l)) => format!(" at {p} (line {l})"),
            (Some(p), None) => format!(" at {p}"),
            _ => String::new(),
        };
        Rejection::new(Reason::InvalidTools, Some(&d.file), format!("{}{at}: {} [{}]", d.file, d.message, d.code))
    };
    let text = crate::json::decode_utf8(tools::FILE_NAME, bytes.clone()).map_err(|d| invalid(&d))?;
    let mut diags = Vec::new();
    let policy = match kept.get(policy::FILE_NAME) {
        Some(p) => match crate::json::decode_utf8(policy::FILE_NAME, p.clone()) {
            Ok(t) => Policy::parse(&Source::new(policy::FILE_NAME, t), &mut diags),
            Err(d) => {
                return Err(Rejection::new(
                    Reason::InvalidTools,
                    Some(policy::FILE_NAME),
                    format!("policy.caps: {}", d.message),
                ));
            }
        },
        None => Policy::default(),
    };
    let validated = tools::validate(&Source::new(tools::FILE_NAME, text), kept, "", &policy, &mut diags);
    if let Some(d) = diags.iter().find(|d| d.is_error()) {
        let mut r = invalid(d);
        r.reason = match d.code {
            Code::UnsupportedVersion => Reason::UnsupportedVersion,
            Code::LimitExceeded => Reason::LimitExceeded,
            _ => Reason::InvalidTools,
        };
        return Err(r);
    }
    // Fail closed: a document valid by every rule but not the model is rejected.
    match validated.valid {
        Some(valid) => valid.model().map(Some).map_err(|d| invalid(&d)),
        None => Err(Rejection::new(Reason::InvalidTools, here, "tools.json could not be validated".to_owned())),
    }
}

#[cfg(test)]
mod tests;
