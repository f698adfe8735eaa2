//! Attestations in registries: OCI 1.1 referrers of a bundle's manifest (distribution spec
//! v1.1, "Listing Referrers" and "Referrers Tag Schema").
//!
//! Each attestation (a Sigstore bundle) is an artifact manifest of its own: `artifactType` per
//! predicate, the empty config, one layer (the Sigstore bundle file), and `subject` = the
//! bundle's manifest. Where the registry keeps the referrers index (it answers the manifest
//! PUT with `OCI-Subject`), nothing more is needed; where it does not (Debian's docker-registry
//! 2.8), the pusher keeps an image index under the fallback tag `sha256-<hex>` of the subject.
//! Readers ask the referrers API first and fall back to the tag.
//!
//! What comes back is untrusted: the index is read under a size cap and at most
//! [`MAX_REFERRERS`] entries (more is refused, not truncated), only our artifact types are
//! fetched, and every manifest and blob is checked against its digest. Whether an attestation
//! is trusted is the gate's judgement, not this module's.

use serde_json::{Value, json};

use super::artifact::{MANIFEST_MEDIA_TYPE, MAX_MANIFEST_BYTES, sha256_digest};
use super::{Client, OciError};
use crate::attest::MAX_ATTESTATION_BYTES;
use crate::oci::Refusal;

/// The media type of an image index (the referrers response and the fallback tag).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The layer media type of an attestation: the Sigstore bundle file.
pub const SIGSTORE_BUNDLE_MEDIA_TYPE: &str = crate::attest::sigstore_bundle::MEDIA_TYPE_V03;
/// The empty config of artifact manifests (image-spec 1.1 "Guidance for an Empty Descriptor").
const EMPTY_CONFIG: &[u8] = b"{}";
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The most entries a referrers index may list; a longer one is refused.
pub const MAX_REFERRERS: usize = 256;

/// The subject of referrers: the bundle's manifest.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    pub digest: &'a str,
    pub size: u64,
}

/// The fallback tag of a subject digest: `sha256:abc…` → `sha256-abc…`.
pub fn fallback_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

/// Pushes each `(artifactType, Sigstore bundle bytes)` as a referrer of `subject`; keeps the
/// fallback tag's index when the registry has no referrers API. Returns the referrers'
/// manifest digests.
pub fn push(
    client: &mut Client,
    subject: &Subject<'_>,
    attestations: &[(&str, Vec<u8>)],
) -> Result<Vec<String>, OciError> {
    let empty_digest = sha256_digest(EMPTY_CONFIG);
    if !attestations.is_empty() {
        client.push_blob(
            &empty_digest,
            EMPTY_CONFIG.len() as u64,
            &mut || Ok(Box::new(std::io::Cursor::new(EMPTY_CONFIG)) as Box<dyn std::io::Read>),
            None,
        )?;
    }
    let mut descriptors = Vec::new();
    let mut api = true;
    for (artifact_type, bytes) in attestations {
        let layer_digest = sha256_digest(bytes);
        let data = bytes.clone();
        client.push_blob(
            &layer_digest,
            bytes.len() as u64,
            &mut || Ok(Box::new(std::io::Cursor::new(data.clone())) as Box<dyn std::io::Read>),
            None,
        )?;
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": artifact_type,
            "config": {"mediaType": EMPTY_MEDIA_TYPE, "digest": empty_digest, "size": EMPTY_CONFIG.len(), "data": "e30="},
            "layers": [{"mediaType": SIGSTORE_BUNDLE_MEDIA_TYPE, "digest": layer_digest, "size": bytes.len()}],
            "subject": {"mediaType": MANIFEST_MEDIA_TYPE, "digest": subject.digest, "size": subject.size},
        });
        let manifest = serde_json::to_vec(&manifest).expect("a manifest serialises");
        let digest = sha256_digest(&manifest);
        api &= client.put_manifest_with_subject(&digest, &manifest, MANIFEST_MEDIA_TYPE)?;
        descriptors.push(json!({
            "mediaType": MANIFEST_MEDIA_TYPE,
            "digest": digest,
            "size": manifest.len(),
            "artifactType": artifact_type,
        }));
    }
    if !api && !descriptors.is_empty() {
        update_fallback_tag(client, subject, &descriptors)?;
    }
    Ok(descriptors.iter().filter_map(|d| d["digest"].as_str().map(str::to_owned)).collect())
}

/// Adds `descriptors` to the index under the subject's fallback tag (keeping other entries,
/// replacing none twice).
fn update_fallback_tag(client: &mut Client, subject: &Subject<'_>, descriptors: &[Value]) -> Result<(), OciError> {
    let tag = fallback_tag(subject.digest);
    let mut manifests: Vec<Value> =
        match client.get_optional(&format!("manifests/{tag}"), INDEX_MEDIA_TYPE, MAX_MANIFEST_BYTES)? {
            Some(bytes) => index_entries(&bytes)?,
            None => Vec::new(),
        };
    for d in descriptors {
        if !manifests.iter().any(|m| m["digest"] == d["digest"]) {
            manifests.push(d.clone());
        }
    }
    let index = json!({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": manifests});
    client.put_manifest(&tag, &serde_json::to_vec(&index).expect("an index serialises"), INDEX_MEDIA_TYPE)
}

fn malformed(why: String) -> OciError {
    OciError::Rejected(Refusal::AttestationMalformed, why)
}

/// The entries of an image index, at most [`MAX_REFERRERS`].
fn index_entries(bytes: &[u8]) -> Result<Vec<Value>, OciError> {
    let index: Value =
        serde_json::from_slice(bytes).map_err(|e| malformed(format!("the referrers index is not JSON: {e}")))?;
    let Some(manifests) = index.get("manifests").and_then(Value::as_array) else {
        return Err(malformed("the referrers index has no `manifests` list".into()));
    };
    if manifests.len() > MAX_REFERRERS {
        return Err(malformed(format!(
            "the referrers index lists {} entries, over the cap of {MAX_REFERRERS}",
            manifests.len()
        )));
    }
    Ok(manifests.clone())
}

/// The attestations attached to `subject_digest`, as `(source, Sigstore bundle bytes)`: from
/// the referrers API, else the fallback tag; only entries whose `artifactType` is one of
/// `artifact_types`. Each manifest and layer is checked against its digest.
pub fn fetch(
    client: &mut Client,
    subject_digest: &str,
    artifact_types: &[&str],
) -> Result<Vec<(String, Vec<u8>)>, OciError> {
    let index =
        match client.get_optional(&format!("referrers/{subject_digest}"), INDEX_MEDIA_TYPE, MAX_MANIFEST_BYTES)? {
            Some(bytes) => Some(bytes),
            None => client.get_optional(
                &format!("manifests/{}", fallback_tag(subject_digest)),
                INDEX_MEDIA_TYPE,
                MAX_MANIFEST_BYTES,
            )?,
        };
    let Some(index) = index else { return Ok(Vec::new()) };
    let mut found = Vec::new();
    for entry in index_entries(&index)? {
        let Some(kind) = entry["artifactType"].as_str().filter(|t| artifact_types.contains(t)) else { continue };
        let Some(digest) = entry["digest"].as_str() else { continue };
        let bytes =
            client.get_optional(&format!("manifests/{digest}"), MANIFEST_MEDIA_TYPE, MAX_MANIFEST_BYTES)?.ok_or_else(
                || malformed(format!("the referrers index names {digest}, which the registry does not have")),
            )?;
        if sha256_digest(&bytes) != digest {
            return Err(OciError::Rejected(
                Refusal::BlobMismatch,
                format!("referrer {digest}: the registry served other bytes"),
            ));
        }
        let manifest: Value =
            serde_json::from_slice(&bytes).map_err(|e| malformed(format!("referrer {digest}: {e}")))?;
        if manifest["subject"]["digest"].as_str() != Some(subject_digest)
            || manifest["artifactType"].as_str() != Some(kind)
        {
            return Err(malformed(format!("referrer {digest} is not an attestation of {subject_digest}")));
        }
        let layer = manifest["layers"][0]["digest"].as_str().unwrap_or_default().to_owned();
        if manifest["layers"].as_array().map(Vec::len) != Some(1) || !layer.starts_with("sha256:") {
            return Err(malformed(format!("referrer {digest} does not hold one Sigstore bundle layer")));
        }
        let blob = client.get_small_blob(&layer, MAX_ATTESTATION_BYTES + 1)?;
        if sha256_digest(&blob) != layer {
            return Err(OciError::Rejected(
                Refusal::BlobMismatch,
                format!("referrer layer {layer}: the registry served other bytes"),
            ));
        }
        found.push((format!("referrer {digest}"), blob));
    }
    Ok(found)
}
