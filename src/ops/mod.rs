//! Operations: what each subcommand does, as library functions that return results for the
//! CLI to render. They never print and never exit.
//!
//! Operations build on the layers below them (`agent`, `bundle`, `contract`, the formats and
//! mechanisms) and on three shared steps, never on each other (tests/cli/architecture.rs keeps
//! the graph of these modules without a cycle): [`input`] is the one way in for a bundle and
//! its evidence (a file or a registry artifact), [`gate`] the deployment gate that every
//! consumer of a bundle (`verify`, `unpack`, `pull`, `cosign`, the API) runs on it, so those
//! call it rather than repeat it; `contracts` reads a release's contracts from a file or
//! folder for `diff` and `baseline`.

pub(crate) mod attest;
pub(crate) mod baseline;
pub(crate) mod check;
pub(crate) mod contracts;
pub(crate) mod cosign;
pub(crate) mod diff;
pub(crate) mod export;
pub mod gate;
pub mod guard;
pub(crate) mod import;
pub(crate) mod init;
pub mod input;
pub(crate) mod inspect;
pub(crate) mod keygen;
pub(crate) mod lock;
pub mod pack;
pub(crate) mod pubkey;
pub(crate) mod pull;
pub(crate) mod push;
pub(crate) mod tool_add;
pub(crate) mod tool_list;
pub(crate) mod tool_remove;
pub(crate) mod trust;
pub(crate) mod unpack;
pub(crate) mod verify;
