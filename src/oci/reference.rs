//! `oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX)`: where an artifact lives in a registry.
//!
//! Parsed strictly by the grammar of the distribution spec (repository components, tags,
//! sha256 digests), so that nothing a user typed reaches a URL unchecked.

use std::fmt;

/// The scheme every reference starts with; it tells a registry reference from a file path.
pub const SCHEME: &str = "oci://";

/// A parsed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host` or `host:port`, as typed (lower-cased).
    pub registry: String,
    /// `team/agents/mailer`.
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: Option<String>,
}

/// Whether `input` names a registry artifact rather than a file.
pub fn is_reference(input: &str) -> bool {
    input.get(..SCHEME.len()).is_some_and(|s| s.eq_ignore_ascii_case(SCHEME))
}

impl Reference {
    /// Parses `oci://…`; the error says what is wrong and what the form is.
    pub fn parse(input: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "`{input}` is not a registry reference: {why}; the form is oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX)"
            )
        };
        if !is_reference(input) {
            return Err(bad("it does not start with oci://"));
        }
        let rest = &input[SCHEME.len()..];
        let (registry, path) = rest.split_once('/').ok_or_else(|| bad("no repository after the host"))?;
        if !valid_registry(registry) {
            return Err(bad("the host is not HOST or HOST:PORT"));
        }
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => (p, Some(d)),
            None => (path, None),
        };
        if let Some(d) = digest
            && !valid_digest(d)
        {
            return Err(bad("the digest is not sha256: with 64 lowercase hex digits"));
        }
        // A tag follows the last `:` after the last `/`.
        let last = path.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match path[last..].find(':') {
            Some(i) => (&path[..last + i], Some(&path[last + i + 1..])),
            None => (path, None),
        };
        if !valid_repository(repository) {
            return Err(bad("the repository must be lowercase components of [a-z0-9] joined by . _ __ - and /"));
        }
        if let Some(t) = tag
            && !valid_tag(t)
        {
            return Err(bad("a tag is 1 to 128 of [A-Za-z0-9_.-], not starting with . or -"));
        }
        Ok(Reference {
            registry: registry.to_ascii_lowercase(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
        })
    }

    /// What a manifest request names: the digest if given, else the tag.
    pub fn manifest_ref(&self) -> Option<&str> {
        self.digest.as_deref().or(self.tag.as_deref())
    }

    /// The same repository with another tag (for `push --tag`).
    pub fn with_tag(&self, tag: &str) -> Result<Self, String> {
        if !valid_tag(tag) {
            return Err(format!("`{tag}` is not a tag: 1 to 128 of [A-Za-z0-9_.-], not starting with . or -"));
        }
        Ok(Reference { tag: Some(tag.to_owned()), digest: None, ..self.clone() })
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

fn valid_registry(s: &str) -> bool {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    let port_ok = port.is_none_or(|p| {
        !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok_and(|n| n > 0)
    });
    host_ok && port_ok
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*`, at most 255 bytes.
fn valid_repository(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s.split('/').all(valid_component)
}

fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

fn valid_tag(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter().all(|&x| x.is_ascii_alphanumeric() || matches!(x, b'_' | b'.' | b'-'))
}

/// `sha256:` and 64 lowercase hex digits (the only algorithm accepted).
pub fn valid_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|x| x.is_ascii_digit() || (b'a'..=b'f').contains(&x)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tags_digests_and_ports() {
        let r = Reference::parse("oci://127.0.0.1:5000/team/mailer:1.4.0").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5000", "team/mailer", Some("1.4.0"))
        );
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("oci://ghcr.io/o/a@{d}")).unwrap();
        assert_eq!((r.tag, r.digest.as_deref()), (None, Some(d.as_str())));
        assert_eq!(Reference::parse("oci://h/a__b.c-d").unwrap().to_string(), "oci://h/a__b.c-d");
    }

    #[test]
    fn rejects_what_a_url_could_be_smuggled_through() {
        for bad in [
            "oci://h",
            "oci://h/",
            "oci://h/A",
            "oci://h/a/../b",
            "oci://h/a?x=1",
            "oci://h/a#x",
            "oci://h:0/a",
            "oci://h:99999/a",
            "oci://user@h/a",
            "oci://h/a:.t",
            "oci://h/a@sha256:abc",
            "oci://h/a@sha512:aa",
            "oci://h/a%2f",
            "http://h/a",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad}");
        }
    }
}
