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
        let credential_key = is_credential_parameter(key);
        let templated = value.starts_with('{') && value.ends_with('}');
        if credential_key && !value.is_empty() && !templated {
            return Some(format!("query parameter `{key}` carries a credential written literally"));
        }
    }
    None
}

/// Whether a URL's query parameter is named like a credential (`token`, `api_key`, `key`,
/// `sig`, ...).
pub fn is_credential_parameter(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    CREDENTIAL_WORDS.iter().any(|w| lower.contains(w)) || lower == "key" || lower == "sig"
}

/// Whether a value looks like a token of a known issuer (`ghp_…`, `sk_live_…`, `AKIA…`).
pub fn is_token(value: &str) -> bool {
    looks_like_token(value)
}

/// Why the command line of a server (`[pins] command`, which is signed and copied with every
/// bundle) carries a credential, if it does: an argument that looks like a token, a URL with
/// credentials, or the value of an option named like one (`--api-key X`, `--token=X`).
pub fn literal_credential_in_command(command: &[String]) -> Option<String> {
    // `--token-file PATH` names where a secret is, not the secret.
    let named = |option: &str| {
        let lower = option.trim_start_matches('-').to_ascii_lowercase();
        let names_a_place = ["file", "path", "dir"].iter().any(|s| lower.ends_with(s));
        option.starts_with('-') && !names_a_place && CREDENTIAL_WORDS.iter().any(|w| lower.contains(w))
    };
    for (i, arg) in command.iter().enumerate() {
        if looks_like_token(arg) {
            return Some(format!("argument {i} looks like a literal token (`{}…`)", prefix(arg)));
        }
        if arg.contains("://")
            && let Some(why) = literal_credential_in_url(arg)
        {
            return Some(format!("argument {i}: {why}"));
        }
        if let Some((option, value)) = arg.split_once('=')
            && named(option)
            && !value.is_empty()
        {
            return Some(format!("argument {i} gives `{option}` a value written literally"));
        }
        if named(arg) && !arg.contains('=') && command.get(i + 1).is_some_and(|v| !v.starts_with('-')) {
            return Some(format!("argument {} is the value of `{arg}`, written literally", i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_server_command() {
        let c = |args: &[&str]| literal_credential_in_command(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(c(&["mcp-server-time", "--local-timezone", "Etc/UTC"]), None);
        assert_eq!(c(&["npx", "-y", "@modelcontextprotocol/server-everything"]), None);
        assert_eq!(c(&["server", "--auth-mode", "--verbose"]), None, "a flag without a value");
        assert!(c(&["server", "--api-key", "abc123"]).is_some());
        assert!(c(&["server", "--token=abc123"]).is_some());
        assert!(c(&["server", "ghp_0123456789abcdef"]).is_some());
        assert!(c(&["server", "https://user:pw@db.example/x"]).is_some());
        assert_eq!(c(&["server", "--token-file", "/run/secrets/t"]), None, "where the secret is");
    }

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
