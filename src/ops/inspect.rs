//! `bundle inspect`: what a bundle holds, read through the one way in ([`super::input`]).
//! Expiry is shown, not enforced: inspecting an expired bundle is how one finds out why.

use crate::bundle::verify::{self, Discard, Expect, Rejection, Trust, Verified, VerifyError};
use crate::contract::release::PinnedServer;
use crate::contract::{Contract, ContractError, release};
use crate::evidence;
use crate::evidence::judge::{self, Judged};
use crate::keyless::TrustedRoot;
use crate::ops::input::{BundleSource, InputError, RegistryConfig, Wanted};
use crate::progress::Silent;
use crate::sha256_read::Sha256Read;
use crate::trust::TrustedKeys;

/// What `inspect` found.
#[derive(Debug)]
pub enum Inspected {
    /// The bundle was read (its signature checked only with keys).
    Bundle {
        verified: Box<Verified>,
        contracts: Result<Vec<Contract>, ContractError>,
        /// The pinned MCP servers (manifest.toml `[pins]`, `format = "mcp"`).
        pins: Result<Vec<PinnedServer>, ContractError>,
        /// The attestations beside the file, or a registry artifact's referrers, each judged.
        attestations: Vec<Judged>,
        /// The agent's skills (`skills/<name>/`), by name.
        skills: Vec<crate::skill::facts::SkillFacts>,
    },
    /// A registry artifact shown from its manifest and config (no keys: the bundle is not
    /// downloaded; nothing in the config is checked).
    Config(Box<RegistryConfig>),
    /// The bundle, or the registry's artifact, was refused.
    Refused(Rejection),
}

/// Inspects the bundle `source` names: every digest and the archive's safety are checked, the
/// signature only against `keys`. A registry artifact without `keys` is shown from its config.
/// A `[[models]]` identity is judged under `model_root`, and the bundle refused without one
/// (`model_trusted_root_missing`), as `verify` refuses it: a model signature is never shown as
/// checked when it was not.
pub fn inspect(
    source: &BundleSource,
    keys: Option<&TrustedKeys>,
    model_root: Option<&TrustedRoot>,
) -> Result<Inspected, InputError> {
    if keys.is_none() && matches!(source, BundleSource::Registry { .. }) {
        return Ok(match source.config()? {
            Ok(config) => Inspected::Config(Box::new(config)),
            Err(rejection) => Inspected::Refused(rejection),
        });
    }
    // The attestations: beside a file, or the referrers of a registry artifact, gathered with
    // the bundle; judged against the SHA-256 of the bytes read (a registry layer's is bound to
    // its descriptor's digest before they are).
    let wanted = Wanted { discover_attestations: true, ..Wanted::default() };
    let mut input = match source.open(&Silent, &wanted)? {
        Ok(input) => input,
        Err(rejection) => return Ok(Inspected::Refused(rejection)),
    };
    let evidence = input.take_evidence();
    let label = source.label();
    let mut attached: Vec<(String, Vec<u8>)> = evidence.attestations.into_iter().map(|p| (p.source, p.bytes)).collect();
    // A registry's attestation referrers, fetched to be shown (inspect lists every one).
    for listed in &evidence.referred {
        match input.fetch_referred(listed)? {
            Ok(piece) => attached.push((piece.source, piece.bytes)),
            Err(rejection) => return Ok(Inspected::Refused(rejection)),
        }
    }
    let trust = keys.map_or(Trust::Unchecked, Trust::Keys);
    let hash = evidence.sha256.is_none() && !attached.is_empty();
    let judged = input.judge(|bytes| {
        let mut bytes = Sha256Read::new(bytes, hash);
        let expect = Expect { model_root, ..Expect::default() };
        let verified = verify::verify(&mut bytes, trust, &expect, &mut Discard);
        let sha256 = bytes.finish().map_err(|e| InputError::File { path: label.clone(), source: e })?;
        Ok::<_, InputError>(verified.map(|v| (v, sha256.or(evidence.sha256))))
    })?;
    Ok(match judged {
        Ok((verified, sha256)) => {
            let agent = release::from_verified(&verified, &source.label());
            let predicate = agent
                .as_ref()
                .map(|a| evidence::contract::predicate(a, &verified.manifest_blake3))
                .map_err(|e| e.to_string());
            let attestations = judge::describe(
                &attached,
                &sha256.map(hex::encode).unwrap_or_default(),
                keys,
                Some((&verified.manifest.name, predicate.as_ref().map_err(Clone::clone))),
            );
            let skills = agent.as_ref().map(|a| a.skills.clone()).unwrap_or_default();
            let contracts = agent.map(|a| a.contracts);
            let pins = crate::agent::pins::mcp::pins_of(&verified);
            Inspected::Bundle { verified: Box::new(verified), contracts, pins, attestations, skills }
        }
        Err(VerifyError::Refused(refused)) => Inspected::Refused(refused.into_rejection()),
        Err(VerifyError::Io(failed)) => return Err(InputError::File { path: label, source: failed.source }),
    })
}
