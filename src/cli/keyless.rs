//! The keyless-signer flags of `bundle verify` (`--sigstore` and the identity policy), named
//! as cosign names them where it has the flag.

use std::path::PathBuf;
use std::sync::Arc;

use agent_bundle::keyless::{
    ClaimMatch, Field, Given, IdentityPolicy, IdentityPolicyError, Requirement, SigstoreBundle, TrustedRoot,
};

/// Require a keyless (Sigstore) signature over the bundle file, judged offline.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Keyless signer (Sigstore, offline)")]
pub struct KeylessArgs {
    /// A Sigstore bundle (`cosign sign-blob --bundle`, `sigstore sign`, a GitHub artifact
    /// attestation) that signs the bundle file: a message signature over it, or a DSSE in-toto
    /// statement whose subject is its sha256. Without --trust-policy it is required in addition
    /// to the bundle's signature and judged against --trusted-root and the --certificate-*
    /// flags; under --trust-policy it is offered to the policy's certificate-identity signers
    /// (repeatable; default: BUNDLE.sigstore.json beside the bundle, when it exists).
    #[arg(long, value_name = "FILE.sigstore.json")]
    pub sigstore: Vec<PathBuf>,
    /// The Sigstore trusted_root.json (Fulcio CAs, CT logs, Rekor logs, TSAs) to judge it by,
    /// and the identities of the bundle's vendor-signed models (manifest.toml `[[models]]`);
    /// never downloaded (`gh attestation trusted-root`, or sigstore's TUF repository). Under
    /// --trust-policy the policy names its own.
    #[arg(long, value_name = "FILE")]
    pub trusted_root: Option<PathBuf>,
    /// The signer's identity (the certificate's SAN: an email, or a workflow URI
    /// `https://github.com/OWNER/REPO/.github/workflows/FILE@REF`), exactly.
    #[arg(long, value_name = "IDENTITY", requires = "sigstore")]
    pub certificate_identity: Option<String>,
    /// The signer's identity as a regular expression that must match the WHOLE identity (unlike
    /// cosign's, which matches anywhere).
    #[arg(long, value_name = "REGEX", requires = "sigstore", conflicts_with = "certificate_identity")]
    pub certificate_identity_regexp: Option<String>,
    /// The OIDC issuer of the signer's certificate, exactly (GitHub Actions:
    /// `https://token.actions.githubusercontent.com`).
    #[arg(long, value_name = "URL", requires = "sigstore")]
    pub certificate_oidc_issuer: Option<String>,
    /// The OIDC issuer as a regular expression that must match the whole issuer.
    #[arg(long, value_name = "REGEX", requires = "sigstore", conflicts_with = "certificate_oidc_issuer")]
    pub certificate_oidc_issuer_regexp: Option<String>,
    /// GitHub workflow claim: the repository, `OWNER/REPO` or its URL.
    #[arg(long, value_name = "OWNER/REPO", requires = "sigstore")]
    pub certificate_github_workflow_repository: Option<String>,
    /// GitHub workflow claim: the git ref, e.g. `refs/tags/v1.4.0`.
    #[arg(long, value_name = "REF", requires = "sigstore")]
    pub certificate_github_workflow_ref: Option<String>,
    /// GitHub workflow claim: the commit sha.
    #[arg(long, value_name = "SHA", requires = "sigstore")]
    pub certificate_github_workflow_sha: Option<String>,
    /// GitHub workflow claim: the triggering event, e.g. `push`, `release`.
    #[arg(long, value_name = "EVENT", requires = "sigstore")]
    pub certificate_github_workflow_trigger: Option<String>,
    /// GitHub workflow claim: the workflow's name.
    #[arg(long, value_name = "NAME", requires = "sigstore")]
    pub certificate_github_workflow_name: Option<String>,
    /// The runner environment claim: `github-hosted` refuses self-hosted runners.
    #[arg(long, value_name = "ENV", requires = "sigstore")]
    pub certificate_runner_environment: Option<String>,
}

impl KeylessArgs {
    /// Puts the keyless flags into the gate's options: under a trust policy the Sigstore
    /// bundles offered to its identity signers, otherwise the one required signer.
    pub fn apply(&self, opts: &mut agent_bundle::ops::gate::GateOptions) -> anyhow::Result<()> {
        match opts.policy.as_mut() {
            Some(policy) => policy.sigstore = self.policy_files()?,
            None => {
                opts.keyless = self.requirement()?;
                opts.model_root = self.trusted_root.as_deref().map(TrustedRoot::read).transpose()?.map(Arc::new);
            }
        }
        Ok(())
    }

    /// Under --trust-policy: the Sigstore bundles to offer to the policy's identity signers.
    /// The policy names the identities and the trusted root, so the flags that would name them
    /// here are refused rather than silently ignored.
    pub fn policy_files(&self) -> anyhow::Result<Vec<PathBuf>> {
        let identity_flags = [
            &self.certificate_identity,
            &self.certificate_identity_regexp,
            &self.certificate_oidc_issuer,
            &self.certificate_oidc_issuer_regexp,
            &self.certificate_github_workflow_repository,
            &self.certificate_github_workflow_ref,
            &self.certificate_github_workflow_sha,
            &self.certificate_github_workflow_trigger,
            &self.certificate_github_workflow_name,
            &self.certificate_runner_environment,
        ];
        if self.trusted_root.is_some() || identity_flags.iter().any(|f| f.is_some()) {
            anyhow::bail!(
                "--trust-policy names the certificate identities and the trusted root keyless signatures are judged by: \
                 drop --trusted-root and the --certificate-* flags (give only --sigstore FILE)"
            );
        }
        Ok(self.sigstore.clone())
    }

    /// The requirement, with the trusted root read and prepared (exit 2 if it cannot be).
    pub fn requirement(&self) -> anyhow::Result<Option<Arc<Requirement>>> {
        let bundle = match self.sigstore.as_slice() {
            [] => return Ok(None),
            [one] => one,
            _ => anyhow::bail!("--sigstore is given once without --trust-policy (a policy can count several)"),
        };
        let Some(root) = &self.trusted_root else {
            anyhow::bail!("--sigstore needs --trusted-root (or a --trust-policy that names its trusted root)")
        };
        let root = TrustedRoot::read(root)?;
        let bundle = SigstoreBundle::read(bundle)?;
        let claims = ClaimMatch::given([
            &self.certificate_github_workflow_repository,
            &self.certificate_github_workflow_ref,
            &self.certificate_github_workflow_sha,
            &self.certificate_github_workflow_trigger,
            &self.certificate_github_workflow_name,
            &self.certificate_runner_environment,
        ]);
        let policy = IdentityPolicy::new(
            Given::of(&self.certificate_identity, &self.certificate_identity_regexp),
            Given::of(&self.certificate_oidc_issuer, &self.certificate_oidc_issuer_regexp),
            claims,
        )
        .map_err(|errors| {
            let e = errors.into_iter().next().expect("a refused policy names a problem");
            let flag = match e.field() {
                Field::Identity => "certificate-identity",
                Field::Issuer => "certificate-oidc-issuer",
            };
            match e {
                IdentityPolicyError::Neither(_) => anyhow::anyhow!("--sigstore needs --{flag} or --{flag}-regexp"),
                // clap refuses both flags before this.
                IdentityPolicyError::Both(_) => anyhow::anyhow!("give --{flag} or --{flag}-regexp, not both"),
                IdentityPolicyError::Pattern(_, e) => anyhow::Error::new(e).context(format!("--{flag}-regexp")),
            }
        })?;
        Ok(Some(Arc::new(Requirement { root, bundle, policy })))
    }
}
