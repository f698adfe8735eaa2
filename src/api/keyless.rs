//! A keyless (Sigstore) signature the gate requires over the bundle file, judged offline against
//! a trusted root: `bundle verify --sigstore FILE --trusted-root ROOT --certificate-identity ...`.
//! The judgement itself is `crate::keyless`; this file is the builder the API takes it from.

use std::path::PathBuf;
use std::sync::Arc;

use super::error::Error;
use crate::error::ErrorCode;
use crate::keyless::{
    ClaimMatch, Field, Given, IdentityPolicy, IdentityPolicyError, Requirement, SigstoreBundle, TrustedRoot,
};

/// One certificate value's rule as given: exactly and/or by pattern (both is refused when the
/// requirement is built, as the command line refuses both flags).
#[derive(Debug, Clone, Default)]
struct Match {
    exact: Option<String>,
    pattern: Option<String>,
}

impl Match {
    fn given(&self) -> Given<'_> {
        Given { exact: self.exact.as_deref(), pattern: self.pattern.as_deref() }
    }
}

/// What a keyless signature must be: the Sigstore bundle (`cosign sign-blob --bundle`, `sigstore
/// sign`, a GitHub artifact attestation) that signs the bundle file, the `trusted_root.json` to
/// judge it by (never downloaded), and who must have signed it. An identity and an issuer are
/// required (each exactly, or by a pattern that must match the whole value, not both: giving
/// both is a `usage` error, as the command line's two flags are); the GitHub workflow claims
/// are optional. The files are read each time a bundle is judged; [`Keyless::check`] checks
/// the rules without them.
#[derive(Debug, Clone)]
pub struct Keyless {
    sigstore_bundle: PathBuf,
    trusted_root: PathBuf,
    identity: Match,
    issuer: Match,
    claims: Vec<(ClaimMatch, String)>,
}

impl Keyless {
    /// The Sigstore bundle (`--sigstore`) and the trusted root (`--trusted-root`).
    pub fn new(sigstore_bundle: impl Into<PathBuf>, trusted_root: impl Into<PathBuf>) -> Keyless {
        Keyless {
            sigstore_bundle: sigstore_bundle.into(),
            trusted_root: trusted_root.into(),
            identity: Match::default(),
            issuer: Match::default(),
            claims: Vec::new(),
        }
    }

    /// The signer's identity, exactly (`--certificate-identity`): an email, or a workflow URI.
    pub fn identity(mut self, identity: impl Into<String>) -> Keyless {
        self.identity.exact = Some(identity.into());
        self
    }

    /// The signer's identity as a regular expression that must match the whole identity
    /// (`--certificate-identity-regexp`).
    pub fn identity_regexp(mut self, pattern: impl Into<String>) -> Keyless {
        self.identity.pattern = Some(pattern.into());
        self
    }

    /// The certificate's OIDC issuer, exactly (`--certificate-oidc-issuer`).
    pub fn issuer(mut self, issuer: impl Into<String>) -> Keyless {
        self.issuer.exact = Some(issuer.into());
        self
    }

    /// The OIDC issuer as a regular expression that must match the whole issuer
    /// (`--certificate-oidc-issuer-regexp`).
    pub fn issuer_regexp(mut self, pattern: impl Into<String>) -> Keyless {
        self.issuer.pattern = Some(pattern.into());
        self
    }

    /// GitHub workflow claim: the repository, `OWNER/REPO` or its URL.
    pub fn github_workflow_repository(self, value: impl Into<String>) -> Keyless {
        self.claim(ClaimMatch::Repository, value)
    }

    /// GitHub workflow claim: the git ref, e.g. `refs/tags/v1.4.0`.
    pub fn github_workflow_ref(self, value: impl Into<String>) -> Keyless {
        self.claim(ClaimMatch::Ref, value)
    }

    /// GitHub workflow claim: the commit sha.
    pub fn github_workflow_sha(self, value: impl Into<String>) -> Keyless {
        self.claim(ClaimMatch::Sha, value)
    }

    /// GitHub workflow claim: the triggering event, e.g. `push`.
    pub fn github_workflow_trigger(self, value: impl Into<String>) -> Keyless {
        self.claim(ClaimMatch::Trigger, value)
    }

    /// GitHub workflow claim: the workflow's name.
    pub fn github_workflow_name(self, value: impl Into<String>) -> Keyless {
        self.claim(ClaimMatch::Name, value)
    }

    /// The runner environment claim: `github-hosted` refuses self-hosted runners.
    pub fn runner_environment(self, value: impl Into<String>) -> Keyless {
        self.claim(ClaimMatch::RunnerEnvironment, value)
    }

    fn claim(mut self, claim: ClaimMatch, value: impl Into<String>) -> Keyless {
        self.claims.retain(|(c, _)| *c != claim);
        self.claims.push((claim, value.into()));
        self
    }

    /// Checks the identity rules without reading any file: the identity and the issuer each
    /// exactly or by a valid pattern, not both, one required. An error has the code `usage`,
    /// as `bundle verify` gives it; judging a bundle checks this too.
    pub fn check(&self) -> Result<(), Error> {
        self.identity_policy().map(drop)
    }

    fn identity_policy(&self) -> Result<IdentityPolicy, Error> {
        IdentityPolicy::new(self.identity.given(), self.issuer.given(), self.claims.clone()).map_err(|errors| {
            let e = errors.into_iter().next().expect("a refused policy names a problem");
            let what = match e.field() {
                Field::Identity => "identity",
                Field::Issuer => "issuer",
            };
            let message = match e {
                IdentityPolicyError::Neither(_) => {
                    format!("a keyless signature needs the signer's {what} (exactly, or a pattern)")
                }
                IdentityPolicyError::Both(_) => format!("give {what} or {what}_regexp, not both"),
                IdentityPolicyError::Pattern(_, e) => format!("{what} pattern: {e}"),
            };
            Error::failed(ErrorCode::Usage, message)
        })
    }

    /// Reads the files and compiles the patterns, with the codes `bundle verify` gives: `usage`
    /// (no identity or issuer, both an exact value and a pattern, a bad pattern, a trusted root
    /// that is not one), `io_error`.
    pub(crate) fn requirement(&self) -> Result<Arc<Requirement>, Error> {
        let policy = self.identity_policy()?;
        let root = TrustedRoot::read(&self.trusted_root).map_err(|e| Error::coded(&e))?;
        let bundle = SigstoreBundle::read(&self.sigstore_bundle).map_err(|e| Error::coded(&e))?;
        Ok(Arc::new(Requirement { root, bundle, policy }))
    }
}
