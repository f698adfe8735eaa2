//! What a signature binds and whom we trust: the `agent-bundle/1` trusted comment that ties a
//! minisign signature to one agent name and version, and the trusted-keys file that says which
//! keys may sign which agents.
//!
//! Trusted-keys file format, one key per line:
//!
//! ```text
//! # comment
//! RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3 mailer kb-*
//! RWT...                                                      # no pattern: any agent
//! ```
//!
//! Each line is a minisign public key (base64, as in the second line of a `.pub` file),
//! optionally followed by agent-name patterns (`*` matches any run of characters). A key with
//! patterns may sign only agents whose name matches one of them.

use crate::minisign::PublicKey;

/// The first word of every trusted comment `bundle` writes and accepts.
pub const COMMENT_PREFIX: &str = "agent-bundle/1";

/// The trusted comment for an agent: `agent-bundle/1 name=<name> version=<version>`. It is
/// covered by the global signature, so it cannot be swapped without the secret key.
pub fn trusted_comment(name: &str, version: &str) -> String {
    format!("{COMMENT_PREFIX} name={name} version={version}")
}

/// The agent name and version a trusted comment binds.
pub fn parse_trusted_comment(comment: &str) -> Result<(String, String), String> {
    let mut words = comment.split(' ');
    if words.next() != Some(COMMENT_PREFIX) {
        return Err(format!("the trusted comment does not start with `{COMMENT_PREFIX}`"));
    }
    let (mut name, mut version) = (None, None);
    for word in words {
        match word.split_once('=') {
            Some(("name", v)) if name.is_none() => name = Some(v.to_owned()),
            Some(("version", v)) if version.is_none() => version = Some(v.to_owned()),
            _ => return Err(format!("unexpected `{word}` in the trusted comment")),
        }
    }
    match (name, version) {
        (Some(n), Some(v)) => Ok((n, v)),
        _ => Err("the trusted comment does not name the agent and version".to_owned()),
    }
}

/// A key we trust, and the agents it may sign (empty: any).
#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub key: PublicKey,
    pub scopes: Vec<String>,
}

impl TrustedKey {
    pub fn may_sign(&self, agent: &str) -> bool {
        self.scopes.is_empty() || self.scopes.iter().any(|p| glob_match(p, agent))
    }
}

/// The set of keys a verifier trusts.
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    pub keys: Vec<TrustedKey>,
}

impl TrustedKeys {
    /// Parses a trusted-keys file, or a plain minisign public key file (its first line an
    /// untrusted comment: one key, trusted for every agent); the error names the line.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim_start().starts_with("untrusted comment:") {
            let key = PublicKey::from_text(text).map_err(|e| e.to_string())?;
            return Ok(Self::from_keys([key]));
        }
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split_once('#').map_or(line, |(before, _)| before).trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            let b64 = words.next().unwrap_or_default();
            let key = PublicKey::from_base64(b64).map_err(|e| format!("line {}: {e}", i + 1))?;
            let scopes: Vec<String> = words.map(str::to_owned).collect();
            for s in &scopes {
                if !s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '*')) {
                    return Err(format!("line {}: `{s}` is not an agent-name pattern (a-z 0-9 - _ and *)", i + 1));
                }
            }
            keys.push(TrustedKey { key, scopes });
        }
        if keys.is_empty() {
            return Err("the trusted-keys file lists no key".to_owned());
        }
        Ok(TrustedKeys { keys })
    }

    pub fn from_keys(keys: impl IntoIterator<Item = PublicKey>) -> Self {
        TrustedKeys { keys: keys.into_iter().map(|key| TrustedKey { key, scopes: Vec::new() }).collect() }
    }

    /// The trusted keys with this key id.
    pub fn with_id(&self, key_id: [u8; 8]) -> impl Iterator<Item = &TrustedKey> {
        self.keys.iter().filter(move |k| k.key.key_id() == key_id)
    }
}

/// `*` matches any run of characters; everything else matches itself.
/// The message for a secret key given where a public key belongs, when `text` (read from
/// `path`) is one (nothing of the key is shown): the command line and the Python package say
/// the same.
pub fn secret_key_given_to_verify(path: &std::path::Path, text: &str) -> Option<String> {
    crate::minisign::SecretKey::is_encrypted(text).ok()?;
    let public = path.with_extension("pub");
    let fix = if public != path && public.is_file() {
        format!("use {}", public.display())
    } else {
        format!("write it with `bundle pubkey {} -o {}`", path.display(), public.display())
    };
    Some(format!(
        "{} is a secret key, but verifying needs the public key: {fix} (and keep the secret key off the machines \
         that verify)",
        path.display()
    ))
}

pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_round_trip() {
        let c = trusted_comment("mailer", "1.4.0");
        assert_eq!(parse_trusted_comment(&c).unwrap(), ("mailer".into(), "1.4.0".into()));
        assert!(parse_trusted_comment("timestamp:1 file:x").is_err());
        assert!(parse_trusted_comment("agent-bundle/1 name=a name=b version=1").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob_match("kb-*", "kb-search"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("mailer", "mailer"));
        assert!(!glob_match("mailer", "mailer2"));
        assert!(!glob_match("kb-*", "mailer"));
    }
}
