//! What changed between two contracts of one tool (or two policy.caps), each change with a
//! stable code and its impact: `widening` (the tool may do more), `narrowing` (less),
//! `breaking` (callers or consumers may fail), `compatible` (they keep working), `neutral`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::schema_changes::{self, Side};
use super::{Contract, ContractBudget, ContractDoc, ContractTransport, Risk};
use crate::policy::{Capability, GrantIndex};

crate::codes::stable_codes! {
    /// The kind of a change. The string forms are stable (docs/book/src/reference/codes.md,
    /// generated from these texts).
    pub enum ChangeKind;
    ToolAdded => "tool_added": "A tool that the old side does not have (widening).",
    ToolRemoved => "tool_removed": "A tool that the new side no longer has (breaking).",
    RiskRaised => "risk_raised": "The risk class gained a flag, e.g. read-only became network (widening). A change of `requires_confirmation` alone is reported as `confirmation_removed`/`confirmation_added` instead.",
    RiskLowered => "risk_lowered": "The risk class lost a flag (narrowing).",
    DescriptionChanged => "description_changed": "The description the model reads changed (neutral).",
    TransportChanged => "transport_changed": "exec became http or the reverse (widening).",
    HttpMethodChanged => "http_method_changed": "Another http method: widening towards DELETE (GET/HEAD < POST/PUT/PATCH/OPTIONS < DELETE), narrowing the other way.",
    HttpHostChanged => "http_host_changed": "The URL's scheme, host or port changed (widening).",
    HttpUrlChanged => "http_url_changed": "The URL's path or query changed on the same host (widening).",
    HttpHeaderAdded => "http_header_added": "An http header was added (widening).",
    HttpHeaderChanged => "http_header_changed": "An http header's value changed (widening).",
    HttpHeaderRemoved => "http_header_removed": "An http header was removed (narrowing).",
    ExecCommandChanged => "exec_command_changed": "Another program runs (widening).",
    ExecArgsChanged => "exec_args_changed": "The program's arguments changed (widening).",
    CapabilityAdded => "capability_added": "A capability was added (widening; neutral when an old capability already covers it).",
    CapabilityRemoved => "capability_removed": "A capability was removed (narrowing).",
    SecretAdded => "secret_added": "The tool uses one more secret (widening).",
    SecretRemoved => "secret_removed": "The tool no longer uses a secret (narrowing).",
    ConfirmationRemoved => "confirmation_removed": "`requires_confirmation` went from true to false (widening).",
    ConfirmationAdded => "confirmation_added": "`requires_confirmation` went from false to true (narrowing).",
    BudgetRaised => "budget_raised": "A token or usd budget went up or was removed (widening).",
    BudgetLowered => "budget_lowered": "A token or usd budget went down or was set (narrowing).",
    PropertyAdded => "property_added": "An optional property was added to a schema (compatible).",
    RequiredPropertyAdded => "required_property_added": "A required property was added (input: breaking; result: compatible).",
    PropertyRemoved => "property_removed": "A property was removed (breaking, for inputs and results).",
    PropertyRequired => "property_required": "An existing property became required (input: breaking; result: compatible).",
    PropertyOptional => "property_optional": "A required property became optional (input: compatible; result: breaking).",
    TypeNarrowed => "type_narrowed": "Fewer types are accepted, e.g. number to integer (input: breaking; result: compatible).",
    TypeWidened => "type_widened": "More types are accepted (input: compatible; result: breaking).",
    EnumValueRemoved => "enum_value_removed": "An enum value was removed (input: breaking; result: compatible).",
    EnumValueAdded => "enum_value_added": "An enum value was added (input: compatible; result: breaking).",
    ConstraintTightened => "constraint_tightened": "A constraint was added or tightened: a bound raised or lowered, a new `pattern` or `format`, `additionalProperties: false`, ... (input: breaking; result: compatible).",
    ConstraintLoosened => "constraint_loosened": "A constraint was removed or loosened (input: compatible; result: breaking).",
    SchemaChanged => "schema_changed": "A schema change that is neither a tightening nor a loosening, e.g. another `pattern`, or `type` string to integer (breaking).",
    AnnotationChanged => "annotation_changed": "A schema annotation changed: title, description, examples, default, ... (neutral).",
    GrantAdded => "grant_added": "policy.caps grants a capability it did not cover before (widening; neutral when an old grant already covers it).",
    GrantRemoved => "grant_removed": "policy.caps no longer grants a capability (narrowing).",
    TitleChanged => "title_changed": "An MCP tool's `title` or `annotations.title` changed (neutral).",
    HintChanged => "hint_changed": "An MCP tool annotation hint changed, absent hints read as the specification's defaults (readOnlyHint false, destructiveHint true, idempotentHint false, openWorldHint true): readOnlyHint true→false, destructiveHint false→true, idempotentHint true→false and openWorldHint false→true are widening (risky), the reverse narrowing.",
    ToolRenamed => "tool_renamed": "An MCP tool is served under another name, its definition otherwise unchanged (breaking: calls by the old name fail, and the new name was never pinned).",
    FieldChanged => "field_changed": "Another field of an MCP tool changed: `icons`, `execution`, `_meta`, or a field no specification defines (widening: what is not understood fails closed).",
    SkillAdded => "skill_added": "A skill (`skills/<name>/`) the old side does not have (widening).",
    SkillRemoved => "skill_removed": "A skill the new side no longer has (breaking).",
    SkillChanged => "skill_changed": "A skill's files changed: its SKILL.md or a file beside it (neutral; its allowed tools are compared on their own).",
    SkillToolsWidened => "skill_tools_widened": "A skill's `allowed-tools` names a tool it did not before (widening).",
    SkillToolsNarrowed => "skill_tools_narrowed": "A skill's `allowed-tools` no longer names a tool (narrowing).",
    ClientToolAdded => "client_tool_added": "manifest.toml `[skills] client_tools` declares a client tool (`Read`, `Bash(git:*)`) it did not before: the agent's skills may now pre-approve it (widening).",
    ClientToolRemoved => "client_tool_removed": "manifest.toml `[skills] client_tools` no longer declares a client tool (narrowing).",
    ContractChanged => "contract_changed": "The fingerprint changed in a way none of the other kinds describes (widening).",
}

crate::codes::stable_codes! {
    /// How much a change matters.
    pub enum Impact;
    Widening => "widening": "The tool may do more: more reach, more secrets, fewer guards.",
    Breaking => "breaking": "Callers (input schema) or consumers of results (result schema) may fail.",
    Narrowing => "narrowing": "The tool may do less.",
    Compatible => "compatible": "A schema change callers and consumers keep working with.",
    Neutral => "neutral": "Worth a look, but neither of the above.",
}

/// One change. `old` and `new` are the values concerned (as text), when there are any.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The tool, or `None` for a policy.caps change.
    pub tool: Option<String>,
    pub kind: ChangeKind,
    pub impact: Impact,
    /// Where: `transport.url`, `capabilities`, `input_schema.to[]`, `policy.caps`, ...
    pub at: String,
    pub old: Option<String>,
    pub new: Option<String>,
    /// One line for people, e.g. `http host https://a.example -> https://b.example`.
    pub message: String,
}

impl Change {
    pub(super) fn new(tool: Option<&str>, kind: ChangeKind, impact: Impact, at: impl Into<String>) -> Change {
        Change {
            tool: tool.map(str::to_owned),
            kind,
            impact,
            at: at.into(),
            old: None,
            new: None,
            message: String::new(),
        }
    }

    pub(super) fn values(mut self, old: Option<String>, new: Option<String>) -> Change {
        self.old = old;
        self.new = new;
        self
    }

    pub(super) fn message(mut self, message: impl Into<String>) -> Change {
        self.message = message.into();
        self
    }
}

/// A tool only the new side has.
pub fn tool_added(new: &Contract) -> Change {
    Change::new(Some(new.id()), ChangeKind::ToolAdded, Impact::Widening, "tools")
        .values(None, Some(new.fingerprint.clone()))
        .message("tool added")
}

/// A tool only the old side has.
pub fn tool_removed(old: &Contract) -> Change {
    Change::new(Some(old.id()), ChangeKind::ToolRemoved, Impact::Breaking, "tools")
        .values(Some(old.fingerprint.clone()), None)
        .message("tool removed")
}

/// Every change from `old` to `new`, two contracts of the same tool id. Equal fingerprints
/// give no changes; different ones give at least one.
pub fn compare(old: &Contract, new: &Contract) -> Vec<Change> {
    if old.fingerprint == new.fingerprint {
        return Vec::new();
    }
    let tool = Some(new.id());
    let (o, n) = (&old.doc, &new.doc);
    let mut out = Vec::new();
    let change = |kind, impact, at: &str| Change::new(tool, kind, impact, at);

    risk(tool, old, new, &mut out);
    if o.description != n.description {
        out.push(
            change(ChangeKind::DescriptionChanged, Impact::Neutral, "description")
                .values(Some(o.description.clone()), Some(n.description.clone()))
                .message("description changed"),
        );
    }
    transport(tool, &o.transport, &n.transport, &mut out);
    capabilities(tool, &o.capabilities, &n.capabilities, &mut out);
    let (os, ns): (BTreeSet<&String>, BTreeSet<&String>) = (o.secrets.iter().collect(), n.secrets.iter().collect());
    for s in ns.difference(&os) {
        out.push(
            change(ChangeKind::SecretAdded, Impact::Widening, "secrets")
                .values(None, Some((*s).clone()))
                .message(format!("secret {s} added")),
        );
    }
    for s in os.difference(&ns) {
        out.push(
            change(ChangeKind::SecretRemoved, Impact::Narrowing, "secrets")
                .values(Some((*s).clone()), None)
                .message(format!("secret {s} removed")),
        );
    }
    match (o.requires_confirmation, n.requires_confirmation) {
        (true, false) => out.push(
            change(ChangeKind::ConfirmationRemoved, Impact::Widening, "requires_confirmation")
                .values(Some("true".into()), Some("false".into()))
                .message("confirmation removed: calls no longer wait for a person"),
        ),
        (false, true) => out.push(
            change(ChangeKind::ConfirmationAdded, Impact::Narrowing, "requires_confirmation")
                .values(Some("false".into()), Some("true".into()))
                .message("confirmation added: calls wait for a person"),
        ),
        _ => {}
    }
    budget(tool, &o.budget, &n.budget, &mut out);
    schema_changes::compare(new.id(), Side::Input, &o.input_schema, &n.input_schema, &mut out);
    schema_changes::compare(new.id(), Side::Result, &o.result_schema, &n.result_schema, &mut out);
    if out.is_empty() {
        // Nothing above explains the difference: say so, and fail closed.
        out.push(
            change(ChangeKind::ContractChanged, Impact::Widening, "contract")
                .values(Some(old.fingerprint.clone()), Some(new.fingerprint.clone()))
                .message("contract changed"),
        );
    }
    out
}

/// Flags the risk class gained and lost. A change of `requires_confirmation` alone is left out:
/// it moves `destructive`, but a removed confirmation is a widening (reported as such), not a
/// lower risk, and an added one is not a higher risk.
fn risk(tool: Option<&str>, old: &Contract, new: &Contract, out: &mut Vec<Change>) {
    let same_confirmation = ContractDoc { requires_confirmation: old.doc.requires_confirmation, ..new.doc.clone() };
    let compared = if same_confirmation.requires_confirmation == new.doc.requires_confirmation {
        new.risk
    } else {
        Risk::of(&same_confirmation)
    };
    let (was, now) = (old.risk.flags(), compared.flags());
    let gained: Vec<&str> = now.iter().filter(|f| !was.contains(f)).copied().collect();
    let lost: Vec<&str> = was.iter().filter(|f| !now.contains(f)).copied().collect();
    let values = || (Some(old.risk.to_string()), Some(new.risk.to_string()));
    if !gained.is_empty() {
        let (o, n) = values();
        out.push(Change::new(tool, ChangeKind::RiskRaised, Impact::Widening, "risk").values(o, n).message(format!(
            "risk raised: +{} (now {})",
            gained.join(" +"),
            new.risk
        )));
    }
    if !lost.is_empty() {
        let (o, n) = values();
        out.push(Change::new(tool, ChangeKind::RiskLowered, Impact::Narrowing, "risk").values(o, n).message(format!(
            "risk lowered: -{} (now {})",
            lost.join(" -"),
            new.risk
        )));
    }
}

/// 0 for methods that only read, 1 for methods that write, 2 for DELETE.
fn method_rank(method: &str) -> u8 {
    match method {
        "GET" | "HEAD" => 0,
        "DELETE" => 2,
        _ => 1,
    }
}

fn transport(tool: Option<&str>, old: &ContractTransport, new: &ContractTransport, out: &mut Vec<Change>) {
    let change = |kind, impact, at: &str| Change::new(tool, kind, impact, at);
    match (old, new) {
        (
            ContractTransport::Http { method: om, url: ou, headers: oh },
            ContractTransport::Http { method: nm, url: nu, headers: nh },
        ) => {
            if om != nm {
                let impact = match method_rank(nm).cmp(&method_rank(om)) {
                    std::cmp::Ordering::Greater => Impact::Widening,
                    std::cmp::Ordering::Less => Impact::Narrowing,
                    std::cmp::Ordering::Equal => Impact::Neutral,
                };
                out.push(
                    change(ChangeKind::HttpMethodChanged, impact, "transport.method")
                        .values(Some(om.clone()), Some(nm.clone()))
                        .message(format!("http method {om} -> {nm}")),
                );
            }
            let (oo, no) = (old.http_origin(), new.http_origin());
            if oo != no {
                let (oo, no) = (oo.unwrap_or_default(), no.unwrap_or_default());
                out.push(
                    change(ChangeKind::HttpHostChanged, Impact::Widening, "transport.url")
                        .values(Some(ou.clone()), Some(nu.clone()))
                        .message(format!("http host {oo} -> {no}")),
                );
            } else if ou != nu {
                out.push(
                    change(ChangeKind::HttpUrlChanged, Impact::Widening, "transport.url")
                        .values(Some(ou.clone()), Some(nu.clone()))
                        .message(format!("http url {ou} -> {nu}")),
                );
            }
            // Header names are case-insensitive (RFC 9110).
            let fold = |h: &BTreeMap<String, String>| -> BTreeMap<String, (String, String)> {
                h.iter().map(|(k, v)| (k.to_ascii_lowercase(), (k.clone(), v.clone()))).collect()
            };
            let (oh, nh) = (fold(oh), fold(nh));
            for (key, (name, value)) in &nh {
                match oh.get(key) {
                    None => out.push(
                        change(ChangeKind::HttpHeaderAdded, Impact::Widening, "transport.headers")
                            .values(None, Some(format!("{name}: {value}")))
                            .message(format!("http header {name} added")),
                    ),
                    Some((_, old_value)) if old_value != value => out.push(
                        change(ChangeKind::HttpHeaderChanged, Impact::Widening, "transport.headers")
                            .values(Some(format!("{name}: {old_value}")), Some(format!("{name}: {value}")))
                            .message(format!("http header {name}: {old_value} -> {value}")),
                    ),
                    Some(_) => {}
                }
            }
            for (key, (name, value)) in &oh {
                if !nh.contains_key(key) {
                    out.push(
                        change(ChangeKind::HttpHeaderRemoved, Impact::Narrowing, "transport.headers")
                            .values(Some(format!("{name}: {value}")), None)
                            .message(format!("http header {name} removed")),
                    );
                }
            }
        }
        (ContractTransport::Exec { command: oc, args: oa }, ContractTransport::Exec { command: nc, args: na }) => {
            if oc != nc {
                out.push(
                    change(ChangeKind::ExecCommandChanged, Impact::Widening, "transport.command")
                        .values(Some(oc.clone()), Some(nc.clone()))
                        .message(format!("exec command {oc} -> {nc}")),
                );
            }
            if oa != na {
                let (oa, na) = (format!("{oa:?}"), format!("{na:?}"));
                out.push(
                    change(ChangeKind::ExecArgsChanged, Impact::Widening, "transport.args")
                        .values(Some(oa.clone()), Some(na.clone()))
                        .message(format!("exec args {oa} -> {na}")),
                );
            }
        }
        _ => out.push(
            change(ChangeKind::TransportChanged, Impact::Widening, "transport")
                .values(Some(old.summary()), Some(new.summary()))
                .message(format!("transport {} -> {}", old.summary(), new.summary())),
        ),
    }
}

/// Added and removed capabilities (or grants), each addition with the old one that already
/// covers it, if any (`net:*.x.example` before, `net:api.x.example` now: neutral, not widening).
fn coverage_changes<'a>(
    old: &'a [String],
    new: &'a [String],
) -> (Vec<(&'a String, Option<&'a String>)>, Vec<&'a String>) {
    let (os, ns): (BTreeSet<&String>, BTreeSet<&String>) = (old.iter().collect(), new.iter().collect());
    // Indexed: policies with many grants must not cost grants x grants.
    let parsed: Vec<(&String, Capability)> =
        os.iter().filter_map(|o| Capability::parse(o).ok().map(|c| (*o, c))).collect();
    let index = GrantIndex::new(parsed.iter().map(|(_, c)| c));
    let added = ns
        .difference(&os)
        .map(|c| {
            let covering = Capability::parse(c).ok().and_then(|need| index.first_covering(&need)).map(|i| parsed[i].0);
            (*c, covering)
        })
        .collect();
    (added, os.difference(&ns).copied().collect())
}

/// Added (widening unless covered) and removed (narrowing) capabilities or grants.
fn set_changes(
    tool: Option<&str>,
    at: &str,
    (added_kind, removed_kind, noun): (ChangeKind, ChangeKind, &str),
    old: &[String],
    new: &[String],
    out: &mut Vec<Change>,
) {
    let (added, removed) = coverage_changes(old, new);
    for (c, covering) in added {
        let impact = if covering.is_some() { Impact::Neutral } else { Impact::Widening };
        let within = covering.map(|o| format!(" (within {o})")).unwrap_or_default();
        out.push(
            Change::new(tool, added_kind, impact, at)
                .values(None, Some(c.clone()))
                .message(format!("{noun} {c} added{within}")),
        );
    }
    for c in removed {
        out.push(
            Change::new(tool, removed_kind, Impact::Narrowing, at)
                .values(Some(c.clone()), None)
                .message(format!("{noun} {c} removed")),
        );
    }
}

fn capabilities(tool: Option<&str>, old: &[String], new: &[String], out: &mut Vec<Change>) {
    let kinds = (ChangeKind::CapabilityAdded, ChangeKind::CapabilityRemoved, "capability");
    set_changes(tool, "capabilities", kinds, old, new, out);
}

/// policy.caps grants added and removed.
pub fn compare_grants(old: &[String], new: &[String]) -> Vec<Change> {
    let mut out = Vec::new();
    set_changes(None, "policy.caps", (ChangeKind::GrantAdded, ChangeKind::GrantRemoved, "grant"), old, new, &mut out);
    out
}

fn budget(tool: Option<&str>, old: &ContractBudget, new: &ContractBudget, out: &mut Vec<Change>) {
    for (name, o, n) in [("tokens", old.tokens, new.tokens), ("usd", old.usd, new.usd)] {
        let raised = match (o, n) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) => b > a,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => continue,
        };
        let show = |v: Option<f64>| v.map_or_else(|| "none".to_owned(), |v| v.to_string());
        let (kind, impact) = if raised {
            (ChangeKind::BudgetRaised, Impact::Widening)
        } else {
            (ChangeKind::BudgetLowered, Impact::Narrowing)
        };
        let note = if n.is_none() { " (no limit)" } else { "" };
        out.push(
            Change::new(tool, kind, impact, format!("budget.{name}"))
                .values(o.map(|v| v.to_string()), n.map(|v| v.to_string()))
                .message(format!("budget {name} {} -> {}{note}", show(o), show(n))),
        );
    }
}
