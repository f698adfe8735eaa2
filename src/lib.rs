//! agent-bundle: check, lock, sign, pack and verify AI agent release bundles.
//!
//! The `bundle` command line lives here too (`cli`, private), so that the compiler sees the
//! whole program: what neither the command line nor the tests, fuzz targets and examples use
//! is dead code. Only the modules those outside users need are public.
//!
//! **The supported library API is [`api`]**: open a bundle, run the deployment gate `bundle
//! verify` runs, read its files from the verified bytes, compare live tools with the signed
//! contracts. It follows semver; everything else is internal and may change in any release.

// The command line names the library by its crate name, as the binary did.
extern crate self as agent_bundle;

pub(crate) mod admission;
pub(crate) mod agent;
// The supported API, documented item by item (`#![warn(missing_docs)]` inside). The other
// public modules serve the command line, tests, fuzz targets and xtask: hidden from the docs,
// outside semver.
pub mod api;
#[doc(hidden)]
pub mod archive;
pub(crate) mod atomic;
#[doc(hidden)]
pub mod attest;
pub(crate) mod blake3_tree;
#[doc(hidden)]
pub mod bundle;
pub(crate) mod canonical;
mod cli;
mod codes;
#[doc(hidden)]
pub mod contract;
#[doc(hidden)]
pub mod diagnostic;
pub(crate) mod digest;
pub(crate) mod entries;
#[doc(hidden)]
pub mod error;
pub(crate) mod error_code;
#[doc(hidden)]
pub mod evidence;
pub(crate) mod fetch;
pub(crate) mod fileset;
pub(crate) mod formats;
#[doc(hidden)]
pub mod guard;
pub(crate) mod handoff;
pub(crate) mod hasher;
pub(crate) mod json;
#[doc(hidden)]
pub mod keyless;
#[doc(hidden)]
pub mod keys;
#[doc(hidden)]
pub mod limits;
#[doc(hidden)]
pub mod manifest;
#[doc(hidden)]
pub mod mcp_client;
pub(crate) mod mcp_process;
#[doc(hidden)]
pub mod minisign;
#[doc(hidden)]
pub mod oci;
#[doc(hidden)]
pub mod ops;
#[doc(hidden)]
pub mod paths;
pub(crate) mod policy;
#[doc(hidden)]
pub mod progress;
pub(crate) mod read_ahead;
pub(crate) mod read_full;
#[doc(hidden)]
pub mod regular_file;
#[doc(hidden)]
pub mod rejection;
pub(crate) mod schemas;
pub(crate) mod sha256_read;
pub(crate) mod signed_json;
#[doc(hidden)]
pub mod skill;
pub(crate) mod state;
#[doc(hidden)]
pub mod timestamp;
pub(crate) mod tools;
#[doc(hidden)]
pub mod trust;
#[doc(hidden)]
pub mod trust_policy;
pub(crate) mod workers;
pub(crate) mod yaml_depth;

#[doc(hidden)]
pub use cli::main;
#[doc(hidden)]
pub use error::{Coded, Error, ErrorCode, Result};
