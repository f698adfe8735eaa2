//! Where attestations live beside a bundle: one Sigstore bundle per statement, named after the
//! bundle file, so that a release folder reads `mailer-1.4.0.agent.bundle`,
//! `mailer-1.4.0.agent.bundle.provenance.sigstore.json`,
//! `mailer-1.4.0.agent.bundle.contract.sigstore.json`.

use std::path::{Path, PathBuf};

/// The predicate types we write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Provenance,
    Contract,
}

/// SLSA Provenance v1.
pub const SLSA_PROVENANCE_V1: &str = "https://slsa.dev/provenance/v1";
/// The agent-contract predicate (schema: `bundle schema contract-predicate`).
pub const AGENT_CONTRACT_V1: &str = "https://agent-bundle.dev/attestation/agent-contract/v1";

/// The OCI `artifactType`s of our attestations, as referrers of a bundle.
pub const ARTIFACT_TYPES: [&str; 2] = [Kind::Provenance.artifact_type(), Kind::Contract.artifact_type()];

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Provenance, Kind::Contract];

    pub fn predicate_type(self) -> &'static str {
        match self {
            Kind::Provenance => SLSA_PROVENANCE_V1,
            Kind::Contract => AGENT_CONTRACT_V1,
        }
    }

    /// The file-name suffix after the bundle's name.
    pub fn suffix(self) -> &'static str {
        match self {
            Kind::Provenance => ".provenance.sigstore.json",
            Kind::Contract => ".contract.sigstore.json",
        }
    }

    /// The OCI `artifactType` of the referrer that carries it in a registry.
    pub const fn artifact_type(self) -> &'static str {
        match self {
            Kind::Provenance => "application/vnd.agent-bundle.attestation.slsa-provenance.v1+json",
            Kind::Contract => "application/vnd.agent-bundle.attestation.agent-contract.v1+json",
        }
    }

    pub fn of_predicate_type(uri: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.predicate_type() == uri)
    }

    /// `provenance` or `contract`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Provenance => "provenance",
            Kind::Contract => "contract",
        }
    }
}

/// The file beside `bundle` that holds its attestation of `kind`.
pub fn beside(bundle: &Path, kind: Kind) -> PathBuf {
    let mut name = bundle.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(kind.suffix());
    bundle.with_file_name(name)
}

/// The attestation files that exist beside `bundle`, in [`Kind::ALL`] order.
pub fn discover(bundle: &Path) -> Vec<PathBuf> {
    Kind::ALL.into_iter().map(|k| beside(bundle, k)).filter(|p| p.is_file()).collect()
}

/// Writes `attestations` beside `bundle` (each atomically), and removes the files of the kinds
/// not given: they described an earlier bundle of that name. Returns the files written.
pub fn replace_beside(
    bundle: &Path,
    attestations: &[(Kind, crate::attest::SigstoreBundle)],
) -> crate::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for kind in Kind::ALL {
        let path = beside(bundle, kind);
        match attestations.iter().find(|(k, _)| *k == kind) {
            Some((_, sigstore)) => {
                crate::atomic::write(&path, &sigstore.to_json(), true).map_err(|e| crate::Error::io(&path, e))?;
                written.push(path);
            }
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(crate::Error::io(&path, e)),
                _ => {}
            },
        }
    }
    Ok(written)
}
