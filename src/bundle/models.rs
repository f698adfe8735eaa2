//! `[[models]]` in a bundle: while the entries stream by, the files of each model folder are
//! hashed with SHA-256 too and the signature and key files are held (within their caps); once
//! every entry has matched the signed manifest, each model's vendor signature is checked
//! against its key and its files against what was signed, as `bundle check` does in a folder.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest as _, Sha256};

use crate::attest::model_verify::{self, Failure, MAX_KEY_BYTES, MAX_MODEL_SIGNATURE_BYTES, ModelFacts};
use crate::manifest::Manifest;
use crate::rejection::{Reason, Rejection};

/// What the stream gathers for the models.
#[derive(Default)]
pub(crate) struct ModelInputs {
    /// SHA-256 of each file inside a model folder, by bundle path.
    pub sha256: HashMap<String, [u8; 32]>,
    /// The signature and key files, by bundle path (those within their caps).
    pub held: HashMap<String, Vec<u8>>,
}

/// Whether the entry at `path` is a file of a model folder (to be hashed with SHA-256).
pub(crate) fn in_a_model(m: &Manifest, path: &str) -> bool {
    m.models.iter().any(|spec| spec.inside(path).is_some())
}

/// Whether the entry at `path` of `size` bytes is a model's signature or key file to hold.
pub(crate) fn to_hold(m: &Manifest, path: &str, size: u64) -> bool {
    m.models
        .iter()
        .any(|s| (s.signature == path && size <= MAX_MODEL_SIGNATURE_BYTES) || (s.key == path && size <= MAX_KEY_BYTES))
}

/// A SHA-256 hasher for an entry that needs one.
pub(crate) fn hasher(m: &Manifest, path: &str) -> Option<Sha256> {
    in_a_model(m, path).then(Sha256::new)
}

/// The reason code of a model signature's failure.
pub fn reason(failure: Failure) -> Reason {
    match failure {
        Failure::Missing => Reason::ModelSignatureMissing,
        Failure::Malformed => Reason::ModelSignatureMalformed,
        Failure::KeyInvalid => Reason::ModelKeyInvalid,
        Failure::WrongKey => Reason::ModelSignatureWrongKey,
        Failure::Invalid => Reason::ModelSignatureInvalid,
        Failure::Mismatch => Reason::ModelMismatch,
    }
}

/// Checks every model of the (verified) bundle; the first failure is the rejection.
pub(crate) fn check(m: &Manifest, inputs: &ModelInputs) -> Result<Vec<ModelFacts>, Rejection> {
    let mut facts = Vec::with_capacity(m.models.len());
    for spec in &m.models {
        let refuse = |path: &str, e: model_verify::ModelError| {
            Rejection::new(reason(e.failure), Some(path), format!("`{}` ({}): {}", spec.path, path, e.message))
        };
        let held = |path: &str, failure: Failure, limit: u64| {
            inputs.held.get(path).ok_or_else(|| {
                let listed = m.entries().contains_key(path);
                let (failure, why) = match listed {
                    true => (
                        if failure == Failure::Missing { Failure::Malformed } else { failure },
                        format!("larger than {limit} bytes"),
                    ),
                    false => (failure, "not in the bundle".to_owned()),
                };
                refuse(path, model_verify::ModelError { failure, message: format!("`{path}` is {why}") })
            })
        };
        let key_bytes = held(&spec.key, Failure::KeyInvalid, MAX_KEY_BYTES)?;
        let key = model_verify::parse_key(key_bytes).map_err(|e| refuse(&spec.key, e))?;
        let bytes = held(&spec.signature, Failure::Missing, MAX_MODEL_SIGNATURE_BYTES)?;
        let signed = model_verify::open(bytes, &key).map_err(|e| refuse(&spec.signature, e))?;
        let actual: BTreeMap<String, [u8; 32]> = inputs
            .sha256
            .iter()
            .filter_map(|(path, d)| spec.inside(path).map(|rel| (rel, d)))
            .filter(|(rel, _)| !signed.ignores(rel, spec.signature_inside()))
            .map(|(rel, d)| (rel.to_owned(), *d))
            .collect();
        signed.compare(&actual).map_err(|e| refuse(&spec.signature, e))?;
        facts.push(ModelFacts::new(&spec.path, &signed, &key));
    }
    Ok(facts)
}
