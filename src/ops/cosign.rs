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

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Error;
use crate::atomic;
use crate::bundle::verify::Discard;
use crate::contract::release;
use crate::keys::Signer;
use crate::ops::gate::{BaselineReport, Gate, GateError, GateOptions, Verdict};
use crate::regular_file::{self, Links, ReadError};
use crate::trust;
use crate::trust_policy::{SignersVerdict, signatures};

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
}

fn display<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&path.display())
}

/// What became of a cosign request.
#[derive(Debug)]
pub enum Outcome {
    Cosigned(Box<Cosigned>),
    /// The gate refused the bundle: nothing was signed.
    Refused(Verdict),
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
        Verdict::Passed { verified, baseline } => (verified, baseline),
        refused @ Verdict::Refused { .. } => return Ok(Outcome::Refused(refused)),
    };
    let contracts = release::from_verified(&verified, bundle)
        .map_err(|e| Error::Usage(format!("{}: cannot compute the tool contracts: {e}", bundle.display())))?;
    let m = &verified.manifest;
    let public = signer.public_key();
    let approval = Approval {
        agent: m.name.clone(),
        version: m.version.to_string(),
        key_id: public.key_id_hex(),
        manifest_blake3: verified.manifest_blake3.to_hex().to_string(),
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
    atomic::write(&path, signatures::to_text(&all).as_bytes(), true).map_err(|e| Error::io(&path, e))?;
    Ok(Outcome::Cosigned(Box::new(Cosigned { approval, file: path, cosignatures: all.len() })))
}
