//! manifest.toml, format 1: which agent this is, and the BLAKE3 digest and size of every file
//! the bundle holds. It is the document that gets signed, so everything a verifier trusts
//! about a bundle must be in it.
//!
//! Parsing keeps spans (for `line:column` in diagnostics); editing (`bundle lock`) goes
//! through `toml_edit::DocumentMut` in [`edit`], so the author's comments and layout survive.

pub mod edit;

use std::collections::BTreeMap;

use crate::timestamp::Timestamp;

pub const FILE_NAME: &str = crate::entries::MANIFEST;
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
    /// `[pins."<file>"]`: remote tool definitions kept by `bundle import --pin` (RAP toolsets,
    /// MCP servers' tool lists), by the agent file that holds the pinned copy.
    pub pins: BTreeMap<String, Pin>,
    /// `[[models]]`: model folders signed by their vendor, each checked against its key.
    pub models: Vec<ModelSpec>,
    /// `[skills] client_tools`: the client's built-in tools (`Read`, `Bash(git:*)`) the agent's
    /// skills may name in `allowed-tools`, in file order.
    pub client_tools: Vec<crate::skill::client_tool::ClientTool>,
}

/// One `[[models]]` entry: a folder of the agent holding a model its vendor signed with
/// OpenSSF model signing, the signature file (default `<path>/model.sig`), who must have signed
/// it, and the shard size when it was signed by file shards.
#[derive(Debug, Clone)]
pub struct ModelSpec {
    pub path: String,
    pub signature: String,
    pub signer: ModelSigner,
    /// `shard_size`: the signature is serialized by file shards of this many bytes
    /// (`model_signing`'s `shards` method); `None`, by whole files. Declared here because a
    /// verifier streaming the bundle hashes the shards before it reaches the signature.
    pub shard_size: Option<u64>,
}

/// Who must have signed a model.
#[derive(Debug, Clone)]
pub enum ModelSigner {
    /// `key`: a P-256 public key (PEM), a file of the agent (`model_signing sign key`).
    Key(String),
    /// `identity` (or `identity_regexp`) and `issuer` (or `issuer_regexp`): a Sigstore
    /// certificate identity (`model_signing sign sigstore`), judged against the operator's
    /// trusted root (`--trusted-root`, or a trust policy's), never one the agent ships.
    Identity(crate::keyless::IdentityPolicy),
}

impl ModelSpec {
    /// The key file, when the model is signed with a key.
    pub fn key(&self) -> Option<&str> {
        match &self.signer {
            ModelSigner::Key(key) => Some(key),
            ModelSigner::Identity(_) => None,
        }
    }
}

impl ModelSpec {
    /// The signature's path inside the model folder, when it lies there (then the folder's
    /// check leaves it out, as `model_signing verify` does).
    pub fn signature_inside(&self) -> Option<&str> {
        self.signature.strip_prefix(&self.path).and_then(|rest| rest.strip_prefix('/'))
    }

    /// The path of `file` (an agent file) inside the model folder, if it lies there.
    pub fn inside<'a>(&self, file: &'a str) -> Option<&'a str> {
        file.strip_prefix(&self.path).and_then(|rest| rest.strip_prefix('/'))
    }
}

/// A remote tool definition pinned at import: where it came from and the BLAKE3 digest of the
/// bytes the pinned file holds (for RAP, the bytes the server sent; for MCP, the pin document
/// of `formats::mcp_pin` holding every Tool object the server listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub source: PinSource,
    pub blake3: blake3::Hash,
}

/// Where a pinned definition is served from; its variant is the pin's `format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinSource {
    /// `format = "rap"`, `url = "…"`: a RAP toolset fetched over http(s).
    Rap { url: String },
    /// `format = "mcp"`, `server = "NAME"` and `command = [...]` or `url = "…"`: the tools an
    /// MCP server listed. `server` is the name `bundle guard --server NAME` asks for. `start`
    /// is `None` for a pin made from a `tools/list` file (`import --from mcp FILE --pin`):
    /// nothing says how to start that server again, so `check --refresh` cannot.
    Mcp { server: String, start: Option<McpStart> },
}

/// How a pinned MCP server is reached again (`bundle check --refresh`). Never a secret: the
/// environment (`--env`) is given again on each run, not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpStart {
    /// `command = ["program", "arg", …]`: the stdio transport.
    Stdio { command: Vec<String> },
    /// `url = "…"`: the streamable HTTP transport.
    Http { url: String },
}

impl McpStart {
    /// The command line or URL, for messages.
    pub fn display(&self) -> String {
        match self {
            McpStart::Stdio { command } => command.join(" "),
            McpStart::Http { url } => url.clone(),
        }
    }
}

impl Pin {
    pub fn format(&self) -> PinFormat {
        match self.source {
            PinSource::Rap { .. } => PinFormat::Rap,
            PinSource::Mcp { .. } => PinFormat::Mcp,
        }
    }

    /// The MCP server name, for an MCP pin.
    pub fn mcp_server(&self) -> Option<&str> {
        match &self.source {
            PinSource::Mcp { server, .. } => Some(server),
            PinSource::Rap { .. } => None,
        }
    }

    /// Where the definition is served from, for messages: the URL or the server's command line.
    pub fn origin(&self) -> String {
        match &self.source {
            PinSource::Rap { url } => url.clone(),
            PinSource::Mcp { start: Some(start), .. } => start.display(),
            PinSource::Mcp { server, start: None } => format!("MCP server {server} (a tools/list file)"),
        }
    }
}

/// The formats a pin can hold (`format = "rap"`, `format = "mcp"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinFormat {
    Rap,
    Mcp,
}

impl PinFormat {
    pub const ALL: &[&str] = &["rap", "mcp"];

    pub fn as_str(self) -> &'static str {
        match self {
            PinFormat::Rap => "rap",
            PinFormat::Mcp => "mcp",
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

    /// The MCP pins of server `server` (`bundle guard --server NAME`), by pinned file.
    pub fn mcp_pins<'a>(&'a self, server: &'a str) -> impl Iterator<Item = (&'a str, &'a Pin)> + 'a {
        self.pins.iter().filter(move |(_, p)| p.mcp_server() == Some(server)).map(|(f, p)| (f.as_str(), p))
    }
}

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

mod parse;

pub use parse::{join, over_item_limit, parse};

/// Server names: 1 to 64 characters of `A-Z a-z 0-9 . _ -`, starting with a letter or digit.
/// They name the pin file and are what `bundle guard --server` asks for.
pub fn check_server_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "server name {name:?} must be 1 to 64 characters of A-Z, a-z, 0-9, `.`, `_` and `-`, starting with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::{Code, Diagnostic, Source};

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
