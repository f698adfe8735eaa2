//! `bundle push`: upload a verified bundle as an OCI artifact (docs/FORMAT.md §11).
//!
//! The bundle is verified first (with trusted keys: fully; without: well formed and signed, the
//! signature unchecked) and refused if it is not. Then the config blob, the layer (the bundle's
//! bytes unchanged, streamed from the file) and the manifest go up; each tag is one manifest
//! PUT. The manifest and config hold nothing but what the bundle determines, so the digest is
//! the same for the same bundle on any machine.

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::attest::SigstoreBundle;
use crate::bundle::verify::{self, Discard, Expect, Rejection, Trust, Verified, VerifyError};
use crate::evidence::files;
use crate::oci::artifact::{self, Config, Sha256Counter};
use crate::oci::client::BlobPush;
use crate::oci::{self, Client, OciError, Reference, referrers};
use crate::read_ahead;
use crate::timestamp::Timestamp;
use crate::trust::TrustedKeys;

/// What to push where.
pub struct Options<'a> {
    pub bundle: &'a Path,
    pub reference: Reference,
    /// More tags for the same manifest.
    pub tags: Vec<String>,
    /// Check the signature against these (else: well formed and signed, unchecked).
    pub keys: Option<&'a TrustedKeys>,
    pub registry: oci::Options,
    /// Mount the blobs from this repository of the same registry when it has them.
    pub mount_from: Option<String>,
    pub now: Timestamp,
    /// `SOURCE_DATE_EPOCH`, if set: when the attestations were made, recorded on their
    /// referrers (`org.opencontainers.image.created`); without it the annotation is left out, so
    /// that pushing the same files again gives the same referrers.
    pub created: Option<Timestamp>,
    /// `--attach-vsa`: a verification summary of this bundle (a Sigstore bundle, as `verify
    /// --emit-vsa` writes it), pushed beside the attestations as a referrer.
    pub vsa: Option<&'a Path>,
    /// The Sigstore trusted root a `[[models]]` identity of the bundle is judged against
    /// (`--trusted-root`); without one such a model is refused (`model_trusted_root_missing`).
    pub trusted_root: Option<&'a crate::keyless::TrustedRoot>,
}

/// What was pushed.
#[derive(Debug)]
pub struct Pushed {
    pub digest: String,
    /// Every reference the manifest now answers to (by tag, then by digest).
    pub references: Vec<String>,
    pub config: BlobPush,
    pub layer: BlobPush,
    pub layer_digest: String,
    pub layer_size: u64,
    pub verified: Box<Verified>,
    /// The attestations found beside the bundle, pushed as referrers of its manifest (their
    /// manifest digests).
    pub referrers: Vec<String>,
}

/// Why nothing was pushed.
#[derive(Debug)]
pub enum PushError {
    /// The bundle did not verify.
    Rejected(Rejection),
    /// The registry or the file failed.
    Registry(OciError),
}

impl From<OciError> for PushError {
    fn from(e: OciError) -> Self {
        PushError::Registry(e)
    }
}

pub fn push(opts: &Options<'_>) -> Result<Pushed, PushError> {
    let io = |e: std::io::Error| OciError::Io(format!("{}: {e}", opts.bundle.display()));
    let tags: Vec<Reference> = (opts.reference.tag.is_some().then(|| Ok(opts.reference.clone())).into_iter())
        .chain(opts.tags.iter().map(|t| opts.reference.with_tag(t)))
        .collect::<Result<_, _>>()
        .map_err(OciError::Usage)?;
    if tags.is_empty() && opts.reference.digest.is_none() {
        return Err(OciError::Usage(format!("{}: name a tag (…:TAG or --tag)", opts.reference)).into());
    }

    // One pass: verify, and hash the bytes for the layer's digest. A large bundle is read (and
    // SHA-256 hashed) on a reading thread while the decoder works (`read_ahead`), as verify does.
    let mut file = File::open(opts.bundle).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let hash = Arc::new(Mutex::new(Sha256Counter::default()));
    let hashing = Hashing { inner: file.try_clone().map_err(io)?, hash: Arc::clone(&hash) };
    let mut input = read_ahead::sequential(hashing, size).map_err(io)?;
    let trust = opts.keys.map_or(Trust::Unchecked, Trust::Keys);
    let expect = Expect { now: Some(opts.now), model_root: opts.trusted_root, ..Expect::default() };
    let verified = match verify::verify(&mut input, trust, &expect, &mut Discard) {
        Ok(v) => v,
        Err(VerifyError::Refused(r)) => return Err(PushError::Rejected(r.into_rejection())),
        Err(VerifyError::Io(e)) => return Err(io(e.source).into()),
    };
    // The end of the input is reached only after every byte was hashed (on the reading thread).
    std::io::copy(&mut input, &mut std::io::sink()).map_err(io)?;
    drop(input);
    let counted = hash.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (layer_size, layer_digest) = (counted.bytes, counted.digest());

    let config = serde_json::to_vec(&config_of(&verified)).expect("the config serialises");
    let config_digest = artifact::sha256_digest(&config);
    let title = opts.bundle.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let manifest = artifact::manifest_bytes((&config_digest, config.len() as u64), (&layer_digest, layer_size), &title);
    let digest = artifact::sha256_digest(&manifest);
    if let Some(want) = &opts.reference.digest
        && *want != digest
    {
        return Err(OciError::Usage(format!(
            "{}: this bundle's manifest digest is {digest}; push it by tag, or to @{digest}",
            opts.reference
        ))
        .into());
    }

    let mut attestations = attestations_beside(opts.bundle, &layer_digest)?;
    if let Some(vsa) = opts.vsa {
        attestations.push(summary(vsa, &layer_digest)?);
    }
    let mount = opts.mount_from.as_deref();
    let mut client = Client::connect(&opts.reference, &opts.registry, true, mount)?;
    let config_push = client.push_blob(
        &config_digest,
        config.len() as u64,
        &mut || Ok(Box::new(std::io::Cursor::new(config.clone())) as Box<dyn Read>),
        mount,
    )?;
    let layer_push = client.push_blob(
        &layer_digest,
        layer_size,
        &mut || {
            file.rewind()?;
            Ok(Box::new(BufReader::with_capacity(1 << 20, file.try_clone()?).take(layer_size)) as Box<dyn Read>)
        },
        mount,
    )?;
    let mut references = Vec::new();
    for tag in &tags {
        client.put_manifest(tag.tag.as_deref().unwrap_or_default(), &manifest, artifact::MANIFEST_MEDIA_TYPE)?;
        references.push(tag.to_string());
    }
    if tags.is_empty() {
        client.put_manifest(&digest, &manifest, artifact::MANIFEST_MEDIA_TYPE)?;
    }
    let subject = referrers::Subject { digest: &digest, size: manifest.len() as u64 };
    let created = opts.created.map(|t| t.to_string());
    let referrers = referrers::push(&mut client, &subject, &attestations, created.as_deref())?;
    let by_digest = Reference { tag: None, digest: Some(digest.clone()), ..opts.reference.clone() };
    references.push(by_digest.to_string());
    Ok(Pushed {
        digest,
        references,
        config: config_push,
        layer: layer_push,
        layer_digest,
        layer_size,
        verified: Box::new(verified),
        referrers,
    })
}

/// The attestations beside the bundle (`pack --attest`'s files), each with its predicate
/// type; one that is not about this bundle (`layer_digest`) stops the push: it would be
/// refused by every gate that pulls it.
fn attestations_beside(bundle: &Path, layer_digest: &str) -> Result<Vec<referrers::Attestation<'static>>, PushError> {
    let mut found = Vec::new();
    for kind in files::Kind::ALL {
        let path = files::beside(bundle, kind);
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|e| OciError::Io(format!("{}: {e}", path.display())))?;
        let about_this = SigstoreBundle::from_json(&bytes)
            .and_then(|b| b.statement())
            .is_ok_and(|s| s.has_sha256(layer_digest.trim_start_matches("sha256:")));
        if !about_this {
            return Err(OciError::Usage(format!(
                "{} is not an attestation of this bundle (sha256 {layer_digest}); pack again with --attest, or remove it",
                path.display()
            ))
            .into());
        }
        found.push(referrers::Attestation { predicate_type: kind.predicate_type(), bytes });
    }
    Ok(found)
}

/// The verification summary at `path`, which must be a Sigstore bundle holding a SLSA VSA v1
/// about this bundle (`layer_digest`). Its signature is not judged here: the consumer that
/// relies on it checks it with the verifier's key.
fn summary(path: &Path, layer_digest: &str) -> Result<referrers::Attestation<'static>, PushError> {
    let usage = |why: String| PushError::Registry(OciError::Usage(format!("--attach-vsa {}: {why}", path.display())));
    let bytes =
        crate::regular_file::read(path, crate::attest::MAX_ATTESTATION_BYTES, crate::regular_file::Links::Follow)
            .map_err(|e| usage(e.into_io().to_string()))?;
    let statement = SigstoreBundle::from_json(&bytes).and_then(|b| b.statement()).map_err(|e| usage(e.to_string()))?;
    if statement.predicate_type != crate::evidence::vsa::VSA_V1 {
        return Err(usage(format!(
            "its predicate type is {:?}, not a SLSA verification summary v1",
            statement.predicate_type
        )));
    }
    if !statement.has_sha256(layer_digest.trim_start_matches("sha256:")) {
        return Err(usage(format!("it is not a summary of this bundle (sha256 {layer_digest})")));
    }
    Ok(referrers::Attestation { predicate_type: crate::evidence::vsa::VSA_V1, bytes })
}

/// The config blob for a verified bundle.
fn config_of(v: &Verified) -> Config {
    Config {
        name: Some(v.manifest.name.clone()),
        version: Some(v.manifest.version.to_string()),
        key_id: Some(v.key_id.clone()),
        expires: v.manifest.expires.map(|t| t.to_string()),
        tools: v.tools.as_ref().map(|t| t.tools.iter().map(|tool| tool.id.clone()).collect()).unwrap_or_default(),
    }
}

/// Hashes what passes through (on whichever thread reads; the digest is read back through
/// the shared counter once the input has been read to its end).
struct Hashing<R> {
    inner: R,
    hash: Arc<Mutex<Sha256Counter>>,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.lock().unwrap_or_else(|p| p.into_inner()).update(&buf[..n]);
        Ok(n)
    }
}
