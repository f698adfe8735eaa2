//! Reading manifest.toml: a bounded parse with `toml_edit` (spans for `line:column`), then one
//! named step per part of the format, each reporting every problem it finds.

use std::collections::BTreeMap;
use std::ops::Range;

use toml_edit::{Item, TableLike};

use super::{Artifact, Digest, FORMAT, Manifest, check_agent_name, parse_blake3};
use crate::diagnostic::MAX_REPORTED;
use crate::diagnostic::did_you_mean;
use crate::diagnostic::{Code, Diagnostic, Severity, Source};
use crate::limits::MAX_TOML_ITEMS;
use crate::paths;
use crate::timestamp::Timestamp;

mod models;
mod pins;
mod skills;

const TOP_KEYS: &[&str] = &["bundle", "agent", "artifacts", "files", "pins", "models", "skills"];
const BUNDLE_KEYS: &[&str] = &["format", "allow_secret_files", "expires"];
const AGENT_KEYS: &[&str] = &["name", "version"];
const ARTIFACT_KINDS: &[&str] = &["tools", "policy"];
const TOOLS_KEYS: &[&str] = &["path", "blake3", "size", "version"];
const POLICY_KEYS: &[&str] = &["path", "blake3", "size"];
const FILE_KEYS: &[&str] = &["blake3", "size", "executable"];

/// Parses and checks manifest.toml, reporting every problem; returns the manifest when its
/// required parts are readable (digest problems are reported but still yield a manifest).
pub fn parse(src: &Source, diags: &mut Vec<Diagnostic>) -> Option<Manifest> {
    let doc = document(src, diags)?;
    let root = doc.as_table();
    let mut p = Parser { src, diags, shown: 0, hidden: (0, 0) };
    let manifest = p.manifest(root);
    let hidden = p.hidden;
    if let Some(d) = crate::diagnostic::hidden_summary(&src.name, hidden) {
        diags.push(d);
    }
    manifest
}

/// The TOML document, once its size in items is known to be within [`MAX_TOML_ITEMS`].
fn document(src: &Source, diags: &mut Vec<Diagnostic>) -> Option<toml_edit::Document<String>> {
    if let Some(offset) = over_item_limit(&src.text, MAX_TOML_ITEMS) {
        diags.push(
            Diagnostic::error(
                Code::LimitExceeded,
                &src.name,
                format!("too many items: more than {MAX_TOML_ITEMS} keys, values and tables"),
            )
            .at_span(src, offset..offset)
            .with_help("a manifest lists files, each in a few keys: remove what is not a manifest key"),
        );
        return None;
    }
    match toml_edit::Document::parse(src.text.to_string()) {
        Ok(doc) => Some(doc),
        Err(e) => {
            let mut d = Diagnostic::error(Code::InvalidToml, &src.name, format!("not valid TOML: {}", e.message()))
                .with_help("see https://toml.io for the syntax");
            if let Some(span) = e.span() {
                d = d.at_span(src, span);
            }
            diags.push(d);
            None
        }
    }
}

/// The byte offset where `text` passes `limit` TOML items, counted without parsing as the `=`,
/// `,`, `[` and `{` outside strings and comments (each key, array element, inline table and
/// table header has one), so that a 1 MiB `a = [0,0,...]` costs a scan, not a parse. A text of
/// at most `limit` bytes cannot pass it (each item counted is one byte) and is not scanned.
pub fn over_item_limit(text: &str, limit: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.len() <= limit {
        return None;
    }
    let mut count = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            q @ (b'"' | b'\'') => {
                let triple = bytes[i..].starts_with(&[q, q, q]);
                i += if triple { 3 } else { 1 };
                loop {
                    match bytes.get(i) {
                        None => return None,
                        Some(b'\\') if q == b'"' => i += 2,
                        Some(&b) if b == q && (!triple || bytes[i..].starts_with(&[q, q, q])) => {
                            i += if triple { 3 } else { 1 };
                            // A closing `"""` may be followed by up to two more quotes.
                            while triple && bytes.get(i) == Some(&q) {
                                i += 1;
                            }
                            break;
                        }
                        Some(b'\n') if !triple => break,
                        Some(_) => i += 1,
                    }
                }
                continue;
            }
            b'=' | b',' | b'[' | b'{' => {
                count += 1;
                if count > limit {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

impl Parser<'_> {
    fn manifest(&mut self, root: &dyn TableLike) -> Option<Manifest> {
        self.known_keys(root, "", TOP_KEYS, "manifest.toml");
        let format = self.format(root)?;
        let (allow_secret_files, expires) = self.bundle_options(root);
        let (name, version) = self.agent(root);
        let (tools, policy) = match self.table(root, "", "artifacts", false) {
            Some(artifacts) => {
                self.known_keys(artifacts, "artifacts", ARTIFACT_KINDS, "[artifacts]");
                (
                    self.artifact(artifacts, "tools", crate::tools::FILE_NAME),
                    self.artifact(artifacts, "policy", crate::policy::FILE_NAME),
                )
            }
            None => (None, None),
        };
        let files = self.files(root);
        let pins = self.pins(root);
        let models = self.models(root);
        let client_tools = self.skills(root);
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
            models,
            client_tools,
        })
    }

    /// `[bundle] format`: `None` stops the parse (the rest is only defined for format 1: fail
    /// closed), `Some(None)` means it is missing (reported) and the rest is still checked.
    fn format(&mut self, root: &dyn TableLike) -> Option<Option<i64>> {
        let Some(bundle) = self.table(root, "", "bundle", true) else {
            return Some(None);
        };
        self.known_keys(bundle, "bundle", BUNDLE_KEYS, "[bundle]");
        let Some(item) = self.required(bundle, "bundle", "format") else {
            return Some(None);
        };
        if item.as_integer() == Some(FORMAT) {
            return Some(Some(FORMAT));
        }
        let found = item.as_value().map_or_else(|| "a table".to_owned(), |v| v.to_string().trim().to_owned());
        self.error(
            Code::UnsupportedVersion,
            "bundle.format",
            item.span(),
            format!("unsupported bundle format {found}; this bundle supports format {FORMAT}"),
            "set `format = 1` (an integer), or upgrade bundle",
        );
        None
    }

    /// `[bundle] allow_secret_files` and `expires`.
    fn bundle_options(&mut self, root: &dyn TableLike) -> (Vec<String>, Option<Timestamp>) {
        let mut allow_secret_files = Vec::new();
        if let Some(item) = root.get("bundle").and_then(|b| b.get("allow_secret_files")) {
            match item.as_array() {
                Some(list) if list.iter().all(|v| v.as_str().is_some()) => {
                    allow_secret_files = list.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
                }
                _ => self.error(
                    Code::WrongType,
                    "bundle.allow_secret_files",
                    item.span(),
                    "`bundle.allow_secret_files` must be an array of file paths".to_owned(),
                    "write e.g. `allow_secret_files = [\"certs/public-ca.pem\"]`",
                ),
            }
        }
        let expires = root.get("bundle").and_then(|b| b.get("expires")).and_then(|item| self.expires(item));
        (allow_secret_files, expires)
    }

    fn expires(&mut self, item: &Item) -> Option<Timestamp> {
        // A string, or a TOML offset date-time (the same RFC 3339 text, unquoted).
        let text = match item.as_value() {
            Some(toml_edit::Value::String(s)) => s.value().clone(),
            Some(toml_edit::Value::Datetime(d)) => d.value().to_string(),
            _ => {
                self.error(
                    Code::WrongType,
                    "bundle.expires",
                    item.span(),
                    "`bundle.expires` must be an RFC 3339 date-time".to_owned(),
                    "write e.g. `expires = \"2027-01-01T00:00:00Z\"`",
                );
                return None;
            }
        };
        match Timestamp::parse(&text) {
            Ok(t) => Some(t),
            Err(why) => {
                self.error(
                    Code::InvalidExpiry,
                    "bundle.expires",
                    item.span(),
                    why,
                    "write e.g. `expires = \"2027-01-01T00:00:00Z\"` (UTC) or with an offset such as +02:00",
                );
                None
            }
        }
    }

    /// `[agent] name` and `version`.
    fn agent(&mut self, root: &dyn TableLike) -> (Option<String>, Option<semver::Version>) {
        let Some(agent) = self.table(root, "", "agent", true) else {
            return (None, None);
        };
        self.known_keys(agent, "agent", AGENT_KEYS, "[agent]");
        let mut name = None;
        if let Some(item) = self.required(agent, "agent", "name")
            && let Some(s) = self.string(item, "agent.name")
        {
            match check_agent_name(s) {
                Ok(()) => name = Some(s.to_owned()),
                Err(why) => self.error(
                    Code::InvalidName,
                    "agent.name",
                    item.span(),
                    why,
                    "use a short lowercase name such as `mailer`",
                ),
            }
        }
        let mut version = None;
        if let Some(item) = self.required(agent, "agent", "version")
            && let Some(s) = self.string(item, "agent.version")
        {
            match semver::Version::parse(s) {
                Ok(v) => version = Some(v),
                Err(e) => self.error(
                    Code::InvalidVersion,
                    "agent.version",
                    item.span(),
                    format!("agent version `{s}` is not semantic versioning: {e}"),
                    "write MAJOR.MINOR.PATCH, e.g. \"1.4.0\"",
                ),
            }
        }
        (name, version)
    }

    /// `[files]`: every listed path with its digest, then the paths that could not sit side
    /// by side in one folder.
    fn files(&mut self, root: &dyn TableLike) -> BTreeMap<String, Option<Digest>> {
        let mut files = BTreeMap::new();
        let Some(table) = self.table(root, "", "files", false) else {
            return files;
        };
        for (path, item) in table.iter() {
            let key = join("files", path);
            let key_span = table.get_key_value(path).and_then(|(k, _)| k.span());
            if let Err(why) = paths::check(path) {
                self.error(
                    Code::UnsafePath,
                    &key,
                    key_span.clone(),
                    format!("file path `{path}` cannot be packed: {why}"),
                    "rename the file",
                );
            }
            if crate::entries::OWN_ENTRIES.contains(&path) {
                self.error(
                    Code::UnsafePath,
                    &key,
                    key_span,
                    format!("`{path}` belongs in its own section, not [files]"),
                    "remove it from [files]; `bundle lock` writes it in the right place",
                );
                continue;
            }
            let Some(entry) = item.as_table_like() else {
                self.error(
                    Code::WrongType,
                    &key,
                    item.span(),
                    format!("`{key}` must be a table `{{ blake3 = \"...\", size = N }}`"),
                    "run `bundle lock`",
                );
                continue;
            };
            self.known_keys(entry, &key, FILE_KEYS, "a [files] entry");
            let digest = self.digest(entry, &key);
            if digest.is_none() && entry.get("blake3").is_none() && entry.get("size").is_none() {
                self.error(
                    Code::MissingField,
                    &key,
                    item.span(),
                    format!("`{key}` has no blake3 digest and size"),
                    "run `bundle lock`",
                );
            }
            files.insert(path.to_owned(), digest);
        }
        self.clashes(table);
        files
    }

    /// Paths of `[files]` that collide with each other or with the bundle's own entries on a
    /// case-insensitive file system (macOS, Windows), after full Unicode case folding, or that
    /// are a file and (folded) a folder of another path.
    fn clashes(&mut self, table: &dyn TableLike) {
        let listed: Vec<&str> = table.iter().map(|(p, _)| p).collect();
        for clash in paths::clashes(&listed, crate::entries::OWN_ENTRIES) {
            let (path, message, help) = match clash {
                paths::Clash::Case { path, first } => (
                    path,
                    format!("`{path}` and `{first}` differ only in case"),
                    "rename one: they collide on case-insensitive file systems",
                ),
                paths::Clash::FileAndFolder { path, folder } => {
                    (path, format!("`{folder}` is listed as a file and as a folder of `{path}`"), "rename one of them")
                }
            };
            let span = table.get_key_value(path).and_then(|(k, _)| k.span());
            self.error(Code::UnsafePath, &join("files", path), span, message, help);
        }
    }
}

struct Parser<'a> {
    src: &'a Source,
    diags: &'a mut Vec<Diagnostic>,
    /// Problems reported, and those past [`MAX_REPORTED`] only counted: (errors, warnings).
    shown: usize,
    hidden: (usize, usize),
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
        if self.shown >= MAX_REPORTED {
            if severity == Severity::Error {
                self.hidden.0 += 1;
            } else {
                self.hidden.1 += 1;
            }
            return;
        }
        self.shown += 1;
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
        return key.to_owned();
    }
    // Built by hand, not with `format!`: a manifest's parse makes one for every key it reads.
    let mut out = String::with_capacity(prefix.len() + key.len() + 3);
    out.push_str(prefix);
    out.push('.');
    if key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        out.push_str(key);
    } else if key.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\' && b != b'\'') {
        // What toml_edit writes for such a key (a test holds the two equal).
        out.push('"');
        out.push_str(key);
        out.push('"');
    } else {
        out.push_str(&toml_edit::Value::from(key).to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn join_writes_keys_as_toml_edit_does() {
        for key in [
            "name",
            "a_b-c",
            "prompts/system.md",
            "with space",
            "a.b",
            "q\"uote",
            "back\\slash",
            "it's",
            "é",
            "tab\t",
            "",
        ] {
            let expected = if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                format!("files.{key}")
            } else {
                format!("files.{}", toml_edit::Value::from(key))
            };
            assert_eq!(super::join("files", key), expected, "{key:?}");
        }
        assert_eq!(super::join("", "agent"), "agent");
    }

    #[test]
    fn items_are_counted_outside_strings_and_short_texts_are_not_scanned() {
        use super::over_item_limit;
        let text = "a = 1 # x = 2\nb = \"c = d\"\nt = [1, 2]\n";
        // a, b, t, `[`, one `,`: five items.
        assert_eq!(over_item_limit(text, 5), None);
        assert_eq!(over_item_limit(text, 4), Some(text.rfind(',').unwrap()));
        assert_eq!(over_item_limit(text, 1), Some(text.find("b =").unwrap() + 2));
        // Never more items than bytes.
        assert_eq!(over_item_limit("=,[{", 4), None);
        assert_eq!(over_item_limit("=,[{=", 4), Some(4));
    }
}
