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
        &Expect::default(),
        &mut Discard,
    )
    .map_err(|r| AttestFailure::Rejected(r.into_rejection()))?;
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
    for (kind, sigstore) in &mut signed {
        add_earlier_signatures(&files::beside(bundle, *kind), sigstore)?;
    }
    let signatures = signed.iter().map(|(_, s)| s.dsse_envelope.signatures.len()).collect();
    let written = files::replace_beside(bundle, &signed)?;
    Ok(Attested {
        name: verified.manifest.name.clone(),
        version: verified.manifest.version.to_string(),
        key_id: signer.public_key().key_id_hex(),
        sha256: evidence::hex(&sha256),
        files: written,
        signatures,
    })
}

/// A second key attests: when the file at `path` is a Sigstore bundle over the very statement
/// `sigstore` signs, its signatures by other keys are kept beside the new one (a signature by
/// the same key is replaced), so that the envelope gathers one signature per key, as
/// `Envelope.verify(keys, threshold)` counts them. An envelope over another statement (another
/// bundle, or a provenance made at another time) is replaced, as before.
fn add_earlier_signatures(path: &Path, sigstore: &mut SigstoreBundle) -> Result<(), Error> {
    let bytes = match regular_file::read(path, crate::attest::MAX_ATTESTATION_BYTES, Links::Follow) {
        Ok(bytes) => bytes,
        Err(ReadError::NotFound) => return Ok(()),
        Err(e) => return Err(Error::io(path, e.into_io())),
    };
    let Ok(earlier) = SigstoreBundle::from_json(&bytes) else { return Ok(()) };
    let (old, new) = (&earlier.dsse_envelope, &sigstore.dsse_envelope);
    if old.payload != new.payload || old.payload_type != new.payload_type {
        return Ok(());
    }
    let mine: Vec<&str> = new.signatures.iter().map(|s| s.keyid.as_str()).collect();
    let kept: Vec<_> = old.signatures.iter().filter(|s| !mine.contains(&s.keyid.as_str())).cloned().collect();
    if kept.len() + new.signatures.len() > crate::attest::MAX_SIGNATURES {
        return Err(Error::Usage(format!(
            "{} already holds {} signatures, the most an envelope may hold",
            path.display(),
            old.signatures.len()
        )));
    }
    let mut merged = earlier.clone();
    merged.dsse_envelope.signatures = kept;
    merged.dsse_envelope.signatures.extend(new.signatures.iter().cloned());
    *sigstore = merged;
    Ok(())
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
