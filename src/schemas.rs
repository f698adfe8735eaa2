//! The published JSON Schemas (schemas/ at the repository root), built into the binary so that
//! `bundle schema` hands editors exactly the rules of the `bundle` that will check the files.

/// JSON Schema of tools.json version 1 (`$id` <https://agent-bundle.dev/schemas/tools.v1.schema.json>).
pub const TOOLS_V1: &str = include_str!("../schemas/tools.v1.schema.json");

/// JSON Schema of manifest.toml format 1, for TOML tools that validate against JSON Schema.
pub const MANIFEST_V1: &str = include_str!("../schemas/manifest.v1.schema.json");

/// JSON Schema of the agent-contract predicate of `pack --attest` (`$id`
/// <https://agent-bundle.dev/schemas/agent-contract.v1.schema.json>), for policy engines.
pub const AGENT_CONTRACT_V1: &str = include_str!("../schemas/agent-contract.v1.schema.json");
