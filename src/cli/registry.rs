//! The registry options that `verify`, `inspect`, `unpack`, `push` and `pull` share, and the
//! bundle input they name (a file or an `oci://` reference, [`BundleSource`]).

use std::path::{Path, PathBuf};

use agent_bundle::oci;
use agent_bundle::ops::input::BundleSource;

/// How to reach a registry.
#[derive(Debug, clap::Args)]
pub struct RegistryArgs {
    /// Talk to the registry over plain http, without TLS (a registry on a trusted network or
    /// loopback only). Never chosen automatically.
    #[arg(long)]
    pub plain_http: bool,
    /// Also trust the root certificates in this PEM file (a registry with a private CA);
    /// repeatable.
    #[arg(long = "ca-cert", value_name = "PEM")]
    pub ca_certs: Vec<PathBuf>,
    /// Give up on the registry after this many seconds for the whole operation (connecting,
    /// the manifest, the whole layer); a registry that sends nothing for 60 s is given up
    /// sooner. Exit 2 with `timeout`.
    #[arg(long, value_name = "SECS", default_value_t = agent_bundle::limits::REGISTRY_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
}

impl RegistryArgs {
    /// The client options.
    pub fn options(&self) -> oci::Options {
        oci::Options {
            plain_http: self.plain_http,
            ca_certs: self.ca_certs.clone(),
            chunk_size: None,
            timeout: Some(std::time::Duration::from_secs(self.timeout)),
        }
    }

    /// The bundle `input` names: a file, or a registry artifact reached with these options.
    pub fn source(&self, input: &Path) -> anyhow::Result<BundleSource> {
        Ok(BundleSource::new(input, self.options())?)
    }
}
