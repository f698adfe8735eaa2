//! Integration tests: run the real `bundle` binary against the fixtures in testdata/.
//!
//! One test binary (STYLE.md); submodules group the commands.

mod support;

mod baseline;
mod bundle;
mod check;
mod diff;
mod docs;
mod editors;
mod export;
mod hostile;
mod import;
mod lock;
mod pipeline;
mod precommit;
mod schemas;
mod tool;
