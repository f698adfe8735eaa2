//! Operations: what each subcommand does, as library functions that return results for the
//! CLI to render. They never print and never exit.

pub mod baseline;
pub mod check;
pub mod diff;
pub mod export;
pub mod gate;
pub mod import;
pub mod init;
pub mod keygen;
pub mod lock;
pub mod pack;
pub mod pubkey;
pub mod pull;
pub mod push;
pub mod tool_add;
pub mod tool_list;
pub mod tool_remove;
pub mod unpack;
