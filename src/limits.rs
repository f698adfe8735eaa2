//! Every cap on what `bundle` reads, in one place (docs/FORMAT.md §2.8 and §6, SECURITY.md).
//!
//! Each input is hostile until checked, so each has a size cap that is enforced while reading
//! (never after reading the whole file) and, where a small file can describe a large structure,
//! a cap on that structure, enforced while parsing. Any input within these caps is handled in
//! bounded memory and time by every command; `pack` refuses what `verify` would refuse.

pub use crate::bundle::{MAX_JSON_BYTES, MAX_JSON_TOTAL, MAX_MANIFEST_BYTES, MAX_SIGNATURE_BYTES};
pub use crate::json::{MAX_DEPTH as MAX_JSON_DEPTH, MAX_VALUES as MAX_JSON_VALUES};

/// The largest policy.caps (held in memory by `bundle verify` like the JSON files).
pub const MAX_POLICY_BYTES: u64 = MAX_JSON_BYTES;
/// The largest `.bundleignore`.
pub const MAX_BUNDLEIGNORE_BYTES: u64 = 1 << 20;
/// The most keys, values and table headers in one manifest.toml, counted before parsing (as
/// the `=`, `,`, `[` and `{` outside strings and comments); a lock of 10 000 files needs about
/// 60 000.
pub const MAX_TOML_ITEMS: usize = 200_000;
/// The largest file `bundle import` reads (a RAP document, an agentcli manifest, an OpenAI or
/// MCP tool list, one Rune descriptor): the same as a fetched RAP body.
pub const MAX_IMPORT_BYTES: u64 = crate::fetch::BODY_LIMIT;
/// The deepest nesting in a Rune descriptor (YAML), checked before parsing.
pub const MAX_YAML_DEPTH: usize = 64;
/// The largest `--state` file.
pub const MAX_STATE_BYTES: u64 = 16 << 20;
/// The largest baseline file (`bundle baseline`, `verify --baseline`).
pub const MAX_BASELINE_BYTES: u64 = 16 << 20;
/// The largest Rune tool descriptor (one tool's YAML): YAML parsing holds every event of the
/// document at once, so this cap is smaller than the JSON one.
pub const MAX_RUNE_DESCRIPTOR_BYTES: u64 = 256 << 10;
