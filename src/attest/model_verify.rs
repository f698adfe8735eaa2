//! Checking an OpenSSF model signature a model's vendor made (`model_signing sign key`, a
//! `model.sig` beside the weights) the way `model_signing verify key` 1.1.1 checks it: the
//! Sigstore bundle v0.3, the public-key hint (SHA-256 of the key's PEM), the ECDSA P-256
//! signature over the DSSE pre-authentication encoding, the in-toto statement of predicate
//! `https://model_signing/signature/v1.0`, the root digest over the resources, and then the
//! folder's files against the resources, leaving out the signature's `ignore_paths`, the git
//! paths and the signature file itself.
//!
//! The file is hostile input: read under [`MAX_MODEL_SIGNATURE_BYTES`], every JSON object
//! checked for a repeated key, at most [`MAX_RESOURCES`] resources, every name a safe relative
//! path. What is not understood is refused: only the `files` serialization with SHA-256 (what
//! the stock CLI signs and rehashes with), symbolic links never allowed.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{DerSignature, VerifyingKey};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::dsse::{PAYLOAD_TYPE_IN_TOTO, pae};
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
    /// The bundle's key hint names another key.
    WrongKey,
    /// No signature verifies with the key.
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
            Failure::WrongKey => "model_signature_wrong_key",
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
}

/// A model signature whose signature verified with the key: what it says was signed.
#[derive(Debug, Clone)]
pub struct SignedModel {
    /// The subject's name (the model folder's name when signed).
    pub name: String,
    /// The root digest: SHA-256 over the resources' digests in manifest order (hex).
    pub root_sha256: String,
    /// Each file's SHA-256, by `/`-separated path inside the model folder.
    pub resources: BTreeMap<String, [u8; 32]>,
    /// The paths the signer left out (relative to the model folder).
    pub ignore_paths: Vec<String>,
}

/// What the agent-contract predicate says of a vendor-signed model: where it is, its root
/// digest as `model_signing` computes it, and the key that signed it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelFacts {
    pub path: String,
    /// `{"sha256": <root digest>}`.
    pub root_digest: BTreeMap<String, String>,
    /// The SHA-256 (hex) of the signer's public key PEM (the bundle's `publicKey.hint`).
    pub key_sha256: String,
}

impl ModelFacts {
    pub fn new(path: &str, signed: &SignedModel, key: &VerifyingKey) -> Self {
        ModelFacts {
            path: path.to_owned(),
            root_digest: BTreeMap::from([("sha256".to_owned(), signed.root_sha256.clone())]),
            key_sha256: key_hint(key),
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Resource {
    name: String,
    algorithm: String,
    digest: String,
}

/// Checks the signature file's bytes with `key` and returns what it signs. The files are not
/// compared here ([`SignedModel::compare`]).
pub fn open(bytes: &[u8], key: &VerifyingKey) -> Result<SignedModel, ModelError> {
    let malformed = |why: String| ModelError::new(Failure::Malformed, why);
    if bytes.len() as u64 > MAX_MODEL_SIGNATURE_BYTES {
        return Err(malformed(format!("larger than {MAX_MODEL_SIGNATURE_BYTES} bytes")));
    }
    let bundle: Bundle = crate::signed_json::from_slice(bytes)
        .map_err(|e| malformed(format!("not a Sigstore bundle with a DSSE envelope: {e}")))?;
    if bundle.media_type != MEDIA_TYPE_V03 {
        return Err(malformed(format!("media type `{}`; model_signing writes {MEDIA_TYPE_V03}", bundle.media_type)));
    }
    let want = key_hint(key);
    if let Some(hint) = bundle.verification_material.public_key.and_then(|k| k.hint).filter(|h| !h.is_empty())
        && hint != want
    {
        return Err(ModelError::new(
            Failure::WrongKey,
            format!("signed by the key with hint {hint}, not by the key named (hint {want})"),
        ));
    }
    let envelope = bundle.dsse_envelope;
    if envelope.payload_type != PAYLOAD_TYPE_IN_TOTO {
        return Err(malformed(format!("DSSE payload type `{}`, not {PAYLOAD_TYPE_IN_TOTO}", envelope.payload_type)));
    }
    let payload = STANDARD.decode(&envelope.payload).map_err(|_| malformed("the payload is not base64".to_owned()))?;
    if envelope.signatures.len() > super::MAX_SIGNATURES {
        return Err(malformed(format!("more than {} signatures", super::MAX_SIGNATURES)));
    }
    let message = pae(PAYLOAD_TYPE_IN_TOTO, &payload);
    let verifies = envelope.signatures.iter().any(|s| {
        let Ok(der) = STANDARD.decode(&s.sig) else { return false };
        DerSignature::from_bytes(&der).is_ok_and(|sig| key.verify(&message, &sig).is_ok())
    });
    if !verifies {
        return Err(ModelError::new(
            Failure::Invalid,
            "no signature in the envelope verifies with the key named (tampered, or signed by another key)",
        ));
    }
    statement(&payload).map_err(malformed)
}

fn statement(payload: &[u8]) -> Result<SignedModel, String> {
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
    if ser.method != "files" || ser.hash_type != "sha256" {
        return Err(format!(
            "serialization `{}` with `{}`; only `files` with `sha256` is checked (what `model_signing sign` writes by default)",
            ser.method, ser.hash_type
        ));
    }
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
        crate::paths::check(&r.name).map_err(|why| format!("resource `{}`: {why}", r.name))?;
        if r.algorithm != "sha256" {
            return Err(format!("resource `{}` has algorithm `{}`, not sha256", r.name, r.algorithm));
        }
        let digest =
            unhex(&r.digest).ok_or_else(|| format!("resource `{}`: the digest is not 64 hex digits", r.name))?;
        hasher.update(digest);
        if resources.insert(r.name.clone(), digest).is_some() {
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
        resources,
        ignore_paths: ser.ignore_paths.iter().map(|p| p.trim_end_matches('/').to_owned()).collect(),
    })
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
        let m = open(&bytes, key.verifying_key()).unwrap();
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
        assert_eq!(open(&bytes, other.verifying_key()).unwrap_err().failure, Failure::WrongKey);
        let text = String::from_utf8(bytes.clone()).unwrap();
        let no_hint = text.replacen("\"hint\":\"", "\"hint\":\"\",\"x\":\"", 1);
        assert_eq!(open(no_hint.as_bytes(), other.verifying_key()).unwrap_err().failure, Failure::Invalid);
        for bad in [
            b"{}".to_vec(),
            b"[1,".to_vec(),
            text.replacen("{", "{\"mediaType\":\"x\",", 1).into_bytes(),
            vec![b' '; MAX_MODEL_SIGNATURE_BYTES as usize + 1],
        ] {
            assert_eq!(open(&bad, key.verifying_key()).unwrap_err().failure, Failure::Malformed);
        }
        assert_eq!(parse_key(b"-----BEGIN PUBLIC KEY-----\n").unwrap_err().failure, Failure::KeyInvalid);
    }
}
