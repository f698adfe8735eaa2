//! agent-bundle: check, lock, sign, pack and verify AI agent release bundles.

pub mod agent;
pub mod archive;
pub mod atomic;
pub mod bundle;
pub mod contract;
pub mod diagnostic;
pub mod digest;
pub mod error;
pub mod fetch;
pub mod fileset;
pub mod formats;
pub mod hasher;
pub mod json;
pub mod keys;
pub mod limits;
pub mod manifest;
pub mod mcp_client;
pub mod minisign;
pub mod oci;
pub mod ops;
pub mod paths;
pub mod policy;
pub mod progress;
pub mod regular_file;
pub mod schemas;
pub mod state;
pub mod timestamp;
pub mod tools;
pub mod trust;

pub use error::{Error, Result};
