//! The flag groups several subcommands share, defined once so that they read and behave the
//! same everywhere: which agents (`check`, `lock`), which keys are trusted (`verify`,
//! `unpack`, `inspect`, `export`), and what the deployment gate requires (`verify`, `unpack`).

use std::path::PathBuf;

use agent_bundle::evidence::judge::AttestPolicy;
use agent_bundle::keyless::TrustedRoot;
use agent_bundle::ops::gate::{AttestOptions, GateOptions, PolicyOptions};
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

/// Options shared by commands that verify. What is trusted is one of three, and the usage line
/// says so: `<--key <PUBLIC_KEY>|--trusted-keys <FILE>|--trust-policy <FILE>>`.
#[derive(Debug, Default, clap::Args)]
#[command(group(clap::ArgGroup::new("trusted").args(["keys", "trusted_keys", "trust_policy"]).required(true)))]
pub struct TrustArgs {
    /// A trusted minisign public key file (repeatable).
    #[arg(long = "key", value_name = "PUBLIC_KEY")]
    pub keys: Vec<PathBuf>,
    /// A file of trusted public keys, each optionally limited to agent-name patterns; or a plain
    /// minisign public key file (one key, every agent).
    #[arg(long, value_name = "FILE", conflicts_with = "keys")]
    pub trusted_keys: Option<PathBuf>,
    /// A signed trust policy (TOML; its signatures in FILE.minisigs): named keys and
    /// certificate identities (keyless CI signers) with roles, agent patterns, validity windows
    /// and revocation, and rules such as "payments-* need 2 distinct signers, one of role
    /// security". Co-signatures are read from BUNDLE.cosig, a keyless signature from
    /// BUNDLE.sigstore.json (or --sigstore).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["keys", "trusted_keys"])]
    pub trust_policy: Option<PathBuf>,
    /// A newer version of the trust policy to follow from --trust-policy (repeatable, any
    /// order): each must be signed by a threshold of the previous version's root signers.
    #[arg(long, value_name = "FILE", requires = "trust_policy")]
    pub policy_update: Vec<PathBuf>,
    /// Read co-signatures from these files instead of BUNDLE.cosig (repeatable).
    #[arg(long = "cosignatures", value_name = "FILE", requires = "trust_policy")]
    pub cosignatures: Vec<PathBuf>,
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
    #[command(flatten)]
    pub attest: AttestArgs,
}

/// What the gate requires of attestations (verify, unpack, pull).
#[derive(Debug, Default, clap::Args)]
pub struct AttestArgs {
    /// Judge these attestations (Sigstore bundles with in-toto statements, as `pack --attest`
    /// writes them) instead of those found beside the bundle (<BUNDLE>.provenance.sigstore.json,
    /// <BUNDLE>.contract.sigstore.json). Each must be signed by a trusted key and be about the
    /// bundle's SHA-256.
    #[arg(long = "attestation", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Do not look for attestations beside the bundle.
    #[arg(long)]
    pub no_discover_attestations: bool,
    /// Require a trusted SLSA provenance attestation about the bundle (attestation_missing).
    #[arg(long)]
    pub require_provenance: bool,
    /// Require the provenance's source repository to be exactly URI (its resolved dependency
    /// `git+URI@REF`, without `git+` and `@REF`); implies --require-provenance.
    #[arg(long, value_name = "URI")]
    pub source_repo: Option<String>,
    /// Require the provenance's source ref to be exactly REF (`refs/heads/main`,
    /// `refs/tags/v1.4.0`); implies --require-provenance.
    #[arg(long, value_name = "REF")]
    pub source_ref: Option<String>,
    /// Require the provenance's `runDetails.builder.id` to be exactly ID; implies
    /// --require-provenance.
    #[arg(long, value_name = "ID")]
    pub builder_id: Option<String>,
}

impl AttestArgs {
    pub fn options(self) -> AttestOptions {
        AttestOptions {
            discover: !self.no_discover_attestations,
            files: self.files,
            policy: AttestPolicy {
                require_provenance: self.require_provenance,
                source_repo: self.source_repo,
                source_ref: self.source_ref,
                builder_id: self.builder_id,
            },
        }
    }
}

impl GateArgs {
    /// The gate's options, with the trusted `keys` (or `policy`) and the clock of `global`.
    pub fn options(self, keys: TrustedKeys, policy: Option<PolicyOptions>, global: Global) -> GateOptions {
        // A deployment gate under a policy remembers the newest version it followed only in a
        // state file: without one, an older version offered later is believed again.
        if policy.as_ref().is_some_and(|p| p.require_threshold) && self.state.is_none() {
            super::output::status(
                global,
                "warning: --trust-policy without --state: the newest policy version followed is not remembered, so an older one (before a revocation) would be believed next time; add --state FILE",
            );
        }
        GateOptions {
            keys,
            name: self.name,
            min_version: self.min_version,
            now: global.now(),
            state: self.state,
            baseline: self.baseline,
            attest: self.attest.options(),
            policy,
            keyless: None,
            model_root: None,
        }
    }
}

/// `SOURCE_DATE_EPOCH` (reproducible-builds.org), if set: the time recorded in what a command
/// writes instead of the clock's, so that the same inputs give the same bytes.
pub fn source_date_epoch() -> anyhow::Result<Option<u64>> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(Some)
            .map_err(|_| anyhow::anyhow!("SOURCE_DATE_EPOCH must be a whole number of seconds, not `{v}`")),
        Err(_) => Ok(None),
    }
}

/// `--trusted-root` of the commands that read an agent or a bundle outside the deployment gate's
/// flags (`check`, `pack`, `inspect`, `diff`, `baseline`, `export`, `agentcard`, `attest`,
/// `cosign`): the root a `[[models]]` entry's Sigstore identity is judged under. It means what
/// `verify --trusted-root` means for models; without it such a model is refused, never shown
/// as checked.
#[derive(Debug, Default, clap::Args)]
pub struct ModelRootArgs {
    /// The Sigstore trusted_root.json a `[[models]]` entry's identity is judged against
    /// (`gh attestation trusted-root`, or sigstore's TUF repository); never downloaded. Without
    /// it, a model signed with a Sigstore identity is refused (`model_trusted_root_missing`).
    #[arg(long, value_name = "FILE")]
    pub trusted_root: Option<PathBuf>,
}

impl ModelRootArgs {
    /// The root, read and prepared (exit 2 if it cannot be).
    pub fn load(&self) -> anyhow::Result<Option<TrustedRoot>> {
        Ok(self.trusted_root.as_deref().map(TrustedRoot::read).transpose()?)
    }
}
