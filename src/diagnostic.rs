//! Diagnostics: every problem `bundle` finds in an agent folder, with a stable code, the file,
//! where in it, what is wrong and what to do.
//!
//! Validators push [`Diagnostic`]s into a [`Report`] instead of returning at the first problem,
//! so that one run shows everything. Rendering (human, JSON, GitHub annotations) lives in
//! `cli::output`; this module only holds the data.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use serde::Serialize;

/// How bad a problem is: errors fail the command (exit 1), warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

crate::codes::stable_codes! {
    /// The stable code of each kind of problem. The string form never changes once released:
    /// scripts and CI match on it.
    pub enum Code;
    MissingFile => "missing_file": "A required file (tools.json, manifest.toml) is not in the agent folder.",
    IoError => "io_error": "A file could not be read (exit 2).",
    InvalidUtf8 => "invalid_utf8": "The file is not UTF-8 (or starts with a byte-order mark).",
    InvalidJson => "invalid_json": "The file is not JSON (no comments, trailing commas or single quotes).",
    DuplicateKey => "duplicate_key": "The same key appears twice in one JSON object (tools.json, and the agentcli, RAP and Rune inputs of `bundle import`) or TOML table.",
    UnsupportedVersion => "unsupported_version": "A version this bundle does not support: tools.json `version` other than the integer 1, manifest `[bundle] format` other than 1, `[artifacts.tools] version` other than 1.",
    UnknownField => "unknown_field": "A key the format does not define (with \"did you mean\").",
    MissingField => "missing_field": "A required key is absent.",
    WrongType => "wrong_type": "A value has the wrong JSON/TOML type.",
    InvalidId => "invalid_id": "A tool id breaks the id rules.",
    DuplicateId => "duplicate_id": "Two tools share an id.",
    EmptyDescription => "empty_description": "A tool description is empty.",
    UnknownTransport => "unknown_transport": "transport.kind is neither `exec` nor `http`.",
    InvalidCommand => "invalid_command": "An exec command is not an absolute path.",
    InvalidMethod => "invalid_method": "An http method is not a supported HTTP method.",
    InvalidUrl => "invalid_url": "An http url is not an absolute http(s) URL, or its template is malformed.",
    UnboundUrlTemplate => "unbound_url_template": "A `{name}` in the url is not a property of the input schema (warning).",
    InvalidPlaceholder => "invalid_placeholder": "A `${...}` in a header is not a valid `${secret:<id>}` placeholder.",
    UnknownSecret => "unknown_secret": "A header placeholder names a secret the tool does not list.",
    HardcodedCredential => "hardcoded_credential": "A credential is written literally instead of as a secret placeholder.",
    InvalidSchema => "invalid_schema": "A JSON Schema is not valid against its meta-schema.",
    InvalidSchemaRef => "invalid_schema_ref": "A `schema:<id>` reference or schema_refs entry is malformed.",
    UnresolvedSchemaRef => "unresolved_schema_ref": "A `schema:<id>` reference resolves to nothing.",
    InvalidCapability => "invalid_capability": "A capability is not of the form `family:scope`.",
    DuplicateCapability => "duplicate_capability": "A tool lists the same capability twice (warning).",
    CapabilityNotGranted => "capability_not_granted": "A tool needs a capability that policy.caps does not grant; the runtime would deny it.",
    InvalidSecret => "invalid_secret": "A secret id breaks the secret id rules (`[A-Za-z0-9._/-]`, no empty segment).",
    DuplicateSecret => "duplicate_secret": "A tool lists the same secret twice.",
    InvalidBudget => "invalid_budget": "budget.tokens is not a non-negative integer or budget.usd not a non-negative number.",
    InvalidGrant => "invalid_grant": "A policy.caps line is not a valid grant.",
    DuplicateGrant => "duplicate_grant": "policy.caps grants the same capability twice (warning).",
    InvalidToml => "invalid_toml": "manifest.toml is not TOML.",
    InvalidName => "invalid_name": "The agent name breaks the name rules (1–64 of `a-z 0-9 - _`, starting with a letter).",
    InvalidVersion => "invalid_version": "The agent version is not semantic versioning.",
    InvalidDigest => "invalid_digest": "A digest (64 lowercase hex digits) or size in manifest.toml is malformed.",
    InvalidExpiry => "invalid_expiry": "`[bundle] expires` in manifest.toml is not an RFC 3339 date-time with an offset (`\"2027-01-01T00:00:00Z\"`).",
    Expired => "expired": "`[bundle] expires` is already past: `bundle pack` refuses to sign a bundle every verifier would reject.",
    StaleDigest => "stale_digest": "manifest.toml's digests are missing or do not match the files; run `bundle lock`.",
    UnsafePath => "unsafe_path": "A file path in the agent folder cannot be packed safely (not NFC, case collision, too long for ustar, control characters).",
    UnsupportedFileType => "unsupported_file_type": "A symlink, socket, device or other non-regular file is in the agent folder.",
    SecretFile => "secret_file": "A file that looks like a secret (.env, *.pem, private keys, id_*) would be packed.",
    InvalidImport => "invalid_import": "`bundle import`: the input breaks its own format's rules (the message is that format's own error text).",
    NotCarriedOver => "not_carried_over": "`bundle import`/`export`: a field or tool the target format cannot express; reported, never dropped silently (warning).",
    RenamedTool => "renamed_tool": "`bundle import`/`export`: a tool name was changed to fit the target format's name rules, e.g. `mail.smtp_send` → `mail__smtp_send` for OpenAI (warning).",
    PinMismatch => "pin_mismatch": "A file pinned in manifest.toml `[pins]` is missing or no longer holds the pinned bytes.",
    TlsError => "tls_error": "An https server could not be trusted (a certificate from an unknown CA, for another name, or expired), the TLS handshake failed, or an https server redirected to plain http; nothing was fetched (exit 2). `--ca-cert` trusts a private root.",
    PinDrift => "pin_drift": "`bundle check --refresh`: a pinned URL now serves a different toolset (a warning when only formatting changed), or a pinned MCP server now lists tools that differ from their pins (one error per tool, with the change classes of `bundle diff`).",
    InvalidPin => "invalid_pin": "A pinned MCP tool list (`pins/<server>.mcp.json`) is not a pin document: not `{\"version\": 1, \"server\", \"tools\"}`, a tool without a name, or two tools of one name.",
    InvalidModelSigner => "invalid_model_signer": "A `[[models]]` entry names both a `key` and a Sigstore identity, an identity or issuer both exactly and by pattern, or a pattern that is not a regular expression.",
    ModelSignatureMissing => "model_signature_missing": "A model folder named in manifest.toml `[[models]]` has no signature file (`model.sig`, or the `signature` given).",
    ModelSignatureMalformed => "model_signature_malformed": "A model signature is not an OpenSSF model signature v1.0 (a Sigstore bundle v0.3 with a DSSE envelope, `files` or `shards` serialization with SHA-256, no links), is over its caps, repeats a key, or is not serialized the way its `[[models]]` entry says (`shard_size`).",
    ModelKeyInvalid => "model_key_invalid": "The public key a `[[models]]` entry names is missing or not a P-256 public key in PEM.",
    ModelTrustedRootMissing => "model_trusted_root_missing": "A `[[models]]` entry names a Sigstore identity, and no trusted root was given to judge it by (`--trusted-root`, or a trust policy's `[sigstore] trusted_root`): the signature cannot be checked, so it is refused.",
    ModelSignatureWrongKey => "model_signature_wrong_key": "A model signature's key hint names another key than the one its `[[models]]` entry names.",
    ModelSignatureWrongIdentity => "model_signature_wrong_identity": "A Sigstore model signature verified, but its certificate's identity or OIDC issuer is not the one its `[[models]]` entry names.",
    ModelSignatureInvalid => "model_signature_invalid": "No signature of a model signature verifies with the key its `[[models]]` entry names (tampered, or another key); or, for a Sigstore identity, the signature, certificate chain, SCT, transparency-log entry or signing time does not verify under the trusted root (the message names the `keyless_*` reason).",
    ModelMismatch => "model_mismatch": "A model folder's files are not the ones its vendor signed: a SHA-256 differs, a signed file is missing, or a file is not signed.",
    UncheckedSignature => "unchecked_signature": "`bundle export` from a bundle without `--key` (warning): every digest was checked, the signature was not, so anyone could have made the bundle.",
    NotExportable => "not_exportable": "`bundle export`: the agent's tools cannot be written in the target format (e.g. RAP needs one endpoint).",
    McpServerFailed => "mcp_server_failed": "`bundle import --from mcp --stdio`: the MCP server could not be started, did not answer within `--timeout`, exited early, or wrote something that is not the protocol (or too much of it); nothing was imported, and the server's stderr is shown (exit 2).",
    LocalPath => "local_path": "`bundle import` (warning): a relative command was resolved to an absolute path on this machine; the runtime must have the program at that same path (`--exec-root` names where it will be).",
    MissingFrontMatter => "missing_front_matter": "A skill's SKILL.md does not start with YAML front matter between `---` lines (Agent Skills specification).",
    InvalidFrontMatter => "invalid_front_matter": "A SKILL.md front matter is not YAML, or a field has the wrong type or length (`compatibility`, `metadata`, `allowed-tools`).",
    InvalidSkillName => "invalid_skill_name": "A skill's `name` is missing, breaks the specification's rules (1–64 lowercase letters, digits and single hyphens) or differs from its folder.",
    InvalidSkillDescription => "invalid_skill_description": "A skill's `description` is missing, empty or longer than 1024 characters.",
    UnknownAllowedTool => "unknown_allowed_tool": "A skill's `allowed-tools` names a tool that neither tools.json defines, nor a pinned MCP server's pin holds (`mcp__<server>__<tool>`), nor manifest.toml `[skills] client_tools` declares (`Read`, `Bash(git:*)`), or names a whole MCP server.",
    InvalidClientTool => "invalid_client_tool": "An entry of manifest.toml `[skills] client_tools` is not a client tool name (an ASCII letter, then letters, digits or `_`), optionally with a `(pattern)` of printable ASCII; or it is listed twice, or the list is over its caps.",
    MissingSkillFile => "missing_skill_file": "A folder in `skills/` has no SKILL.md.",
    LimitExceeded => "limit_exceeded": "An input beyond a documented cap: a file larger than `bundle verify` accepts (manifest.toml 1 MiB; tools.json, policy.caps, schemas 4 MiB), JSON with more than 200 000 values or nested more than 64 deep, a manifest of more than 200 000 items; pack refuses.",
    TooManyProblems => "too_many_problems": "More problems in one file than are reported (the first 100 are); fix those and check again.",
}

/// One problem.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: Code,
    /// The file, as the user named it (relative to the working directory when possible).
    pub file: String,
    /// Where in the file: a JSON path (`tools[1].transport.command`), a TOML key
    /// (`agent.name`), or a line (`line:3`) for line-based files.
    pub path: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Byte range in the file's text, for underlining.
    #[serde(skip)]
    pub span: Option<Range<usize>>,
    pub message: String,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn new(severity: Severity, code: Code, file: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            code,
            file: file.into(),
            path: None,
            line: None,
            column: None,
            span: None,
            message: message.into(),
            help: None,
        }
    }

    pub fn error(code: Code, file: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, code, file, message)
    }

    pub fn warning(code: Code, file: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, code, file, message)
    }

    /// Sets the logical location (JSON path, TOML key, ...).
    pub fn at_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Sets the byte range and, from the source text, the line and column.
    pub fn at_span(mut self, source: &Source, span: Range<usize>) -> Self {
        let (line, column) = source.line_column(span.start);
        self.line = Some(line);
        self.column = Some(column);
        self.span = Some(span);
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The most problems reported for one file (tools.json with its schema files, policy.caps,
/// manifest.toml); the rest are counted in one closing diagnostic, so that a hostile file
/// cannot make the report itself huge (nor its positions costly to find).
pub const MAX_REPORTED: usize = 100;

/// The closing `too_many_problems` diagnostic, when some were not reported.
pub fn hidden_summary(file: &str, (errors, warnings): (usize, usize)) -> Option<Diagnostic> {
    if errors + warnings == 0 {
        return None;
    }
    let severity = if errors > 0 { Severity::Error } else { Severity::Warning };
    Some(
        Diagnostic::new(
            severity,
            Code::TooManyProblems,
            file,
            format!(
                "{errors} more errors and {warnings} more warnings are not shown (at most {MAX_REPORTED} are reported)"
            ),
        )
        .with_help("fix the problems shown and check again"),
    )
}

/// A file's text with its display name, kept so that diagnostics can show the offending line.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub text: Arc<str>,
    /// Made on first use (most sources are never shown: `check` of 20,000 clean agents reads
    /// 100,000 of them) and shared by clones: a report keeps a copy of every source, and a
    /// 4 MiB file of newlines has four million of them.
    line_starts: Arc<OnceLock<Box<[usize]>>>,
}

impl Source {
    pub fn new(name: impl Into<String>, text: impl Into<Arc<str>>) -> Self {
        Source { name: name.into(), text: text.into(), line_starts: Arc::default() }
    }

    /// The byte offset where each line starts.
    fn line_starts(&self) -> &[usize] {
        self.line_starts
            .get_or_init(|| std::iter::once(0).chain(self.text.match_indices('\n').map(|(i, _)| i + 1)).collect())
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line_starts = self.line_starts();
        let line = line_starts.partition_point(|&start| start <= offset) - 1;
        let start = line_starts[line];
        let column = self.text.get(start..offset).map_or(offset - start, |s| s.chars().count()) + 1;
        (line + 1, column)
    }

    /// Byte offset of a 1-based line and column (in characters).
    pub fn offset_of(&self, line: usize, column: usize) -> usize {
        let Some(&start) = self.line_starts().get(line.saturating_sub(1)) else {
            return self.text.len();
        };
        self.text[start..].char_indices().nth(column.saturating_sub(1)).map_or(self.text.len(), |(i, _)| start + i)
    }
}

/// How many characters of a long line a diagnostic shows around its span: servers send
/// single-line JSON, and a 4 MiB line helps nobody.
pub const EXCERPT_WIDTH: usize = 120;

/// A window of one long source line around a span, with `…` where the line goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excerpt {
    pub text: String,
    /// The span, as byte offsets into `text`.
    pub span: Range<usize>,
    /// 0-based index of the line in the whole source.
    pub line_index: usize,
    /// Characters of the line before the first character of `text` that comes from it.
    skipped: usize,
    /// Bytes of the leading ellipsis (0 when the window starts the line).
    lead: usize,
}

impl Excerpt {
    /// 1-based column (in characters) in the whole line of a byte offset into `text`.
    pub fn column(&self, byte_index: usize) -> usize {
        let shown = self.text.get(self.lead..byte_index.max(self.lead)).map_or(0, |s| s.chars().count());
        self.skipped + shown + 1
    }
}

impl Source {
    /// A window of about `width` characters around `span`, when the span's first line is
    /// longer than that; `None` for a line short enough to show whole.
    pub fn excerpt(&self, span: Range<usize>, width: usize) -> Option<Excerpt> {
        let start = span.start.min(self.text.len());
        let line_starts = self.line_starts();
        let line_index = line_starts.partition_point(|&s| s <= start) - 1;
        let line_start = line_starts[line_index];
        let line_end = line_starts.get(line_index + 1).map_or(self.text.len(), |&next| next - 1);
        let line = self.text.get(line_start..line_end)?;
        let line = line.strip_suffix('\r').unwrap_or(line);
        line.chars().nth(width)?;
        let offsets: Vec<usize> = line.char_indices().map(|(i, _)| i).collect();
        let byte = |c: usize| offsets.get(c).copied().unwrap_or(line.len());
        let (from, to) = (start - line_start, span.end.clamp(start, line_start + line.len()) - line_start);
        let (first, last) = (offsets.partition_point(|&o| o < from), offsets.partition_point(|&o| o < to));
        let pad = width.saturating_sub(last - first) / 2;
        let end = (first.saturating_sub(pad) + width).min(offsets.len());
        let begin = end.saturating_sub(width);
        let (lead, tail) = (if begin > 0 { "…" } else { "" }, if end < offsets.len() { "…" } else { "" });
        let (b, e) = (byte(begin), byte(end));
        let shift = |o: usize| lead.len() + o.clamp(b, e) - b;
        Some(Excerpt {
            text: format!("{lead}{}{tail}", &line[b..e]),
            span: shift(from)..shift(to),
            line_index,
            skipped: begin,
            lead: lead.len(),
        })
    }
}

/// Everything one run found, plus the sources needed to show it.
#[derive(Debug, Default)]
pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    pub sources: BTreeMap<String, Source>,
}

impl Report {
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    pub fn add_source(&mut self, source: &Source) {
        self.sources.entry(source.name.clone()).or_insert_with(|| source.clone());
    }

    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    pub fn warnings(&self) -> usize {
        self.diagnostics.len() - self.errors()
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    pub fn extend(&mut self, other: Report) {
        self.diagnostics.extend(other.diagnostics);
        self.sources.extend(other.sources);
    }
}

/// Makes a whole source text safe to show while keeping every byte offset valid: each
/// dangerous character becomes U+FFFD (when it is 3 bytes long) or `?`s of its length.
pub fn sanitize_source(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_dangerous(c) && c != '\r' {
            let n = c.len_utf8();
            if n == 3 { out.push('\u{FFFD}') } else { out.extend(std::iter::repeat_n('?', n)) }
        } else {
            out.push(c);
        }
    }
    out
}

fn is_dangerous(c: char) -> bool {
    let bidi = matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    (c.is_control() && c != '\n' && c != '\t') || bidi || c == '\u{FEFF}'
}

/// Makes untrusted text (from a file, a registry, a server) safe to print on a terminal as
/// part of one line: control characters, line breaks (`\n`, `\r`, U+2028, U+2029: a name
/// must not start a forged "signed by:" or "error:" line) and Unicode bidirectional overrides
/// (which can make a line read differently than it is) are shown as `\u{..}` escapes.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_dangerous(c) || matches!(c, '\n' | '\u{2028}' | '\u{2029}') {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The closest allowed name, when it is close enough to be a likely typo.
pub fn did_you_mean<'n>(found: &str, allowed: &[&'n str]) -> Option<&'n str> {
    let mut best: std::collections::BTreeMap<usize, &str> = std::collections::BTreeMap::new();
    for &name in allowed {
        let d = strsim::damerau_levenshtein(&found.to_ascii_lowercase(), name);
        best.entry(d).or_insert(name);
    }
    let (&d, &name) = best.iter().next()?;
    (d <= (name.len() / 4).max(1) + usize::from(name.len() > 12)).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_characters() {
        let s = Source::new("x", "ab\nçd\n");
        assert_eq!(s.line_column(0), (1, 1));
        assert_eq!(s.line_column(3), (2, 1));
        assert_eq!(s.line_column(5), (2, 2));
        assert_eq!(s.offset_of(2, 2), 5);
    }

    #[test]
    fn excerpt_windows_a_long_line_around_the_span() {
        let long = format!("{{\"a\": [{}\"here\"{}]}}", "0,".repeat(500), ",1".repeat(500));
        let source = Source::new("x.json", format!("{{\n{long}\n}}"));
        let at = source.text.find("\"here\"").unwrap();
        let ex = source.excerpt(at..at + 6, 40).unwrap();
        assert_eq!(ex.line_index, 1);
        assert_eq!(ex.text.chars().count(), 42, "40 characters and an ellipsis at each end: {}", ex.text);
        assert!(ex.text.starts_with('…') && ex.text.ends_with('…'));
        assert_eq!(&ex.text[ex.span.clone()], "\"here\"");
        assert_eq!(ex.column(ex.span.start), source.line_column(at).1);
        assert_eq!(source.excerpt(0..1, 40), None, "a short line is shown whole");
        let start = source.excerpt(2..3, 40).unwrap();
        assert!(!start.text.starts_with('…') && start.span == (0..1), "{start:?}");
        let end = source.text.len() - 4;
        let last = source.excerpt(end..end + 1, 40).unwrap();
        assert!(last.text.starts_with('…') && !last.text.ends_with('…'), "{last:?}");
        assert_eq!(&last.text[last.span.clone()], "]");
    }

    #[test]
    fn sanitize_escapes_bidi_and_controls() {
        assert_eq!(sanitize("a\u{202E}b\x1b"), "a\\u{202e}b\\u{1b}");
    }
}
