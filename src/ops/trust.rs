//! `bundle trust`: read a signed trust policy, sign it, follow a chain of its versions, and
//! start the next version. The format is [`crate::trust_policy::format`]; the rules for
//! following versions are [`crate::trust_policy::chain`].

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::keys::Signer;
use crate::regular_file::{self, Links, ReadError};
use crate::state::{StateError, StateFile};
use crate::timestamp::Timestamp;
use crate::trust_policy::chain::{self, ChainError, ChainReport, SignedPolicy};
use crate::trust_policy::{TrustPolicy, signatures};
use crate::{Error, atomic};

/// A policy file is read whole; 100 keys take about 20 KiB.
pub const MAX_POLICY_BYTES: u64 = 4 << 20;

/// Why a trust policy could not be used (exit 2; code `policy_error` for a malformed one).
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{path}: not a usable trust policy:\n{why}")]
    Malformed { path: PathBuf, why: String },
    #[error(transparent)]
    Other(#[from] Error),
    #[error(transparent)]
    State(#[from] StateError),
}

impl crate::error::Coded for TrustError {
    fn code(&self) -> crate::error::ErrorCode {
        match self {
            TrustError::Malformed { .. } => crate::error::ErrorCode::PolicyError,
            TrustError::Other(e) => e.code(),
            TrustError::State(e) => e.code(),
        }
    }
}

fn read_text(path: &Path, limit: u64) -> Result<Option<String>, Error> {
    match regular_file::read(path, limit, Links::Follow) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| Error::io(path, std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))),
        Err(ReadError::NotFound) => Ok(None),
        Err(e) => Err(Error::io(path, e.into_io())),
    }
}

/// Reads a policy and its signatures (`<policy>.minisigs`, none when absent).
pub fn read_signed(path: &Path) -> Result<SignedPolicy, TrustError> {
    let malformed = |why: String| TrustError::Malformed { path: path.to_path_buf(), why };
    let text = read_text(path, MAX_POLICY_BYTES)?
        .ok_or_else(|| Error::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")))?;
    let policy = TrustPolicy::parse(&text).map_err(malformed)?;
    let sigs_path = signatures::policy_sigs_path(path);
    let signatures = match read_text(&sigs_path, signatures::MAX_SIGNATURES_BYTES)? {
        Some(t) => signatures::parse(&t).map_err(|why| TrustError::Malformed { path: sigs_path.clone(), why })?,
        None => Vec::new(),
    };
    Ok(SignedPolicy { origin: path.display().to_string(), bytes: text.into_bytes(), policy, signatures })
}

/// What `bundle trust sign` did.
#[derive(Debug, Serialize)]
pub struct Signed {
    pub policy: String,
    pub version: u64,
    pub key_id: String,
    /// The signer's name in this version, when it is one of its signers.
    pub signer: Option<String>,
    /// Whether the key is a root signer of this version.
    pub root: bool,
    pub signatures: usize,
    #[serde(serialize_with = "display")]
    pub file: PathBuf,
}

fn display<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&path.display())
}

/// Adds `signer`'s signature to the policy's signatures file (replacing an earlier one by the
/// same key for the same version), written atomically.
pub fn sign(path: &Path, signer: &mut Signer) -> Result<Signed, TrustError> {
    let mut signed = read_signed(path)?;
    let comment = signed.policy.signed_comment();
    let public = signer.public_key();
    let signature = signer.sign(&signed.bytes, &comment, "signature from bundle trust sign").map_err(Error::from)?;
    signed.signatures.retain(|s| !(s.key_id() == public.key_id() && s.trusted_comment() == comment));
    signed.signatures.push(signature);
    let file = signatures::policy_sigs_path(path);
    atomic::write(&file, signatures::to_text(&signed.signatures).as_bytes(), true).map_err(|e| Error::io(&file, e))?;
    let p = &signed.policy;
    let me = p.with_key_id(public.key_id()).find(|(_, s)| s.id == crate::trust_policy::SignerId::Key(public));
    Ok(Signed {
        policy: p.id.clone(),
        version: p.version,
        key_id: public.key_id_hex(),
        signer: me.map(|(_, s)| s.name.clone()),
        root: me.is_some_and(|(i, _)| p.is_root(i)),
        signatures: signed.signatures.len(),
        file,
    })
}

/// Follows the chain from `pin` through `updates` at `now`; with a state file, refuses a
/// version older than one followed before and records the one followed.
pub fn follow(
    pin: &Path,
    updates: &[PathBuf],
    state: Option<&Path>,
    now: Timestamp,
) -> Result<Result<ChainReport, ChainError>, TrustError> {
    let pin = read_signed(pin)?;
    let updates = updates.iter().map(|u| read_signed(u)).collect::<Result<Vec<_>, _>>()?;
    let mut state = state.map(StateFile::open).transpose()?;
    let seen = state.as_ref().and_then(|s| s.state.policy_version(&pin.policy.id));
    match chain::follow(pin, updates, now, seen) {
        Ok((policy, report)) => {
            if let Some(state) = state.as_mut() {
                state.record_policy(&policy.id, policy.version)?;
            }
            Ok(Ok(report))
        }
        Err(e) => Ok(Err(e)),
    }
}

/// Starts the next version: a copy of `from` with `version` one higher and a new `expires`,
/// comments and order kept, written to `out` (never over an existing file). It is unsigned:
/// edit it, then have it signed by a threshold of `from`'s root signers and of its own.
pub fn rotate(from: &Path, out: &Path, expires: Timestamp) -> Result<u64, TrustError> {
    let current = read_signed(from)?;
    let text = String::from_utf8(current.bytes).expect("read as UTF-8");
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| TrustError::Malformed { path: from.to_path_buf(), why: e.to_string() })?;
    let next = current.policy.version + 1;
    let as_i64 = i64::try_from(next).map_err(|_| Error::Usage("the policy version is too large".to_owned()))?;
    doc["version"] = toml_edit::value(as_i64);
    let when: toml_datetime::Datetime =
        expires.to_string().parse().map_err(|e| Error::Usage(format!("--expires: {e}")))?;
    doc["expires"] = toml_edit::value(when);
    let written = doc.to_string();
    TrustPolicy::parse(&written).map_err(|why| TrustError::Malformed { path: out.to_path_buf(), why })?;
    atomic::write(out, written.as_bytes(), false).map_err(|e| Error::io(out, e))?;
    Ok(next)
}
