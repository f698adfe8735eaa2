//! Who may sign: the certificate's identity (SAN) and OIDC issuer, each exactly or by an
//! anchored regular expression, and optionally GitHub Actions workflow claims that Fulcio
//! copies into the certificate's extensions (OID arc `1.3.6.1.4.1.57264.1`).
//!
//! Patterns must match the whole value (`^(?:PATTERN)$`): cosign's `--certificate-identity-regexp`
//! matches anywhere in the value, so `https://github.com/org/` there also accepts
//! `https://evil.example/?https://github.com/org/`; here it must be written out.

use sigstore_verify::crypto::FulcioCiClaims;

/// How one certificate value is matched.
#[derive(Debug, Clone)]
pub enum Matcher {
    Exact(String),
    /// A regular expression that must match the whole value.
    Pattern(regex::Regex),
}

/// An invalid pattern.
#[derive(Debug, thiserror::Error)]
#[error("invalid pattern `{pattern}`: {message}")]
pub struct PatternError {
    pub pattern: String,
    pub message: String,
}

impl Matcher {
    /// A pattern matched against the whole value.
    pub fn pattern(pattern: &str) -> Result<Matcher, PatternError> {
        regex::Regex::new(&format!("^(?:{pattern})$"))
            .map(Matcher::Pattern)
            .map_err(|e| PatternError { pattern: pattern.to_owned(), message: e.to_string() })
    }

    pub fn matches(&self, value: &str) -> bool {
        match self {
            Matcher::Exact(expected) => expected == value,
            Matcher::Pattern(re) => re.is_match(value),
        }
    }

    fn exact(&self) -> Option<&str> {
        match self {
            Matcher::Exact(s) => Some(s),
            Matcher::Pattern(_) => None,
        }
    }
}

impl std::fmt::Display for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Matcher::Exact(s) => write!(f, "`{s}`"),
            // Shown as given, without the anchors added.
            Matcher::Pattern(re) => {
                let shown = re.as_str().strip_prefix("^(?:").and_then(|s| s.strip_suffix(")$"));
                write!(f, "a value matching `{}`", shown.unwrap_or(re.as_str()))
            }
        }
    }
}

/// A GitHub Actions workflow claim the certificate must carry, with the value it must have.
/// Each is read from the current extension and, for certificates that predate it, from the
/// deprecated GitHub one (`1.3.6.1.4.1.57264.1.2`-`.6`), as cosign does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimMatch {
    /// `owner/repo` (`.1.5`) or the repository URL (`.1.12`).
    Repository,
    /// The git ref, e.g. `refs/tags/v1.4.0` (`.1.14`, `.1.6`).
    Ref,
    /// The commit (`.1.13`, `.1.3`).
    Sha,
    /// The event that triggered the workflow, e.g. `push` (`.1.20`, `.1.2`).
    Trigger,
    /// The workflow's display name (`.1.4`).
    Name,
    /// `github-hosted` or `self-hosted` (`.1.11`).
    RunnerEnvironment,
}

impl ClaimMatch {
    /// The flag's name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimMatch::Repository => "workflow repository",
            ClaimMatch::Ref => "workflow ref",
            ClaimMatch::Sha => "workflow sha",
            ClaimMatch::Trigger => "workflow trigger",
            ClaimMatch::Name => "workflow name",
            ClaimMatch::RunnerEnvironment => "runner environment",
        }
    }

    /// The claims whose expected value is given, from the values for the repository, ref, sha,
    /// trigger, workflow name and runner environment, in that order (the order of the
    /// `--certificate-github-workflow-*` flags and of the trust policy's fields).
    pub fn given(values: [&Option<String>; 6]) -> Vec<(ClaimMatch, String)> {
        use ClaimMatch::*;
        let all = [Repository, Ref, Sha, Trigger, Name, RunnerEnvironment];
        all.into_iter().zip(values).filter_map(|(c, v)| Some((c, v.clone()?))).collect()
    }

    /// The values the certificate gives for this claim (current first, then deprecated).
    fn values(self, c: &FulcioCiClaims) -> Vec<&str> {
        let g = &c.deprecated_github;
        let values = match self {
            ClaimMatch::Repository => [&c.source_repository_uri, &g.workflow_repository],
            ClaimMatch::Ref => [&c.source_repository_ref, &g.workflow_ref],
            ClaimMatch::Sha => [&c.source_repository_digest, &g.workflow_sha],
            ClaimMatch::Trigger => [&c.build_trigger, &g.workflow_trigger],
            ClaimMatch::Name => [&g.workflow_name, &None],
            ClaimMatch::RunnerEnvironment => [&c.runner_environment, &None],
        };
        values.into_iter().flatten().map(String::as_str).collect()
    }

    fn accepts(self, expected: &str, value: &str) -> bool {
        match self {
            // `owner/repo` names the same repository as its GitHub URL.
            ClaimMatch::Repository => value == expected || value.strip_prefix("https://github.com/") == Some(expected),
            _ => value == expected,
        }
    }
}

/// The two certificate values an identity policy must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The certificate's identity (SAN).
    Identity,
    /// The certificate's OIDC issuer.
    Issuer,
}

/// One certificate value's rule as given: exactly, or by a pattern (each caller names them in
/// its own words: `--certificate-identity[-regexp]`, `certificate_identity[_regexp]`,
/// `identity[_regexp]`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Given<'a> {
    pub exact: Option<&'a str>,
    pub pattern: Option<&'a str>,
}

impl<'a> Given<'a> {
    /// From two optional fields (a flag and its `-regexp` twin).
    pub fn of(exact: &'a Option<String>, pattern: &'a Option<String>) -> Given<'a> {
        Given { exact: exact.as_deref(), pattern: pattern.as_deref() }
    }
}

/// Why an identity policy cannot be built from what was given, for which value.
#[derive(Debug, thiserror::Error)]
pub enum IdentityPolicyError {
    #[error("an exact value and a pattern both given; give one")]
    Both(Field),
    #[error("neither an exact value nor a pattern given; one is required")]
    Neither(Field),
    #[error("{1}")]
    Pattern(Field, #[source] PatternError),
}

impl IdentityPolicyError {
    /// The value the problem is about.
    pub fn field(&self) -> Field {
        match self {
            IdentityPolicyError::Both(f) | IdentityPolicyError::Neither(f) | IdentityPolicyError::Pattern(f, _) => *f,
        }
    }
}

impl Matcher {
    /// The rule for one value: exactly or by a pattern, not both, one required (an empty exact
    /// value is none: it would match no certificate).
    fn given(field: Field, given: Given<'_>) -> Result<Matcher, IdentityPolicyError> {
        match (given.exact.filter(|e| !e.is_empty()), given.pattern) {
            (Some(_), Some(_)) => Err(IdentityPolicyError::Both(field)),
            (Some(exact), None) => Ok(Matcher::Exact(exact.to_owned())),
            (None, Some(pattern)) => Matcher::pattern(pattern).map_err(|e| IdentityPolicyError::Pattern(field, e)),
            (None, None) => Err(IdentityPolicyError::Neither(field)),
        }
    }
}

/// The signer a keyless signature must come from.
#[derive(Debug, Clone)]
pub struct IdentityPolicy {
    pub identity: Matcher,
    pub issuer: Matcher,
    pub claims: Vec<(ClaimMatch, String)>,
}

impl IdentityPolicy {
    /// The one constructor, for the command line, the trust policy, the API and Python alike:
    /// the identity and the issuer each exactly or by a pattern, not both, one required. Every
    /// problem is returned (the identity's first).
    pub fn new(
        identity: Given<'_>,
        issuer: Given<'_>,
        claims: Vec<(ClaimMatch, String)>,
    ) -> Result<IdentityPolicy, Vec<IdentityPolicyError>> {
        match (Matcher::given(Field::Identity, identity), Matcher::given(Field::Issuer, issuer)) {
            (Ok(identity), Ok(issuer)) => Ok(IdentityPolicy { identity, issuer, claims }),
            (identity, issuer) => Err(identity.err().into_iter().chain(issuer.err()).collect()),
        }
    }

    /// The part of the policy `sigstore-verify` can check itself (exact values), so that a
    /// mismatch stops verification where that library checks it. Patterns and claims are
    /// checked by [`IdentityPolicy::check`] on the verified certificate.
    pub(crate) fn to_library(&self) -> sigstore_verify::VerificationPolicy {
        let mut policy = sigstore_verify::VerificationPolicy::any_identity();
        if let Some(identity) = self.identity.exact() {
            policy = policy.require_identity(identity);
        }
        if let Some(issuer) = self.issuer.exact() {
            policy = policy.require_issuer(issuer);
        }
        policy
    }

    /// Whether a verified certificate's claims satisfy the policy; the error says which does not.
    pub fn check(&self, identity: &str, issuer: &str, claims: &FulcioCiClaims) -> Result<(), String> {
        if !self.identity.matches(identity) {
            return Err(format!("the certificate identity `{identity}` is not {}", self.identity));
        }
        if !self.issuer.matches(issuer) {
            return Err(format!("the certificate's OIDC issuer `{issuer}` is not {}", self.issuer));
        }
        for (claim, expected) in &self.claims {
            let values = claim.values(claims);
            if !values.iter().any(|v| claim.accepts(expected, v)) {
                let found = values.first().map_or("none".to_owned(), |v| format!("`{v}`"));
                return Err(format!("the certificate's {} is {found}, not `{expected}`", claim.as_str()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_must_match_the_whole_value() {
        let m = Matcher::pattern("https://github\\.com/org/.*").expect("a valid pattern");
        assert!(m.matches("https://github.com/org/repo/.github/workflows/release.yml@refs/tags/v1"));
        assert!(!m.matches("https://evil.example/?https://github.com/org/x"));
        assert_eq!(m.to_string(), "a value matching `https://github\\.com/org/.*`");
    }

    #[test]
    fn one_constructor_takes_each_value_exactly_or_by_pattern_not_both_one_required() {
        let exact = |v| Given { exact: Some(v), pattern: None };
        let ok = IdentityPolicy::new(exact("i"), Given { exact: None, pattern: Some("https://.*") }, Vec::new());
        let ok = ok.expect("an exact identity and an issuer pattern");
        assert!(ok.identity.matches("i") && ok.issuer.matches("https://x"));
        let both = Given { exact: Some("i"), pattern: Some(".*") };
        let errors = |identity, issuer| {
            let e = IdentityPolicy::new(identity, issuer, Vec::new()).expect_err("refused");
            e.iter().map(|e| (e.field(), e.to_string().split(' ').next().unwrap_or("").to_owned())).collect::<Vec<_>>()
        };
        assert_eq!(errors(both, exact("s")), [(Field::Identity, "an".to_owned())]);
        assert_eq!(errors(exact("i"), Given::default()), [(Field::Issuer, "neither".to_owned())]);
        // An empty exact value is none; every problem is reported, the identity's first.
        assert_eq!(
            errors(exact(""), Given { exact: None, pattern: Some("(") }),
            [(Field::Identity, "neither".to_owned()), (Field::Issuer, "invalid".to_owned())]
        );
    }

    #[test]
    fn the_repository_claim_accepts_owner_slash_repo_for_its_github_url() {
        let mut claims = FulcioCiClaims::default();
        claims.source_repository_uri = Some("https://github.com/org/repo".into());
        let policy = IdentityPolicy {
            identity: Matcher::Exact("i".into()),
            issuer: Matcher::Exact("s".into()),
            claims: vec![(ClaimMatch::Repository, "org/repo".into())],
        };
        assert_eq!(policy.check("i", "s", &claims), Ok(()));
        let other = IdentityPolicy { claims: vec![(ClaimMatch::Repository, "org/other".into())], ..policy };
        let err = other.check("i", "s", &claims).expect_err("another repository");
        assert_eq!(err, "the certificate's workflow repository is `https://github.com/org/repo`, not `org/other`");
    }
}
