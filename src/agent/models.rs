//! `[[models]]` in an agent folder: each model folder's vendor signature (an OpenSSF model
//! signature) checked against the key or the Sigstore identity manifest.toml names (an
//! identity under the operator's trusted root), and the folder's files against what was
//! signed. The files compared are the ones the bundle will hold (what `pack` collects), so
//! that `check`, `pack` and `verify` of the bundle agree.

use std::collections::BTreeMap;
use std::path::Path;

use crate::attest::model_resources::{self, Layout};
use crate::attest::model_verify::{
    self, Failure, MAX_KEY_BYTES, MAX_MODEL_SIGNATURE_BYTES, ModelError, ModelFacts, Signer,
};
use crate::diagnostic::{Code, Diagnostic};
use crate::keyless::TrustedRoot;
use crate::manifest::{Manifest, ModelSigner, ModelSpec};
use crate::regular_file::{self, Links, ReadError};

/// The diagnostic code of a model signature's failure.
pub fn code(failure: Failure) -> Code {
    match failure {
        Failure::Missing => Code::ModelSignatureMissing,
        Failure::Malformed => Code::ModelSignatureMalformed,
        Failure::KeyInvalid => Code::ModelKeyInvalid,
        Failure::NoTrustedRoot => Code::ModelTrustedRootMissing,
        Failure::WrongKey => Code::ModelSignatureWrongKey,
        Failure::WrongIdentity => Code::ModelSignatureWrongIdentity,
        Failure::Invalid => Code::ModelSignatureInvalid,
        Failure::Mismatch => Code::ModelMismatch,
    }
}

/// Checks every `[[models]]` entry of `m` (a Sigstore identity under `root`); reports each
/// failure as an error and returns the facts of the models that passed (in manifest order).
pub fn check(
    dir: &Path,
    prefix: &str,
    m: &Manifest,
    root: Option<&TrustedRoot>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<ModelFacts> {
    if m.models.is_empty() {
        return Vec::new();
    }
    // What the bundle will hold; problems with the folder are check's to report elsewhere.
    let files = crate::fileset::collect(dir, prefix, &m.allow_secret_files, &mut Vec::new());
    let mut facts = Vec::new();
    for (i, spec) in m.models.iter().enumerate() {
        let inside: Vec<(&str, &Path)> =
            files.iter().filter_map(|f| spec.inside(&f.path).map(|rel| (rel, f.full.as_path()))).collect();
        match one(dir, spec, root, &inside) {
            Ok(f) => facts.push(f),
            Err((file, e)) => {
                let help = match e.failure {
                    Failure::Missing => "ship the vendor's model.sig in the model folder, or name it with `signature`",
                    Failure::KeyInvalid => "name the vendor's P-256 public key (PEM) with `key`",
                    Failure::NoTrustedRoot => {
                        "give the Sigstore trusted root to judge the identity by (`--trusted-root trusted_root.json`)"
                    }
                    Failure::WrongIdentity => "check `identity` and `issuer` against the vendor's published identity",
                    Failure::WrongKey | Failure::Invalid => {
                        "check that `key` or `identity` names the vendor, and get the signature again from the vendor"
                    }
                    Failure::Malformed => "get the signature again from the vendor (`model_signing sign key`)",
                    Failure::Mismatch => "restore the files the vendor signed, or get a signature of these files",
                };
                diags.push(
                    Diagnostic::error(code(e.failure), format!("{prefix}{file}"), e.message)
                        .at_path(format!("models[{i}]"))
                        .with_help(help),
                );
            }
        }
    }
    facts
}

/// One model: its key, its signature, its files. The error names the file concerned.
fn one(
    dir: &Path,
    spec: &ModelSpec,
    root: Option<&TrustedRoot>,
    files: &[(&str, &Path)],
) -> Result<ModelFacts, (String, ModelError)> {
    let at_sig = |e| (spec.signature.clone(), e);
    let key;
    let signer = match &spec.signer {
        ModelSigner::Key(path) => {
            let bytes = read(dir, path, MAX_KEY_BYTES, Failure::KeyInvalid).map_err(|e| (path.clone(), e))?;
            key = model_verify::parse_key(&bytes).map_err(|e| (path.clone(), e))?;
            Signer::Key(&key)
        }
        ModelSigner::Identity(policy) => {
            let root = root.ok_or_else(|| at_sig(ModelError::no_trusted_root()))?;
            Signer::Identity { root, policy }
        }
    };
    let bytes = read(dir, &spec.signature, MAX_MODEL_SIGNATURE_BYTES, Failure::Missing).map_err(at_sig)?;
    let signed = model_verify::open(&bytes, signer, Layout::of(spec.shard_size)).map_err(at_sig)?;
    let mut actual = BTreeMap::new();
    for (rel, full) in files {
        if signed.ignores(rel, spec.signature_inside()) {
            continue;
        }
        let resources = model_resources::of_file(full, rel, signed.layout)
            .map_err(|why| at_sig(failure(Failure::Mismatch, format!("`{rel}`: {why}"))))?;
        actual.extend(resources);
    }
    signed.compare(&actual).map_err(at_sig)?;
    Ok(ModelFacts::new(&spec.path, &signed))
}

fn failure(f: Failure, message: String) -> ModelError {
    ModelError { failure: f, message }
}

/// A file of the agent; not there is `missing`, over `limit` is malformed.
fn read(dir: &Path, rel: &str, limit: u64, missing: Failure) -> Result<Vec<u8>, ModelError> {
    match regular_file::read(&dir.join(rel), limit, Links::Refuse) {
        Ok(bytes) => Ok(bytes),
        Err(ReadError::NotFound) => Err(failure(missing, format!("`{rel}` is not in the agent folder"))),
        Err(ReadError::TooLarge { limit }) => {
            let kind = if missing == Failure::KeyInvalid { Failure::KeyInvalid } else { Failure::Malformed };
            Err(failure(kind, format!("`{rel}` is larger than {limit} bytes")))
        }
        Err(e) => Err(failure(missing, format!("`{rel}`: {e}"))),
    }
}
