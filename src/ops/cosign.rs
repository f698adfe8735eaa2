//! `bundle cosign BUNDLE --key KEYREF`: a second (third, ...) person approves a release by
//! adding their signature beside it, without changing the bundle's bytes.
//!
//! A co-signature is a minisign signature over the bundle's manifest.toml (entry 1, which
//! holds the BLAKE3 digest of every file) with the same trusted comment as the pack signature
//! (`agent-bundle/1 name=<agent> version=<version>`), appended to `<bundle>.cosig`. It binds
//! exactly what the pack signature binds, and `minisign -V` checks it against the manifest
//! extracted from the bundle. The bundle is judged by the same gate as `verify` first (with a
//! trust policy, everything but the rules' thresholds, which the co-signature is for), and
//! the approver's review callback sees what is approved before anything is signed.
//!
//! For tools that read the supply chain's formats rather than minisign, each co-signer also
//! signs one DSSE envelope beside the bundle, `<bundle>.approval.dsse.json`: an in-toto
//! Statement v1 whose subject is the bundle file (its SHA-256) and whose predicate
//! ([`APPROVAL_PREDICATE`]) lists the agent, its manifest's BLAKE3 and each tool's risk
//! classes and contract fingerprint. The statement depends only on the bundle, so every
//! approver signs the same payload and the envelope gathers one signature per key
//! (securesystemslib's `Envelope.verify(keys, threshold)` counts them). The gate counts the
//! minisign co-signatures; the envelope is the same approval in the standard form.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Error;
use crate::atomic;
use crate::attest::{Envelope, Statement, Subject, dsse::PAYLOAD_TYPE_IN_TOTO};
use crate::bundle::verify::Discard;
use crate::contract::release;
use crate::keys::Signer;
use crate::ops::gate::{BaselineReport, Gate, GateError, GateOptions, Verdict};
use crate::regular_file::{self, Links, ReadError};
use crate::trust;
use crate::trust_policy::{SignersVerdict, signatures};

/// The predicate type of the approval statement.
pub const APPROVAL_PREDICATE: &str = "https://agent-bundle.dev/attestation/approval/v1";

/// Where the approval envelope of a bundle file is kept.
pub fn approval_path(bundle: &Path) -> PathBuf {
    let mut name = bundle.as_os_str().to_owned();
    name.push(".approval.dsse.json");
    name.into()
}

/// One tool as the approver sees it.
#[derive(Debug, Serialize)]
pub struct ToolApproval {
    pub id: String,
    pub risk: Vec<&'static str>,
    pub fingerprint: String,
}

/// What a co-signature approves.
#[derive(Debug, Serialize)]
pub struct Approval {
    pub agent: String,
    pub version: String,
    /// The key that signs (the approver's).
    pub key_id: String,
    pub manifest_blake3: String,
    /// The bundle file's SHA-256 (the approval statement's subject).
    pub sha256: String,
    pub tools: Vec<ToolApproval>,
    pub grants: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineReport>,
    /// With a trust policy: the signatures before this one, and the rules' tallies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signers: Option<SignersVerdict>,
}

/// The co-signature written.
#[derive(Debug, Serialize)]
pub struct Cosigned {
    #[serde(flatten)]
    pub approval: Approval,
    #[serde(serialize_with = "display")]
    pub file: PathBuf,
    /// How many co-signatures the file holds now.
    pub cosignatures: usize,
    /// The approval envelope and how many signatures it holds now.
    #[serde(serialize_with = "display")]
    pub envelope: PathBuf,
    pub envelope_signatures: usize,
}

fn display<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&path.display())
}

/// What became of a cosign request.
#[derive(Debug)]
pub enum Outcome {
    Cosigned(Box<Cosigned>),
    /// The gate refused the bundle: nothing was signed.
    Refused(Box<Verdict>),
    /// The review callback declined: nothing was signed.
    Declined,
}

/// Judges `bundle` with a gate made of `opts`, lets `review` see what would be approved (it
/// returns whether to go on), then signs the manifest with `signer` and appends the
/// signature to `<bundle>.cosig` (atomically; an earlier co-signature by the same key is
/// replaced).
pub fn cosign(
    bundle: &Path,
    opts: GateOptions,
    signer: &mut Signer,
    review: &mut dyn FnMut(&Approval) -> bool,
) -> Result<Outcome, GateError> {
    let gate = Gate::open(opts)?;
    let file = File::open(bundle).map_err(|e| Error::io(bundle, e))?;
    let verdict = gate.run(BufReader::with_capacity(1 << 20, file), bundle, &mut Discard)?;
    let (verified, baseline) = match verdict {
        Verdict::Passed { verified, baseline, .. } => (verified, baseline),
        refused @ Verdict::Refused { .. } => return Ok(Outcome::Refused(Box::new(refused))),
    };
    let contracts = release::from_verified(&verified, bundle)
        .map_err(|e| Error::Usage(format!("{}: cannot compute the tool contracts: {e}", bundle.display())))?;
    let m = &verified.manifest;
    let public = signer.public_key();
    let sha256 = file_sha256(bundle)?;
    let approval = Approval {
        agent: m.name.clone(),
        version: m.version.to_string(),
        key_id: public.key_id_hex(),
        manifest_blake3: verified.manifest_blake3.to_hex().to_string(),
        sha256: hex(&sha256),
        tools: contracts
            .contracts
            .iter()
            .map(|c| ToolApproval { id: c.id().to_owned(), risk: c.risk.names(), fingerprint: c.fingerprint.clone() })
            .collect(),
        grants: contracts.grants.clone(),
        baseline,
        signers: verified.signers.clone(),
    };
    if !review(&approval) {
        return Ok(Outcome::Declined);
    }
    let comment = trust::trusted_comment(&approval.agent, &approval.version);
    let signature =
        signer.sign(&verified.manifest_bytes, &comment, "co-signature from bundle cosign").map_err(Error::from)?;
    let path = signatures::cosig_path(bundle);
    let mut all = match regular_file::read_to_string(&path, signatures::MAX_SIGNATURES_BYTES, Links::Follow) {
        Ok(text) => signatures::parse(&text).map_err(|why| Error::Usage(format!("{}: {why}", path.display())))?,
        Err(ReadError::NotFound) => Vec::new(),
        Err(e) => return Err(Error::io(&path, e.into_io()).into()),
    };
    all.retain(|s| !(s.key_id() == public.key_id() && s.trusted_comment() == comment));
    all.push(signature);
    let (envelope_path, envelope) = approval_envelope(bundle, &approval, &sha256, signer)?;
    atomic::write(&path, signatures::to_text(&all).as_bytes(), true).map_err(|e| Error::io(&path, e))?;
    let mut json = serde_json::to_string_pretty(&envelope).expect("an envelope serialises");
    json.push('\n');
    atomic::write(&envelope_path, json.as_bytes(), true).map_err(|e| Error::io(&envelope_path, e))?;
    Ok(Outcome::Cosigned(Box::new(Cosigned {
        approval,
        file: path,
        cosignatures: all.len(),
        envelope: envelope_path,
        envelope_signatures: envelope.signatures.len(),
    })))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn file_sha256(path: &Path) -> Result<[u8; 32], Error> {
    use sha2::Digest as _;
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = std::io::Read::read(&mut file, &mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().into())
}

/// The approval statement's payload: the same bytes for every approver of this bundle.
fn approval_statement(bundle: &Path, a: &Approval, sha256: &[u8; 32]) -> Vec<u8> {
    let name = bundle.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let predicate = serde_json::json!({
        "agent": { "name": a.agent, "version": a.version },
        "manifestBlake3": a.manifest_blake3,
        "tools": a.tools.iter().map(|t| serde_json::json!({
            "id": t.id, "risk": t.risk, "contractFingerprint": t.fingerprint,
        })).collect::<Vec<_>>(),
        "grants": a.grants,
    });
    Statement::new(vec![Subject::sha256(&name, sha256)], APPROVAL_PREDICATE, predicate).to_payload()
}

/// The approval envelope beside the bundle with this signer's signature added (replacing an
/// earlier one by the same key). An envelope over another statement (another bundle, or one
/// renamed) is refused rather than overwritten.
fn approval_envelope(
    bundle: &Path,
    a: &Approval,
    sha256: &[u8; 32],
    signer: &mut Signer,
) -> Result<(PathBuf, Envelope), Error> {
    let path = approval_path(bundle);
    let payload = approval_statement(bundle, a, sha256);
    let mut envelope = match regular_file::read(&path, crate::attest::MAX_ATTESTATION_BYTES, Links::Follow) {
        Ok(bytes) => {
            let e: Envelope = crate::attest::parse_json(&bytes, "the approval envelope")
                .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
            if e.payload != payload || e.payload_type != PAYLOAD_TYPE_IN_TOTO {
                return Err(Error::Usage(format!(
                    "{} approves another statement (another bundle, or this one under another name); move it away",
                    path.display()
                )));
            }
            e
        }
        Err(ReadError::NotFound) => Envelope::new(PAYLOAD_TYPE_IN_TOTO, payload),
        Err(e) => return Err(Error::io(&path, e.into_io())),
    };
    let key_id = signer.public_key().key_id_hex();
    envelope.sign(&key_id, |pae| signer.sign_ed25519(pae))?;
    Ok((path, envelope))
}
