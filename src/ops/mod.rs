//! Operations: what each subcommand does, as library functions that return results for the
//! CLI to render. They never print and never exit.
//!
//! Operations build on the layers below them (`agent`, `bundle`, `contract`, the formats and
//! mechanisms), never on each other, with one exception by design: [`gate`] is the deployment
//! gate that every consumer of a bundle (`verify`, `unpack`, a registry pull) must run, so
//! those call it rather than repeat it. `contracts` is not an operation but a step two of
//! them (`diff`, `baseline`) share: reading a release's contracts from a file or folder.

pub(crate) mod attest;
pub(crate) mod baseline;
pub(crate) mod cat;
pub(crate) mod check;
pub(crate) mod contracts;
pub(crate) mod cosign;
pub(crate) mod diff;
pub(crate) mod export;
pub mod gate;
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
