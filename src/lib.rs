//! agent-bundle: check, lock, sign, pack and verify AI agent release bundles.
//!
//! The `bundle` command line lives here too (`cli`, private), so that the compiler sees the
//! whole program: what neither the command line nor the tests, fuzz targets and examples use
//! is dead code. Only the modules those outside users need are public.

// The command line names the library by its crate name, as the binary did.
extern crate self as agent_bundle;

pub(crate) mod agent;
pub mod archive;
pub(crate) mod atomic;
pub mod attest;
pub mod bundle;
mod cli;
mod codes;
pub mod contract;
pub mod diagnostic;
pub(crate) mod digest;
pub mod error;
pub mod evidence;
pub(crate) mod fetch;
pub(crate) mod fileset;
pub(crate) mod formats;
pub(crate) mod hasher;
pub(crate) mod json;
pub mod keyless;
pub mod keys;
pub mod limits;
pub mod manifest;
pub mod mcp_client;
pub mod minisign;
pub mod oci;
pub mod ops;
pub mod paths;
pub(crate) mod policy;
pub mod progress;
pub(crate) mod read_full;
pub mod regular_file;
pub(crate) mod schemas;
pub(crate) mod state;
pub mod timestamp;
pub(crate) mod tools;
pub mod trust;
pub mod trust_policy;

pub use cli::main;
pub use error::{Coded, Error, ErrorCode, Result};
