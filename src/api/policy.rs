//! A signed trust policy as the gate takes it (`bundle verify --trust-policy`): named keys with
//! roles, agent patterns, validity windows and revocation, and rules such as "payments-* need 2
//! distinct keys, one of role security". The format and its rules are the book's "Two-person
//! release" guide; this file only reads it for [`crate::api::VerifyOptions::with_trust_policy`].

use std::path::Path;

use super::error::Error;
use crate::error::ErrorCode;
use crate::trust_policy::chain::SignedPolicy;

/// A trust policy with its signatures (`FILE.minisigs`), read but not yet trusted: the gate
/// checks its root signatures, follows the newer versions given with
/// [`crate::api::VerifyOptions::policy_update`], and refuses every bundle (`policy_untrusted`,
/// `policy_expired`, ...) when no version can be followed.
#[derive(Debug, Clone)]
pub struct TrustPolicy(pub(crate) SignedPolicy);

impl TrustPolicy {
    /// Reads a policy file and its signatures beside it (`FILE.minisigs`; none when absent), as
    /// `--trust-policy FILE` does. A policy that is not valid is an [`Error`] with code
    /// `policy_error`; a file that cannot be read, `io_error`.
    pub fn read(path: impl AsRef<Path>) -> Result<TrustPolicy, Error> {
        crate::ops::trust::read_signed(path.as_ref()).map(TrustPolicy).map_err(|e| Error::coded(&e))
    }

    /// A policy given as text (`policy`, the TOML document) with the text of its signatures
    /// file (`signatures`, the `FILE.minisigs` lines; empty for none), for a runtime that keeps
    /// its configuration elsewhere than in files.
    pub fn parse(policy: &str, signatures: &str) -> Result<TrustPolicy, Error> {
        let parsed = crate::trust_policy::TrustPolicy::parse(policy)
            .map_err(|e| Error::failed(ErrorCode::PolicyError, format!("not a usable trust policy:\n{e}")))?;
        let signatures = if signatures.trim().is_empty() {
            Vec::new()
        } else {
            crate::trust_policy::signatures::parse(signatures)
                .map_err(|why| Error::failed(ErrorCode::PolicyError, format!("the policy's signatures: {why}")))?
        };
        Ok(TrustPolicy(SignedPolicy {
            origin: "<policy text>".to_owned(),
            bytes: policy.as_bytes().to_vec(),
            policy: parsed,
            signatures,
        }))
    }

    /// The policy's `id`.
    pub fn id(&self) -> &str {
        &self.0.policy.id
    }

    /// The policy's `version`.
    pub fn version(&self) -> u64 {
        self.0.policy.version
    }
}
