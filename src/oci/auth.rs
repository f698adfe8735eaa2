//! Registry credentials and the two challenges a registry may answer with (RFC 7235
//! `WWW-Authenticate`): `Basic` and the Docker token flow (`Bearer realm=…,service=…,scope=…`).
//!
//! Credentials come from `BUNDLE_REGISTRY_USERNAME`/`BUNDLE_REGISTRY_PASSWORD`, else from the
//! `auths` of `$DOCKER_CONFIG/config.json` (or `~/.docker/config.json`), the file that docker,
//! helm, oras and cosign log in to: an `auth` (base64 `user:password`) or a `username` and
//! `password`. Credential helpers (`credsStore`, `credHelpers`) are not run. A password never
//! appears in an error or a `Debug` line.

use std::fmt;
use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroizing;

pub const ENV_USERNAME: &str = "BUNDLE_REGISTRY_USERNAME";
pub const ENV_PASSWORD: &str = "BUNDLE_REGISTRY_PASSWORD";

/// A user name and password (or identity token) for one registry.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    password: Zeroizing<String>,
    /// Where they came from, for messages: the variable names or the config file.
    pub source: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials {{ username: {:?}, password: <redacted>, source: {:?} }}", self.username, self.source)
    }
}

impl Credentials {
    pub fn new(username: String, password: String, source: String) -> Self {
        Credentials { username, password: Zeroizing::new(password), source }
    }

    /// The `Authorization` value for HTTP Basic.
    pub fn basic(&self) -> Zeroizing<String> {
        let pair = Zeroizing::new(format!("{}:{}", self.username, self.password.as_str()));
        Zeroizing::new(format!("Basic {}", STANDARD.encode(pair.as_bytes())))
    }

    /// The credentials for `registry` (`host[:port]`): the environment first, then the docker
    /// config file. A config file that exists but cannot be read or parsed is an error (a
    /// login that silently stopped working is worse than a clear message).
    pub fn lookup(registry: &str) -> Result<Option<Credentials>, String> {
        let user = std::env::var(ENV_USERNAME).ok().filter(|u| !u.is_empty());
        let pass = std::env::var(ENV_PASSWORD).ok();
        match (user, pass) {
            (Some(u), Some(p)) => return Ok(Some(Credentials::new(u, p, format!("{ENV_USERNAME}/{ENV_PASSWORD}")))),
            (Some(_), None) | (None, Some(_)) => {
                return Err(format!("set both {ENV_USERNAME} and {ENV_PASSWORD}, or neither"));
            }
            (None, None) => {}
        }
        let Some(path) = docker_config_path() else { return Ok(None) };
        // A regular file within its cap: a link to /dev/zero or a FIFO is refused before reading.
        let limit = crate::limits::MAX_DOCKER_CONFIG_BYTES;
        let text = match crate::regular_file::read_to_string(&path, limit, crate::regular_file::Links::Follow) {
            Ok(t) => t,
            Err(crate::regular_file::ReadError::NotFound) => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        from_docker_config(&text, registry, &path.display().to_string())
    }
}

fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".docker").join("config.json"))
}

/// The `auths` entry for `registry` in a docker config file's text. Keys may be `host[:port]`
/// or a URL (`https://host[:port]/…`); Docker Hub's is `https://index.docker.io/v1/`.
pub fn from_docker_config(text: &str, registry: &str, file: &str) -> Result<Option<Credentials>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{file}: not a docker config file (invalid JSON: {e})"))?;
    let Some(auths) = doc.get("auths").and_then(|a| a.as_object()) else { return Ok(None) };
    let hub = matches!(registry, "docker.io" | "registry-1.docker.io" | "index.docker.io");
    let entry = auths.iter().find(|(key, _)| {
        let host = key.trim_start_matches("https://").trim_start_matches("http://");
        let host = host.split('/').next().unwrap_or_default().to_ascii_lowercase();
        host == registry || (hub && host == "index.docker.io")
    });
    let Some((key, entry)) = entry else { return Ok(None) };
    let source = format!("{file} (auths.\"{key}\")");
    let field = |name: &str| entry.get(name).and_then(|v| v.as_str()).filter(|s| !s.is_empty());
    if let Some(auth) = field("auth") {
        let decoded = Zeroizing::new(
            STANDARD.decode(auth.trim()).map_err(|_| format!("{source}: `auth` is not base64 (of user:password)"))?,
        );
        let text = std::str::from_utf8(&decoded).map_err(|_| format!("{source}: `auth` is not UTF-8"))?;
        let (user, pass) = text.split_once(':').ok_or_else(|| format!("{source}: `auth` is not user:password"))?;
        return Ok(Some(Credentials::new(user.to_owned(), pass.to_owned(), source)));
    }
    match (field("username"), field("password")) {
        (Some(u), Some(p)) => Ok(Some(Credentials::new(u.to_owned(), p.to_owned(), source))),
        _ if field("identitytoken").is_some() => {
            Err(format!("{source}: only an identity token is stored; set {ENV_USERNAME}/{ENV_PASSWORD} instead"))
        }
        _ => Ok(None),
    }
}

/// One `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer { realm: String, service: Option<String>, scope: Option<String> },
}

impl Challenge {
    /// Parses the header's value; `None` for a scheme this client does not speak.
    pub fn parse(header: &str) -> Option<Challenge> {
        let header = header.trim();
        let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Some(Challenge::Basic);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let params = auth_params(params);
        let get = |k: &str| params.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)).map(|(_, v)| v.clone());
        Some(Challenge::Bearer { realm: get("realm")?, service: get("service"), scope: get("scope") })
    }
}

/// `name=value` or `name="quoted, value"` pairs separated by commas.
fn auth_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect::<String>().trim().to_owned();
        if name.is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied().filter(|c| *c != ',') {
                value.push(c);
                chars.next();
            }
            value = value.trim().to_owned();
        }
        out.push((name, value));
    }
}

/// The token in a token server's JSON answer (`token`, or OAuth2's `access_token`).
pub fn token_from_response(body: &str) -> Option<Zeroizing<String>> {
    let doc: serde_json::Value = serde_json::from_str(body).ok()?;
    let token = doc.get("token").or_else(|| doc.get("access_token"))?.as_str()?;
    (!token.is_empty()).then(|| Zeroizing::new(token.to_owned()))
}

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_challenges_with_quoted_commas() {
        let c = Challenge::parse(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(
            c,
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(Challenge::parse(r#"Basic realm="Registry Realm""#), Some(Challenge::Basic));
        assert_eq!(Challenge::parse("Negotiate"), None);
    }

    #[test]
    fn reads_docker_config_auths_both_ways() {
        let auth = STANDARD.encode("ci:s3cret:with:colons");
        let text = format!(
            r#"{{"auths": {{"https://reg.example:5000/v1/": {{"auth": "{auth}"}}, "other": {{"username": "u", "password": "p"}}}}}}"#
        );
        let c = from_docker_config(&text, "reg.example:5000", "config.json").unwrap().unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("ci", "s3cret:with:colons"));
        let c = from_docker_config(&text, "other", "config.json").unwrap().unwrap();
        assert_eq!(c.username, "u");
        assert!(from_docker_config(&text, "none", "config.json").unwrap().is_none());
        // The password never shows in debug output.
        let shown = format!("{c:?}");
        assert!(shown.contains("password: <redacted>") && !shown.contains("\"p\""), "{shown}");
    }
}
