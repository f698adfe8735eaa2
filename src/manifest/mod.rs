//! manifest.toml, format 1: which agent this is, and the BLAKE3 digest and size of every file
//! the bundle holds. It is the document that gets signed, so everything a verifier trusts
//! about a bundle must be in it.
//!
//! Parsing keeps spans (for `line:column` in diagnostics); editing (`bundle lock`) goes
//! through `toml_edit::DocumentMut` in [`edit`], so the author's comments and layout survive.

pub mod edit;

use std::collections::BTreeMap;
use std::ops::Range;

use toml_edit::{Item, TableLike};

use crate::diagnostic::did_you_mean;
use crate::diagnostic::{Code, Diagnostic, Severity, Source};
use crate::paths;
use crate::timestamp::Timestamp;

pub const FILE_NAME: &str = "manifest.toml";
/// The only bundle format this build understands.
pub const FORMAT: i64 = 1;

/// A BLAKE3 digest, size and executable bit, as written in the manifest. The executable bit
/// is signed too: it decides the mode a deployed file gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub blake3: blake3::Hash,
    pub size: u64,
    pub executable: bool,
}

/// A named artifact: `[artifacts.tools]` or `[artifacts.policy]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub path: String,
    pub digest: Option<Digest>,
    /// `[artifacts.tools] version`: the tools.json schema version.
    pub version: Option<i64>,
}

/// The parsed manifest. Digests are optional here: an unlocked manifest is valid TOML for
/// `check` (which then reports `stale_digest`), never for `verify`.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub format: i64,
    pub name: String,
    pub version: semver::Version,
    pub tools: Option<Artifact>,
    pub policy: Option<Artifact>,
    pub files: BTreeMap<String, Option<Digest>>,
    /// `[bundle] allow_secret_files`: paths that look like secrets but are meant to ship.
    pub allow_secret_files: Vec<String>,
    /// `[bundle] expires`: after this instant `bundle verify` rejects the bundle (`expired`),
    /// so a stale release cannot be replayed forever (a freeze attack).
    pub expires: Option<Timestamp>,
    /// `[pins."<file>"]`: remote toolsets fetched by `bundle import --pin`, by the agent file
    /// that holds the fetched copy.
    pub pins: BTreeMap<String, Pin>,
}

/// A remote tool definition pinned at import: where it came from and the BLAKE3 digest of the
/// bytes the server sent then (which the pinned file holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub url: String,
    pub format: PinFormat,
    pub blake3: blake3::Hash,
}

/// The formats a pin can hold (`format = "rap"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinFormat {
    Rap,
}

impl PinFormat {
    pub const ALL: &[&str] = &["rap"];

    pub fn as_str(self) -> &'static str {
        match self {
            PinFormat::Rap => "rap",
        }
    }
}

impl Manifest {
    /// Every file the manifest lists, with its digest when present: the two named artifacts
    /// and `[files]`.
    pub fn entries(&self) -> BTreeMap<&str, Option<&Digest>> {
        let mut all: BTreeMap<&str, Option<&Digest>> =
            self.files.iter().map(|(p, d)| (p.as_str(), d.as_ref())).collect();
        for a in [&self.tools, &self.policy].into_iter().flatten() {
            all.insert(a.path.as_str(), a.digest.as_ref());
        }
        all
    }
}

const TOP_KEYS: &[&str] = &["bundle", "agent", "artifacts", "files", "pins"];
const BUNDLE_KEYS: &[&str] = &["format", "allow_secret_files", "expires"];
const AGENT_KEYS: &[&str] = &["name", "version"];
const ARTIFACT_KINDS: &[&str] = &["tools", "policy"];
const TOOLS_KEYS: &[&str] = &["path", "blake3", "size", "version"];
const POLICY_KEYS: &[&str] = &["path", "blake3", "size"];
const FILE_KEYS: &[&str] = &["blake3", "size", "executable"];
const PIN_KEYS: &[&str] = &["url", "format", "blake3"];

/// Agent names: 1-64 characters, lowercase ASCII letters, digits, `-` and `_`, starting with a
/// letter. They name the bundle file and are matched against trusted-key scopes.
pub fn check_agent_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("agent name `{name}` must be 1 to 64 characters of a-z, 0-9, `-` and `_`, starting with a letter"))
    }
}

/// Parses a digest string: exactly 64 lowercase hex digits.
pub fn parse_blake3(text: &str) -> Option<blake3::Hash> {
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    blake3::Hash::from_hex(text).ok()
}

struct Parser<'a> {
    src: &'a Source,
    diags: &'a mut Vec<Diagnostic>,
}

impl Parser<'_> {
    fn push(
        &mut self,
        severity: Severity,
        code: Code,
        key: &str,
        span: Option<Range<usize>>,
        message: String,
        help: &str,
    ) {
        let mut d = Diagnostic::new(severity, code, &self.src.name, message).at_path(key).with_help(help);
        if let Some(span) = span {
            d = d.at_span(self.src, span);
        }
        self.diags.push(d);
    }

    fn error(&mut self, code: Code, key: &str, span: Option<Range<usize>>, message: String, help: &str) {
        self.push(Severity::Error, code, key, span, message, help);
    }

    fn known_keys(&mut self, table: &dyn TableLike, prefix: &str, allowed: &[&str], what: &str) {
        for (key, _) in table.iter() {
            if allowed.contains(&key) {
                continue;
            }
            let span = table.get_key_value(key).and_then(|(k, _)| k.span());
            let help = match did_you_mean(key, allowed) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("{what} allows only: {}", allowed.join(", ")),
            };
            self.error(Code::UnknownField, &join(prefix, key), span, format!("unknown key `{key}` in {what}"), &help);
        }
    }

    fn table<'t>(
        &mut self,
        parent: &'t dyn TableLike,
        prefix: &str,
        key: &str,
        required: bool,
    ) -> Option<&'t dyn TableLike> {
        let full = join(prefix, key);
        match parent.get(key) {
            None => {
                if required {
                    self.error(
                        Code::MissingField,
                        &full,
                        None,
                        format!("manifest.toml has no `[{full}]` table"),
                        "add it; see `bundle init` for a template",
                    );
                }
                None
            }
            Some(item) => match item.as_table_like() {
                Some(t) => Some(t),
                None => {
                    self.error(
                        Code::WrongType,
                        &full,
                        item.span(),
                        format!("`{full}` must be a table"),
                        "write it as a `[table]`",
                    );
                    None
                }
            },
        }
    }

    fn required<'t>(&mut self, table: &'t dyn TableLike, prefix: &str, key: &str) -> Option<&'t Item> {
        let item = table.get(key);
        if item.is_none() {
            let full = join(prefix, key);
            self.error(
                Code::MissingField,
                &full,
                None,
                format!("manifest.toml has no `{full}`"),
                "add it: it is required",
            );
        }
        item
    }

    fn string<'t>(&mut self, item: &'t Item, key: &str) -> Option<&'t str> {
        let s = item.as_str();
        if s.is_none() {
            self.error(Code::WrongType, key, item.span(), format!("`{key}` must be a string"), "quote the value");
        }
        s
    }

    fn integer(&mut self, item: &Item, key: &str) -> Option<i64> {
        let n = item.as_integer();
        if n.is_none() {
            self.error(
                Code::WrongType,
                key,
                item.span(),
                format!("`{key}` must be an integer"),
                "write a whole number",
            );
        }
        n
    }

    fn digest(&mut self, table: &dyn TableLike, prefix: &str) -> Option<Digest> {
        let (hash_item, size_item) = (table.get("blake3"), table.get("size"));
        if hash_item.is_none() && size_item.is_none() {
            return None;
        }
        let mut hash = None;
        let mut size = None;
        let key = join(prefix, "blake3");
        match hash_item {
            None => self.error(
                Code::MissingField,
                &key,
                None,
                format!("`{prefix}` has a size but no blake3 digest"),
                "run `bundle lock`",
            ),
            Some(item) => {
                if let Some(s) = self.string(item, &key) {
                    hash = parse_blake3(s);
                    if hash.is_none() {
                        self.error(
                            Code::InvalidDigest,
                            &key,
                            item.span(),
                            format!("`{key}` must be 64 lowercase hex digits"),
                            "run `bundle lock` to recompute it",
                        );
                    }
                }
            }
        }
        let key = join(prefix, "size");
        match size_item {
            None => self.error(
                Code::MissingField,
                &key,
                None,
                format!("`{prefix}` has a digest but no size"),
                "run `bundle lock`",
            ),
            Some(item) => {
                if let Some(n) = self.integer(item, &key) {
                    if n < 0 {
                        self.error(
                            Code::InvalidDigest,
                            &key,
                            item.span(),
                            format!("`{key}` must not be negative"),
                            "run `bundle lock`",
                        );
                    } else {
                        size = Some(n as u64);
                    }
                }
            }
        }
        let mut executable = false;
        if let Some(item) = table.get("executable") {
            let key = join(prefix, "executable");
            match item.as_bool() {
                Some(b) => executable = b,
                None => self.error(
                    Code::WrongType,
                    &key,
                    item.span(),
                    format!("`{key}` must be true or false"),
                    "run `bundle lock`",
                ),
            }
        }
        Some(Digest { blake3: hash?, size: size?, executable })
    }

    /// `[pins."<file>"]` tables: `url` (http or https), `format` ("rap"), `blake3`.
    fn pins(&mut self, root: &dyn TableLike) -> BTreeMap<String, Pin> {
        let mut pins = BTreeMap::new();
        let Some(table) = self.table(root, "", "pins", false) else { return pins };
        for (path, item) in table.iter() {
            let key = join("pins", path);
            if let Err(why) = paths::check(path) {
                let span = table.get_key_value(path).and_then(|(k, _)| k.span());
                self.error(
                    Code::UnsafePath,
                    &key,
                    span,
                    format!("pinned file path `{path}` is not a safe relative path: {why}"),
                    "pins name a file inside the agent folder, e.g. `pins/example.com.rap.json`",
                );
                continue;
            }
            let Some(entry) = item.as_table_like() else {
                self.error(
                    Code::WrongType,
                    &key,
                    item.span(),
                    format!("`{key}` must be a table with url, format and blake3"),
                    "let `bundle import --from rap URL --pin` write it",
                );
                continue;
            };
            self.known_keys(entry, &key, PIN_KEYS, "a [pins] entry");
            let url_key = join(&key, "url");
            let url = self.required(entry, &key, "url").and_then(|i| self.string(i, &url_key).map(|s| (s, i.span())));
            let url = match url {
                Some((u, _)) if crate::tools::validate::check_url(u).is_ok_and(|t| t.is_empty()) => Some(u.to_owned()),
                Some((u, span)) => {
                    self.error(
                        Code::InvalidUrl,
                        &url_key,
                        span,
                        format!("`{url_key}` = \"{u}\" is not an absolute http or https URL"),
                        "pin the URL the toolset is served from",
                    );
                    None
                }
                None => None,
            };
            let format_key = join(&key, "format");
            let format = self.required(entry, &key, "format").and_then(|i| {
                let s = self.string(i, &format_key)?;
                if s == PinFormat::Rap.as_str() {
                    return Some(PinFormat::Rap);
                }
                self.error(
                    Code::UnsupportedVersion,
                    &format_key,
                    i.span(),
                    format!("pinned format `{s}` is not supported"),
                    &format!("supported: {}", PinFormat::ALL.join(", ")),
                );
                None
            });
            let hash_key = join(&key, "blake3");
            let hash = self.required(entry, &key, "blake3").and_then(|i| {
                let s = self.string(i, &hash_key)?;
                let h = parse_blake3(s);
                if h.is_none() {
                    self.error(
                        Code::InvalidDigest,
                        &hash_key,
                        i.span(),
                        format!("`{hash_key}` must be 64 lowercase hex digits"),
                        "pin again with `bundle import --from rap URL --pin`",
                    );
                }
                h
            });
            if let (Some(url), Some(format), Some(blake3)) = (url, format, hash) {
                pins.insert(path.to_owned(), Pin { url, format, blake3 });
            }
        }
        pins
    }

    fn artifact(&mut self, artifacts: &dyn TableLike, kind: &str, expected_path: &str) -> Option<Artifact> {
        let prefix = format!("artifacts.{kind}");
        let table = self.table(artifacts, "artifacts", kind, false)?;
        let keys = if kind == "tools" { TOOLS_KEYS } else { POLICY_KEYS };
        self.known_keys(table, &prefix, keys, &format!("[{prefix}]"));
        let path_key = join(&prefix, "path");
        let path = self.required(table, &prefix, "path").and_then(|i| self.string(i, &path_key).map(|s| (s, i.span())));
        if let Some((path, span)) = path
            && path != expected_path
        {
            self.error(
                Code::InvalidDigest,
                &path_key,
                span,
                format!("`{path_key}` must be \"{expected_path}\""),
                "the artifact's file name is fixed by the format",
            );
        }
        let mut version = None;
        if let Some(item) = table.get("version") {
            let key = join(&prefix, "version");
            version = self.integer(item, &key);
            if let Some(v) = version
                && v != crate::tools::SUPPORTED_VERSION as i64
            {
                self.error(
                    Code::UnsupportedVersion,
                    &key,
                    item.span(),
                    format!(
                        "`{key}` is {v}; this bundle supports tools.json version {}",
                        crate::tools::SUPPORTED_VERSION
                    ),
                    "set it to 1, or upgrade bundle",
                );
            }
        }
        let digest = self.digest(table, &prefix);
        Some(Artifact { path: expected_path.to_owned(), digest, version })
    }
}

/// A TOML key path as diagnostics show it: `files."prompts/system.md"`, `agent.name`.
pub fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        format!("{prefix}.{key}")
    } else {
        format!("{prefix}.{}", toml_edit::Value::from(key))
    }
}

/// Parses and checks manifest.toml, reporting every problem; returns the manifest when its
/// required parts are readable (digest problems are reported but still yield a manifest).
pub fn parse(src: &Source, diags: &mut Vec<Diagnostic>) -> Option<Manifest> {
    let doc = match toml_edit::Document::parse(src.text.to_string()) {
        Ok(doc) => doc,
        Err(e) => {
            let mut d = Diagnostic::error(Code::InvalidToml, &src.name, format!("not valid TOML: {}", e.message()))
                .with_help("see https://toml.io for the syntax");
            if let Some(span) = e.span() {
                d = d.at_span(src, span);
            }
            diags.push(d);
            return None;
        }
    };
    let mut p = Parser { src, diags };
    let root = doc.as_table();
    p.known_keys(root, "", TOP_KEYS, "manifest.toml");

    let mut format = None;
    if let Some(bundle) = p.table(root, "", "bundle", true) {
        p.known_keys(bundle, "bundle", BUNDLE_KEYS, "[bundle]");
        if let Some(item) = p.required(bundle, "bundle", "format") {
            match item.as_integer() {
                Some(FORMAT) => format = Some(FORMAT),
                _ => {
                    let found =
                        item.as_value().map_or_else(|| "a table".to_owned(), |v| v.to_string().trim().to_owned());
                    p.error(
                        Code::UnsupportedVersion,
                        "bundle.format",
                        item.span(),
                        format!("unsupported bundle format {found}; this bundle supports format {FORMAT}"),
                        "set `format = 1` (an integer), or upgrade bundle",
                    );
                    // Fail closed: the rest is only defined for format 1.
                    return None;
                }
            }
        }
    }

    let mut allow_secret_files = Vec::new();
    if let Some(item) = root.get("bundle").and_then(|b| b.get("allow_secret_files")) {
        match item.as_array() {
            Some(list) if list.iter().all(|v| v.as_str().is_some()) => {
                allow_secret_files = list.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            }
            _ => p.error(
                Code::WrongType,
                "bundle.allow_secret_files",
                item.span(),
                "`bundle.allow_secret_files` must be an array of file paths".to_owned(),
                "write e.g. `allow_secret_files = [\"certs/public-ca.pem\"]`",
            ),
        }
    }

    let mut expires = None;
    if let Some(item) = root.get("bundle").and_then(|b| b.get("expires")) {
        // A string, or a TOML offset date-time (the same RFC 3339 text, unquoted).
        let text = match item.as_value() {
            Some(toml_edit::Value::String(s)) => Some(s.value().clone()),
            Some(toml_edit::Value::Datetime(d)) => Some(d.value().to_string()),
            _ => None,
        };
        match text {
            Some(text) => match Timestamp::parse(&text) {
                Ok(t) => expires = Some(t),
                Err(why) => p.error(
                    Code::InvalidExpiry,
                    "bundle.expires",
                    item.span(),
                    why,
                    "write e.g. `expires = \"2027-01-01T00:00:00Z\"` (UTC) or with an offset such as +02:00",
                ),
            },
            None => p.error(
                Code::WrongType,
                "bundle.expires",
                item.span(),
                "`bundle.expires` must be an RFC 3339 date-time".to_owned(),
                "write e.g. `expires = \"2027-01-01T00:00:00Z\"`",
            ),
        }
    }

    let mut name = None;
    let mut version = None;
    if let Some(agent) = p.table(root, "", "agent", true) {
        p.known_keys(agent, "agent", AGENT_KEYS, "[agent]");
        if let Some(item) = p.required(agent, "agent", "name")
            && let Some(s) = p.string(item, "agent.name")
        {
            match check_agent_name(s) {
                Ok(()) => name = Some(s.to_owned()),
                Err(why) => p.error(
                    Code::InvalidName,
                    "agent.name",
                    item.span(),
                    why,
                    "use a short lowercase name such as `mailer`",
                ),
            }
        }
        if let Some(item) = p.required(agent, "agent", "version")
            && let Some(s) = p.string(item, "agent.version")
        {
            match semver::Version::parse(s) {
                Ok(v) => version = Some(v),
                Err(e) => p.error(
                    Code::InvalidVersion,
                    "agent.version",
                    item.span(),
                    format!("agent version `{s}` is not semantic versioning: {e}"),
                    "write MAJOR.MINOR.PATCH, e.g. \"1.4.0\"",
                ),
            }
        }
    }

    let mut tools = None;
    let mut policy = None;
    if let Some(artifacts) = p.table(root, "", "artifacts", false) {
        p.known_keys(artifacts, "artifacts", ARTIFACT_KINDS, "[artifacts]");
        tools = p.artifact(artifacts, "tools", crate::tools::FILE_NAME);
        policy = p.artifact(artifacts, "policy", crate::policy::FILE_NAME);
    }

    let mut files = BTreeMap::new();
    if let Some(table) = p.table(root, "", "files", false) {
        // The named artifacts take part in the case-collision check too.
        let mut folded: BTreeMap<String, String> = [crate::tools::FILE_NAME, crate::policy::FILE_NAME, FILE_NAME]
            .into_iter()
            .map(|p| (paths::fold_key(p), p.to_owned()))
            .collect();
        for (path, item) in table.iter() {
            let key = join("files", path);
            let key_span = table.get_key_value(path).and_then(|(k, _)| k.span());
            if let Err(why) = paths::check(path) {
                p.error(
                    Code::UnsafePath,
                    &key,
                    key_span.clone(),
                    format!("file path `{path}` cannot be packed: {why}"),
                    "rename the file",
                );
            }
            if let Some(first) = folded.insert(paths::fold_key(path), path.to_owned()) {
                p.error(
                    Code::UnsafePath,
                    &key,
                    key_span.clone(),
                    format!("`{path}` and `{first}` differ only in case"),
                    "rename one: they collide on case-insensitive file systems",
                );
            }
            if [crate::tools::FILE_NAME, crate::policy::FILE_NAME, FILE_NAME, crate::bundle::SIGNATURE_ENTRY]
                .contains(&path)
            {
                p.error(
                    Code::UnsafePath,
                    &key,
                    key_span,
                    format!("`{path}` belongs in its own section, not [files]"),
                    "remove it from [files]; `bundle lock` writes it in the right place",
                );
                continue;
            }
            let Some(entry) = item.as_table_like() else {
                p.error(
                    Code::WrongType,
                    &key,
                    item.span(),
                    format!("`{key}` must be a table `{{ blake3 = \"...\", size = N }}`"),
                    "run `bundle lock`",
                );
                continue;
            };
            p.known_keys(entry, &key, FILE_KEYS, "a [files] entry");
            let digest = p.digest(entry, &key);
            if digest.is_none() && entry.get("blake3").is_none() && entry.get("size").is_none() {
                p.error(
                    Code::MissingField,
                    &key,
                    item.span(),
                    format!("`{key}` has no blake3 digest and size"),
                    "run `bundle lock`",
                );
            }
            files.insert(path.to_owned(), digest);
        }
        // A path may not be both a file and a folder (`prompts` and `prompts/system.md`):
        // no file system could hold both.
        let named = [crate::tools::FILE_NAME, crate::policy::FILE_NAME, FILE_NAME, crate::bundle::SIGNATURE_ENTRY];
        for path in table.iter().map(|(p, _)| p) {
            let mut at = 0;
            while let Some(i) = path[at..].find('/') {
                let folder = &path[..at + i];
                if files.contains_key(folder) || named.contains(&folder) {
                    let key = join("files", path);
                    let span = table.get_key_value(path).and_then(|(k, _)| k.span());
                    p.error(
                        Code::UnsafePath,
                        &key,
                        span,
                        format!("`{folder}` is listed as a file and as a folder of `{path}`"),
                        "rename one of them",
                    );
                    break;
                }
                at += i + 1;
            }
        }
    }

    let pins = p.pins(root);

    Some(Manifest {
        format: format?,
        name: name?,
        version: version?,
        tools,
        policy,
        files,
        allow_secret_files,
        expires,
        pins,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> (Option<Manifest>, Vec<Diagnostic>) {
        let mut d = Vec::new();
        let m = parse(&Source::new("manifest.toml", text), &mut d);
        (m, d)
    }

    #[test]
    fn minimal_manifest_parses() {
        let (m, d) = parse_text("[bundle]\nformat = 1\n\n[agent]\nname = \"mailer\"\nversion = \"1.4.0\"\n");
        assert!(d.is_empty(), "{d:?}");
        let m = m.unwrap();
        assert_eq!(m.name, "mailer");
        assert!(m.tools.is_none());
    }

    #[test]
    fn expires_is_a_string_or_an_offset_date_time() {
        let head = "[bundle]\nformat = 1\n";
        let tail = "\n[agent]\nname = \"m\"\nversion = \"1.0.0\"\n";
        let (m, d) = parse_text(&format!("{head}expires = 2027-01-01T00:00:00Z{tail}"));
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(m.unwrap().expires, Some(Timestamp::parse("2027-01-01T00:00:00Z").unwrap()));
        for (value, code) in [
            ("2027-01-01T00:00:00", Code::InvalidExpiry),
            ("2027-01-01", Code::InvalidExpiry),
            ("\"next year\"", Code::InvalidExpiry),
            ("1798761600", Code::WrongType),
        ] {
            let (_, d) = parse_text(&format!("{head}expires = {value}{tail}"));
            assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), [code], "{value}");
        }
    }

    #[test]
    fn reports_keys_and_versions() {
        let (_, d) = parse_text("[bundle]\nformat = 2\n[agent]\nname = \"x\"\nversion = \"1.0.0\"\n");
        assert_eq!(d[0].code, Code::UnsupportedVersion);
        let (_, d) = parse_text("[bundle]\nformat = 1\n[agent]\nname = \"Mail Bot\"\nversion = \"1.0\"\nnmae = 1\n");
        let codes: Vec<_> = d.iter().map(|d| (d.code, d.path.clone().unwrap())).collect();
        assert!(codes.contains(&(Code::UnknownField, "agent.nmae".into())));
        assert!(codes.contains(&(Code::InvalidName, "agent.name".into())));
        assert!(codes.contains(&(Code::InvalidVersion, "agent.version".into())));
    }
}
