//! Attestations in registries: OCI 1.1 referrers of a bundle's manifest (distribution spec
//! v1.1, "Listing Referrers" and "Referrers Tag Schema").
//!
//! Each attestation (a Sigstore bundle) is an artifact manifest of its own, in the layout of
//! cosign's `specs/BUNDLE_SPEC.md`, which cosign, Kyverno and sigstore/policy-controller look
//! for: `artifactType` the Sigstore bundle media type, the empty config, one layer (the
//! Sigstore bundle file, titled `sha256-<hex>.sigstore.json`), the annotations
//! `dev.sigstore.bundle.content`, `dev.sigstore.bundle.predicateType` and
//! `org.opencontainers.image.created`, and `subject` = the bundle's manifest. Releases before
//! that gave each predicate an `artifactType` of our own; readers still find those
//! ([`Wanted::Typed`]), and our co-signatures keep theirs.
//!
//! Where the registry keeps the referrers index (it answers the manifest PUT with
//! `OCI-Subject`), nothing more is needed; where it does not (Debian's docker-registry 2.8),
//! the pusher keeps an image index under the fallback tag `sha256-<hex>` of the subject, its
//! entries carrying the manifests' annotations as the referrers API would. Readers ask the
//! referrers API first and fall back to the tag.
//!
//! What comes back is untrusted: the index is read under a size cap and at most
//! [`MAX_REFERRERS`] entries (more is refused, not truncated), only the wanted referrers are
//! fetched (a Sigstore bundle only when its predicate type annotation is wanted: another
//! tool's signature or a verification summary beside the bundle is not ours to judge), and
//! every manifest and blob is checked against its digest. Whether an attestation is trusted is
//! the gate's judgement, not this module's.

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
pub use crate::limits::MAX_REFERRERS;
/// cosign's annotations of a Sigstore-bundle referrer (BUNDLE_SPEC.md, "Annotations").
pub const CONTENT_ANNOTATION: &str = "dev.sigstore.bundle.content";
pub const PREDICATE_TYPE_ANNOTATION: &str = "dev.sigstore.bundle.predicateType";
pub const CREATED_ANNOTATION: &str = "org.opencontainers.image.created";
/// The layer's suggested file name (BUNDLE_SPEC.md, "Layer Annotations").
const TITLE_ANNOTATION: &str = super::artifact::TITLE_ANNOTATION;

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

/// One attestation to push in cosign's layout: a Sigstore bundle holding a DSSE envelope.
#[derive(Debug, Clone)]
pub struct Attestation<'a> {
    /// The in-toto statement's `predicateType`.
    pub predicate_type: &'a str,
    /// The Sigstore bundle file.
    pub bytes: Vec<u8>,
}

/// Pushes each attestation as a referrer of `subject` in cosign's layout; `created` (RFC 3339,
/// from `SOURCE_DATE_EPOCH`, so that pushes stay reproducible) is recorded when given. Keeps
/// the fallback tag's index when the registry has no referrers API. Returns the referrers'
/// manifest digests.
pub fn push(
    client: &mut Client,
    subject: &Subject<'_>,
    attestations: &[Attestation<'_>],
    created: Option<&str>,
) -> Result<Vec<String>, OciError> {
    let referrers: Vec<Referrer<'_>> = attestations
        .iter()
        .map(|a| {
            let mut annotations = vec![
                (CONTENT_ANNOTATION, "dsse-envelope".to_owned()),
                (PREDICATE_TYPE_ANNOTATION, a.predicate_type.to_owned()),
            ];
            annotations.extend(created.map(|c| (CREATED_ANNOTATION, c.to_owned())));
            Referrer {
                artifact_type: SIGSTORE_BUNDLE_MEDIA_TYPE,
                layers: vec![(SIGSTORE_BUNDLE_MEDIA_TYPE, a.bytes.clone())],
                annotations,
            }
        })
        .collect();
    push_referrers(client, subject, &referrers)
}

/// One referrer to push: its `artifactType`, its layers as `(mediaType, bytes)`, and the
/// manifest's annotations in the order written.
#[derive(Debug, Clone)]
pub struct Referrer<'a> {
    pub artifact_type: &'a str,
    pub layers: Vec<(&'a str, Vec<u8>)>,
    pub annotations: Vec<(&'a str, String)>,
}

/// Pushes each referrer (an artifact manifest: the empty config, its layers, `subject`) and,
/// when the registry has no referrers API, adds them to the fallback tag's index. Pushing the
/// same referrer twice changes nothing (its manifest digest is the same). Returns the
/// referrers' manifest digests.
pub fn push_referrers(
    client: &mut Client,
    subject: &Subject<'_>,
    referrers: &[Referrer<'_>],
) -> Result<Vec<String>, OciError> {
    let empty_digest = sha256_digest(EMPTY_CONFIG);
    if !referrers.is_empty() {
        client.push_blob(
            &empty_digest,
            EMPTY_CONFIG.len() as u64,
            &mut || Ok(Box::new(std::io::Cursor::new(EMPTY_CONFIG)) as Box<dyn std::io::Read>),
            None,
        )?;
    }
    let mut descriptors = Vec::new();
    let mut api = true;
    for referrer in referrers {
        let mut layers = Vec::new();
        for (media_type, bytes) in &referrer.layers {
            let layer_digest = sha256_digest(bytes);
            let data = bytes.clone();
            client.push_blob(
                &layer_digest,
                bytes.len() as u64,
                &mut || Ok(Box::new(std::io::Cursor::new(data.clone())) as Box<dyn std::io::Read>),
                None,
            )?;
            let mut layer = json!({"mediaType": media_type, "digest": layer_digest, "size": bytes.len()});
            if referrer.artifact_type == SIGSTORE_BUNDLE_MEDIA_TYPE {
                let title = format!("{}.sigstore.json", fallback_tag(&layer_digest));
                layer["annotations"] = json!({ TITLE_ANNOTATION: title });
            }
            layers.push(layer);
        }
        let mut manifest = json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": referrer.artifact_type,
            "config": {"mediaType": EMPTY_MEDIA_TYPE, "digest": empty_digest, "size": EMPTY_CONFIG.len(), "data": "e30="},
            "layers": layers,
            "subject": {"mediaType": MANIFEST_MEDIA_TYPE, "digest": subject.digest, "size": subject.size},
        });
        let annotations: serde_json::Map<String, Value> =
            referrer.annotations.iter().map(|(k, v)| ((*k).to_owned(), Value::from(v.as_str()))).collect();
        if !annotations.is_empty() {
            manifest["annotations"] = Value::Object(annotations.clone());
        }
        let manifest = serde_json::to_vec(&manifest).expect("a manifest serialises");
        let digest = sha256_digest(&manifest);
        api &= client.put_manifest_with_subject(&digest, &manifest, MANIFEST_MEDIA_TYPE)?;
        let mut descriptor = json!({
            "mediaType": MANIFEST_MEDIA_TYPE,
            "digest": digest,
            "size": manifest.len(),
            "artifactType": referrer.artifact_type,
        });
        // As the referrers API would list it: with the manifest's annotations.
        if !annotations.is_empty() {
            descriptor["annotations"] = Value::Object(annotations);
        }
        descriptors.push(descriptor);
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

/// Which referrers of a subject to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted<'a> {
    /// Referrers of this `artifactType`, each with exactly one layer of this media type (our
    /// co-signatures; attestations pushed by releases before cosign's layout).
    Typed { artifact_type: &'a str, media_type: &'a str },
    /// Sigstore bundles in cosign's layout whose `dev.sigstore.bundle.predicateType`
    /// annotation is this predicate type.
    Attestation { predicate_type: &'a str },
}

impl Wanted<'_> {
    /// The layer media type a referrer matching this must hold exactly one of.
    fn media_type(&self) -> &str {
        match self {
            Wanted::Typed { media_type, .. } => media_type,
            Wanted::Attestation { .. } => SIGSTORE_BUNDLE_MEDIA_TYPE,
        }
    }

    /// Whether a referrer (an index entry, or its manifest) with this `artifactType` and these
    /// annotations is this one.
    fn matches(&self, artifact_type: Option<&str>, annotations: &Value) -> bool {
        match self {
            Wanted::Typed { artifact_type: wanted, .. } => artifact_type == Some(*wanted),
            Wanted::Attestation { predicate_type } => {
                artifact_type == Some(SIGSTORE_BUNDLE_MEDIA_TYPE)
                    && annotations[PREDICATE_TYPE_ANNOTATION].as_str() == Some(*predicate_type)
            }
        }
    }
}

/// One referrer's layer, fetched and checked against its digest.
#[derive(Debug, Clone)]
pub struct Found {
    pub artifact_type: String,
    /// `referrer sha256:…`, for messages.
    pub source: String,
    pub bytes: Vec<u8>,
}

/// A referrer of a wanted kind, as the index lists it: its manifest is not fetched yet.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The `artifactType` its index entry names (and its manifest must name too).
    pub artifact_type: String,
    /// The `dev.sigstore.bundle.predicateType` it must carry, for cosign's layout.
    pub predicate_type: Option<String>,
    /// The layer media type wanted of it.
    pub media_type: String,
    /// Its manifest's digest.
    pub digest: String,
}

/// The referrers attached to `subject_digest` that `wanted` names: from the referrers API,
/// else the fallback tag. Each manifest and layer is checked against its digest; a referrer
/// of a wanted type without exactly one layer of the wanted media type is refused.
pub fn fetch(client: &mut Client, subject_digest: &str, wanted: &[Wanted<'_>]) -> Result<Vec<Found>, OciError> {
    list(client, subject_digest, wanted)?.iter().map(|l| fetch_one(client, subject_digest, l)).collect()
}

/// The referrers of `subject_digest` of the kinds `wanted` names, as its index lists them (at
/// most [`MAX_REFERRERS`] entries; more is refused): their bytes are fetched one at a time
/// with [`fetch_one`], so that a consumer holds one at a time.
pub fn list(client: &mut Client, subject_digest: &str, wanted: &[Wanted<'_>]) -> Result<Vec<Listed>, OciError> {
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
    let mut listed = Vec::new();
    for entry in index_entries(&index)? {
        let Some(want) = wanted.iter().find(|w| w.matches(entry["artifactType"].as_str(), &entry["annotations"]))
        else {
            continue;
        };
        let Some(digest) = entry["digest"].as_str() else { continue };
        let (artifact_type, predicate_type) = match want {
            Wanted::Typed { artifact_type, .. } => ((*artifact_type).to_owned(), None),
            Wanted::Attestation { predicate_type } => {
                (SIGSTORE_BUNDLE_MEDIA_TYPE.to_owned(), Some((*predicate_type).to_owned()))
            }
        };
        listed.push(Listed {
            artifact_type,
            predicate_type,
            media_type: want.media_type().to_owned(),
            digest: digest.to_owned(),
        });
    }
    Ok(listed)
}

/// One listed referrer's layer, fetched and checked: its manifest against its digest, subject
/// and kind, its one layer of the wanted media type within the attestation cap (a descriptor
/// that says more is refused before a byte moves, as a file that large is) and against its
/// digest and size.
pub fn fetch_one(client: &mut Client, subject_digest: &str, listed: &Listed) -> Result<Found, OciError> {
    let (media_type, digest) = (listed.media_type.as_str(), &listed.digest);
    let bytes = client
        .get_optional(&format!("manifests/{digest}"), MANIFEST_MEDIA_TYPE, MAX_MANIFEST_BYTES)?
        .ok_or_else(|| malformed(format!("the referrers index names {digest}, which the registry does not have")))?;
    if sha256_digest(&bytes) != *digest {
        return Err(OciError::Rejected(
            Refusal::BlobMismatch,
            format!("referrer {digest}: the registry served other bytes"),
        ));
    }
    let manifest: Value = serde_json::from_slice(&bytes).map_err(|e| malformed(format!("referrer {digest}: {e}")))?;
    let predicate_ok = listed
        .predicate_type
        .as_deref()
        .is_none_or(|p| manifest["annotations"][PREDICATE_TYPE_ANNOTATION].as_str() == Some(p));
    if manifest["subject"]["digest"].as_str() != Some(subject_digest)
        || manifest["artifactType"].as_str() != Some(listed.artifact_type.as_str())
        || !predicate_ok
    {
        return Err(malformed(format!("referrer {digest} is not an attestation of {subject_digest}")));
    }
    let layers: Vec<&Value> = manifest["layers"]
        .as_array()
        .map(|l| l.iter().filter(|l| l["mediaType"].as_str() == Some(media_type)).collect())
        .unwrap_or_default();
    let (layer, size) = match layers.as_slice() {
        [one] => (one["digest"].as_str().unwrap_or_default().to_owned(), one["size"].as_u64()),
        _ => (String::new(), None),
    };
    if !layer.starts_with("sha256:") {
        return Err(malformed(format!("referrer {digest} does not hold one layer of type {media_type}")));
    }
    let Some(size) = size else {
        return Err(malformed(format!("referrer {digest}: its layer descriptor names no size")));
    };
    if size > MAX_ATTESTATION_BYTES {
        return Err(OciError::Rejected(
            Refusal::TooLarge,
            format!("referrer {digest}: its layer is {size} bytes, over the cap of {MAX_ATTESTATION_BYTES}"),
        ));
    }
    let blob = client.get_small_blob(&layer, MAX_ATTESTATION_BYTES + 1)?;
    if sha256_digest(&blob) != layer || blob.len() as u64 != size {
        return Err(OciError::Rejected(
            Refusal::BlobMismatch,
            format!("referrer layer {layer}: the registry served other bytes"),
        ));
    }
    Ok(Found { artifact_type: listed.artifact_type.clone(), source: format!("referrer {digest}"), bytes: blob })
}
