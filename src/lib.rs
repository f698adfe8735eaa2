//! agent-bundle: check, lock, sign, pack and verify AI agent release bundles.

pub mod agent;
pub mod archive;
pub mod atomic;
pub mod bundle;
mod codes;
pub mod contract;
pub mod diagnostic;
pub(crate) mod digest;
pub(crate) mod error;
pub mod fetch;
pub(crate) mod fileset;
pub(crate) mod formats;
pub(crate) mod hasher;
pub(crate) mod json;
pub mod manifest;
pub mod minisign;
pub mod ops;
pub(crate) mod paths;
pub(crate) mod policy;
pub mod progress;
pub mod schemas;
pub(crate) mod state;
pub mod timestamp;
pub mod tools;
pub mod trust;

pub use error::{Error, Result};
