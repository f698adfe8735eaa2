//! `bundle verify --emit-vsa`: the gate's verdict on one bundle as a SLSA Verification Summary
//! Attestation v1 ([`crate::evidence::vsa`]) in a Sigstore bundle, signed with the verifier's
//! key, so that an admission step further on can trust the verdict without running `bundle`.
//!
//! What it says is only what the gate established: the subject is the bundle file's SHA-256
//! (a registry artifact's layer digest: the same bytes); `policy` the trust policy (with the
//! version followed), else the trusted-keys file, else the public key files; `inputAttestations`
//! every attestation judged sound, every co-signature and keyless bundle read, and the approved
//! baseline; `verifiedLevels` the SLSA build level a trusted provenance supports and our own
//! properties, or on FAILED the refusal's code. The same inputs and time give the same bytes.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::attest::{SigstoreBundle, Statement, Subject};
use crate::evidence::files::Kind;
use crate::evidence::judge::Attestation;
use crate::evidence::vsa::{self, Predicate, Property, ResourceDescriptor, Verifier};
use crate::keys::Signer;
use crate::ops::gate::{CosignatureOrigin, Verdict};
use crate::ops::input::BundleSource;
use crate::timestamp::Timestamp;

/// Who writes the summary, when, and which files the gate's policy came from (as given).
#[derive(Debug, Clone, Default)]
pub struct VsaRequest {
    /// `--verifier-id`: a URI naming this gate (`verifier.id`).
    pub verifier_id: String,
    /// `timeVerified`: `SOURCE_DATE_EPOCH` when set, else the gate's time.
    pub time: Option<Timestamp>,
    pub trust_policy: Option<PathBuf>,
    pub policy_updates: Vec<PathBuf>,
    pub trusted_keys: Option<PathBuf>,
    pub keys: Vec<PathBuf>,
    /// A baseline file, or a folder of `<agent>.toml`.
    pub baseline: Option<PathBuf>,
    pub cosignatures: Vec<PathBuf>,
    pub sigstore: Vec<PathBuf>,
    /// `--state` was given (rollback was judged).
    pub state: bool,
}

/// The summary's statement about the bundle `source` names, from the gate's `verdict`.
pub fn summarise(source: &BundleSource, verdict: &Verdict, req: &VsaRequest) -> Result<Statement, crate::Error> {
    let known = match verdict {
        Verdict::Passed { sha256, .. } => *sha256,
        Verdict::Refused { .. } => None,
    };
    let (name, sha256) = subject(source, known)?;
    let (agent, judged, levels, result) = match verdict {
        Verdict::Passed { verified, baseline, keyless, attestations, .. } => {
            let mut levels = Vec::new();
            let sound = |kind| attestations.iter().any(|j| j.is_ok() && j.kind() == Some(kind));
            if sound(Kind::Provenance) {
                levels.push(vsa::SLSA_BUILD_LEVEL_1.to_owned());
            }
            let properties = [
                (Property::Signed, verified.signature_checked),
                (Property::ThresholdMet, verified.signers.as_ref().is_some_and(|s| s.accepted)),
                (Property::ContractsApproved, baseline.is_some()),
                (Property::ContractAttested, sound(Kind::Contract)),
                (Property::KeylessVerified, keyless.is_some()),
                (Property::NotRolledBack, req.state),
            ];
            levels.extend(properties.into_iter().filter(|(_, held)| *held).map(|(p, _)| p.as_str().to_owned()));
            (Some(verified.manifest.name.clone()), attestations, levels, "PASSED")
        }
        Verdict::Refused { rejection, attestations, .. } => (
            rejection.agent.as_ref().map(|(name, _)| name.clone()),
            attestations,
            vsa::refused_levels(rejection.reason.as_str()),
            "FAILED",
        ),
    };
    let policy_version = match verdict {
        Verdict::Passed { verified, .. } => verified.signers.as_ref().map(|s| s.policy_version),
        Verdict::Refused { signers, .. } => signers.as_ref().map(|s| s.policy_version),
    };
    let predicate = Predicate {
        verifier: Verifier {
            id: req.verifier_id.clone(),
            version: BTreeMap::from([("agent-bundle".to_owned(), env!("CARGO_PKG_VERSION").to_owned())]),
        },
        time_verified: req.time.unwrap_or_else(Timestamp::now).to_string(),
        resource_uri: source.label().display().to_string(),
        policy: policy(req, policy_version)?,
        input_attestations: inputs(source, judged, counted_cosignatures(verdict), agent.as_deref(), req)?,
        verification_result: result.to_owned(),
        verified_levels: levels,
        slsa_version: vsa::SLSA_VERSION.to_owned(),
    };
    let predicate = serde_json::to_value(&predicate).expect("a summary serialises");
    Ok(Statement::new(vec![Subject::sha256(&name, &sha256)], vsa::VSA_V1, predicate))
}

/// The key that signs a summary: an Ed25519 key (a minisign key file, an ssh-agent's or a
/// token's Ed25519 key; the key id is the minisign one), or a P-256 key (a PEM file, an
/// ssh-agent's ecdsa-sha2-nistp256 key or a token's P-256 key; the key id is the SHA-256 of
/// its public key PEM).
#[derive(Debug)]
pub enum VsaKey {
    Ed25519(Signer),
    P256(crate::keys::P256Signer),
}

/// The statement signed by `key` in a Sigstore bundle (its file bytes).
pub fn sign(statement: &Statement, key: &mut VsaKey) -> Result<Vec<u8>, crate::Error> {
    let bundle = match key {
        VsaKey::Ed25519(signer) => {
            let key_id = signer.public_key().key_id_hex();
            SigstoreBundle::sign_statement(statement, &key_id, |pae| signer.sign_ed25519(pae))?
        }
        VsaKey::P256(signer) => SigstoreBundle::sign_statement_p256(statement, signer)?,
    };
    Ok(bundle.to_json())
}

/// The subject: the bundle file's name and SHA-256 (`known` when the gate computed it, else
/// read again), or a registry artifact's reference and layer digest (the bundle's bytes as the
/// registry holds them).
fn subject(source: &BundleSource, known: Option<[u8; 32]>) -> Result<(String, [u8; 32]), crate::Error> {
    match source {
        BundleSource::File(path) => {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            Ok((name, known.map_or_else(|| file_sha256(path), Ok)?))
        }
        BundleSource::Registry { reference, .. } => {
            if let Some(known) = known {
                return Ok((reference.to_string(), known));
            }
            let config = source.config().map_err(|e| crate::Error::Usage(e.to_string()))?.map_err(|r| {
                crate::Error::Usage(format!(
                    "{reference}: no summary of an artifact whose manifest is refused: {}",
                    r.message
                ))
            })?;
            let mut digest = [0u8; 32];
            hex::decode_to_slice(config.artifact.layer_digest.trim_start_matches("sha256:"), &mut digest)
                .map_err(|_| crate::Error::Usage(format!("{reference}: the layer digest is not a sha256")))?;
            Ok((reference.to_string(), digest))
        }
    }
}

/// `policy`: the trust policy (`PATH#version=N`, N the version followed), else the trusted-keys
/// file, else the public key files (their paths joined by `,`, the digest over their bytes in
/// that order).
fn policy(req: &VsaRequest, version: Option<u64>) -> Result<ResourceDescriptor, crate::Error> {
    let (uri, files): (String, Vec<&Path>) = if let Some(p) = &req.trust_policy {
        let uri = match version {
            Some(v) => format!("{}#version={v}", p.display()),
            None => p.display().to_string(),
        };
        (uri, vec![p.as_path()])
    } else if let Some(t) = &req.trusted_keys {
        (t.display().to_string(), vec![t.as_path()])
    } else {
        let names: Vec<String> = req.keys.iter().map(|k| k.display().to_string()).collect();
        (names.join(","), req.keys.iter().map(PathBuf::as_path).collect())
    };
    let mut hasher = Sha256::new();
    for file in files {
        hasher.update(std::fs::read(file).map_err(|e| crate::Error::io(file, e))?);
    }
    Ok(ResourceDescriptor::sha256(uri, hex::encode(hasher.finalize())))
}

/// The co-signatures that counted, where the gate passed the bundle.
fn counted_cosignatures(verdict: &Verdict) -> &[CosignatureOrigin] {
    match verdict {
        Verdict::Passed { cosignatures, .. } => cosignatures,
        Verdict::Refused { .. } => &[],
    }
}

/// `inputAttestations`: the attestations judged sound, a registry's co-signature referrers
/// that counted, the co-signature and keyless files read (those given, else the ones beside a
/// bundle file, under a trust policy), the policy updates followed and the agent's approved
/// baseline.
fn inputs(
    source: &BundleSource,
    judged: &[Attestation],
    cosignatures: &[CosignatureOrigin],
    agent: Option<&str>,
    req: &VsaRequest,
) -> Result<Vec<ResourceDescriptor>, crate::Error> {
    let mut out: Vec<ResourceDescriptor> = judged
        .iter()
        .filter(|j| j.is_ok())
        .map(|j| ResourceDescriptor::sha256(attestation_uri(source, &j.report.source), hex::encode(j.sha256)))
        .collect();
    // A file's co-signatures are named below by their file; a registry's by their referrer.
    out.extend(
        cosignatures
            .iter()
            .filter(|c| c.source.starts_with("referrer "))
            .map(|c| ResourceDescriptor::sha256(attestation_uri(source, &c.source), c.sha256.clone())),
    );
    let mut files: Vec<PathBuf> = req.policy_updates.clone();
    if req.trust_policy.is_some() {
        let beside = |given: &[PathBuf], path: PathBuf| match (given, source) {
            ([], BundleSource::File(_)) => path.is_file().then_some(path).into_iter().collect(),
            _ => given.to_vec(),
        };
        let bundle = source.label();
        files.extend(beside(&req.cosignatures, crate::trust_policy::signatures::cosig_path(&bundle)));
        files.extend(beside(&req.sigstore, crate::ops::input::keyless_path(&bundle)));
    } else {
        files.extend(req.sigstore.iter().cloned());
    }
    if let Some(baseline) = &req.baseline {
        match (baseline.is_dir(), agent) {
            (true, Some(agent)) => files.push(baseline.join(format!("{agent}.toml"))),
            (true, None) => {}
            (false, _) => files.push(baseline.clone()),
        }
    }
    for file in files.into_iter().filter(|f| f.is_file()) {
        let sha256 = file_sha256(&file)?;
        out.push(ResourceDescriptor::sha256(file.display().to_string(), hex::encode(sha256)));
    }
    Ok(out)
}

/// An attestation's URI: its file, or for a registry referrer (`referrer sha256:…`) the
/// artifact's repository at that digest.
fn attestation_uri(source: &BundleSource, judged_source: &str) -> String {
    match (source, judged_source.strip_prefix("referrer ")) {
        (BundleSource::Registry { reference, .. }, Some(digest)) => {
            let at = crate::oci::Reference { tag: None, digest: Some(digest.to_owned()), ..reference.clone() };
            at.to_string()
        }
        _ => judged_source.to_owned(),
    }
}

fn file_sha256(path: &Path) -> Result<[u8; 32], crate::Error> {
    let mut file = std::fs::File::open(path).map_err(|e| crate::Error::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf).map_err(|e| crate::Error::io(path, e))? {
            0 => break,
            n => hasher.update(&buf[..n]),
        }
    }
    Ok(hasher.finalize().into())
}
