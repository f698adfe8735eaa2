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
use crate::trust_policy::{PolicyError, TrustPolicy, signatures};
use crate::{Error, atomic};

/// A policy file is read whole; 100 keys take about 20 KiB.
pub use crate::limits::MAX_TRUST_POLICY_BYTES as MAX_POLICY_BYTES;

/// Why a trust policy could not be used (exit 2; code `policy_error` for a malformed one).
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{path}: not a usable trust policy:\n{why}")]
    Malformed { path: PathBuf, why: String },
    #[error("{path}: not a usable trust policy:\n{source}")]
    Policy { path: PathBuf, source: PolicyError },
    #[error(transparent)]
    Other(#[from] Error),
    #[error(transparent)]
    State(#[from] StateError),
    /// The trusted root the policy names cannot be used (exit 2).
    #[error(transparent)]
    Root(#[from] crate::keyless::RootError),
}

impl crate::error::Coded for TrustError {
    fn code(&self) -> crate::error::ErrorCode {
        match self {
            TrustError::Malformed { .. } | TrustError::Policy { .. } => crate::error::ErrorCode::PolicyError,
            TrustError::Other(e) => e.code(),
            TrustError::State(e) => e.code(),
            TrustError::Root(e) => e.code(),
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
    let mut policy =
        TrustPolicy::parse(&text).map_err(|source| TrustError::Policy { path: path.to_path_buf(), source })?;
    if policy.has_identities() && policy.sigstore.is_none() {
        return Err(malformed(
            "certificate-identity signers need the trusted root they are judged against: add [sigstore] trusted_root and sha256 (`bundle trust import-root POLICY trusted_root.json`)".to_owned(),
        ));
    }
    if let Some(root) = &policy.sigstore {
        let file = root_path(path, &root.file);
        policy.trusted_root = Some(std::sync::Arc::new(crate::keyless::TrustedRoot::read_pinned(&file, &root.sha256)?));
    }
    let sigs_path = signatures::policy_sigs_path(path);
    let signatures = match read_text(&sigs_path, signatures::MAX_SIGNATURES_BYTES)? {
        Some(t) => signatures::parse(&t).map_err(|why| TrustError::Malformed { path: sigs_path.clone(), why })?,
        None => Vec::new(),
    };
    Ok(SignedPolicy { origin: path.display().to_string(), bytes: text.into_bytes(), policy, signatures })
}

/// Where a policy's `[sigstore] trusted_root` is: relative to the policy file's folder.
pub fn root_path(policy: &Path, file: &str) -> PathBuf {
    policy.parent().unwrap_or(Path::new("")).join(file)
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
    let me = p.with_key_id(public.key_id()).find(|(_, s)| s.id.key() == Some(&public));
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
    TrustPolicy::parse(&written).map_err(|source| TrustError::Policy { path: out.to_path_buf(), source })?;
    atomic::write(out, written.as_bytes(), false).map_err(|e| Error::io(out, e))?;
    Ok(next)
}

/// A trusted root whose newest key started more than this many days ago may have missed a
/// rotation of its instance (`bundle trust import-root` warns).
pub const ROOT_STALE_DAYS: i64 = 180;

/// What `bundle trust import-root` did.
#[derive(Debug, Serialize)]
pub struct ImportedRoot {
    /// The copy beside the policy that the policy now names.
    #[serde(serialize_with = "display")]
    pub file: PathBuf,
    pub sha256: String,
    pub certificate_authorities: usize,
    pub tlogs: usize,
    pub ctlogs: usize,
    pub timestamp_authorities: usize,
    /// The newest validity start among its keys and CAs (RFC 3339), and its age in days.
    pub newest_key_start: Option<String>,
    pub age_days: Option<i64>,
    /// Older than [`ROOT_STALE_DAYS`].
    pub stale: bool,
    /// Signatures of this policy version that no longer match its bytes (sign it again).
    pub signatures_invalidated: usize,
}

/// Imports a Sigstore `trusted_root.json` into a trust policy: checks it is a usable root,
/// copies it beside the policy as `trusted_root-<first 12 hex digits of its sha256>.json` (so
/// that each policy version keeps naming the root it was signed with), and sets the policy's
/// `[sigstore] trusted_root` and `sha256` (comments and order kept, written atomically). The
/// policy's bytes change: its signatures for this version must be made again.
pub fn import_root(policy: &Path, root: &Path, now: Timestamp) -> Result<ImportedRoot, TrustError> {
    use sha2::Digest as _;
    // Read without its current root, which the import replaces.
    let current = read_unrooted(policy)?;
    let text = regular_file::read_to_string(root, crate::keyless::MAX_TRUSTED_ROOT_BYTES, Links::Follow)
        .map_err(|e| Error::io(root, e.into_io()))?;
    let parsed = crate::keyless::TrustedRoot::parse(root, &text)?;
    let sha256 = hex::encode(sha2::Sha256::digest(text.as_bytes()));
    let name = format!("trusted_root-{}.json", &sha256[..12]);
    let file = root_path(policy, &name);
    atomic::write(&file, text.as_bytes(), true).map_err(|e| Error::io(&file, e))?;

    let malformed = |why: String| TrustError::Malformed { path: policy.to_path_buf(), why };
    let policy_text = String::from_utf8(current.bytes.clone()).expect("read as UTF-8");
    let mut doc: toml_edit::DocumentMut =
        policy_text.parse().map_err(|e: toml_edit::TomlError| malformed(e.to_string()))?;
    let mut table = toml_edit::Table::new();
    table["trusted_root"] = toml_edit::value(name);
    table["sha256"] = toml_edit::value(sha256.clone());
    match doc.get_mut("sigstore").and_then(|t| t.as_table_mut()) {
        Some(existing) => {
            existing["trusted_root"] = table["trusted_root"].clone();
            existing["sha256"] = table["sha256"].clone();
        }
        None => {
            doc["sigstore"] = toml_edit::Item::Table(table);
        }
    }
    let written = doc.to_string();
    TrustPolicy::parse(&written).map_err(|source| TrustError::Policy { path: policy.to_path_buf(), source })?;
    atomic::write(policy, written.as_bytes(), true).map_err(|e| Error::io(policy, e))?;

    let comment = current.policy.signed_comment();
    let unchanged = written.as_bytes() == current.bytes.as_slice();
    let invalidated =
        if unchanged { 0 } else { current.signatures.iter().filter(|s| s.trusted_comment() == comment).count() };
    let start = parsed.newest_key_start();
    let age_days = start
        .as_deref()
        .and_then(|s| Timestamp::parse(s).ok())
        .map(|t| (now.unix_seconds() - t.unix_seconds()).div_euclid(86_400));
    let counts = parsed.counts();
    Ok(ImportedRoot {
        file,
        sha256,
        certificate_authorities: counts[0],
        tlogs: counts[1],
        ctlogs: counts[2],
        timestamp_authorities: counts[3],
        newest_key_start: start,
        stale: age_days.is_some_and(|d| d > ROOT_STALE_DAYS),
        age_days,
        signatures_invalidated: invalidated,
    })
}

/// A policy read without its trusted root (an import replaces that root).
fn read_unrooted(path: &Path) -> Result<SignedPolicy, TrustError> {
    let text = read_text(path, MAX_POLICY_BYTES)?
        .ok_or_else(|| Error::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")))?;
    let policy = TrustPolicy::parse(&text).map_err(|source| TrustError::Policy { path: path.to_path_buf(), source })?;
    let sigs_path = signatures::policy_sigs_path(path);
    let signatures = match read_text(&sigs_path, signatures::MAX_SIGNATURES_BYTES)? {
        Some(t) => signatures::parse(&t).unwrap_or_default(),
        None => Vec::new(),
    };
    Ok(SignedPolicy { origin: path.display().to_string(), bytes: text.into_bytes(), policy, signatures })
}
