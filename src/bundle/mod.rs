//! The bundle format: the names, order and size limits of the entries a `.agent.bundle` holds
//! (docs/book/src/reference/format.md), and the streaming [`verify`]er that reads one. The packer
//! writes what this module names and the verifier accepts no more, so both take the constants from
//! here.

pub mod file;
mod models;
pub mod open;
mod refused;
mod signature;
pub mod verify;

/// The format's names live in a low module of their own (`crate::entries`).
pub use crate::entries::{EXTENSION, OWN_ENTRIES, SIGNATURE_ENTRY, UNTRUSTED_COMMENT};

/// Largest JSON file (tools.json, schemas) held in memory for re-validation, and the total.
pub use crate::limits::MAX_JSON_BYTES;
pub use crate::limits::MAX_JSON_TOTAL;
/// Largest manifest.toml accepted (read into memory before anything is trusted).
pub use crate::limits::MAX_MANIFEST_BYTES;
/// Largest signature file accepted.
pub use crate::limits::MAX_SIGNATURE_BYTES;

/// Whether an entry is held for re-validation (FORMAT §6 step 13), given the bytes of other
/// JSON files held before it: tools.json and policy.caps always (within [`MAX_JSON_BYTES`]);
/// other JSON files (schemas tools.json may reference) while they fit [`MAX_JSON_TOTAL`].
pub fn is_held(path: &str, size: u64, held_total: u64) -> bool {
    let named = path == crate::tools::FILE_NAME || path == crate::policy::FILE_NAME;
    // A skill's SKILL.md is held like a schema (within the same total): inspect and diff show
    // the skill's front matter.
    let other = path.ends_with(".json") || crate::skill::is_skill_md(path);
    size <= MAX_JSON_BYTES && (named || (other && held_total + size <= MAX_JSON_TOTAL))
}

/// The entries verify holds, for files in bundle order: what `pack` checks schemas against.
pub fn held_paths<'p>(files: impl IntoIterator<Item = (&'p str, u64)>) -> std::collections::HashSet<&'p str> {
    let mut total = 0;
    let mut held = std::collections::HashSet::new();
    for (path, size) in files {
        if is_held(path, size, total) {
            if path != crate::tools::FILE_NAME && path != crate::policy::FILE_NAME {
                total += size;
            }
            held.insert(path);
        }
    }
    held
}

/// The file name `bundle pack` writes when not told otherwise: `<name>-<version>.agent.bundle`.
pub fn default_file_name(name: &str, version: &str) -> String {
    format!("{name}-{version}{EXTENSION}")
}
