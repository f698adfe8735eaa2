//! The JSON documents `--format json` prints, one type per command, in one place so that the
//! shape of every document can be read (and documented) without running the commands. Fields
//! print in declaration order. Text that comes from an untrusted file is sanitised on the way
//! out (`clean`, [`Clean`]); names the validator already restricted are printed as they are.
//! The deployment gate's document is the library's [`agent_bundle::ops::gate::VerdictReport`].

use serde::{Serialize, Serializer};

use agent_bundle::contract::{Change, Risk};
use agent_bundle::diagnostic::{Code, Diagnostic, Severity, sanitize};
use agent_bundle::ops::diff::{Side, Status};
use agent_bundle::tools::Transport;

use super::output::sanitize_json;

/// Serialises a string sanitised.
pub fn clean<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&sanitize(text))
}

/// Serialises an optional string sanitised.
pub fn clean_opt<S: Serializer, T: AsRef<str>>(text: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match text {
        Some(t) => s.serialize_str(&sanitize(t.as_ref())),
        None => s.serialize_none(),
    }
}

/// A value whose every string (keys included) is sanitised.
#[derive(Debug)]
pub struct Clean<T>(pub T);

impl<T: Serialize> Serialize for Clean<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        sanitize_json(serde_json::to_value(&self.0).map_err(serde::ser::Error::custom)?).serialize(s)
    }
}

/// One diagnostic.
#[derive(Debug, Serialize)]
pub struct DiagnosticJson<'a> {
    pub severity: Severity,
    pub code: Code,
    #[serde(serialize_with = "clean")]
    pub file: &'a str,
    #[serde(serialize_with = "clean_opt")]
    pub path: &'a Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    #[serde(serialize_with = "clean")]
    pub message: &'a str,
    #[serde(serialize_with = "clean_opt")]
    pub help: &'a Option<String>,
}

impl<'a> From<&'a Diagnostic> for DiagnosticJson<'a> {
    fn from(d: &'a Diagnostic) -> Self {
        DiagnosticJson {
            severity: d.severity,
            code: d.code,
            file: &d.file,
            path: &d.path,
            line: d.line,
            column: d.column,
            message: &d.message,
            help: &d.help,
        }
    }
}

/// Every diagnostic of a report.
pub fn diagnostics<'a>(all: impl IntoIterator<Item = &'a Diagnostic>) -> Vec<DiagnosticJson<'a>> {
    all.into_iter().map(DiagnosticJson::from).collect()
}

/// `check`, `lock`, and the report of commands that judge agent folders (pack, import, export,
/// tool add) when they stop on problems.
#[derive(Debug, Serialize)]
pub struct CheckReport<'a, A> {
    pub ok: bool,
    pub errors: usize,
    pub warnings: usize,
    pub agents: &'a [A],
    pub diagnostics: Vec<DiagnosticJson<'a>>,
}

/// One agent `check` looked at.
#[derive(Debug, Serialize)]
pub struct CheckedAgent {
    pub dir: String,
    pub name: Option<String>,
    pub version: Option<String>,
    pub ok: bool,
}

/// One agent `lock` looked at.
#[derive(Debug, Serialize)]
pub struct LockedAgent {
    pub dir: String,
    pub manifest: String,
    pub written: bool,
    pub added: Vec<String>,
    pub updated: Vec<String>,
    pub removed: Vec<String>,
    pub ok: bool,
}

/// An agent's name and version.
#[derive(Debug, Serialize)]
pub struct AgentJson<N, V> {
    pub name: N,
    pub version: V,
}

/// `pack`.
#[derive(Debug, Serialize)]
pub struct PackReport<'a> {
    pub ok: bool,
    pub bundle: String,
    pub agent: AgentJson<&'a str, &'a str>,
    pub key_id: &'a str,
    pub files: usize,
    pub content_bytes: u64,
    pub bundle_bytes: u64,
    pub relocked: bool,
    /// With `--attest`: the bundle's SHA-256 (the attestations' subject) and their files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub attestations: Vec<String>,
}

/// `inspect`.
#[derive(Debug, Serialize)]
pub struct InspectReport<'a> {
    pub agent: AgentJson<&'a str, String>,
    pub expires: Option<String>,
    pub expired: bool,
    pub key_id: &'a str,
    #[serde(serialize_with = "clean")]
    pub trusted_comment: &'a str,
    pub signature_checked: bool,
    pub files: &'a [agent_bundle::bundle::verify::VerifiedFile],
    pub tools: Option<Vec<InspectTool<'a>>>,
    #[serde(serialize_with = "clean_opt")]
    pub contract_error: Option<String>,
    /// The pinned MCP servers, when the bundle has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<InspectPin<'a>>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "clean_opt")]
    pub pin_error: Option<String>,
}

/// One pinned MCP server of an inspected bundle.
#[derive(Debug, Serialize)]
pub struct InspectPin<'a> {
    #[serde(serialize_with = "clean")]
    pub server: &'a str,
    #[serde(serialize_with = "clean")]
    pub file: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<&'a str>,
    /// `(name, fingerprint)` in served order, shown as objects.
    #[serde(serialize_with = "pinned_tools")]
    pub tools: Vec<(String, String)>,
}

fn pinned_tools<S: Serializer>(tools: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    let owned = Some(tools.to_vec());
    let list = PinnedTool::list(&owned).unwrap_or_default();
    list.serialize(s)
}

/// One tool of an inspected bundle.
#[derive(Debug, Serialize)]
pub struct InspectTool<'a> {
    pub id: &'a str,
    pub transport: &'a str,
    #[serde(serialize_with = "clean")]
    pub target: &'a str,
    pub capabilities: &'a [String],
    pub secrets: &'a [String],
    pub requires_confirmation: bool,
    pub risk: Option<Risk>,
    pub fingerprint: Option<&'a str>,
}

impl<'a> InspectTool<'a> {
    pub fn new(
        tool: &'a agent_bundle::tools::Tool,
        target: &'a str,
        contract: Option<&'a agent_bundle::contract::Contract>,
    ) -> Self {
        InspectTool {
            id: &tool.id,
            transport: Transport::kind(&tool.transport),
            target,
            capabilities: &tool.capabilities,
            secrets: &tool.secrets,
            requires_confirmation: tool.requires_confirmation,
            risk: contract.map(|c| c.risk),
            fingerprint: contract.map(|c| c.fingerprint.as_str()),
        }
    }
}

/// `export`.
#[derive(Debug, Serialize)]
pub struct ExportReport<'a> {
    pub ok: bool,
    pub output: Option<String>,
    pub document: Option<&'a serde_json::Value>,
    pub diagnostics: Vec<DiagnosticJson<'a>>,
}

/// `import`.
#[derive(Debug, Serialize)]
pub struct ImportReport<'a> {
    pub ok: bool,
    pub tools: usize,
    pub output: Option<String>,
    pub pinned: &'a [String],
    pub granted: &'a [String],
    pub ungranted: &'a [String],
    pub relocked: Option<bool>,
    pub document: Option<serde_json::Value>,
    pub diagnostics: Vec<DiagnosticJson<'a>>,
}

/// `tool add`.
#[derive(Debug, Serialize)]
pub struct ToolAddReport<'a> {
    pub ok: bool,
    pub tool: &'a str,
    pub tools_file: String,
    pub granted: &'a [String],
    pub relocked: bool,
    pub diagnostics: Vec<DiagnosticJson<'a>>,
}

/// `baseline snapshot`.
#[derive(Debug, Serialize)]
pub struct SnapshotReport<'a> {
    pub ok: bool,
    pub file: String,
    pub agent: AgentJson<&'a Option<String>, &'a Option<String>>,
    pub tools: Vec<ApprovedTool<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<ApprovedSkill<'a>>,
}

/// One skill a snapshot approved.
#[derive(Debug, Serialize)]
pub struct ApprovedSkill<'a> {
    pub name: &'a str,
    pub digest: &'a str,
    pub allowed_tools: &'a [String],
}

/// One tool a snapshot approved.
#[derive(Debug, Serialize)]
pub struct ApprovedTool<'a> {
    pub id: &'a str,
    pub fingerprint: &'a str,
    pub risk: Risk,
}

/// `baseline approve`.
#[derive(Debug, Serialize)]
pub struct ApproveReport<'a> {
    pub ok: bool,
    pub file: String,
    pub from: Release<'a>,
    pub tools: &'a [agent_bundle::contract::baseline::Approval],
}

/// A release contracts were read from.
#[derive(Debug, Serialize)]
pub struct Release<'a> {
    pub path: String,
    pub name: &'a Option<String>,
    pub version: &'a Option<String>,
}

/// `diff`.
#[derive(Debug, Serialize)]
pub struct DiffReport<'a> {
    pub ok: bool,
    pub old: Clean<Release<'a>>,
    pub new: Clean<Release<'a>>,
    pub fail_on: &'a [&'a str],
    pub matched: usize,
    /// OLD and NEW are different agents (their `[agent] name`s differ).
    pub different_agents: bool,
    pub summary: DiffSummary,
    pub grants: Vec<Clean<&'a Change>>,
    /// Skill changes; absent when there are none (diffs of agents without skills are as before).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<Clean<&'a Change>>,
    pub tools: Vec<DiffTool<'a>>,
    /// The pinned MCP servers (manifest.toml `[pins]`, `format = "mcp"`), when either side has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<DiffPin<'a>>,
    pub changes: Vec<Clean<&'a Change>>,
}

/// One pinned MCP server in `diff`: its tools' fingerprints (in served order) on each side
/// and the changes.
#[derive(Debug, Serialize)]
pub struct DiffPin<'a> {
    #[serde(serialize_with = "clean")]
    pub server: &'a str,
    #[serde(serialize_with = "clean")]
    pub file: &'a str,
    pub status: Status,
    pub old: Option<Vec<PinnedTool<'a>>>,
    pub new: Option<Vec<PinnedTool<'a>>>,
    pub changes: Vec<Clean<&'a Change>>,
}

/// A pinned MCP tool: its name and fingerprint (BLAKE3 of its RFC 8785 canonical form).
#[derive(Debug, Serialize)]
pub struct PinnedTool<'a> {
    #[serde(serialize_with = "clean")]
    pub name: &'a str,
    pub fingerprint: &'a str,
}

impl<'a> PinnedTool<'a> {
    pub fn list(tools: &'a Option<Vec<(String, String)>>) -> Option<Vec<PinnedTool<'a>>> {
        tools.as_ref().map(|t| t.iter().map(|(name, fingerprint)| PinnedTool { name, fingerprint }).collect())
    }
}

/// The counts of a diff: all changes, changes by impact, tools by status.
#[derive(Debug)]
pub struct DiffSummary {
    pub changes: usize,
    pub by_impact: Vec<(&'static str, usize)>,
    /// `(status name, tools)`: changed, added, removed, unchanged.
    pub tools: Vec<(&'static str, usize)>,
}

impl Serialize for DiffSummary {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1 + self.by_impact.len() + self.tools.len()))?;
        map.serialize_entry("changes", &self.changes)?;
        for (impact, n) in &self.by_impact {
            map.serialize_entry(impact, n)?;
        }
        for (status, n) in &self.tools {
            map.serialize_entry(&format!("tools_{status}"), n)?;
        }
        map.end()
    }
}

/// One tool of a diff.
#[derive(Debug, Serialize)]
pub struct DiffTool<'a> {
    #[serde(serialize_with = "clean")]
    pub id: &'a str,
    pub status: Status,
    pub old: &'a Option<Side>,
    pub new: &'a Option<Side>,
    pub changes: Vec<Clean<&'a Change>>,
}

/// The document of a command given several inputs: one document per input, in order.
#[derive(Debug, Serialize)]
pub struct Results {
    pub ok: bool,
    pub results: Vec<serde_json::Value>,
}

/// An agent that `pack` refused before anything was written.
#[derive(Debug, Serialize)]
pub struct FailedAgent {
    pub dir: String,
    pub ok: bool,
}

/// Any report as a JSON value (a document collected into [`Results`]).
pub fn value(report: impl Serialize) -> serde_json::Value {
    serde_json::to_value(report).expect("a report serialises")
}

/// `export --to ... --out-dir`: one agent exported.
#[derive(Debug, Serialize)]
pub struct ExportedAgent<'a> {
    pub ok: bool,
    pub input: String,
    pub output: Option<String>,
    pub diagnostics: Vec<DiagnosticJson<'a>>,
}

/// `tool list`.
#[derive(Debug, Serialize)]
pub struct ToolListReport<'a, T> {
    pub ok: bool,
    pub tools_file: String,
    pub tools: &'a [T],
}

/// `tool remove`.
#[derive(Debug, Serialize)]
pub struct ToolRemoveReport<'a, T> {
    pub ok: bool,
    pub tool: &'a T,
    pub tools_file: String,
    pub relocked: bool,
    pub unused_capabilities: &'a [String],
    pub diagnostics: Vec<DiagnosticJson<'a>>,
}

/// The one document of a run that stopped with an error (exit 2).
#[derive(Debug, Serialize)]
pub struct ErrorReport<'a> {
    pub ok: bool,
    pub code: &'a str,
    #[serde(serialize_with = "clean")]
    pub message: &'a str,
    pub causes: Vec<String>,
}

/// `push`: the manifest digest and every reference that now names it.
#[derive(Debug, Serialize)]
pub struct PushReport<'a> {
    pub ok: bool,
    pub digest: &'a str,
    /// The first reference (the first tag, else the digest).
    #[serde(rename = "ref")]
    pub reference: Option<&'a String>,
    pub refs: &'a [String],
    pub agent: AgentJson<&'a str, String>,
    pub key_id: &'a str,
    pub signature_checked: bool,
    pub layer: PushedLayer<'a>,
    pub config: PushedConfig,
    /// The attestations pushed as referrers of the manifest (their manifest digests).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub referrers: &'a [String],
}

/// The bundle's layer as pushed.
#[derive(Debug, Serialize)]
pub struct PushedLayer<'a> {
    pub digest: &'a str,
    pub size: u64,
    pub upload: agent_bundle::oci::client::BlobPush,
}

/// The config blob as pushed.
#[derive(Debug, Serialize)]
pub struct PushedConfig {
    pub upload: agent_bundle::oci::client::BlobPush,
}

/// `inspect oci://` without a key: what the artifact's config says (not checked). Everything in
/// it comes from the registry: print it as [`Clean`].
#[derive(Debug, Serialize)]
pub struct OciInspectReport<'a> {
    #[serde(rename = "ref")]
    pub reference: &'a str,
    pub digest: &'a str,
    pub from_config: bool,
    pub signature_checked: bool,
    pub agent: AgentJson<Option<&'a str>, Option<&'a str>>,
    pub key_id: Option<&'a str>,
    pub expires: Option<&'a str>,
    pub tools: &'a [String],
    pub layer: OciLayer<'a>,
}

/// The layer an artifact's manifest names.
#[derive(Debug, Serialize)]
pub struct OciLayer<'a> {
    pub digest: &'a str,
    pub size: u64,
    pub title: Option<&'a str>,
}
