//! The names of the bundle format (docs/book/src/reference/format.md): the entries a
//! `.agent.bundle` holds besides the agent's own files, the signature's fixed comment and the
//! file name extension. A low module of constants only, so that the formats that must not
//! collide with them (manifest paths, the packer's file set) and the reader and writer of
//! bundles all take them from one place without importing each other.

/// The signed manifest, the bundle's first entry.
pub const MANIFEST: &str = "manifest.toml";
/// The name of the signature entry, the bundle's second.
pub const SIGNATURE_ENTRY: &str = "manifest.toml.minisig";
/// The tools file of every agent.
pub const TOOLS: &str = "tools.json";
/// The capability policy of every agent.
pub const POLICY: &str = "policy.caps";
/// The bundle's own entries besides `[files]`: no listed path may collide with them.
pub const OWN_ENTRIES: &[&str] = &[MANIFEST, SIGNATURE_ENTRY, TOOLS, POLICY];
/// The untrusted comment of every signature `bundle` writes (fixed, so packs are reproducible).
pub const UNTRUSTED_COMMENT: &str = "signature from agent-bundle";
/// The file name extension of a bundle; the packer's file-set leaves such files out.
pub const EXTENSION: &str = ".agent.bundle";
