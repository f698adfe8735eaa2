//! Bundles in OCI registries (`bundle push`, `bundle pull`, `oci://` inputs): the reference
//! syntax, credentials and challenges, a distribution-spec client, and the artifact layout.
//! These are mechanisms; the decisions (what to verify, where to write) are the callers'.

pub mod artifact;
pub mod auth;
pub mod client;
mod http;
pub(crate) mod prefetch;
pub mod reference;
pub mod referrers;

use std::io::Read;

pub use artifact::{Artifact, CheckedReader};
pub use client::{Client, Options};
pub use reference::Reference;

/// Why the registry's artifact is refused (exit 1): stable codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a bundle artifact: another manifest type, another artifactType, not exactly one
    /// layer, another layer media type, a manifest too large.
    UnsupportedArtifact,
    /// A blob or manifest whose bytes are not the ones its digest and size name.
    BlobMismatch,
    /// A referrers index or referrer that is not an attestation we can read (too many entries,
    /// not JSON, a referrer of another subject).
    AttestationMalformed,
    /// A referrer whose layer descriptor names more bytes than the cap of what it holds
    /// (refused before a byte of it moves). The caller names it as it names the same file
    /// over its cap: an attestation `attestation_malformed`, co-signatures `limit_exceeded`.
    TooLarge,
}

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The artifact was fetched and is refused (exit 1).
    #[error("{1}")]
    Rejected(Refusal, String),
    /// Missing, refused or unusable credentials (exit 2).
    #[error("{0}")]
    Auth(String),
    /// A TLS failure (exit 2).
    #[error("{0}")]
    Tls(String),
    /// A failure worth trying again: 5xx, 429, a dropped connection (exit 2); `retry_after` is
    /// the pause the registry asked for (`Retry-After`), if it named one.
    #[error("{message}")]
    Transient { message: String, retry_after: Option<std::time::Duration> },
    /// Anything else that stops the transfer (exit 2).
    #[error("{0}")]
    Io(String),
    /// A bad reference, option or credentials setting (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The operation ran past its deadline, or the registry went silent (exit 2).
    #[error("{0}")]
    Timeout(String),
}

impl crate::error::Coded for OciError {
    /// The exit-2 code. A refusal is reported as a rejection (exit 1) by every caller
    /// ([`crate::ops::input`], push) and never reaches the error path; were it to, it would be
    /// an `io_error`.
    fn code(&self) -> crate::error::ErrorCode {
        use crate::error::ErrorCode;
        match self {
            OciError::Rejected(..) | OciError::Transient { .. } | OciError::Io(_) => ErrorCode::IoError,
            OciError::Auth(_) => ErrorCode::AuthFailed,
            OciError::Tls(_) => ErrorCode::TlsError,
            OciError::Usage(_) => ErrorCode::Usage,
            OciError::Timeout(_) => ErrorCode::Timeout,
        }
    }
}

/// A bundle artifact's layer, opened for streaming: nothing read from `reader` may be trusted
/// before [`CheckedReader::finish`] (or the consumer reaching its end without error).
pub struct Layer {
    /// The manifest's digest (what `@sha256:` pins).
    pub manifest_digest: String,
    pub artifact: Artifact,
    pub reader: CheckedReader<Box<dyn Read + Send>>,
}

/// Fetches and checks the manifest `reference` names (an `@sha256:` must match it).
pub fn fetch_manifest(client: &mut Client, reference: &Reference) -> Result<(String, Artifact), OciError> {
    let Some(name) = reference.manifest_ref() else {
        return Err(OciError::Usage(format!("{reference}: name a tag (…:TAG) or a digest (…@sha256:…)")));
    };
    let bytes = client.get_manifest(name, artifact::MANIFEST_MEDIA_TYPE, artifact::MAX_MANIFEST_BYTES)?;
    let digest = artifact::sha256_digest(&bytes);
    if let Some(want) = &reference.digest
        && *want != digest
    {
        return Err(OciError::Rejected(
            Refusal::BlobMismatch,
            format!("{reference}: the registry served a manifest whose digest is {digest}"),
        ));
    }
    let artifact = artifact::parse_manifest(&bytes)
        .map_err(|why| OciError::Rejected(Refusal::UnsupportedArtifact, format!("{reference}: {why}")))?;
    Ok((digest, artifact))
}

/// A bundle artifact whose manifest was fetched and checked, with what the registry says of it
/// before its layer is fetched: the referrers asked for and (when asked for) the artifact's
/// config, whose fields are unsigned claims. The layer's bytes move only on
/// [`Pending::open_layer`], so that a judgement of what came first can stop them.
pub struct Pending {
    client: Client,
    /// The manifest's digest (what `@sha256:` pins).
    pub manifest_digest: String,
    pub artifact: Artifact,
    /// The referrers of the wanted types, as listed: each is fetched with
    /// [`Pending::fetch_referrer`], one at a time.
    pub referrers: Vec<referrers::Listed>,
    pub config: Option<artifact::Config>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("manifest_digest", &self.manifest_digest).finish_non_exhaustive()
    }
}

impl Pending {
    /// The layer's SHA-256 as the manifest names it (the bytes will be held to it).
    pub fn layer_sha256(&self) -> Option<[u8; 32]> {
        let hex = self.artifact.layer_digest.strip_prefix("sha256:")?;
        let mut digest = [0u8; 32];
        hex::decode_to_slice(hex, &mut digest).ok().map(|()| digest)
    }

    /// One listed referrer's layer, fetched and checked against its descriptors.
    pub fn fetch_referrer(&mut self, listed: &referrers::Listed) -> Result<referrers::Found, OciError> {
        referrers::fetch_one(&mut self.client, &self.manifest_digest, listed)
    }

    /// Requests the layer, as a stream checked against its descriptor.
    pub fn open_layer(mut self) -> Result<Layer, OciError> {
        let body = self.client.get_blob(&self.artifact.layer_digest)?;
        let reader = CheckedReader::new(body, &self.artifact.layer_digest, self.artifact.layer_size);
        Ok(Layer { manifest_digest: self.manifest_digest, artifact: self.artifact, reader })
    }
}

/// Connects, fetches the manifest, then the referrers `wanted` names (and the config, with
/// `with_config`); the layer is not requested yet.
pub fn open_artifact(
    reference: &Reference,
    options: &Options,
    wanted: &[referrers::Wanted<'_>],
    with_config: bool,
) -> Result<Pending, OciError> {
    let mut client = Client::connect(reference, options, false, None)?;
    let (manifest_digest, artifact) = fetch_manifest(&mut client, reference)?;
    let referrers =
        if wanted.is_empty() { Vec::new() } else { referrers::list(&mut client, &manifest_digest, wanted)? };
    let config = if with_config { Some(checked_config(&mut client, reference, &artifact)?) } else { None };
    Ok(Pending { client, manifest_digest, artifact, referrers, config })
}

/// The artifact's config, parsed leniently (another client's config has none of our fields).
pub fn fetch_config(
    reference: &Reference,
    options: &Options,
) -> Result<(String, Artifact, artifact::Config), OciError> {
    let mut client = Client::connect(reference, options, false, None)?;
    let (manifest_digest, artifact) = fetch_manifest(&mut client, reference)?;
    let config = checked_config(&mut client, reference, &artifact)?;
    Ok((manifest_digest, artifact, config))
}

/// The config blob `artifact` names, checked against its digest and parsed leniently.
fn checked_config(
    client: &mut Client,
    reference: &Reference,
    artifact: &Artifact,
) -> Result<artifact::Config, OciError> {
    let bytes = client.get_small_blob(&artifact.config_digest, artifact::MAX_MANIFEST_BYTES)?;
    if artifact::sha256_digest(&bytes) != artifact.config_digest {
        return Err(OciError::Rejected(
            Refusal::BlobMismatch,
            format!("{reference}: the registry served a config whose digest is not {}", artifact.config_digest),
        ));
    }
    artifact::parse_config(&bytes)
        .map_err(|why| OciError::Rejected(Refusal::UnsupportedArtifact, format!("{reference}: {why}")))
}
