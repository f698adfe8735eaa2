//! Checking an OpenSSF model signature a model's vendor made (`model_signing sign key` or
//! `sign sigstore`, a `model.sig` beside the weights) the way `model_signing verify` 1.1.1
//! checks it: the Sigstore bundle v0.3; with a key, the public-key hint (SHA-256 of the key's
//! PEM) and the ECDSA P-256 signature over the DSSE pre-authentication encoding; with a
//! Sigstore identity, the keyless verifier of `crate::keyless` (Fulcio chain, SCT, Rekor
//! entry, signing time, under the operator's trusted root) and the identity policy; then the
//! in-toto statement of predicate `https://model_signing/signature/v1.0`, the root digest over
//! the resources, and the folder's files against the resources, leaving out the signature's
//! `ignore_paths`, the git paths and the signature file itself.
//!
//! The file is hostile input: read under [`MAX_MODEL_SIGNATURE_BYTES`], every JSON object
//! checked for a repeated key, at most [`MAX_RESOURCES`] resources, every name a safe relative
//! path. What is not understood is refused: only the `files` and `shards` serializations with
//! SHA-256, the shard size the `[[models]]` entry declares, symbolic links never allowed.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{DerSignature, VerifyingKey};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::dsse::{PAYLOAD_TYPE_IN_TOTO, pae};
use super::model_resources::Layout;
use super::model_signing::{GIT_PATHS, PREDICATE_TYPE};
use super::sigstore_bundle::MEDIA_TYPE_V03;
use crate::keys::p256_key;

/// The signature file `model_signing sign` writes by default, looked for in the model folder.
pub const DEFAULT_SIGNATURE: &str = "model.sig";
/// The caps on a vendor's signature and key ([`crate::limits`]).
pub use crate::limits::{
    MAX_MODEL_KEY_BYTES as MAX_KEY_BYTES, MAX_MODEL_RESOURCES as MAX_RESOURCES, MAX_MODEL_SIGNATURE_BYTES,
};

/// The ways a model signature fails; [`Failure::as_str`] is the stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The signature file is not there.
    Missing,
    /// Not a Sigstore bundle v0.3 with a DSSE envelope holding a model_signing v1.0
    /// statement, over a cap, or a repeated key; or a serialization other than `files` with
    /// SHA-256.
    Malformed,
    /// The public key named in manifest.toml is not a P-256 public key in PEM.
    KeyInvalid,
    /// A Sigstore identity is named and no trusted root was given to judge it by.
    NoTrustedRoot,
    /// The bundle's key hint names another key.
    WrongKey,
    /// The Sigstore certificate names another identity or issuer.
    WrongIdentity,
    /// No signature verifies with the key; or the Sigstore signature does not verify.
    Invalid,
    /// The model's files are not the ones signed (a digest, a file missing, a file extra).
    Mismatch,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Missing => "model_signature_missing",
            Failure::Malformed => "model_signature_malformed",
            Failure::KeyInvalid => "model_key_invalid",
            Failure::NoTrustedRoot => "model_trusted_root_missing",
            Failure::WrongKey => "model_signature_wrong_key",
            Failure::WrongIdentity => "model_signature_wrong_identity",
            Failure::Invalid => "model_signature_invalid",
            Failure::Mismatch => "model_mismatch",
        }
    }
}

/// Why a model signature was refused: the kind and what exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    pub failure: Failure,
    pub message: String,
}

impl ModelError {
    fn new(failure: Failure, message: impl Into<String>) -> Self {
        ModelError { failure, message: message.into() }
    }

    /// A Sigstore identity with no trusted root to judge it by: refused, never skipped.
    pub fn no_trusted_root() -> Self {
        let why = "the signature must come from a Sigstore identity, and no trusted root was given to judge it by";
        ModelError::new(Failure::NoTrustedRoot, why)
    }
}

/// Who must have signed a model signature.
#[derive(Debug, Clone, Copy)]
pub enum Signer<'a> {
    /// The vendor's P-256 public key.
    Key(&'a VerifyingKey),
    /// A Sigstore certificate identity, judged under the operator's trusted root.
    Identity { root: &'a crate::keyless::TrustedRoot, policy: &'a crate::keyless::IdentityPolicy },
}

/// Who signed, as verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedBy {
    /// The SHA-256 (hex) of the key's PEM.
    Key(String),
    /// The certificate's identity (SAN) and OIDC issuer.
    Identity { identity: String, issuer: String },
}

/// A model signature whose signature verified: what it says was signed.
#[derive(Debug, Clone)]
pub struct SignedModel {
    /// The subject's name (the model folder's name when signed).
    pub name: String,
    /// The root digest: SHA-256 over the resources' digests in manifest order (hex).
    pub root_sha256: String,
    /// How the folder was cut into resources.
    pub layout: Layout,
    /// Each resource's SHA-256, by name: a file's `/`-separated path inside the model folder,
    /// or a shard's `path:start:end`.
    pub resources: BTreeMap<String, [u8; 32]>,
    /// The paths the signer left out (relative to the model folder).
    pub ignore_paths: Vec<String>,
    pub signed_by: SignedBy,
}

/// What the agent-contract predicate says of a vendor-signed model: where it is, its root
/// digest as `model_signing` computes it, and the key or the Sigstore identity that signed it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelFacts {
    pub path: String,
    /// `{"sha256": <root digest>}`.
    pub root_digest: BTreeMap<String, String>,
    /// The SHA-256 (hex) of the signer's public key PEM (the bundle's `publicKey.hint`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_sha256: Option<String>,
    /// The Sigstore certificate's identity (SAN), for a signature made with Sigstore.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The Sigstore certificate's OIDC issuer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The shard size, for a signature serialized by file shards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_size: Option<u64>,
}

impl ModelFacts {
    pub fn new(path: &str, signed: &SignedModel) -> Self {
        let (key_sha256, identity, issuer) = match &signed.signed_by {
            SignedBy::Key(hint) => (Some(hint.clone()), None, None),
            SignedBy::Identity { identity, issuer } => (None, Some(identity.clone()), Some(issuer.clone())),
        };
        let shard_size = match signed.layout {
            Layout::Files => None,
            Layout::Shards(size) => Some(size),
        };
        ModelFacts {
            path: path.to_owned(),
            root_digest: BTreeMap::from([("sha256".to_owned(), signed.root_sha256.clone())]),
            key_sha256,
            identity,
            issuer,
            shard_size,
        }
    }
}

/// The SHA-256 (hex) of the key's SubjectPublicKeyInfo PEM: the hint `model_signing` writes.
pub fn key_hint(key: &VerifyingKey) -> String {
    hex(&Sha256::digest(p256_key::public_pem(key).as_bytes()))
}

/// Reads a P-256 public key in PEM (the bytes of the file manifest.toml names).
pub fn parse_key(bytes: &[u8]) -> Result<VerifyingKey, ModelError> {
    use p256::pkcs8::DecodePublicKey as _;
    let invalid = |why: String| ModelError::new(Failure::KeyInvalid, why);
    if bytes.len() as u64 > MAX_KEY_BYTES {
        return Err(invalid(format!("larger than {MAX_KEY_BYTES} bytes; a public key file is a few hundred")));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".to_owned()))?;
    VerifyingKey::from_public_key_pem(text).map_err(|e| invalid(format!("not a P-256 public key in PEM ({e})")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Bundle {
    media_type: String,
    verification_material: Material,
    dsse_envelope: Envelope,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Material {
    #[serde(default)]
    public_key: Option<Hint>,
}

#[derive(Deserialize)]
struct Hint {
    #[serde(default)]
    hint: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Envelope {
    payload: String,
    payload_type: String,
    signatures: Vec<Signature>,
}

#[derive(Deserialize)]
struct Signature {
    sig: String,
    #[allow(dead_code)]
    #[serde(default)]
    keyid: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Statement {
    #[serde(rename = "_type")]
    kind: String,
    subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    predicate_type: String,
    predicate: Predicate,
}

#[derive(Deserialize)]
struct Subject {
    name: String,
    digest: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Predicate {
    serialization: Serialization,
    resources: Vec<Resource>,
}

#[derive(Deserialize)]
struct Serialization {
    method: String,
    hash_type: String,
    allow_symlinks: bool,
    #[serde(default)]
    ignore_paths: Vec<String>,
    /// A number (`model_signing` 1.1.1 writes it as a float, `1024.0`), for `shards`.
    #[serde(default)]
    shard_size: Option<serde_json::Number>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Resource {
    name: String,
    algorithm: String,
    digest: String,
}

/// Checks the signature file's bytes: signed by `signer`, serialized as `layout` says (the
/// `[[models]]` entry's `shard_size`). Returns what it signs; the files are not compared here
/// ([`SignedModel::compare`]).
pub fn open(bytes: &[u8], signer: Signer<'_>, layout: Layout) -> Result<SignedModel, ModelError> {
    let malformed = |why: String| ModelError::new(Failure::Malformed, why);
    if bytes.len() as u64 > MAX_MODEL_SIGNATURE_BYTES {
        return Err(malformed(format!("larger than {MAX_MODEL_SIGNATURE_BYTES} bytes")));
    }
    let bundle: Bundle = crate::signed_json::from_slice(bytes)
        .map_err(|e| malformed(format!("not a Sigstore bundle with a DSSE envelope: {e}")))?;
    if bundle.media_type != MEDIA_TYPE_V03 {
        return Err(malformed(format!("media type `{}`; model_signing writes {MEDIA_TYPE_V03}", bundle.media_type)));
    }
    let envelope = bundle.dsse_envelope;
    if envelope.payload_type != PAYLOAD_TYPE_IN_TOTO {
        return Err(malformed(format!("DSSE payload type `{}`, not {PAYLOAD_TYPE_IN_TOTO}", envelope.payload_type)));
    }
    let payload = STANDARD.decode(&envelope.payload).map_err(|_| malformed("the payload is not base64".to_owned()))?;
    if envelope.signatures.len() > super::MAX_SIGNATURES {
        return Err(malformed(format!("more than {} signatures", super::MAX_SIGNATURES)));
    }
    let signed_by = match signer {
        Signer::Key(key) => {
            let hint = bundle.verification_material.public_key.and_then(|k| k.hint).filter(|h| !h.is_empty());
            by_key(key, hint, &payload, &envelope.signatures)?
        }
        Signer::Identity { root, policy } => by_identity(bytes, root, policy)?,
    };
    statement(&payload, layout, signed_by).map_err(malformed)
}

/// The ECDSA signature with the key (after its hint, when there is one).
fn by_key(
    key: &VerifyingKey,
    hint: Option<String>,
    payload: &[u8],
    signatures: &[Signature],
) -> Result<SignedBy, ModelError> {
    let want = key_hint(key);
    if let Some(hint) = hint
        && hint != want
    {
        return Err(ModelError::new(
            Failure::WrongKey,
            format!("signed by the key with hint {hint}, not by the key named (hint {want})"),
        ));
    }
    let message = pae(PAYLOAD_TYPE_IN_TOTO, payload);
    let verifies = signatures.iter().any(|s| {
        let Ok(der) = STANDARD.decode(&s.sig) else { return false };
        DerSignature::from_bytes(&der).is_ok_and(|sig| key.verify(&message, &sig).is_ok())
    });
    if !verifies {
        return Err(ModelError::new(
            Failure::Invalid,
            "no signature in the envelope verifies with the key named (tampered, or signed by another key)",
        ));
    }
    Ok(SignedBy::Key(want))
}

/// The keyless verification of the whole Sigstore bundle over the statement's subject (the
/// root digest), then the identity policy on the verified certificate.
fn by_identity(
    bytes: &[u8],
    root: &crate::keyless::TrustedRoot,
    policy: &crate::keyless::IdentityPolicy,
) -> Result<SignedBy, ModelError> {
    use crate::rejection::Reason;
    let bundle = crate::keyless::SigstoreBundle::from_bytes("the model signature", bytes);
    let claimed = crate::keyless::verify_claimed(root, &bundle).map_err(|r| {
        let failure = match r.reason {
            Reason::KeylessMalformed | Reason::KeylessUnsupportedVersion => Failure::Malformed,
            _ => Failure::Invalid,
        };
        ModelError::new(failure, format!("{} ({})", r.message, r.reason.as_str()))
    })?;
    let signer = claimed.signer;
    policy
        .check(&signer.identity, &signer.issuer, &claimed.claims)
        .map_err(|why| ModelError::new(Failure::WrongIdentity, format!("signed with Sigstore, but {why}")))?;
    Ok(SignedBy::Identity { identity: signer.identity, issuer: signer.issuer })
}

fn statement(payload: &[u8], layout: Layout, signed_by: SignedBy) -> Result<SignedModel, String> {
    let s: Statement = crate::signed_json::from_slice(payload).map_err(|e| format!("the statement: {e}"))?;
    if s.kind != super::statement::STATEMENT_TYPE_V1 {
        return Err(format!("statement type `{}`, not {}", s.kind, super::statement::STATEMENT_TYPE_V1));
    }
    if s.predicate_type != PREDICATE_TYPE {
        return Err(format!("predicate type `{}`, not {PREDICATE_TYPE}", s.predicate_type));
    }
    let [subject] = s.subject.as_slice() else {
        return Err(format!("{} subjects; a model signature has one", s.subject.len()));
    };
    let root = subject.digest.get("sha256").ok_or("the subject has no sha256 digest")?;
    let p = s.predicate;
    let ser = &p.serialization;
    let algorithm = serialization(ser, layout)?;
    if ser.allow_symlinks {
        return Err("it allows symbolic links; an agent bundle holds none".to_owned());
    }
    if p.resources.len() > MAX_RESOURCES {
        return Err(format!("more than {MAX_RESOURCES} resources"));
    }
    for path in &ser.ignore_paths {
        let trimmed = path.trim_end_matches('/');
        crate::paths::check(trimmed).map_err(|why| format!("ignore path `{path}`: {why}"))?;
    }
    let mut resources = BTreeMap::new();
    let mut hasher = Sha256::new();
    for r in &p.resources {
        let name = resource_name(&r.name, layout).map_err(|why| format!("resource `{}`: {why}", r.name))?;
        if r.algorithm != algorithm {
            return Err(format!("resource `{}` has algorithm `{}`, not {algorithm}", r.name, r.algorithm));
        }
        let digest =
            unhex(&r.digest).ok_or_else(|| format!("resource `{}`: the digest is not 64 hex digits", r.name))?;
        hasher.update(digest);
        if resources.insert(name, digest).is_some() {
            return Err(format!("resource `{}` is listed twice", r.name));
        }
    }
    let computed = hex(&hasher.finalize());
    if &computed != root {
        return Err(format!("the root digest is {root}, but the resources hash to {computed}"));
    }
    Ok(SignedModel {
        name: subject.name.clone(),
        root_sha256: computed,
        layout,
        resources,
        ignore_paths: ser.ignore_paths.iter().map(|p| p.trim_end_matches('/').to_owned()).collect(),
        signed_by,
    })
}

/// Checks the serialization against the layout the `[[models]]` entry declares; returns the
/// `algorithm` each resource must name (`sha256`, or `sha256-sharded-<size>` for shards).
fn serialization(ser: &Serialization, layout: Layout) -> Result<String, String> {
    if ser.hash_type != "sha256" {
        return Err(format!("hash type `{}`; only `sha256` is checked", ser.hash_type));
    }
    let shard_size = match &ser.shard_size {
        None => None,
        // An integer, or a float with no fraction (what `model_signing` writes) below 2^53.
        Some(n) => Some(
            n.as_u64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 1.0 && *f < 9.0e15).map(|f| f as u64))
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("shard size `{n}` is not a whole number of bytes"))?,
        ),
    };
    match (ser.method.as_str(), shard_size, layout) {
        ("files", None, Layout::Files) => Ok("sha256".to_owned()),
        ("shards", Some(size), Layout::Shards(declared)) if size == declared => Ok(format!("sha256-sharded-{size}")),
        ("shards", Some(size), _) => Err(format!(
            "serialized by shards of {size} bytes, and the [[models]] entry {}: write `shard_size = {size}` in it",
            match layout {
                Layout::Files => "declares no `shard_size`".to_owned(),
                Layout::Shards(declared) => format!("declares `shard_size = {declared}`"),
            }
        )),
        ("files", None, Layout::Shards(declared)) => Err(format!(
            "serialized by whole files, and the [[models]] entry declares `shard_size = {declared}`: remove it"
        )),
        (method, _, _) => Err(format!(
            "serialization `{method}`{}; only `files`, and `shards` with a shard size, are checked",
            if shard_size.is_some() { " with a shard size" } else { "" }
        )),
    }
}

/// A resource's name as the layout reads it: a safe path, or `path:start:end` with a safe
/// path and `start < end` (normalised, as `model_signing` compares the numbers).
fn resource_name(name: &str, layout: Layout) -> Result<String, String> {
    match layout {
        Layout::Files => crate::paths::check(name).map(|()| name.to_owned()),
        Layout::Shards(_) => {
            let parts: Vec<&str> = name.split(':').collect();
            let [path, start, end] = parts.as_slice() else {
                return Err("a shard is named `path:start:end`".to_owned());
            };
            crate::paths::check(path)?;
            let number = |n: &str| n.parse::<u64>().map_err(|_| format!("`{n}` is not a byte offset"));
            let (start, end) = (number(start)?, number(end)?);
            if start >= end {
                return Err("a shard ends after it starts".to_owned());
            }
            Ok(format!("{path}:{start}:{end}"))
        }
    }
}

impl SignedModel {
    /// Whether `path` (inside the model folder) is left out as `model_signing verify key`
    /// leaves it out: one of the signature's ignore paths or below one, a git path, or the
    /// signature file itself (`signature`, inside the folder, when it is there).
    pub fn ignores(&self, path: &str, signature: Option<&str>) -> bool {
        let under = |p: &str| path == p || path.strip_prefix(p).is_some_and(|rest| rest.starts_with('/'));
        signature.is_some_and(under) || self.ignore_paths.iter().any(|p| under(p)) || GIT_PATHS.iter().any(|p| under(p))
    }

    /// Compares the model folder's files (`actual`: SHA-256 by path inside the folder, the
    /// ignored ones already left out) with what was signed; reports every difference.
    pub fn compare(&self, actual: &BTreeMap<String, [u8; 32]>) -> Result<(), ModelError> {
        const SHOWN: usize = 8;
        let mut problems = Vec::new();
        for (name, digest) in &self.resources {
            match actual.get(name) {
                None => problems.push(format!("`{name}` is signed but missing")),
                Some(d) if d != digest => {
                    problems.push(format!("`{name}` has SHA-256 {}, the signature says {}", hex(d), hex(digest)))
                }
                Some(_) => {}
            }
        }
        for name in actual.keys().filter(|n| !self.resources.contains_key(*n)) {
            problems.push(format!("`{name}` is not signed"));
        }
        if problems.is_empty() {
            return Ok(());
        }
        let more = problems.len().saturating_sub(SHOWN);
        problems.truncate(SHOWN);
        let tail = if more > 0 { format!("; and {more} more") } else { String::new() };
        Err(ModelError::new(Failure::Mismatch, format!("{}{tail}", problems.join("; "))))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attest::model_signing::{self, Resource as Res};

    fn signed(resources: &[(&str, [u8; 32])]) -> (Vec<u8>, p256::ecdsa::SigningKey) {
        let key = p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap();
        let mut r: Vec<Res> = resources.iter().map(|(n, d)| Res { name: (*n).to_owned(), sha256: *d }).collect();
        model_signing::sort(&mut r);
        let s = model_signing::statement("m", &r, &["model.sig".to_owned()]);
        let mut signer = crate::keys::P256Signer::File(key.clone());
        (model_signing::sign(&s, &mut signer).unwrap(), key)
    }

    #[test]
    fn our_own_model_signatures_open_and_compare() {
        let (bytes, key) = signed(&[("w.bin", [1; 32]), ("sub/a", [2; 32])]);
        let m = open(&bytes, Signer::Key(key.verifying_key()), Layout::Files).unwrap();
        assert_eq!(m.resources.len(), 2);
        assert!(m.ignores("model.sig", None) && m.ignores(".git/x", None) && !m.ignores("w.bin", None));
        let mut actual = BTreeMap::from([("w.bin".to_owned(), [1; 32]), ("sub/a".to_owned(), [2; 32])]);
        assert!(m.compare(&actual).is_ok());
        actual.insert("extra".to_owned(), [3; 32]);
        actual.insert("w.bin".to_owned(), [9; 32]);
        let e = m.compare(&actual).unwrap_err();
        assert_eq!(e.failure, Failure::Mismatch);
        assert!(e.message.contains("`extra` is not signed") && e.message.contains("`w.bin` has"), "{}", e.message);
    }

    #[test]
    fn hostile_signatures_are_refused_with_their_kind() {
        let (bytes, key) = signed(&[("w.bin", [1; 32])]);
        let other = p256::ecdsa::SigningKey::from_slice(&[8u8; 32]).unwrap();
        let other = Signer::Key(other.verifying_key());
        assert_eq!(open(&bytes, other, Layout::Files).unwrap_err().failure, Failure::WrongKey);
        let text = String::from_utf8(bytes.clone()).unwrap();
        let no_hint = text.replacen("\"hint\":\"", "\"hint\":\"\",\"x\":\"", 1);
        assert_eq!(open(no_hint.as_bytes(), other, Layout::Files).unwrap_err().failure, Failure::Invalid);
        for bad in [
            b"{}".to_vec(),
            b"[1,".to_vec(),
            text.replacen("{", "{\"mediaType\":\"x\",", 1).into_bytes(),
            vec![b' '; MAX_MODEL_SIGNATURE_BYTES as usize + 1],
        ] {
            assert_eq!(
                open(&bad, Signer::Key(key.verifying_key()), Layout::Files).unwrap_err().failure,
                Failure::Malformed
            );
        }
        assert_eq!(parse_key(b"-----BEGIN PUBLIC KEY-----\n").unwrap_err().failure, Failure::KeyInvalid);
    }

    fn identity(identity: &str, issuer: &str) -> crate::keyless::IdentityPolicy {
        use crate::keyless::Given;
        let exact = |v| Given { exact: Some(v), pattern: None };
        crate::keyless::IdentityPolicy::new(exact(identity), exact(issuer), Vec::new()).expect("a policy")
    }

    const SIGSTORE_SIGNED: &str = "testdata/models/v1.1.0-sigstore/model.sig";
    const VENDOR: (&str, &str) = ("stefanb@us.ibm.com", "https://sigstore.verify.ibm.com/oauth2");

    #[test]
    fn a_real_sigstore_model_signature_verifies_offline_for_its_identity_only() {
        use crate::keyless::TrustedRoot;
        let read = |p: &str| TrustedRoot::read(std::path::Path::new(p)).expect("a trusted root");
        let production = read("testdata/sigstore/trusted_root.production.json");
        let bytes = std::fs::read(SIGSTORE_SIGNED).unwrap();
        let vendor = identity(VENDOR.0, VENDOR.1);
        let m = open(&bytes, Signer::Identity { root: &production, policy: &vendor }, Layout::Files).unwrap();
        assert_eq!(m.signed_by, SignedBy::Identity { identity: VENDOR.0.into(), issuer: VENDOR.1.into() });
        assert_eq!(m.resources.keys().collect::<Vec<_>>(), ["signme-1", "signme-2"]);
        let other = identity("mallory@example.com", VENDOR.1);
        let e = open(&bytes, Signer::Identity { root: &production, policy: &other }, Layout::Files).unwrap_err();
        assert_eq!(e.failure, Failure::WrongIdentity, "{}", e.message);
        // Another instance's root: the chain does not verify.
        let staging = read("testdata/sigstore/trusted_root.staging.json");
        let e = open(&bytes, Signer::Identity { root: &staging, policy: &vendor }, Layout::Files).unwrap_err();
        assert_eq!(e.failure, Failure::Invalid, "{}", e.message);
        assert!(e.message.contains("(keyless_"), "{}", e.message);
        // Declared as shards, it is not what the entry says.
        let e = open(&bytes, Signer::Identity { root: &production, policy: &vendor }, Layout::Shards(1 << 20));
        assert_eq!(e.unwrap_err().failure, Failure::Malformed);
        // A key is not an identity: the certificate's signature is not the key's.
        let key = p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap();
        let e = open(&bytes, Signer::Key(key.verifying_key()), Layout::Files).unwrap_err();
        assert_eq!(e.failure, Failure::Invalid);
    }

    #[test]
    fn a_tampered_sigstore_model_signature_is_refused() {
        let production =
            crate::keyless::TrustedRoot::read(std::path::Path::new("testdata/sigstore/trusted_root.production.json"))
                .unwrap();
        let vendor = identity(VENDOR.0, VENDOR.1);
        let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(SIGSTORE_SIGNED).unwrap()).unwrap();
        let payload = STANDARD.decode(doc["dsseEnvelope"]["payload"].as_str().unwrap()).unwrap();
        let text = String::from_utf8(payload).unwrap().replacen("signme-1", "signme-3", 1);
        doc["dsseEnvelope"]["payload"] = STANDARD.encode(text).into();
        let bytes = serde_json::to_vec(&doc).unwrap();
        let e = open(&bytes, Signer::Identity { root: &production, policy: &vendor }, Layout::Files).unwrap_err();
        assert_eq!(e.failure, Failure::Invalid, "{}", e.message);
    }
}
