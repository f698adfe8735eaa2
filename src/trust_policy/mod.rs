//! Many signers: the trust policy (`--trust-policy`) that says which keys may sign which
//! agents and how many distinct ones each agent needs, the files of several signatures
//! (co-signatures beside a bundle, the signatures of a policy), and rotation of the policy
//! itself along a signed chain of versions.
//!
//! [`format`] is the policy file; [`authenticate`] then [`judge`] apply it to a bundle's
//! signatures (authenticate, bind to the file, count); [`chain`] decides which version of the
//! policy to follow; [`signatures`] reads and writes files of several minisign signatures;
//! [`bound`] judges a registry's co-signatures before the bundle's layer is fetched; [`keys`]
//! lends the policy's keys to the attestation judgement. The one-key `--trusted-keys` file
//! stays in [`crate::trust`].

pub mod authenticate;
pub mod bound;
pub mod chain;
pub mod format;
pub mod judge;
pub mod keys;
pub mod signatures;

pub use authenticate::{Authenticated, Bound, FileDigest, KeylessOffer};
pub use chain::{ChainError, ChainFault, ChainReport, SignedPolicy};
pub use format::{PolicyError, Signer, SignerId, TrustPolicy};
pub use judge::{Refusal, SignatureStatus, SignatureVerdict, SignersVerdict};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_chain;
