//! What `bundle` attests about a bundle, and how the gate judges it: the two predicates
//! ([`provenance`]: SLSA Provenance v1; [`contract`]: the agent contract), the files they are
//! written to beside a bundle ([`files`]), and the judgement of attestations against a bundle's
//! SHA-256, the trusted keys and the policy flags ([`judge`]). The formats themselves (DSSE,
//! in-toto, Sigstore bundle) are in [`crate::attest`]; `pack`, `attest`, `verify`, `unpack`,
//! `pull` and `inspect` all come here, so none can attest or judge differently.

pub mod contract;
pub mod files;
pub mod judge;
pub mod provenance;
pub mod vsa;

use crate::attest::{SigstoreBundle, Statement, Subject};
use crate::keys::{Signer, SignerError};

/// The two statements about one bundle file, signed: provenance first, then the contract.
pub fn sign_all(
    bundle_name: &str,
    sha256: &[u8; 32],
    provenance: serde_json::Value,
    contract: serde_json::Value,
    signer: &mut Signer,
) -> Result<Vec<(files::Kind, SigstoreBundle)>, SignerError> {
    let key_id = signer.public_key().key_id_hex();
    let mut out = Vec::new();
    for (kind, predicate) in [(files::Kind::Provenance, provenance), (files::Kind::Contract, contract)] {
        let statement = Statement::new(vec![Subject::sha256(bundle_name, sha256)], kind.predicate_type(), predicate);
        out.push((kind, SigstoreBundle::sign_statement(&statement, &key_id, |m| signer.sign_ed25519(m))?));
    }
    Ok(out)
}

/// The signed attestations of a bundle just written by `pack` (not yet in place): its file
/// name, SHA-256 and signed manifest bytes, how it was built and its tools' contracts.
pub fn for_packed(
    facts: &provenance::BuildFacts<'_>,
    agent: &crate::contract::release::AgentContracts,
    output: &std::path::Path,
    sha256: &[u8; 32],
    manifest_bytes: &[u8],
    signer: &mut Signer,
) -> crate::Result<Vec<(files::Kind, SigstoreBundle)>> {
    let name = output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let contract = contract::predicate(agent, &blake3::hash(manifest_bytes));
    let provenance = provenance::predicate(facts, &|k| std::env::var(k).ok());
    Ok(sign_all(&name, sha256, provenance, contract, signer)?)
}

#[cfg(test)]
mod tests;
