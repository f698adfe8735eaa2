//! Integration tests: run the real `bundle` binary against the fixtures in testdata/.
//!
//! One test binary (STYLE.md); submodules group the commands.

mod support;

mod bundle;
mod check;
mod crash;
mod docs;
mod freshness;
mod hostile;
mod lock;
mod properties;
mod schemas;
