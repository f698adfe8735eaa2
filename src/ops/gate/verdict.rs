//! What the gate says of one bundle: passed (with what vouched for it) or refused (with the
//! reason and what was learned before the refusal), and the JSON document `verify`, `unpack`
//! and `pull` print of it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bundle::verify::{Reason, Refused, Rejection, Verified, VerifyIoError};
use crate::contract::baseline::Findings;
use crate::evidence::judge::{self, Attestation};
use crate::keyless::KeylessSigner;
use crate::trust_policy::SignersVerdict;

/// The baseline's findings on a release that was compared with it.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineReport {
    /// The baseline file.
    #[serde(serialize_with = "display")]
    pub file: PathBuf,
    #[serde(flatten)]
    pub findings: Findings,
}

fn display<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&path.display())
}

/// Where a co-signature that counted came from: a `.cosig` file or a registry referrer
/// (`referrer sha256:…`), and the SHA-256 of that piece's bytes (for a summary's
/// `inputAttestations`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosignatureOrigin {
    pub source: String,
    pub sha256: String,
}

/// The gate's judgement of one bundle.
#[derive(Debug)]
pub enum Verdict {
    /// Every check passed; the sink was committed and the state recorded.
    Passed {
        verified: Box<Verified>,
        baseline: Option<BaselineReport>,
        keyless: Option<KeylessSigner>,
        /// The attestations judged and accepted (none when there were none to judge).
        attestations: Vec<Attestation>,
        /// The SHA-256 of the bytes judged, when the gate computed it or a registry's
        /// descriptor bound them to it (what attestations and keyless signatures name).
        sha256: Option<[u8; 32]>,
        /// Of a registry's attestation referrers, the first accepted of each kind, as fetched
        /// (for a pull to keep beside its file; the others' bytes were dropped once judged).
        referred: Vec<crate::ops::input::Piece>,
        /// With a trust policy: where the co-signatures that counted came from, each once.
        cosignatures: Vec<CosignatureOrigin>,
    },
    /// Refused with a stable reason code. `baseline` is set when the bundle itself verified
    /// and its contracts were compared: the drift that refused it is there.
    Refused {
        rejection: Rejection,
        baseline: Option<BaselineReport>,
        /// With a trust policy: what became of each signature, and each rule's tally.
        signers: Option<Box<SignersVerdict>>,
        /// The attestations judged before the refusal, each with its verdict.
        attestations: Vec<Attestation>,
    },
}

/// The JSON document `verify` and `unpack` print: the verdict, then the baseline's findings
/// when the contracts were compared. Strings are as found; the renderer sanitises them.
#[derive(Debug, Serialize)]
pub struct VerdictReport<'a> {
    pub ok: bool,
    pub code: Option<Reason>,
    pub path: Option<&'a str>,
    pub message: Option<&'a str>,
    pub agent: Option<AgentId<'a>>,
    pub key_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<&'a BaselineReport>,
    /// Every attestation judged, each with its verdict (`ok` or a reason code).
    #[serde(skip_serializing_if = "<[Attestation]>::is_empty", serialize_with = "judge::reports")]
    pub attestations: &'a [Attestation],
    /// With --trust-policy: each signature's fate and each rule's tally.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signers: Option<&'a SignersVerdict>,
    /// The keyless signer that verified (`--sigstore`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyless: Option<&'a KeylessSigner>,
}

/// An agent's name and version.
#[derive(Debug, Serialize)]
pub struct AgentId<'a> {
    pub name: &'a str,
    pub version: String,
}

impl<'a> VerdictReport<'a> {
    /// The report of a bundle that verified.
    pub fn passed(v: &'a Verified, baseline: Option<&'a BaselineReport>, attestations: &'a [Attestation]) -> Self {
        VerdictReport {
            ok: true,
            code: None,
            path: None,
            message: None,
            agent: Some(AgentId { name: &v.manifest.name, version: v.manifest.version.to_string() }),
            key_id: Some(&v.key_id),
            files: Some(v.files.len()),
            bytes: Some(v.files.iter().map(|f| f.size).sum()),
            baseline,
            attestations,
            signers: v.signers.as_ref(),
            keyless: None,
        }
    }

    /// The report of a refused bundle.
    pub fn refused(r: &'a Rejection, baseline: Option<&'a BaselineReport>) -> Self {
        VerdictReport {
            ok: false,
            code: Some(r.reason),
            path: r.path.as_deref(),
            message: Some(&r.message),
            agent: r.agent.as_ref().map(|(name, version)| AgentId { name, version: version.clone() }),
            key_id: r.key_id.as_deref(),
            files: None,
            bytes: None,
            baseline,
            attestations: &[],
            signers: None,
            keyless: None,
        }
    }
}

impl Verdict {
    /// A refusal with nothing learned besides its reason.
    pub fn refused(r: impl Into<Refused>) -> Self {
        let Refused { rejection, signers } = r.into();
        Verdict::Refused { rejection, baseline: None, signers, attestations: Vec::new() }
    }

    /// The rejection, if the bundle was refused.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Verdict::Refused { rejection, .. } => Some(rejection),
            Verdict::Passed { .. } => None,
        }
    }
}

/// A fault of the stream a verdict was reached on overturns it ([`crate::ops::input`]), and
/// explains a bundle the verifier could not read (`Err`).
impl crate::ops::input::Judgement for Result<Verdict, VerifyIoError> {
    fn refused(rejection: Rejection) -> Self {
        Ok(Verdict::refused(rejection))
    }

    fn refused_for(self, rejection: Rejection) -> Self {
        Ok(Verdict::refused(match self {
            Ok(Verdict::Refused { rejection: earlier, .. }) => {
                Rejection { agent: earlier.agent, key_id: earlier.key_id, ..rejection }
            }
            Ok(Verdict::Passed { .. }) => rejection,
            Err(failed) => failed.refused_as(rejection),
        }))
    }

    fn rejection(&self) -> Option<&Rejection> {
        self.as_ref().ok().and_then(Verdict::rejection)
    }
}

impl Verdict {
    /// The verdict as the JSON document `verify` prints.
    pub fn report(&self) -> VerdictReport<'_> {
        match self {
            Verdict::Passed { verified, baseline, keyless, attestations, .. } => VerdictReport {
                keyless: keyless.as_ref(),
                ..VerdictReport::passed(verified, baseline.as_ref(), attestations)
            },
            Verdict::Refused { rejection, baseline, signers, attestations } => VerdictReport {
                attestations,
                signers: signers.as_deref(),
                ..VerdictReport::refused(rejection, baseline.as_ref())
            },
        }
    }
}
