//! `[[models]]` in a bundle: while the entries stream by, the files of each model folder are
//! hashed with SHA-256 too (whole, or by the shards the entry declares) and the signature and
//! key files are held (within their caps); once every entry has matched the signed manifest,
//! each model's vendor signature is checked against its key or its Sigstore identity (under
//! the operator's trusted root) and its files against what was signed, as `bundle check` does
//! in a folder.

use std::collections::{BTreeMap, HashMap};

use crate::attest::model_resources::{Layout, ResourceHasher};
use crate::attest::model_verify::{self, Failure, MAX_KEY_BYTES, MAX_MODEL_SIGNATURE_BYTES, ModelFacts, Signer};
use crate::keyless::TrustedRoot;
use crate::manifest::{Manifest, ModelSigner};
use crate::rejection::{Reason, Rejection};

/// What the stream gathers for the models.
#[derive(Default)]
pub(crate) struct ModelInputs {
    /// The resources (name inside the model folder, SHA-256) of each file inside a model
    /// folder, by bundle path.
    pub resources: HashMap<String, Vec<(String, [u8; 32])>>,
    /// The signature and key files, by bundle path (those within their caps).
    pub held: HashMap<String, Vec<u8>>,
}

/// Whether the entry at `path` of `size` bytes is a model's signature or key file to hold.
pub(crate) fn to_hold(m: &Manifest, path: &str, size: u64) -> bool {
    m.models.iter().any(|s| {
        (s.signature == path && size <= MAX_MODEL_SIGNATURE_BYTES) || (s.key() == Some(path) && size <= MAX_KEY_BYTES)
    })
}

/// The resource hasher for an entry of a model folder (by the layout its entry declares).
pub(crate) fn hasher(m: &Manifest, path: &str) -> Option<ResourceHasher> {
    m.models.iter().find_map(|spec| Some(ResourceHasher::new(spec.inside(path)?, Layout::of(spec.shard_size))))
}

/// The reason code of a model signature's failure.
pub fn reason(failure: Failure) -> Reason {
    match failure {
        Failure::Missing => Reason::ModelSignatureMissing,
        Failure::Malformed => Reason::ModelSignatureMalformed,
        Failure::KeyInvalid => Reason::ModelKeyInvalid,
        Failure::NoTrustedRoot => Reason::ModelTrustedRootMissing,
        Failure::WrongKey => Reason::ModelSignatureWrongKey,
        Failure::WrongIdentity => Reason::ModelSignatureWrongIdentity,
        Failure::Invalid => Reason::ModelSignatureInvalid,
        Failure::Mismatch => Reason::ModelMismatch,
    }
}

/// Checks every model of the (verified) bundle (a Sigstore identity under `root`); the first
/// failure is the rejection.
pub(crate) fn check(
    m: &Manifest,
    inputs: &ModelInputs,
    root: Option<&TrustedRoot>,
) -> Result<Vec<ModelFacts>, Rejection> {
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
        let key;
        let signer = match &spec.signer {
            ModelSigner::Key(path) => {
                let key_bytes = held(path, Failure::KeyInvalid, MAX_KEY_BYTES)?;
                key = model_verify::parse_key(key_bytes).map_err(|e| refuse(path, e))?;
                Signer::Key(&key)
            }
            ModelSigner::Identity(policy) => {
                let root = root.ok_or_else(|| refuse(&spec.signature, model_verify::ModelError::no_trusted_root()))?;
                Signer::Identity { root, policy }
            }
        };
        let bytes = held(&spec.signature, Failure::Missing, MAX_MODEL_SIGNATURE_BYTES)?;
        let signed =
            model_verify::open(bytes, signer, Layout::of(spec.shard_size)).map_err(|e| refuse(&spec.signature, e))?;
        let actual: BTreeMap<String, [u8; 32]> = inputs
            .resources
            .iter()
            .filter_map(|(path, r)| spec.inside(path).map(|rel| (rel, r)))
            .filter(|(rel, _)| !signed.ignores(rel, spec.signature_inside()))
            .flat_map(|(_, r)| r.iter().cloned())
            .collect();
        signed.compare(&actual).map_err(|e| refuse(&spec.signature, e))?;
        facts.push(ModelFacts::new(&spec.path, &signed));
    }
    Ok(facts)
}
