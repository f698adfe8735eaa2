//! `bundle inspect`: what a bundle holds, read through the one way in ([`super::input`]).
//! Expiry is shown, not enforced: inspecting an expired bundle is how one finds out why.

use crate::bundle::verify::{self, Discard, Expect, Rejection, Trust, Verified};
use crate::contract::{Contract, ContractError, release};
use crate::ops::input::{BundleSource, InputError, RegistryConfig};
use crate::progress::Silent;
use crate::trust::TrustedKeys;

/// What `inspect` found.
#[derive(Debug)]
pub enum Inspected {
    /// The bundle was read (its signature checked only with keys).
    Bundle { verified: Box<Verified>, contracts: Result<Vec<Contract>, ContractError> },
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
    let input = match source.open(&Silent)? {
        Ok(input) => input,
        Err(rejection) => return Ok(Inspected::Refused(rejection)),
    };
    let trust = keys.map_or(Trust::Unchecked, Trust::Keys);
    let judged =
        input.judge(|bytes| Ok::<_, InputError>(verify::verify(bytes, trust, &Expect::default(), &mut Discard)))?;
    Ok(match judged {
        Ok(verified) => {
            let contracts = release::from_verified(&verified, &source.label()).map(|a| a.contracts);
            Inspected::Bundle { verified: Box::new(verified), contracts }
        }
        Err(rejection) => Inspected::Refused(rejection),
    })
}
