//! `bundle guard`: a live contract gate between an MCP client and an MCP server. The client
//! sees only the tools the release signed (`pins/<server>.mcp.json`), exactly as signed, and
//! can call only those, with arguments their signed schemas allow.
//!
//! The judge ([`judge`]) and the session's rules ([`session`]) are pure; the transports
//! ([`stdio`], [`http`]) move bytes and keep every peer within the caps ([`frame`]); the codes of every
//! decision are in [`reason`].

pub mod frame;
pub mod http;
pub mod judge;
pub mod pins;
pub mod reason;
pub mod session;
pub mod signals;
pub mod stdio;

pub use judge::{Decision, Judge, OnDrift, Policy};
pub use reason::GuardReason;
