//! The trust policy file (`--trust-policy FILE`, TOML): who may sign which agents, how many
//! distinct signers each agent needs, and which signers may sign the policy's next version.
//!
//! ```toml
//! format = 1
//! id = "acme-agents"            # names the policy in the state file and in its signatures
//! version = 1                   # each rotation adds one
//! expires = 2027-06-01T00:00:00Z
//!
//! [root]                        # who signs version 2 (and this one)
//! threshold = 2
//! signers = ["alice", "bob", "carol"]
//!
//! [[signer]]
//! name = "alice"
//! public_key = "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3"
//! roles = ["release"]
//! agents = ["*"]                # agent-name patterns this key may sign for (default: all)
//! not_before = 2026-01-01T00:00:00Z
//! not_after = 2027-01-01T00:00:00Z
//! revoked = false
//!
//! [[signer]]                    # a certificate identity: a keyless CI signer
//! name = "release-workflow"
//! certificate_identity = "https://github.com/acme/agents/.github/workflows/release.yml@refs/tags/v1.4.0"
//! certificate_oidc_issuer = "https://token.actions.githubusercontent.com"
//! certificate_github_workflow_repository = "acme/agents"   # and _ref, _sha, _trigger, _name
//!
//! [sigstore]                    # the trusted root identities are judged against
//! trusted_root = "trusted_root-f900539b4d16.json"          # beside the policy file
//! sha256 = "…"                  # so the policy's signatures cover it
//!
//! [[rule]]
//! agents = ["payments-*"]
//! threshold = 2                 # distinct signers (keys or certificate identities)
//! roles = { security = 1 }      # of which at least one has role `security`
//! ```
//!
//! Parsed strictly (unknown fields are errors) and checked whole: every problem is reported at
//! once, and a policy that could never be met (a rule asking for a role no signer has, more
//! keys than there are) is refused here rather than at the gate.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;

use crate::keyless::{ClaimMatch, Field, Given, IdentityPolicy, IdentityPolicyError};
use crate::minisign::PublicKey;
use crate::timestamp::Timestamp;
use crate::trust::glob_match;

/// The only policy format this build reads.
pub const FORMAT: u32 = 1;
/// A policy lists at most this many signers and rules (the gate indexes them; a policy is
/// read whole).
pub use crate::limits::{MAX_TRUST_POLICY_RULES as MAX_RULES, MAX_TRUST_POLICY_SIGNERS as MAX_SIGNERS};

/// Who a signer is: an Ed25519 key (a minisign public key: file keys, ssh-agent and PKCS#11
/// keys alike, the latter two under their derived key ids), or a certificate identity (the
/// OIDC issuer and subject of a short-lived Sigstore certificate, with optional GitHub
/// workflow claims), whose keyless signatures are judged against the policy's trusted root.
#[derive(Debug, Clone)]
pub enum SignerId {
    Key(PublicKey),
    Identity(IdentityPolicy),
}

impl SignerId {
    /// How the verdict names the signer: the minisign key id, or the identity and issuer.
    pub fn describe(&self) -> String {
        match self {
            SignerId::Key(k) => k.key_id_hex(),
            SignerId::Identity(p) => format!("{} ({})", p.identity, p.issuer),
        }
    }

    /// The key, for a key signer.
    pub fn key(&self) -> Option<&PublicKey> {
        match self {
            SignerId::Key(k) => Some(k),
            SignerId::Identity(_) => None,
        }
    }

    /// The identity policy, for a certificate-identity signer.
    pub fn identity(&self) -> Option<&IdentityPolicy> {
        match self {
            SignerId::Identity(p) => Some(p),
            SignerId::Key(_) => None,
        }
    }
}

/// The Sigstore trusted root a policy with identity signers names: a file beside the policy
/// (`[sigstore] trusted_root`, relative to the policy file) and its SHA-256, so that the
/// policy's signatures cover the root too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigstoreRoot {
    pub file: String,
    /// Lowercase hex.
    pub sha256: String,
}

/// One named signer of the policy.
#[derive(Debug, Clone)]
pub struct Signer {
    pub name: String,
    pub id: SignerId,
    pub roles: Vec<String>,
    /// Agent-name patterns (`*` any run of characters); empty means every agent.
    pub agents: Vec<String>,
    pub not_before: Option<Timestamp>,
    pub not_after: Option<Timestamp>,
    pub revoked: bool,
}

impl Signer {
    pub fn may_sign(&self, agent: &str) -> bool {
        self.agents.is_empty() || self.agents.iter().any(|p| glob_match(p, agent))
    }

    /// Whether `now` is inside the signer's validity window (both ends inclusive).
    pub fn in_window(&self, now: Timestamp) -> bool {
        self.not_before.is_none_or(|t| now >= t) && self.not_after.is_none_or(|t| now <= t)
    }

    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

/// Which signers may sign the next version of the policy (and must have signed this one).
#[derive(Debug, Clone)]
pub struct Root {
    pub threshold: usize,
    /// Indexes into [`TrustPolicy::signers`].
    pub signers: Vec<usize>,
}

/// What the agents matching `agents` need: `threshold` distinct counted keys, and for each
/// role at least that many of them holding it.
#[derive(Debug, Clone)]
pub struct Rule {
    pub agents: Vec<String>,
    pub threshold: usize,
    pub roles: BTreeMap<String, usize>,
}

impl Rule {
    pub fn applies_to(&self, agent: &str) -> bool {
        self.agents.iter().any(|p| glob_match(p, agent))
    }

    /// The rule as one line: `payments-* need 2 distinct signers, 1 of role security`.
    pub fn describe(&self) -> String {
        let roles: Vec<String> = self.roles.iter().map(|(r, n)| format!(", {n} of role {r}")).collect();
        format!("{} need {} distinct signer(s){}", self.agents.join(" "), self.threshold, roles.concat())
    }
}

/// Why a text is not a usable trust policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Not TOML, or not of the policy's shape (an unknown field, a value of the wrong type).
    #[error("{0}")]
    Syntax(String),
    /// Of the policy's shape, but breaking its rules: every problem, one a line.
    #[error("{}", .0.join("\n"))]
    Invalid(Vec<String>),
}

/// A checked trust policy.
#[derive(Debug, Clone)]
pub struct TrustPolicy {
    pub id: String,
    pub version: u64,
    pub expires: Timestamp,
    pub root: Root,
    pub signers: Vec<Signer>,
    pub rules: Vec<Rule>,
    /// `[sigstore]`: the trusted root identity signers are judged against.
    pub sigstore: Option<SigstoreRoot>,
    /// That root, read and checked against its digest by whoever read the policy file
    /// (`ops::trust::read_signed`); `None` until then.
    pub trusted_root: Option<std::sync::Arc<crate::keyless::TrustedRoot>>,
    by_key_id: HashMap<[u8; 8], Vec<usize>>,
}

impl TrustPolicy {
    /// Parses and checks a policy's text; the error lists every problem.
    pub fn parse(text: &str) -> Result<TrustPolicy, PolicyError> {
        let raw: RawPolicy =
            toml_edit::de::from_str(text).map_err(|e| PolicyError::Syntax(e.to_string().trim_end().to_owned()))?;
        raw.check().map_err(PolicyError::Invalid)
    }

    /// The signers with this key id (a key id may be shared by unrelated keys; the signature
    /// decides).
    pub fn with_key_id(&self, key_id: [u8; 8]) -> impl Iterator<Item = (usize, &Signer)> {
        self.by_key_id.get(&key_id).into_iter().flatten().map(|&i| (i, &self.signers[i]))
    }

    /// The signer whose key this is (the key bytes, not only the key id), if any.
    pub fn signer_of_key(&self, key: &PublicKey) -> Option<&Signer> {
        let bytes = key.ed25519_bytes();
        self.with_key_id(key.key_id()).map(|(_, s)| s).find(|s| s.id.key().is_some_and(|k| k.ed25519_bytes() == bytes))
    }

    /// The rules that apply to `agent` (all must be met).
    pub fn rules_for<'a>(&'a self, agent: &'a str) -> impl Iterator<Item = &'a Rule> {
        self.rules.iter().filter(move |r| r.applies_to(agent))
    }

    /// The identity signers whose policy a verified certificate satisfies, in file order.
    pub fn identities_matching(
        &self,
        identity: &str,
        issuer: &str,
        claims: &sigstore_verify::crypto::FulcioCiClaims,
    ) -> Vec<usize> {
        let matches = |p: &IdentityPolicy| p.check(identity, issuer, claims).is_ok();
        (0..self.signers.len()).filter(|&i| self.signers[i].id.identity().is_some_and(matches)).collect()
    }

    /// Whether any signer is a certificate identity.
    pub fn has_identities(&self) -> bool {
        self.signers.iter().any(|s| s.id.identity().is_some())
    }

    pub fn is_root(&self, signer: usize) -> bool {
        self.root.signers.contains(&signer)
    }

    /// The trusted comment of this version's signatures.
    pub fn signed_comment(&self) -> String {
        signed_comment(&self.id, self.version)
    }
}

/// The trusted comment a policy signature carries: `agent-bundle-policy/1 id=<id> version=<N>`.
pub fn signed_comment(id: &str, version: u64) -> String {
    format!("agent-bundle-policy/1 id={id} version={version}")
}

/// A TOML date-time, or a string holding an RFC 3339 one.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum When {
    Toml(toml_datetime::Datetime),
    Text(String),
}

impl When {
    fn instant(&self) -> Result<Timestamp, String> {
        match self {
            When::Toml(dt) => Timestamp::parse(&dt.to_string()),
            When::Text(s) => Timestamp::parse(s),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    format: u32,
    id: String,
    version: u64,
    expires: When,
    root: RawRoot,
    #[serde(default, rename = "signer")]
    signers: Vec<RawSigner>,
    #[serde(default, rename = "rule")]
    rules: Vec<RawRule>,
    sigstore: Option<RawSigstore>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSigstore {
    trusted_root: String,
    sha256: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoot {
    threshold: usize,
    signers: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSigner {
    name: String,
    public_key: Option<String>,
    certificate_identity: Option<String>,
    certificate_identity_regexp: Option<String>,
    certificate_oidc_issuer: Option<String>,
    certificate_oidc_issuer_regexp: Option<String>,
    certificate_github_workflow_repository: Option<String>,
    certificate_github_workflow_ref: Option<String>,
    certificate_github_workflow_sha: Option<String>,
    certificate_github_workflow_trigger: Option<String>,
    certificate_github_workflow_name: Option<String>,
    certificate_runner_environment: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    agents: Vec<String>,
    not_before: Option<When>,
    not_after: Option<When>,
    #[serde(default)]
    revoked: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    agents: Vec<String>,
    threshold: usize,
    #[serde(default)]
    roles: BTreeMap<String, usize>,
}

fn is_word(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_pattern(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'*'))
}

impl RawPolicy {
    fn check(self) -> Result<TrustPolicy, Vec<String>> {
        let mut problems = Vec::new();
        if self.format != FORMAT {
            problems.push(format!("format {} is not supported (this bundle reads format {FORMAT})", self.format));
        }
        if !is_word(&self.id) {
            problems.push(format!("id `{}` must be 1-64 of a-z A-Z 0-9 - _ .", self.id));
        }
        if self.version == 0 {
            problems.push("version must be 1 or more".to_owned());
        }
        let expires = self.expires.instant().unwrap_or_else(|e| {
            problems.push(format!("expires: {e}"));
            Timestamp::from_unix(0, 0)
        });
        if self.signers.len() > MAX_SIGNERS || self.rules.len() > MAX_RULES {
            problems.push(format!("at most {MAX_SIGNERS} signers and {MAX_RULES} rules are accepted"));
        }
        let mut signers = Vec::with_capacity(self.signers.len());
        let mut names = HashMap::new();
        let mut keys = HashSet::new();
        for (i, s) in self.signers.into_iter().enumerate() {
            let at = format!("signer `{}`", s.name);
            if !is_word(&s.name) {
                problems.push(format!("signer {}: name `{}` must be 1-64 of a-z A-Z 0-9 - _ .", i + 1, s.name));
            }
            if names.insert(s.name.clone(), i).is_some() {
                problems.push(format!("{at}: the name is used twice"));
            }
            let id = s.signer_id(&at, &mut problems);
            // The same key under two names would count twice towards a threshold.
            if let Some(SignerId::Key(k)) = &id
                && !keys.insert(k.ed25519_bytes())
            {
                problems.push(format!("{at}: key {} is listed under another name too", k.key_id_hex()));
            }
            for r in &s.roles {
                if !is_word(r) {
                    problems.push(format!("{at}: role `{r}` must be 1-64 of a-z A-Z 0-9 - _ ."));
                }
            }
            for p in &s.agents {
                if !is_pattern(p) {
                    problems.push(format!("{at}: `{p}` is not an agent-name pattern (a-z 0-9 - _ and *)"));
                }
            }
            let mut when = |w: Option<When>, field: &str| {
                w.and_then(|w| w.instant().map_err(|e| problems.push(format!("{at}: {field}: {e}"))).ok())
            };
            let not_before = when(s.not_before, "not_before");
            let not_after = when(s.not_after, "not_after");
            if let (Some(b), Some(a)) = (not_before, not_after)
                && a < b
            {
                problems.push(format!("{at}: not_after is before not_before"));
            }
            if let Some(id) = id {
                signers.push(Signer {
                    name: s.name,
                    id,
                    roles: s.roles,
                    agents: s.agents,
                    not_before,
                    not_after,
                    revoked: s.revoked,
                });
            }
        }
        let mut root = Vec::new();
        for name in &self.root.signers {
            match signers.iter().position(|s| &s.name == name) {
                Some(i) if root.contains(&i) => problems.push(format!("root: signer `{name}` is listed twice")),
                // Root signers sign the policy file (minisign); a certificate identity cannot.
                Some(i) if signers[i].id.key().is_none() => {
                    problems.push(format!("root: signer `{name}` is a certificate identity; root signers must be keys"))
                }
                Some(i) => root.push(i),
                None => problems.push(format!("root: no signer is named `{name}`")),
            }
        }
        if self.root.threshold == 0 || self.root.threshold > self.root.signers.len() {
            problems.push(format!(
                "root: threshold {} must be between 1 and the {} root signers",
                self.root.threshold,
                self.root.signers.len()
            ));
        }
        let sigstore = self.sigstore.map(|r| {
            let sha256 = r.sha256.trim().to_ascii_lowercase();
            if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                problems.push("[sigstore] sha256: 64 hex digits (the SHA-256 of the trusted root file)".to_owned());
            }
            if r.trusted_root.is_empty() || r.trusted_root.contains('\0') {
                problems.push(
                    "[sigstore] trusted_root: the trusted_root.json file's name, relative to the policy".to_owned(),
                );
            }
            SigstoreRoot { file: r.trusted_root, sha256 }
        });
        if self.rules.is_empty() {
            problems.push(
                "no [[rule]]: say which agents need which signers (`agents = [\"*\"]`, `threshold = 1` for one key)"
                    .to_owned(),
            );
        }
        let rules: Vec<Rule> = self
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let at = format!("rule {}", i + 1);
                if r.agents.is_empty() || !r.agents.iter().all(|p| is_pattern(p)) {
                    problems.push(format!("{at}: agents must be agent-name patterns (a-z 0-9 - _ and *)"));
                }
                if r.threshold == 0 {
                    problems.push(format!("{at}: threshold must be 1 or more"));
                }
                let could_sign = |role: Option<&str>| {
                    signers.iter().filter(|s| !s.revoked && role.is_none_or(|r| s.has_role(r))).count()
                };
                if r.threshold > could_sign(None) {
                    problems.push(format!(
                        "{at}: threshold {} can never be met: {} unrevoked signer(s) in the policy",
                        r.threshold,
                        could_sign(None)
                    ));
                }
                for (role, n) in &r.roles {
                    if *n == 0 || *n > r.threshold {
                        problems.push(format!("{at}: role `{role}` needs {n}; say 1 to {}", r.threshold));
                    } else if *n > could_sign(Some(role)) {
                        problems.push(format!("{at}: fewer than {n} unrevoked signer(s) have role `{role}`"));
                    }
                }
                Rule { agents: r.agents, threshold: r.threshold, roles: r.roles }
            })
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut by_key_id: HashMap<[u8; 8], Vec<usize>> = HashMap::new();
        for (i, s) in signers.iter().enumerate() {
            if let SignerId::Key(k) = &s.id {
                by_key_id.entry(k.key_id()).or_default().push(i);
            }
        }
        Ok(TrustPolicy {
            id: self.id,
            version: self.version,
            expires,
            root: Root { threshold: self.root.threshold, signers: root },
            signers,
            rules,
            sigstore,
            trusted_root: None,
            by_key_id,
        })
    }
}

impl RawSigner {
    /// The signer's key or certificate identity; problems are pushed, `None` when unusable.
    fn signer_id(&self, at: &str, problems: &mut Vec<String>) -> Option<SignerId> {
        let identity_fields = self.certificate_identity.is_some()
            || self.certificate_identity_regexp.is_some()
            || self.certificate_oidc_issuer.is_some()
            || self.certificate_oidc_issuer_regexp.is_some();
        let claims = ClaimMatch::given([
            &self.certificate_github_workflow_repository,
            &self.certificate_github_workflow_ref,
            &self.certificate_github_workflow_sha,
            &self.certificate_github_workflow_trigger,
            &self.certificate_github_workflow_name,
            &self.certificate_runner_environment,
        ]);
        match (&self.public_key, identity_fields) {
            (Some(_), true) => {
                problems.push(format!("{at}: a signer is a public_key or a certificate identity, not both"));
                None
            }
            (Some(key), false) => {
                if !claims.is_empty() {
                    problems.push(format!("{at}: workflow claims belong to a certificate identity, not to a key"));
                }
                PublicKey::from_base64(key.trim())
                    .map(SignerId::Key)
                    .map_err(|e| problems.push(format!("{at}: public_key: {e}")))
                    .ok()
            }
            (None, false) => {
                problems.push(format!(
                    "{at}: give public_key, or certificate_identity (or _regexp) with certificate_oidc_issuer (or _regexp)"
                ));
                None
            }
            (None, true) => {
                let identity = Given::of(&self.certificate_identity, &self.certificate_identity_regexp);
                let issuer = Given::of(&self.certificate_oidc_issuer, &self.certificate_oidc_issuer_regexp);
                match IdentityPolicy::new(identity, issuer, claims) {
                    Ok(policy) => Some(SignerId::Identity(policy)),
                    Err(errors) => {
                        for e in errors {
                            let field = match e.field() {
                                Field::Identity => "certificate_identity",
                                Field::Issuer => "certificate_oidc_issuer",
                            };
                            problems.push(match e {
                                IdentityPolicyError::Both(_) => format!("{at}: {field} or {field}_regexp, not both"),
                                IdentityPolicyError::Neither(_) => {
                                    format!("{at}: {field} (or {field}_regexp) is required for a certificate identity")
                                }
                                IdentityPolicyError::Pattern(_, e) => format!("{at}: {field}_regexp: {e}"),
                            });
                        }
                        None
                    }
                }
            }
        }
    }
}
