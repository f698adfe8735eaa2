//! `[[models]]` in an agent folder: each model folder's vendor signature (an OpenSSF model
//! signature) checked against the key manifest.toml names, and the folder's files against what
//! was signed. The files compared are the ones the bundle will hold (what `pack` collects), so
//! that `check`, `pack` and `verify` of the bundle agree.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::attest::model_verify::{self, Failure, MAX_KEY_BYTES, MAX_MODEL_SIGNATURE_BYTES, ModelError, ModelFacts};
use crate::diagnostic::{Code, Diagnostic};
use crate::manifest::{Manifest, ModelSpec};
use crate::regular_file::{self, Links, ReadError};

/// The diagnostic code of a model signature's failure.
pub fn code(failure: Failure) -> Code {
    match failure {
        Failure::Missing => Code::ModelSignatureMissing,
        Failure::Malformed => Code::ModelSignatureMalformed,
        Failure::KeyInvalid => Code::ModelKeyInvalid,
        Failure::WrongKey => Code::ModelSignatureWrongKey,
        Failure::Invalid => Code::ModelSignatureInvalid,
        Failure::Mismatch => Code::ModelMismatch,
    }
}

/// Checks every `[[models]]` entry of `m`; reports each failure as an error and returns the
/// facts of the models that passed (in manifest order).
pub fn check(dir: &Path, prefix: &str, m: &Manifest, diags: &mut Vec<Diagnostic>) -> Vec<ModelFacts> {
    if m.models.is_empty() {
        return Vec::new();
    }
    // What the bundle will hold; problems with the folder are check's to report elsewhere.
    let files = crate::fileset::collect(dir, prefix, &m.allow_secret_files, &mut Vec::new());
    let mut facts = Vec::new();
    for (i, spec) in m.models.iter().enumerate() {
        let inside: Vec<(&str, &Path)> =
            files.iter().filter_map(|f| spec.inside(&f.path).map(|rel| (rel, f.full.as_path()))).collect();
        match one(dir, spec, &inside) {
            Ok(f) => facts.push(f),
            Err((file, e)) => {
                let help = match e.failure {
                    Failure::Missing => "ship the vendor's model.sig in the model folder, or name it with `signature`",
                    Failure::KeyInvalid => "name the vendor's P-256 public key (PEM) with `key`",
                    Failure::WrongKey | Failure::Invalid => {
                        "check that `key` is the vendor's key, and get the signature again from the vendor"
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
fn one(dir: &Path, spec: &ModelSpec, files: &[(&str, &Path)]) -> Result<ModelFacts, (String, ModelError)> {
    let key_bytes = read(dir, &spec.key, MAX_KEY_BYTES, Failure::KeyInvalid).map_err(|e| (spec.key.clone(), e))?;
    let key = model_verify::parse_key(&key_bytes).map_err(|e| (spec.key.clone(), e))?;
    let at_sig = |e| (spec.signature.clone(), e);
    let bytes = read(dir, &spec.signature, MAX_MODEL_SIGNATURE_BYTES, Failure::Missing).map_err(at_sig)?;
    let signed = model_verify::open(&bytes, &key).map_err(at_sig)?;
    let mut actual = BTreeMap::new();
    for (rel, full) in files {
        if signed.ignores(rel, spec.signature_inside()) {
            continue;
        }
        let digest = sha256(full).map_err(|why| at_sig(failure(Failure::Mismatch, format!("`{rel}`: {why}"))))?;
        actual.insert((*rel).to_owned(), digest);
    }
    signed.compare(&actual).map_err(at_sig)?;
    Ok(ModelFacts::new(&spec.path, &signed, &key))
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

fn sha256(path: &Path) -> std::io::Result<[u8; 32]> {
    let mut file = regular_file::open(path, Links::Refuse).map_err(ReadError::into_io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf)? {
            0 => break,
            n => hasher.update(&buf[..n]),
        }
    }
    Ok(hasher.finalize().into())
}
