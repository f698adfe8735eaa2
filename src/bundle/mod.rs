//! The bundle format: the names, order and size limits of the entries a `.agent.bundle` holds
//! (docs/book/src/reference/format.md), and the streaming [`verify`]er that reads one. The packer
//! writes what this module names and the verifier accepts no more, so both take the constants from
//! here.

mod rejection;
pub mod verify;

/// The name of the signature entry, the bundle's second.
pub const SIGNATURE_ENTRY: &str = "manifest.toml.minisig";
/// The untrusted comment of every signature `bundle` writes (fixed, so packs are reproducible).
pub const UNTRUSTED_COMMENT: &str = "signature from agent-bundle";
/// The file name extension of a bundle; the packer's file-set leaves such files out.
pub const EXTENSION: &str = ".agent.bundle";

/// Largest manifest.toml accepted (read into memory before anything is trusted).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Largest signature file accepted.
pub const MAX_SIGNATURE_BYTES: u64 = 4096;
/// Largest JSON file (tools.json, schemas) held in memory for re-validation, and the total.
pub const MAX_JSON_BYTES: u64 = 4 << 20;
pub const MAX_JSON_TOTAL: u64 = 16 << 20;

/// The file name `bundle pack` writes when not told otherwise: `<name>-<version>.agent.bundle`.
pub fn default_file_name(name: &str, version: &str) -> String {
    format!("{name}-{version}{EXTENSION}")
}
