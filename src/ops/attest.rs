//! `bundle attest BUNDLE --key KEY`: the attestations of an existing bundle, as `pack --attest`
//! writes them at pack time, for a bundle packed before (or by a key that only signs evidence,
//! such as a CI builder's).
//!
//! The bundle is read in one pass: well formed, every digest checked, its tools.json valid (the
//! contract predicate is computed from it), hashed with SHA-256 as it goes (the subject). Its
//! signature is not judged here — that is the gate's job, which also judges these attestations.
//! A second key attesting the same statement adds its signature to the envelope beside the
//! bundle instead of replacing it.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::attest::SigstoreBundle;
use crate::bundle::verify::{self, Discard, Expect, Rejection, Trust};
use crate::contract::release;
use crate::error::Error;
use crate::evidence::{self, files, provenance};
use crate::keys::Signer;
use crate::regular_file::{self, Links, ReadError};

/// Where the provenance says the bundle came from.
#[derive(Debug, Clone, Default)]
pub struct AttestOptions {
    /// The agent folder the bundle was packed from (its git facts go into the provenance);
    /// default: the bundle's own folder.
    pub from: Option<PathBuf>,
    /// `SOURCE_DATE_EPOCH`, if set.
    pub source_date_epoch: Option<u64>,
    /// The root a `[[models]]` entry's Sigstore identity is judged under (`--trusted-root`);
    /// without one such a bundle is refused (`model_trusted_root_missing`).
    pub trusted_root: Option<std::sync::Arc<crate::keyless::TrustedRoot>>,
}

/// What was written.
#[derive(Debug)]
pub struct Attested {
    pub name: String,
    pub version: String,
    pub key_id: String,
    pub sha256: String,
    pub files: Vec<PathBuf>,
    /// How many signatures each file's envelope holds now (this key's, and those of other
    /// keys over the same statement that were there before).
    pub signatures: Vec<usize>,
    /// For each file, whether this key signed the statement already there (about this very
    /// file, made by another key, another way: `pack --attest` records how it compressed)
    /// rather than its own: adding a signer never removes one.
    pub adopted: Vec<bool>,
}

/// Why nothing was written.
#[derive(Debug)]
pub enum AttestFailure {
    /// The bundle is not one (exit 1).
    Rejected(Rejection),
    Error(Error),
}

impl From<Error> for AttestFailure {
    fn from(e: Error) -> Self {
        AttestFailure::Error(e)
    }
}

pub fn attest(bundle: &Path, signer: &mut Signer, opts: &AttestOptions) -> Result<Attested, AttestFailure> {
    let file = File::open(bundle).map_err(|e| Error::io(bundle, e))?;
    let mut hashing = Hashing { inner: file, sha256: Sha256::new() };
    let verified = verify::verify(
        BufReader::with_capacity(1 << 20, &mut hashing),
        Trust::Unchecked,
        &Expect { model_root: opts.trusted_root.as_deref(), ..Expect::default() },
        &mut Discard,
    )
    .map_err(|e| e.rejection(bundle).map_or_else(AttestFailure::from, AttestFailure::Rejected))?;
    std::io::copy(&mut hashing, &mut std::io::sink()).map_err(|e| Error::io(bundle, e))?;
    let sha256: [u8; 32] = hashing.sha256.finalize().into();
    let contracts = release::from_verified(&verified, bundle)
        .map_err(|e| Error::Usage(format!("cannot compute the tool contracts of {}: {e}", bundle.display())))?;
    let contract = evidence::contract::predicate(&contracts, &verified.manifest_blake3);
    let here = bundle.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let facts = provenance::BuildFacts {
        agent_dir: opts.from.as_deref().unwrap_or(here),
        // A bundle's manifest is always locked; its compression level is not recorded.
        locked: true,
        level: None,
        expires: verified.manifest.expires,
        source_date_epoch: opts.source_date_epoch,
    };
    let provenance = provenance::predicate(&facts, &|k| std::env::var(k).ok());
    let name = bundle.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut signed = evidence::sign_all(&name, &sha256, provenance, contract, signer).map_err(Error::Signer)?;
    let mut adopted = Vec::with_capacity(signed.len());
    for (kind, sigstore) in &mut signed {
        adopted.push(add_earlier_signatures(&files::beside(bundle, *kind), sigstore, &sha256, signer)?);
    }
    let signatures = signed.iter().map(|(_, s)| s.dsse_envelope.signatures.len()).collect();
    let written = files::replace_beside(bundle, &signed)?;
    Ok(Attested {
        name: verified.manifest.name.clone(),
        version: verified.manifest.version.to_string(),
        key_id: signer.public_key().key_id_hex(),
        sha256: hex::encode(sha256),
        files: written,
        signatures,
        adopted,
    })
}

/// A second key attests: when the file at `path` is a Sigstore bundle over the very statement
/// `sigstore` signs, its signatures by other keys are kept beside the new one (a signature by
/// the same key is replaced), so that the envelope gathers one signature per key, as
/// `Envelope.verify(keys, threshold)` counts them. When it holds another statement of the same
/// kind about this very file (`sha256`; `pack --attest` records what `attest` cannot know),
/// `signer` signs that statement instead of replacing it, and `true` says so: adding a signer
/// never removes one. An envelope about another file (an earlier bundle of that name), or one
/// that cannot be read as an attestation, is replaced.
fn add_earlier_signatures(
    path: &Path,
    sigstore: &mut SigstoreBundle,
    sha256: &[u8; 32],
    signer: &mut Signer,
) -> Result<bool, Error> {
    let bytes = match regular_file::read(path, crate::attest::MAX_ATTESTATION_BYTES, Links::Follow) {
        Ok(bytes) => bytes,
        Err(ReadError::NotFound) => return Ok(false),
        Err(e) => return Err(Error::io(path, e.into_io())),
    };
    let Ok(mut earlier) = SigstoreBundle::from_json(&bytes) else { return Ok(false) };
    let mut adopted = false;
    if earlier.dsse_envelope.payload != sigstore.dsse_envelope.payload
        || earlier.dsse_envelope.payload_type != sigstore.dsse_envelope.payload_type
    {
        let ours = sigstore.statement().ok();
        let theirs = earlier.statement().ok();
        let about_this_file = |s: &crate::attest::Statement| {
            s.subject.iter().any(|subject| subject.digest.get("sha256") == Some(&hex::encode(sha256)))
        };
        let same_kind = match (&ours, &theirs) {
            (Some(o), Some(t)) => o.predicate_type == t.predicate_type && about_this_file(t),
            _ => false,
        };
        if !same_kind || earlier.dsse_envelope.signatures.is_empty() {
            return Ok(false);
        }
        // Sign the statement already there: this key's signature over it joins the others.
        let key_id = signer.public_key().key_id_hex();
        let mut mine = earlier.dsse_envelope.clone();
        mine.signatures.clear();
        mine.sign(&key_id, |pae| signer.sign_ed25519(pae)).map_err(Error::Signer)?;
        sigstore.dsse_envelope = mine;
        adopted = true;
    }
    let (old, new) = (&earlier.dsse_envelope, &sigstore.dsse_envelope);
    let mine: Vec<&str> = new.signatures.iter().map(|s| s.keyid.as_str()).collect();
    let kept: Vec<_> = old.signatures.iter().filter(|s| !mine.contains(&s.keyid.as_str())).cloned().collect();
    if kept.len() + new.signatures.len() > crate::attest::MAX_SIGNATURES {
        return Err(Error::Usage(format!(
            "{} already holds {} signatures, the most an envelope may hold",
            path.display(),
            old.signatures.len()
        )));
    }
    let signatures: Vec<_> = kept.into_iter().chain(new.signatures.iter().cloned()).collect();
    earlier.dsse_envelope.signatures = signatures;
    *sigstore = earlier;
    Ok(adopted)
}

struct Hashing<R> {
    inner: R,
    sha256: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha256.update(&buf[..n]);
        Ok(n)
    }
}
