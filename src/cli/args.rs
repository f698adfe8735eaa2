//! The flag groups several subcommands share, defined once so that they read and behave the
//! same everywhere: which agents (`check`, `lock`), which keys are trusted (`verify`,
//! `unpack`, `inspect`, `export`), and what the deployment gate requires (`verify`, `unpack`).

use std::path::PathBuf;

use agent_bundle::ops::gate::GateOptions;
use agent_bundle::trust::TrustedKeys;

use super::{Format, Global};

/// The agent folders `check` and `lock` work on, and how they print.
#[derive(Debug, clap::Args)]
pub struct Targets {
    /// Agent folders, or folders of agent folders: every agent below them, at any depth, sorted
    /// (default: ., whose agents/ when it has one)
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

impl Targets {
    /// The paths given, or `.`.
    pub fn paths(&self) -> Vec<PathBuf> {
        if self.paths.is_empty() { vec![".".into()] } else { self.paths.clone() }
    }
}

/// Options shared by commands that verify.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// A trusted minisign public key file (repeatable).
    #[arg(long = "key", value_name = "PUBLIC_KEY", required_unless_present = "trusted_keys")]
    pub keys: Vec<PathBuf>,
    /// A file of trusted public keys, each optionally limited to agent-name patterns; or a plain
    /// minisign public key file (one key, every agent).
    #[arg(long, value_name = "FILE", conflicts_with = "keys")]
    pub trusted_keys: Option<PathBuf>,
}

/// What a deployment gate requires beyond a trusted signature (verify and unpack).
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// Also require the bundle to be this agent.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Reject a bundle older than one accepted before (`rollback`): FILE records the highest
    /// version accepted per agent and signing key, and is updated atomically on success.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Reject a bundle whose version is lower than this (`rollback`).
    #[arg(long, value_name = "VERSION", value_parser = semver::Version::parse)]
    pub min_version: Option<semver::Version>,
    /// Also require every tool contract to match this approved baseline (see `bundle
    /// baseline`); a folder of baselines (`baselines/`) gives each agent its `<agent>.toml`.
    #[arg(long, value_name = "FILE|DIR")]
    pub baseline: Option<PathBuf>,
}

impl GateArgs {
    /// The gate's options, with the trusted `keys` and the clock of `global`.
    pub fn options(self, keys: TrustedKeys, global: Global) -> GateOptions {
        GateOptions {
            keys,
            name: self.name,
            min_version: self.min_version,
            now: global.now(),
            state: self.state,
            baseline: self.baseline,
            keyless: None,
        }
    }
}
