//! Secret placeholders in http headers (`${secret:<id>}`) and the detection of credentials
//! written literally, which would end up in a signed, widely copied bundle.

use std::ops::Range;

pub const PLACEHOLDER_PREFIX: &str = "${secret:";

/// A `${secret:<id>}` found in a header value, with its byte range in the value.
#[derive(Debug, PartialEq)]
pub struct Placeholder {
    pub secret: String,
    pub range: Range<usize>,
}

/// Finds every placeholder in `value`. Any `${` that does not open a well-formed
/// `${secret:<id>}` is an error, described in the returned message.
pub fn placeholders(value: &str) -> Result<Vec<Placeholder>, String> {
    let mut found = Vec::new();
    let mut rest = 0;
    while let Some(i) = value[rest..].find("${") {
        let start = rest + i;
        let Some(len) = value[start..].find('}') else {
            return Err(format!("`{}` opens a placeholder that is never closed", &value[start..]));
        };
        let end = start + len + 1;
        let inner = &value[start..end];
        let Some(secret) = inner.strip_prefix(PLACEHOLDER_PREFIX).and_then(|s| s.strip_suffix('}')) else {
            return Err(format!("`{inner}` is not a secret placeholder; write `${{secret:<secret-id>}}`"));
        };
        if let Err(why) = check_secret_id(secret) {
            return Err(format!("`{inner}`: {why}"));
        }
        found.push(Placeholder { secret: secret.to_owned(), range: start..end });
        rest = end;
    }
    Ok(found)
}

/// Secret ids: 1-256 characters of `[A-Za-z0-9._/-]`, `/`-separated segments that are not empty.
pub fn check_secret_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 256 {
        return Err(format!("secret id `{id}` must be 1 to 256 characters long"));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))) {
        return Err(format!("secret id `{id}` contains `{}`; allowed are A-Z a-z 0-9 . _ / -", c.escape_debug()));
    }
    if id.split('/').any(str::is_empty) {
        return Err(format!("secret id `{id}` has an empty `/` segment"));
    }
    Ok(())
}

const CREDENTIAL_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"];
const CREDENTIAL_WORDS: &[&str] = &["token", "secret", "password", "passwd", "api-key", "apikey", "api_key", "auth"];
const SCHEME_WORDS: &[&str] = &["bearer", "basic", "token", "digest", "apikey", "key", "bot", "otoken"];
const TOKEN_PREFIXES: &[&str] = &[
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "glpat-",
    "AKIA",
    "AIza",
];

fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    CREDENTIAL_HEADERS.contains(&lower.as_str()) || CREDENTIAL_WORDS.iter().any(|w| lower.contains(w))
}

fn without_placeholders(value: &str, found: &[Placeholder]) -> String {
    let mut out = String::new();
    let mut at = 0;
    for p in found {
        out.push_str(&value[at..p.range.start]);
        out.push(' ');
        at = p.range.end;
    }
    out.push_str(&value[at..]);
    out
}

fn looks_like_token(word: &str) -> bool {
    TOKEN_PREFIXES.iter().any(|p| word.starts_with(p) && word.len() >= p.len() + 8)
}

/// Why this header value is a literal credential, if it is one.
pub fn literal_credential_in_header(name: &str, value: &str, found: &[Placeholder]) -> Option<String> {
    let literal = without_placeholders(value, found);
    let words: Vec<&str> = literal.split_whitespace().collect();
    if let Some(word) = words.iter().find(|w| looks_like_token(w)) {
        return Some(format!("header `{name}` contains what looks like a literal token (`{}…`)", prefix(word)));
    }
    for pair in words.windows(2) {
        let scheme = pair[0].to_ascii_lowercase();
        if (scheme == "bearer" || scheme == "basic") && !pair[1].is_empty() {
            return Some(format!("header `{name}` contains a literal `{}` credential", pair[0]));
        }
    }
    if is_credential_header(name) {
        let leftover: Vec<&&str> =
            words.iter().filter(|w| !SCHEME_WORDS.contains(&w.to_ascii_lowercase().as_str())).collect();
        if !leftover.is_empty() {
            return Some(format!(
                "header `{name}` carries a credential written literally (`{}…`)",
                prefix(leftover[0])
            ));
        }
    }
    None
}

fn prefix(word: &str) -> String {
    word.chars().take(4).collect()
}

/// Why this URL carries a credential, if it does: a password in the authority, or a query
/// parameter named like a credential with a literal value.
pub fn literal_credential_in_url(url: &str) -> Option<String> {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Some("the URL carries credentials in its `user:password@` part".to_owned());
    }
    let query = url.split_once('?').map(|(_, q)| q.split('#').next().unwrap_or(q))?;
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let lower = key.to_ascii_lowercase();
        let credential_key = CREDENTIAL_WORDS.iter().any(|w| lower.contains(w)) || lower == "key" || lower == "sig";
        let templated = value.starts_with('{') && value.ends_with('}');
        if credential_key && !value.is_empty() && !templated {
            return Some(format!("query parameter `{key}` carries a credential written literally"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_placeholders() {
        let p = placeholders("Bearer ${secret:a/b}").unwrap();
        assert_eq!(p, vec![Placeholder { secret: "a/b".into(), range: 7..20 }]);
        assert!(placeholders("${secret:}").is_err());
        assert!(placeholders("${foo}").is_err());
        assert!(placeholders("${secret:a").is_err());
    }

    #[test]
    fn detects_literal_credentials() {
        let check = |n: &str, v: &str| literal_credential_in_header(n, v, &placeholders(v).unwrap());
        assert!(check("Authorization", "Bearer abcdef123456789").is_some());
        assert!(check("Authorization", "Bearer ${secret:x}").is_none());
        assert!(check("X-Api-Key", "sk-live-0123456789abcdef").is_some());
        assert!(check("X-Trace", "Bearer abc").is_some());
        assert!(check("Accept", "application/json").is_none());
        assert!(literal_credential_in_url("https://u:p@x.com/").is_some());
        assert!(literal_credential_in_url("https://x.com/?api_key=abc").is_some());
        assert!(literal_credential_in_url("https://x.com/?q={q}&token={token}").is_none());
    }
}
