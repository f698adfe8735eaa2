//! Integration tests: run the real `bundle` binary against the fixtures in testdata/.
//!
//! One test binary (STYLE.md); submodules group the commands.

mod snapshot;
mod support;

mod agentcard;
mod architecture;
mod attest;
mod baseline;
mod book;
mod bundle;
mod check;
mod commands;
mod crash;
mod diff;
mod docs;
mod edges;
mod editors;
mod export;
mod first_hour;
mod freshness;
mod guard;
mod hardening;
mod hostile;
mod import;
mod keyless;
mod keyless_signers;
mod keys;
mod lock;
mod mcp;
mod mcp_pin;
mod mcpb;
mod monorepo;
mod network;
mod newcomer;
mod oci;
mod openai;
mod output;
mod pin;
mod pipeline;
mod precommit;
mod properties;
mod public_api;
mod read_ahead;
mod registry;
mod schemas;
mod scripts;
mod signers;
mod skills;
mod stat_cache;
mod tls;
mod tool;
