//! tools.json version 1: the host tools an agent may call (seed 000, "Tool Attachments").
//!
//! `validate` walks the raw JSON and reports every broken rule
//! (docs/book/src/reference/tools-json.md); `model` is the typed view the rest of the program uses
//! once a file has passed.

pub mod credentials;
pub mod meta_schema;
pub mod model;
pub mod rules;
pub mod schema_refs;
pub mod summary;
pub mod validate;

pub use model::{Tool, ToolsFile, Transport};
pub use schema_refs::{AgentFiles, REF_PREFIX, Resolved, Resolver};
pub use validate::{SUPPORTED_VERSION, ValidTools, validate};

/// Where a tool's tools.json lives inside an agent folder.
pub const FILE_NAME: &str = crate::entries::TOOLS;
