//! The supported library API: what a runtime that loads agent bundles (a Rust host, or the
//! Python package `agent_bundle` built on it) needs, and nothing else.
//!
//! The rest of the crate serves the `bundle` command line and may change in any release; this
//! module is the surface that follows semver. It wraps the same deployment gate `bundle verify`
//! runs (`ops::gate`), so a runtime judges a bundle exactly as the command line does, with the
//! same stable reason codes.
//!
//! ```no_run
//! use agent_bundle::api::{Bundle, TrustedKeys, VerifyOptions};
//!
//! # fn main() -> Result<(), agent_bundle::api::Error> {
//! let keys = TrustedKeys::read("release.pub")?;
//! let options = VerifyOptions::new(keys).name("mailer").baseline("approved.toml");
//! // Every file comes from the bytes that were verified: the path is read once.
//! let agent = Bundle::open("mailer-1.4.0.agent.bundle")?.load(&options)?;
//! let prompt = agent.file("prompts/system.md").expect("listed in the manifest");
//! for tool in agent.verdict().tools() {
//!     println!("{} {} {}", tool.id(), tool.risk(), tool.fingerprint());
//! }
//! # let _ = prompt;
//! # Ok(())
//! # }
//! ```
//!
//! What is here: [`Bundle`] (a bundle from a file, bytes or a reader) judged with
//! [`VerifyOptions`] (trusted keys or a [`TrustPolicy`], attestation requirements, a
//! [`Keyless`] signer, name, versions, clock, state, baseline) into a [`Verdict`] (or loaded into a [`VerifiedAgent`] whose files are held
//! from the verified bytes, or opened into a [`LazyBundle`] whose files are read one at a time,
//! each decoding only its own frames and checked against the signed manifest); [`ToolContract`] and [`contract_fingerprint`] (the fingerprint the
//! gate compares); [`ContractGate`] (live tool definitions against the signed or approved
//! contracts); [`McpGuard`] (the judge of `bundle guard`, in-process); [`diff()`] of two
//! releases. Every judgement carries a [`ReasonCode`]; everything that stops a judgement is an
//! [`Error`] with a stable [`Error::code`].

#![warn(missing_docs)]

mod bundle;
mod contracts;
mod diff;
mod error;
mod keyless;
mod lazy;
mod mcp_guard;
mod policy;
mod verdict;

pub use crate::error::ErrorCode;
pub use bundle::{
    Bundle, DEFAULT_MAX_LOADED_BYTES, TrustedKeys, VerifiedAgent, VerifiedFile, VerifyOptions, time_from_unix_seconds,
};
pub use contracts::{ContractGate, DriftReport, Risk, ToolContract, ToolDrift, contract_fingerprint};
pub use diff::{ReleaseDiff, ToolChange, ToolChangeStatus, diff};
pub use error::{Error, FailureCode};
pub use keyless::Keyless;
pub use lazy::LazyBundle;
pub use mcp_guard::{GuardDecision, GuardOptions, GuardRefusal, GuardedList, McpGuard};
pub use policy::TrustPolicy;
pub use verdict::{AgentId, Finding, ReasonCode, Verdict};

#[cfg(test)]
mod tests;
