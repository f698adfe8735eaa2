//! Key references: what `--key` and `BUNDLE_SIGNING_KEY` may name. A minisign secret key file,
//! a key held by an ssh-agent (`ssh-agent:` or `ssh-agent:SHA256:<fingerprint>`), or a key on a
//! PKCS#11 token named by an RFC 7512 URI (`pkcs11:token=...;object=...?pin-source=...`).
//!
//! Parsing is kept apart from the mechanisms so that a malformed reference is refused before
//! any socket is opened or module loaded, and so that it can be tested without either.

use std::ffi::OsStr;
use std::fmt;
use std::path::PathBuf;

use zeroize::Zeroizing;

use super::SignerError;

/// The prefix of an ssh-agent key reference.
pub const SSH_AGENT_PREFIX: &str = "ssh-agent:";
/// The scheme of a PKCS#11 URI (RFC 7512), matched without regard to case.
pub const PKCS11_SCHEME: &str = "pkcs11:";

/// Where a signing key lives.
#[derive(Debug)]
pub enum KeyRef {
    /// A minisign secret key file.
    File(PathBuf),
    /// A key held by the ssh-agent at `SSH_AUTH_SOCK`: the only ssh-ed25519 key it holds, or
    /// the one with this SHA-256 fingerprint (`SHA256:...`, as `ssh-add -l -E sha256` shows).
    SshAgent { fingerprint: Option<String> },
    /// A private key on a PKCS#11 token.
    Pkcs11(Box<Pkcs11Uri>),
}

impl KeyRef {
    /// Reads a reference as given on the command line. Anything that does not start with
    /// `ssh-agent:` or `pkcs11:` is a file path (`./pkcs11:x` names a file of that name).
    pub fn parse(text: &OsStr) -> Result<KeyRef, SignerError> {
        let Some(s) = text.to_str() else { return Ok(KeyRef::File(PathBuf::from(text))) };
        if let Some(rest) = s.strip_prefix(SSH_AGENT_PREFIX) {
            return parse_agent(rest);
        }
        if is_pkcs11(s) {
            return Pkcs11Uri::parse(s).map(|uri| KeyRef::Pkcs11(Box::new(uri)));
        }
        Ok(KeyRef::File(PathBuf::from(text)))
    }

    /// Whether `text` is an ssh-agent or PKCS#11 reference rather than key text or a path.
    pub fn is_external(text: &str) -> bool {
        text.starts_with(SSH_AGENT_PREFIX) || is_pkcs11(text)
    }
}

fn is_pkcs11(s: &str) -> bool {
    s.get(..PKCS11_SCHEME.len()).is_some_and(|p| p.eq_ignore_ascii_case(PKCS11_SCHEME))
}

fn parse_agent(rest: &str) -> Result<KeyRef, SignerError> {
    if rest.is_empty() {
        return Ok(KeyRef::SshAgent { fingerprint: None });
    }
    let valid = rest
        .strip_prefix("SHA256:")
        .is_some_and(|b64| b64.len() == 43 && b64.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/'));
    if !valid {
        return Err(SignerError::Reference(format!(
            "`{SSH_AGENT_PREFIX}{rest}` does not name a key by its SHA-256 fingerprint; write `ssh-agent:` for the agent's only Ed25519 key, or `ssh-agent:SHA256:...` as `ssh-add -l -E sha256` prints it"
        )));
    }
    Ok(KeyRef::SshAgent { fingerprint: Some(rest.to_owned()) })
}

/// The parts of an RFC 7512 PKCS#11 URI that select a token, a private key and a PIN.
/// Its `Debug` and `Display` never show the PIN.
#[derive(Default)]
pub struct Pkcs11Uri {
    pub token: Option<String>,
    pub manufacturer: Option<String>,
    pub serial: Option<String>,
    pub model: Option<String>,
    pub slot_id: Option<u64>,
    /// `object=`: the key's CKA_LABEL.
    pub object: Option<String>,
    /// `id=`: the key's CKA_ID, raw bytes.
    pub id: Option<Vec<u8>>,
    pub pin_value: Option<Zeroizing<String>>,
    /// `pin-source=`: a file holding the PIN (a path or a `file:` URI).
    pub pin_source: Option<PathBuf>,
    pub module_path: Option<PathBuf>,
}

impl Pkcs11Uri {
    /// Parses `pkcs11:path-attributes[?query-attributes]`. Attributes this tool does not
    /// act on are refused rather than ignored (RFC 7512 §2.3: an unknown path attribute must
    /// not match anything), and so is an attribute given twice.
    pub fn parse(uri: &str) -> Result<Pkcs11Uri, SignerError> {
        let body = &uri[PKCS11_SCHEME.len()..];
        let (path, query) = body.split_once('?').unwrap_or((body, ""));
        let mut parsed = Pkcs11Uri::default();
        let mut seen = Vec::new();
        for (attrs, separator) in [(path, ';'), (query, '&')] {
            for attr in attrs.split(separator).filter(|a| !a.is_empty()) {
                let (name, raw) = attr
                    .split_once('=')
                    .ok_or_else(|| bad_uri(format!("`{}` is not an attribute=value pair", redact_attr(attr))))?;
                if seen.contains(&name) {
                    return Err(bad_uri(format!("`{name}` is given twice")));
                }
                seen.push(name);
                let in_query = separator == '&';
                parsed.set(name, raw, in_query)?;
            }
        }
        if parsed.pin_value.is_some() && parsed.pin_source.is_some() {
            return Err(bad_uri("give either pin-value or pin-source, not both".to_owned()));
        }
        Ok(parsed)
    }

    fn set(&mut self, name: &str, raw: &str, in_query: bool) -> Result<(), SignerError> {
        let bytes = pct_decode(raw).map_err(|e| bad_uri(format!("`{name}`: {e}")))?;
        let text = || String::from_utf8(bytes.clone()).map_err(|_| bad_uri(format!("`{name}` is not UTF-8 text")));
        match (name, in_query) {
            ("token", false) => self.token = Some(text()?),
            ("manufacturer", false) => self.manufacturer = Some(text()?),
            ("serial", false) => self.serial = Some(text()?),
            ("model", false) => self.model = Some(text()?),
            ("object", false) => self.object = Some(text()?),
            ("id", false) => self.id = Some(bytes),
            ("slot-id", false) => {
                self.slot_id = Some(text()?.parse().map_err(|_| bad_uri("`slot-id` is not a number".to_owned()))?);
            }
            ("type", false) => {
                if bytes != b"private" {
                    return Err(bad_uri(format!(
                        "`type={}` does not name a private key; signing needs `type=private` (or no type)",
                        String::from_utf8_lossy(&bytes)
                    )));
                }
            }
            ("pin-value", true) => {
                let pin = Zeroizing::new(bytes);
                let text = std::str::from_utf8(&pin).map_err(|_| bad_uri("the PIN is not UTF-8 text".to_owned()))?;
                self.pin_value = Some(Zeroizing::new(text.to_owned()));
            }
            ("pin-source", true) => {
                let source = text()?;
                let path = match source.strip_prefix("file:") {
                    // file:///abs/path and file:/abs/path (RFC 8089)
                    Some(rest) => rest.strip_prefix("//").unwrap_or(rest).to_owned(),
                    None if source.contains("://") || source.starts_with('|') => {
                        return Err(bad_uri(format!(
                            "pin-source `{source}`: only a file path or a file: URI is supported"
                        )));
                    }
                    None => source,
                };
                self.pin_source = Some(PathBuf::from(path));
            }
            ("module-path", true) => self.module_path = Some(PathBuf::from(text()?)),
            ("module-name", true) => {
                return Err(bad_uri(
                    "`module-name` is not supported: give the module's full path with module-path= or BUNDLE_PKCS11_MODULE"
                        .to_owned(),
                ));
            }
            (name, false) if PATH_ATTRS.contains(&name) => {
                return Err(bad_uri(format!(
                    "`{name}` is not supported for choosing a token; use token=, serial= or slot-id="
                )));
            }
            (name, _) => {
                let place = if in_query { "query" } else { "path" };
                return Err(bad_uri(format!(
                    "`{name}` is not a {place} attribute this tool understands (path: token, manufacturer, serial, model, slot-id, object, id, type; query: pin-value, pin-source, module-path)"
                )));
            }
        }
        Ok(())
    }
}

/// RFC 7512 path attributes that select what this tool does not select by.
const PATH_ATTRS: &[&str] =
    &["library-manufacturer", "library-description", "library-version", "slot-description", "slot-manufacturer"];

fn bad_uri(message: String) -> SignerError {
    SignerError::Reference(format!("PKCS#11 URI: {message}"))
}

/// An attribute for an error message, with a PIN value left out.
fn redact_attr(attr: &str) -> &str {
    if attr.starts_with("pin-value") { "pin-value=..." } else { attr }
}

fn pct_decode(raw: &str) -> Result<Vec<u8>, String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte =
                hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or("a `%` is not followed by two hex digits")?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

impl fmt::Display for Pkcs11Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (name, value) in [
            ("token", &self.token),
            ("manufacturer", &self.manufacturer),
            ("serial", &self.serial),
            ("model", &self.model),
            ("object", &self.object),
        ] {
            if let Some(v) = value {
                parts.push(format!("{name}={v}"));
            }
        }
        if let Some(slot) = self.slot_id {
            parts.push(format!("slot-id={slot}"));
        }
        if let Some(id) = &self.id {
            parts.push(format!("id={}", id.iter().map(|b| format!("%{b:02x}")).collect::<String>()));
        }
        write!(f, "pkcs11:{}", parts.join(";"))
    }
}

impl fmt::Debug for Pkcs11Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkcs11Uri")
            .field("uri", &self.to_string())
            .field("pin_value", &self.pin_value.as_ref().map(|_| "<redacted>"))
            .field("pin_source", &self.pin_source)
            .field("module_path", &self.module_path)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<KeyRef, SignerError> {
        KeyRef::parse(OsStr::new(s))
    }

    #[test]
    fn files_agents_and_uris_are_told_apart() {
        assert!(matches!(parse("release.key").unwrap(), KeyRef::File(p) if p.as_os_str() == "release.key"));
        assert!(matches!(parse("./pkcs11:odd").unwrap(), KeyRef::File(_)));
        assert!(matches!(parse("ssh-agent:").unwrap(), KeyRef::SshAgent { fingerprint: None }));
        let fp = "SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8";
        assert!(
            matches!(parse(&format!("ssh-agent:{fp}")).unwrap(), KeyRef::SshAgent { fingerprint: Some(f) } if f == fp)
        );
        for bad in ["ssh-agent:MD5:aa:bb", "ssh-agent:SHA256:short", "ssh-agent:release"] {
            assert!(matches!(parse(bad), Err(SignerError::Reference(_))), "{bad}");
        }
        assert!(matches!(parse("PKCS11:token=a").unwrap(), KeyRef::Pkcs11(_)));
    }

    #[test]
    fn rfc7512_attributes_are_decoded() {
        let uri = Pkcs11Uri::parse(
            "pkcs11:token=Release%20HSM;object=bundle;id=%01%a2;type=private?pin-source=file:///run/pin&module-path=/usr/lib/softhsm/libsofthsm2.so",
        )
        .unwrap();
        assert_eq!(uri.token.as_deref(), Some("Release HSM"));
        assert_eq!(uri.object.as_deref(), Some("bundle"));
        assert_eq!(uri.id.as_deref(), Some(&[0x01, 0xa2][..]));
        assert_eq!(uri.pin_source, Some(PathBuf::from("/run/pin")));
        assert_eq!(uri.module_path, Some(PathBuf::from("/usr/lib/softhsm/libsofthsm2.so")));
        assert_eq!(uri.to_string(), "pkcs11:token=Release HSM;object=bundle;id=%01%a2");
        let uri = Pkcs11Uri::parse("pkcs11:slot-id=7?pin-value=12%334").unwrap();
        assert_eq!(uri.slot_id, Some(7));
        assert_eq!(uri.pin_value.as_deref().map(String::as_str), Some("1234"));
    }

    #[test]
    fn unknown_repeated_and_malformed_attributes_are_refused() {
        for bad in [
            "pkcs11:token=a;token=b",
            "pkcs11:tokn=a",
            "pkcs11:library-version=1",
            "pkcs11:token=a?module-name=softhsm2",
            "pkcs11:type=public",
            "pkcs11:object=%zz",
            "pkcs11:object",
            "pkcs11:?pin-value=1&pin-source=/p",
            "pkcs11:?pin-source=https://example/pin",
            "pkcs11:?token=a",
        ] {
            assert!(matches!(Pkcs11Uri::parse(bad), Err(SignerError::Reference(_))), "{bad}");
        }
    }

    #[test]
    fn pins_never_show() {
        let uri = Pkcs11Uri::parse("pkcs11:token=t?pin-value=s3cr3t-pin").unwrap();
        assert!(!format!("{uri} {uri:?}").contains("s3cr3t"));
        let err = Pkcs11Uri::parse("pkcs11:token=t?pin-value%s3cr3t").unwrap_err();
        assert!(!err.to_string().contains("s3cr3t"), "{err}");
    }
}
