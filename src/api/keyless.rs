//! A keyless (Sigstore) signature the gate requires over the bundle file, judged offline against
//! a trusted root: `bundle verify --sigstore FILE --trusted-root ROOT --certificate-identity ...`.
//! The judgement itself is `crate::keyless`; this file is the builder the API takes it from.

use std::path::PathBuf;
use std::sync::Arc;

use super::error::Error;
use crate::error::ErrorCode;
use crate::keyless::{ClaimMatch, IdentityPolicy, Matcher, Requirement, SigstoreBundle, TrustedRoot};

#[derive(Debug, Clone)]
enum Match {
    Exact(String),
    Pattern(String),
}

/// What a keyless signature must be: the Sigstore bundle (`cosign sign-blob --bundle`, `sigstore
/// sign`, a GitHub artifact attestation) that signs the bundle file, the `trusted_root.json` to
/// judge it by (never downloaded), and who must have signed it. An identity and an issuer are
/// required (each exactly, or by a pattern that must match the whole value); the GitHub
/// workflow claims are optional. The files are read each time a bundle is judged.
#[derive(Debug, Clone)]
pub struct Keyless {
    sigstore_bundle: PathBuf,
    trusted_root: PathBuf,
    identity: Option<Match>,
    issuer: Option<Match>,
    claims: Vec<(ClaimMatch, String)>,
}

impl Keyless {
    /// The Sigstore bundle (`--sigstore`) and the trusted root (`--trusted-root`).
    pub fn new(sigstore_bundle: impl Into<PathBuf>, trusted_root: impl Into<PathBuf>) -> Keyless {
        Keyless {
            sigstore_bundle: sigstore_bundle.into(),
            trusted_root: trusted_root.into(),
            identity: None,
            issuer: None,
            claims: Vec::new(),
        }
    }

    /// The signer's identity, exactly (`--certificate-identity`): an email, or a workflow URI.
    pub fn identity(mut self, identity: impl Into<String>) -> Keyless {
        self.identity = Some(Match::Exact(identity.into()));
        self
    }

    /// The signer's identity as a regular expression that must match the whole identity
    /// (`--certificate-identity-regexp`).
    pub fn identity_regexp(mut self, pattern: impl Into<String>) -> Keyless {
        self.identity = Some(Match::Pattern(pattern.into()));
        self
    }

    /// The certificate's OIDC issuer, exactly (`--certificate-oidc-issuer`).
    pub fn issuer(mut self, issuer: impl Into<String>) -> Keyless {
        self.issuer = Some(Match::Exact(issuer.into()));
        self
    }

    /// The OIDC issuer as a regular expression that must match the whole issuer
    /// (`--certificate-oidc-issuer-regexp`).
    pub fn issuer_regexp(mut self, pattern: impl Into<String>) -> Keyless {
        self.issuer = Some(Match::Pattern(pattern.into()));
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

    /// Reads the files and compiles the patterns, with the codes `bundle verify` gives: `usage`
    /// (no identity or issuer, a bad pattern, a trusted root that is not one), `io_error`.
    pub(crate) fn requirement(&self) -> Result<Arc<Requirement>, Error> {
        let matcher = |m: &Option<Match>, what: &str| -> Result<Matcher, Error> {
            match m {
                Some(Match::Exact(s)) => Ok(Matcher::Exact(s.clone())),
                Some(Match::Pattern(p)) => {
                    Matcher::pattern(p).map_err(|e| Error::failed(ErrorCode::Usage, format!("{what} pattern: {e}")))
                }
                None => Err(Error::failed(
                    ErrorCode::Usage,
                    format!("a keyless signature needs the signer's {what} (exactly, or a pattern)"),
                )),
            }
        };
        let identity = matcher(&self.identity, "identity")?;
        let issuer = matcher(&self.issuer, "issuer")?;
        let root = TrustedRoot::read(&self.trusted_root).map_err(|e| Error::coded(&e))?;
        let bundle = SigstoreBundle::read(&self.sigstore_bundle).map_err(|e| Error::coded(&e))?;
        let policy = IdentityPolicy { identity, issuer, claims: self.claims.clone() };
        Ok(Arc::new(Requirement { root, bundle, policy }))
    }
}
