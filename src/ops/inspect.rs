//! `bundle inspect`: what a bundle holds, read through the one way in ([`super::input`]).
//! Expiry is shown, not enforced: inspecting an expired bundle is how one finds out why.

use crate::bundle::verify::{self, Discard, Expect, Refused, Rejection, Trust, Verified};
use crate::contract::{Contract, ContractError, release};
use crate::evidence::judge::{self, Judged};
use crate::evidence::{self, files};
use crate::ops::input::{BundleSource, InputError, RegistryConfig};
use crate::progress::Silent;
use crate::trust::TrustedKeys;

/// What `inspect` found.
#[derive(Debug)]
pub enum Inspected {
    /// The bundle was read (its signature checked only with keys).
    Bundle {
        verified: Box<Verified>,
        contracts: Result<Vec<Contract>, ContractError>,
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
pub fn inspect(source: &BundleSource, keys: Option<&TrustedKeys>) -> Result<Inspected, InputError> {
    if keys.is_none() && matches!(source, BundleSource::Registry { .. }) {
        return Ok(match source.config()? {
            Ok(config) => Inspected::Config(Box::new(config)),
            Err(rejection) => Inspected::Refused(rejection),
        });
    }
    // The attestations: beside a file, or the referrers of a registry artifact (with the
    // layer's SHA-256), fetched before its layer.
    let mut attached: (Vec<(String, Vec<u8>)>, String) = (Vec::new(), String::new());
    if let BundleSource::File(path) = source {
        attached = files::read_beside(path).map_err(|e| InputError::File { path: path.clone(), source: e })?;
    }
    let keep = |before: crate::oci::BeforeLayer| {
        let attestations = before
            .referrers
            .into_iter()
            .filter(|f| files::ARTIFACT_TYPES.contains(&f.artifact_type.as_str()))
            .map(|f| (f.source, f.bytes))
            .collect();
        attached = (attestations, before.sha256);
        Ok(())
    };
    let input = match source.open_judged(&Silent, false, keep)? {
        Ok(input) => input,
        Err(rejection) => return Ok(Inspected::Refused(rejection)),
    };
    let trust = keys.map_or(Trust::Unchecked, Trust::Keys);
    let judged = input.judge(|bytes| {
        Ok::<_, InputError>(
            verify::verify(bytes, trust, &Expect::default(), &mut Discard).map_err(Refused::into_rejection),
        )
    })?;
    Ok(match judged {
        Ok(verified) => {
            let agent = release::from_verified(&verified, &source.label());
            let predicate = agent
                .as_ref()
                .map(|a| evidence::contract::predicate(a, &verified.manifest_blake3))
                .map_err(|e| e.to_string());
            let attestations = judge::describe(
                &attached.0,
                &attached.1,
                keys,
                Some((&verified.manifest.name, predicate.as_ref().map_err(Clone::clone))),
            );
            let skills = agent.as_ref().map(|a| a.skills.clone()).unwrap_or_default();
            let contracts = agent.map(|a| a.contracts);
            Inspected::Bundle { verified: Box::new(verified), contracts, attestations, skills }
        }
        Err(rejection) => Inspected::Refused(rejection),
    })
}
