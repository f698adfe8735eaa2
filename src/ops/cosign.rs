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

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Error;
use crate::atomic;
use crate::attest::{Envelope, SigstoreBundle, Statement, Subject, dsse::PAYLOAD_TYPE_IN_TOTO};
use crate::bundle::verify::{Discard, Verified};
use crate::contract::release;
use crate::keys::Signer;
use crate::minisign::PublicKey;
use crate::oci::{self, Artifact, referrers, referrers::Referrer};
use crate::ops::gate::{BaselineReport, Gate, GateError, GateOptions, Verdict};
use crate::ops::input::{BundleSource, InputError};
use crate::progress::Silent;
use crate::regular_file::{self, Links, ReadError};
use crate::trust;
use crate::trust_policy::{SignersVerdict, TrustPolicy, signatures};

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
    #[serde(flatten)]
    pub stored: Stored,
}

/// Where a co-signature went.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Stored {
    /// Beside a bundle file.
    Files {
        #[serde(serialize_with = "display")]
        file: PathBuf,
        /// How many co-signatures the file holds now.
        cosignatures: usize,
        /// The approval envelope and how many signatures it holds now.
        #[serde(serialize_with = "display")]
        envelope: PathBuf,
        envelope_signatures: usize,
    },
    /// In a registry, as a referrer of the bundle's manifest.
    Registry {
        /// The bundle's manifest digest (the referrer's subject).
        subject: String,
        /// The co-signature referrer's manifest digest.
        referrer: String,
        /// How many co-signatures the registry holds now.
        cosignatures: usize,
    },
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
    let Approved { verified, baseline, sha256, policy, .. } =
        match judge(&BundleSource::File(bundle.to_path_buf()), opts)? {
            Ok(approved) => approved,
            Err(refused) => return Ok(Outcome::Refused(Box::new(refused))),
        };
    let public = signer.public_key();
    let approval = approval(&verified, baseline, bundle, &sha256, signer)?;
    policy_signer(policy.as_ref(), &public, &approval.agent)?;
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
    let name = bundle.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (envelope_path, envelope) = approval_envelope(bundle, approval_statement(&name, &approval, &sha256), signer)?;
    atomic::write(&path, signatures::to_text(&all).as_bytes(), true).map_err(|e| Error::io(&path, e))?;
    let mut json = serde_json::to_string_pretty(&envelope).expect("an envelope serialises");
    json.push('\n');
    atomic::write(&envelope_path, json.as_bytes(), true).map_err(|e| Error::io(&envelope_path, e))?;
    Ok(Outcome::Cosigned(Box::new(Cosigned {
        approval,
        stored: Stored::Files {
            file: path,
            cosignatures: all.len(),
            envelope: envelope_path,
            envelope_signatures: envelope.signatures.len(),
        },
    })))
}

/// `bundle cosign oci://REF`: as [`cosign`], for a bundle in a registry. The gate judges the
/// artifact through the one way in (its attestations and the co-signatures already there
/// before its layer, then the layer); the co-signature is pushed as a referrer of the
/// bundle's manifest (artifactType [`signatures::COSIGNATURE_ARTIFACT_TYPE`]): its first
/// layer the minisign signature the gate counts, its second the approval statement in a
/// Sigstore bundle signed by this key alone. The bundle is not pushed again.
pub fn cosign_registry(
    source: &BundleSource,
    opts: GateOptions,
    signer: &mut Signer,
    review: &mut dyn FnMut(&Approval) -> bool,
) -> Result<Outcome, GateError> {
    let BundleSource::Registry { reference, options } = source else {
        return Err(Error::Usage(format!("{}: not a registry reference", source.label().display())).into());
    };
    let Approved { verified, baseline, sha256, artifact, policy } = match judge(source, opts)? {
        Ok(approved) => approved,
        Err(refused) => return Ok(Outcome::Refused(Box::new(refused))),
    };
    let Some((subject, artifact)) = artifact else {
        return Err(Error::Usage(format!("{reference}: not a registry artifact")).into());
    };
    let label = source.label();
    let public = signer.public_key();
    let approval = approval(&verified, baseline, &label, &sha256, signer)?;
    policy_signer(policy.as_ref(), &public, &approval.agent)?;
    if !review(&approval) {
        return Ok(Outcome::Declined);
    }
    let comment = trust::trusted_comment(&approval.agent, &approval.version);
    let signature =
        signer.sign(&verified.manifest_bytes, &comment, "co-signature from bundle cosign").map_err(Error::from)?;
    let name =
        artifact.title.clone().unwrap_or_else(|| format!("{}-{}.agent.bundle", approval.agent, approval.version));
    let statement = approval_statement(&name, &approval, &sha256);
    let key_id = public.key_id_hex();
    let sigstore =
        SigstoreBundle::sign_statement(&statement, &key_id, |pae| signer.sign_ed25519(pae)).map_err(Error::from)?;
    let referrer = Referrer {
        artifact_type: signatures::COSIGNATURE_ARTIFACT_TYPE,
        layers: vec![
            (signatures::COSIGNATURE_MEDIA_TYPE, signature.to_text().into_bytes()),
            (referrers::SIGSTORE_BUNDLE_MEDIA_TYPE, sigstore.to_json()),
        ],
        annotations: Vec::new(),
    };
    let mut client = oci::Client::connect(reference, options, true, None).map_err(InputError::Registry)?;
    let digest = referrers::Subject { digest: &subject, size: artifact.manifest_size };
    let pushed = referrers::push_referrers(&mut client, &digest, &[referrer]).map_err(InputError::Registry)?;
    // The co-signatures there before, but an earlier one by this key for this release.
    let earlier = approval
        .signers
        .as_ref()
        .map_or(0, |s| s.signatures.iter().filter(|v| v.source.starts_with("cosig:") && v.key_id != key_id).count());
    Ok(Outcome::Cosigned(Box::new(Cosigned {
        approval,
        stored: Stored::Registry {
            subject,
            referrer: pushed.into_iter().next().unwrap_or_default(),
            cosignatures: earlier + 1,
        },
    })))
}

/// A bundle the gate passed, with what an approval is about: the SHA-256 of the bytes that
/// were judged (not of a second read), and a registry artifact's manifest digest and manifest.
struct Approved {
    verified: Box<Verified>,
    baseline: Option<BaselineReport>,
    sha256: [u8; 32],
    artifact: Option<(String, Artifact)>,
    /// The trust policy version the gate followed, if any.
    policy: Option<TrustPolicy>,
}

/// Under a trust policy, the co-signing key must be one of its signers, and not revoked: a
/// co-signature by any other key could never count, and an approver who believed it did
/// would be wrong silently. (A key that may not sign this agent now, or that counted already,
/// is let through: its window may open, its signature is still an approval on record.)
fn policy_signer(policy: Option<&TrustPolicy>, key: &PublicKey, agent: &str) -> Result<(), Error> {
    let Some(policy) = policy else { return Ok(()) };
    let at = format!("trust policy `{}` version {}", policy.id, policy.version);
    match policy.signer_of_key(key) {
        None => Err(Error::Usage(format!(
            "key {} is not a signer of {at}: its co-signature of `{agent}` would never count; sign with a key the policy lists, or give the version that adds it with --policy-update",
            key.key_id_hex()
        ))),
        Some(s) if s.revoked => Err(Error::Usage(format!(
            "key {} is signer `{}` of {at}, which revokes it: its co-signature would never count",
            key.key_id_hex(),
            s.name
        ))),
        Some(_) => Ok(()),
    }
}

/// Judges the bundle `source` names through the one way in, with a gate made of `opts` that
/// names the SHA-256 of the bytes it judged: `Err` is the refusal.
fn judge(source: &BundleSource, opts: GateOptions) -> Result<Result<Approved, Verdict>, GateError> {
    let gate = Gate::open(opts)?.with_digest();
    let policy = gate.followed_policy().cloned();
    let input = match source.open(&Silent, &gate.wanted())? {
        Ok(input) => input,
        Err(rejection) => return Ok(Err(Verdict::refused(rejection))),
    };
    let artifact = input.registry_artifact().map(|(digest, a)| (digest.to_owned(), a.clone()));
    match gate.judge(input, &mut Discard)? {
        Verdict::Passed { verified, baseline, sha256: Some(sha256), .. } => {
            Ok(Ok(Approved { verified, baseline, sha256, artifact, policy }))
        }
        Verdict::Passed { .. } => Err(Error::Usage("the gate named no SHA-256 of the bundle it judged".into()).into()),
        refused @ Verdict::Refused { .. } => Ok(Err(refused)),
    }
}

/// What `signer` is about to approve of a verified bundle whose file has `sha256`.
fn approval(
    verified: &Verified,
    baseline: Option<BaselineReport>,
    origin: &Path,
    sha256: &[u8; 32],
    signer: &Signer,
) -> Result<Approval, Error> {
    let contracts = release::from_verified(verified, origin)
        .map_err(|e| Error::Usage(format!("{}: cannot compute the tool contracts: {e}", origin.display())))?;
    let m = &verified.manifest;
    let public = signer.public_key();
    Ok(Approval {
        agent: m.name.clone(),
        version: m.version.to_string(),
        key_id: public.key_id_hex(),
        manifest_blake3: verified.manifest_blake3.to_hex().to_string(),
        sha256: hex::encode(sha256),
        tools: contracts
            .contracts
            .iter()
            .map(|c| ToolApproval { id: c.id().to_owned(), risk: c.risk.names(), fingerprint: c.fingerprint.clone() })
            .collect(),
        grants: contracts.grants.clone(),
        baseline,
        signers: verified.signers.clone(),
    })
}

/// The approval statement about the bundle file `name`: the same for every approver of it.
fn approval_statement(name: &str, a: &Approval, sha256: &[u8; 32]) -> Statement {
    let predicate = serde_json::json!({
        "agent": { "name": a.agent, "version": a.version },
        "manifestBlake3": a.manifest_blake3,
        "tools": a.tools.iter().map(|t| serde_json::json!({
            "id": t.id, "risk": t.risk, "contractFingerprint": t.fingerprint,
        })).collect::<Vec<_>>(),
        "grants": a.grants,
    });
    Statement::new(vec![Subject::sha256(name, sha256)], APPROVAL_PREDICATE, predicate)
}

/// The approval envelope beside the bundle with this signer's signature added (replacing an
/// earlier one by the same key). An envelope over another statement (another bundle, or one
/// renamed) is refused rather than overwritten.
fn approval_envelope(bundle: &Path, statement: Statement, signer: &mut Signer) -> Result<(PathBuf, Envelope), Error> {
    let path = approval_path(bundle);
    let payload = statement.to_payload();
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
