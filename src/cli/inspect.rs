//! `bundle inspect <BUNDLE>`: what a bundle holds, and whether its signature was checked.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_bundle::bundle::verify::Verified;
use agent_bundle::contract::release::PinnedServer;
use agent_bundle::contract::{Contract, ContractError};
use agent_bundle::diagnostic::sanitize;
use agent_bundle::formats::mcp_pin;
use agent_bundle::keyless::TrustedRoot;
use agent_bundle::manifest::{McpStart, PinSource};
use agent_bundle::ops::gate::Verdict;
use agent_bundle::ops::input::RegistryConfig;
use agent_bundle::ops::inspect::{self, Inspected};
use agent_bundle::timestamp::Timestamp;
use agent_bundle::tools::Transport;
use agent_bundle::trust::TrustedKeys;

use super::json::{self, AgentJson, InspectPin, InspectReport, InspectTool, OciInspectReport, OciLayer, Results};
use super::keys::{load_public_key, load_trust};
use super::{Format, Global, Outcome};

/// The widest tool table printed; a wider one becomes a block per tool (a terminal of 100
/// columns; `--format json` has every field in full).
const TABLE_COLUMNS: usize = 100;

/// Show a bundle's agent, signer, files and tools (with each tool's risk class and contract
/// fingerprint).
///
/// An MCP bundle (FILE.mcpb) shows what its manifest.json claims and whether its signature
/// block is well-formed (read without extracting anything; its certificate is not verified).
///
/// Without --key the signature is read but NOT checked (the output says so); every digest and
/// the archive's safety are still checked, and so are vendor model signatures (`[[models]]`):
/// one made with a Sigstore identity only under --trusted-root (refused without it, as `bundle
/// verify` refuses it, rather than shown as checked).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle inspect mailer-1.4.0.agent.bundle\n  bundle inspect mailer-1.4.0.agent.bundle --key release.pub --format json"
)]
pub struct Args {
    /// The bundle files, each shown in turn; or registry artifacts,
    /// oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX) (without --key: shown from the artifact's
    /// config, without downloading the bundle).
    #[arg(value_name = "BUNDLE", required = true)]
    bundles: Vec<PathBuf>,
    /// Check the signature against this public key (repeatable).
    #[arg(long = "key", value_name = "PUBLIC_KEY")]
    keys: Vec<PathBuf>,
    /// Check the signature against a trusted-keys file.
    #[arg(long, value_name = "FILE", conflicts_with = "keys")]
    trusted_keys: Option<PathBuf>,
    #[command(flatten)]
    models: super::args::ModelRootArgs,
    #[command(flatten)]
    registry: super::registry::RegistryArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(super) format: Format,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let keys: Option<TrustedKeys> = if args.keys.is_empty() && args.trusted_keys.is_none() {
        None
    } else if args.trusted_keys.is_some() {
        Some(load_trust(&super::args::TrustArgs { trusted_keys: args.trusted_keys.clone(), ..Default::default() })?)
    } else {
        Some(TrustedKeys::from_keys(args.keys.iter().map(|p| load_public_key(p)).collect::<anyhow::Result<Vec<_>>>()?))
    };
    let keys = keys.as_ref();
    let root = args.models.load()?;
    let root = root.as_ref();
    if let [bundle] = args.bundles.as_slice()
        && agent_bundle::ops::inspect_mcpb::is_mcpb(bundle)
    {
        return super::inspect_mcpb::run(bundle, args.format, global);
    }
    if let [bundle] = args.bundles.as_slice() {
        return Ok(inspect_one(bundle, keys, root, &args.registry, args.format, global, false)?.0);
    }
    let mut outcome = Outcome::Ok;
    let mut results = Vec::new();
    for bundle in &args.bundles {
        let (this, json) = match inspect_one(bundle, keys, root, &args.registry, args.format, global, true) {
            Ok(done) => done,
            // One bundle that cannot be read does not stop the others from being shown.
            Err(e) => {
                match args.format {
                    Format::Json => {}
                    Format::Github => super::output::github_error(&e),
                    Format::Human => super::output::print_error(global, &e),
                }
                let code = super::output::error_code(&e).as_str();
                (Outcome::Failed, Some(super::output::error_json(code, &e.to_string(), &[])))
            }
        };
        outcome = outcome.worst(this);
        if let Some(mut json) = json {
            json["bundle"] = bundle.display().to_string().into();
            results.push(json);
        }
    }
    if args.format == Format::Json {
        super::output::print_json(&Results { ok: outcome == Outcome::Ok, results })?;
    }
    Ok(outcome)
}

/// Shows one bundle; with `collect` and `--format json`, returns its document instead of
/// printing it.
fn inspect_one(
    bundle: &Path,
    keys: Option<&TrustedKeys>,
    root: Option<&TrustedRoot>,
    registry: &super::registry::RegistryArgs,
    format: Format,
    global: Global,
    collect: bool,
) -> anyhow::Result<(Outcome, Option<serde_json::Value>)> {
    let source = registry.source(bundle)?;
    let (v, contracts, pins, attestations, skills) = match inspect::inspect(&source, keys, root)? {
        Inspected::Bundle { verified, contracts, pins, attestations, skills } => {
            (verified, contracts, pins, attestations, skills)
        }
        Inspected::Config(found) => return config_view(&source.label(), &found, format, collect),
        Inspected::Refused(rejection) if collect && format == Format::Json => {
            let verdict = Verdict::refused(rejection);
            return Ok((super::verify::outcome_of(&verdict), Some(super::verify::verdict_json(&verdict)?)));
        }
        Inspected::Refused(r) => return Ok((super::verify::render_rejection(bundle, r, format, global)?, None)),
    };
    if format == Format::Human && collect {
        super::output::print_line(&format!("bundle     {}", sanitize(&bundle.display().to_string())))?;
    }
    let now = global.now();
    let with_attestations = |mut doc: serde_json::Value| {
        if !attestations.is_empty() {
            doc["attestations"] = super::output::sanitize_json(serde_json::to_value(&attestations).unwrap_or_default());
        }
        if !skills.is_empty() {
            doc["skills"] = super::output::sanitize_json(serde_json::to_value(&skills).unwrap_or_default());
        }
        if !v.manifest.client_tools.is_empty() {
            let declared: Vec<String> = v.manifest.client_tools.iter().map(ToString::to_string).collect();
            doc["client_tools"] = super::output::sanitize_json(serde_json::json!(declared));
        }
        doc
    };
    match format {
        Format::Json if collect => {
            return Ok((Outcome::Ok, Some(with_attestations(json(&v, &contracts, &pins, now)))));
        }
        Format::Json => super::output::print_json(&with_attestations(json(&v, &contracts, &pins, now)))?,
        Format::Github => super::output::notice(
            Some(&bundle.display().to_string()),
            "inspected",
            &format!(
                "{} {}: {} files, signature {}",
                v.manifest.name,
                v.manifest.version,
                v.files.len(),
                if v.signature_checked { "checked" } else { "NOT checked (pass --key)" }
            ),
        )?,
        Format::Human => {
            human(&v, &contracts, now)?;
            human_pins(&v, &pins)?;
            human_skills(&skills, &v.manifest.client_tools)?;
            for a in &attestations {
                super::output::print_line(&super::verify::attestation_line(a))?;
            }
        }
    }
    Ok((Outcome::Ok, None))
}

/// The contract of tool `index`, when contracts could be computed.
fn contract(contracts: &Result<Vec<Contract>, ContractError>, index: usize) -> Option<&Contract> {
    contracts.as_ref().ok().and_then(|c| c.get(index))
}

fn json(
    v: &Verified,
    contracts: &Result<Vec<Contract>, ContractError>,
    pins: &Result<Vec<PinnedServer>, ContractError>,
    now: Timestamp,
) -> serde_json::Value {
    let targets: Vec<String> = v.tools.iter().flat_map(|t| &t.tools).map(|tool| tool.transport.summary()).collect();
    json::value(InspectReport {
        agent: AgentJson { name: &v.manifest.name, version: v.manifest.version.to_string() },
        expires: v.manifest.expires.map(|t| t.to_string()),
        expired: v.manifest.expires.is_some_and(|t| now >= t),
        key_id: &v.key_id,
        trusted_comment: &v.trusted_comment,
        signature_checked: v.signature_checked,
        files: &v.files,
        tools: v.tools.as_ref().map(|t| {
            t.tools
                .iter()
                .zip(&targets)
                .enumerate()
                .map(|(i, (tool, target))| InspectTool::new(tool, target, contract(contracts, i)))
                .collect()
        }),
        contract_error: contracts.as_ref().err().map(|e| e.to_string()),
        pins: pins.as_ref().map(|p| p.iter().map(|s| inspect_pin(v, s)).collect()).unwrap_or_default(),
        pin_error: pins.as_ref().err().map(|e| e.to_string()),
    })
}

fn inspect_pin<'a>(v: &'a Verified, s: &'a PinnedServer) -> InspectPin<'a> {
    let start = v.manifest.pins.get(&s.file).and_then(|p| match &p.source {
        PinSource::Mcp { start, .. } => start.as_ref(),
        PinSource::Rap { .. } => None,
    });
    InspectPin {
        server: &s.server,
        file: &s.file,
        command: start.and_then(|s| match s {
            McpStart::Stdio { command } => Some(command.as_slice()),
            McpStart::Http { .. } => None,
        }),
        url: start.and_then(|s| match s {
            McpStart::Http { url } => Some(url.as_str()),
            McpStart::Stdio { .. } => None,
        }),
        tools: fingerprints(s),
    }
}

/// `(name, fingerprint)` of each pinned tool, in served order.
fn fingerprints(s: &PinnedServer) -> Vec<(String, String)> {
    s.tools.iter().map(|t| (mcp_pin::tool_name(t).unwrap_or_default().to_owned(), mcp_pin::fingerprint(t))).collect()
}

/// Each pinned MCP server, how it is started, and its tools' fingerprints.
fn human_pins(v: &Verified, pins: &Result<Vec<PinnedServer>, ContractError>) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let servers = match pins {
        Ok(p) if p.is_empty() => return Ok(()),
        Ok(p) => p,
        Err(e) => return writeln!(out, "\npinned MCP servers: cannot be read: {}", sanitize(&e.to_string())),
    };
    writeln!(out, "\npinned MCP servers ({}):", servers.len())?;
    for s in servers {
        let origin = v.manifest.pins.get(&s.file).map(|p| p.origin()).unwrap_or_default();
        writeln!(out, "  {}  {}  {}", sanitize(&s.server), sanitize(&s.file), sanitize(&origin))?;
        let rows = fingerprints(s);
        let width = rows.iter().map(|(n, _)| sanitize(n).chars().count()).max().unwrap_or(0).min(64);
        for (name, fp) in rows {
            let name = sanitize(&name);
            let pad = " ".repeat(width.saturating_sub(name.chars().count()));
            writeln!(out, "    {name}{pad}  {}", &fp[..16])?;
        }
    }
    out.flush()
}

fn human(v: &Verified, contracts: &Result<Vec<Contract>, ContractError>, now: Timestamp) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "agent      {} {}", v.manifest.name, v.manifest.version)?;
    match v.manifest.expires {
        Some(t) if now >= t => writeln!(out, "expires    {t} (EXPIRED: verify rejects it)")?,
        Some(t) => writeln!(out, "expires    {t}")?,
        None => writeln!(out, "expires    never")?,
    }
    writeln!(out, "signer     {}", v.key_id)?;
    writeln!(out, "comment    {}", sanitize(&v.trusted_comment))?;
    if v.signature_checked {
        writeln!(out, "signature  checked: valid, by a trusted key")?;
    } else {
        writeln!(out, "signature  NOT CHECKED (pass --key to check it); digests and archive safety were checked")?;
    }
    writeln!(out, "\nfiles ({}):", v.files.len())?;
    for f in &v.files {
        let x = if f.executable { "x" } else { "-" };
        writeln!(out, "  {x} {:>10}  {}  {}", f.size, &f.blake3[..16], sanitize(&f.path))?;
    }
    let tools = v.tools.as_ref().map(|t| t.tools.as_slice()).unwrap_or_default();
    writeln!(out, "\ntools ({}):", tools.len())?;
    let rows: Vec<[String; 7]> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let transport = match &t.transport {
                Transport::Exec { command, .. } => format!("exec {command}"),
                Transport::Http { method, url, .. } => format!("{method} {url}"),
            };
            [
                sanitize(&t.id),
                sanitize(&transport),
                list_cell(&t.capabilities),
                list_cell(&t.secrets),
                if t.requires_confirmation { "yes".into() } else { "no".into() },
                contract(contracts, i).map_or_else(|| "-".into(), |c| c.risk.names().join(",")),
                contract(contracts, i).map_or_else(|| "-".into(), |c| c.fingerprint[..16].to_owned()),
            ]
        })
        .collect();
    // The table when it fits TABLE_COLUMNS; else a block per tool (JSON has every field in full).
    let header = ["id", "transport", "capabilities", "secrets", "confirm", "risk", "fingerprint"];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    // Padded by hand: `format!("{c:<w$}")` panics for widths over 65 535.
    let line = |cells: [&str; 7]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w.saturating_sub(c.chars().count()))))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    if 2 + widths.iter().sum::<usize>() + 2 * (widths.len() - 1) <= TABLE_COLUMNS {
        writeln!(out, "  {}", line(header))?;
        for r in &rows {
            writeln!(out, "  {}", line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6]]))?;
        }
    } else {
        // Too wide for a terminal: one block per tool, its fields one per line.
        for r in &rows {
            writeln!(out, "  {}  {}  {}", r[0], r[6], r[5])?;
            for (name, value) in [("transport", &r[1]), ("capabilities", &r[2]), ("secrets", &r[3]), ("confirm", &r[4])]
            {
                writeln!(out, "    {name:<12}  {}", if value.is_empty() { "-" } else { value })?;
            }
        }
    }
    if let Err(e) = contracts {
        writeln!(out, "  (no fingerprints: {})", sanitize(&e.to_string()))?;
    } else if !tools.is_empty() {
        writeln!(out, "  (fingerprint: the first 16 hex digits; --format json shows all 64)")?;
    }
    out.flush()
}

/// The skills section (none when the agent has no skills and declares no client tools).
fn human_skills(
    skills: &[agent_bundle::skill::facts::SkillFacts],
    client_tools: &[agent_bundle::skill::client_tool::ClientTool],
) -> std::io::Result<()> {
    if skills.is_empty() && client_tools.is_empty() {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nskills ({}):", skills.len())?;
    let width = skills.iter().map(|s| s.name.chars().count()).max().unwrap_or(0);
    for s in skills {
        let tools = if s.allowed_tools.is_empty() { "-".to_owned() } else { list_cell(&s.allowed_tools) };
        let name = sanitize(&s.name);
        let pad = " ".repeat(width.saturating_sub(name.chars().count()));
        let files = if s.files == 1 { "1 file ".to_owned() } else { format!("{} files", s.files) };
        writeln!(out, "  {name}{pad}  {}  {files}  allowed: {tools}", &s.digest[..16])?;
    }
    if !skills.is_empty() {
        writeln!(out, "  (digest: BLAKE3 over the skill's files, as `b3sum` lists them; --format json shows all 64)")?;
    }
    if !client_tools.is_empty() {
        // Each entry is printable ASCII by the manifest's rules; sanitised all the same.
        let declared: Vec<String> = client_tools.iter().map(|c| sanitize(&c.to_string())).collect();
        writeln!(out, "  client tools the skills may allow (manifest.toml [skills]): {}", declared.join(", "))?;
    }
    out.flush()
}

/// A list for one table cell: comma-separated, sanitised, and cut short (with the count) when
/// long, so that a tool with 80 000 capabilities does not make a 2 MB line.
fn list_cell(items: &[String]) -> String {
    const MAX_CHARS: usize = 60;
    let joined = sanitize(&items.join(","));
    if joined.chars().count() <= MAX_CHARS {
        return joined;
    }
    let cut: String = joined.chars().take(MAX_CHARS).collect();
    format!("{cut}... ({} in all)", items.len())
}

/// `inspect oci://…` without keys: the manifest and the config, which are informational only
/// (unsigned; nothing in them is checked against the bundle).
fn config_view(
    label: &Path,
    found: &RegistryConfig,
    format: Format,
    collect: bool,
) -> anyhow::Result<(Outcome, Option<serde_json::Value>)> {
    let RegistryConfig { digest, artifact, config } = found;
    let reference = label.display();
    if format == Format::Json {
        let reference = reference.to_string();
        let doc = serde_json::to_value(json::Clean(OciInspectReport {
            reference: &reference,
            digest,
            from_config: true,
            signature_checked: false,
            agent: AgentJson { name: config.name.as_deref(), version: config.version.as_deref() },
            key_id: config.key_id.as_deref(),
            expires: config.expires.as_deref(),
            tools: &config.tools,
            layer: OciLayer {
                digest: &artifact.layer_digest,
                size: artifact.layer_size,
                title: artifact.title.as_deref(),
            },
        }))?;
        if collect {
            return Ok((Outcome::Ok, Some(doc)));
        }
        super::output::print_json(&doc)?;
        return Ok((Outcome::Ok, None));
    }
    let none = || "?".to_owned();
    let mut out = std::io::stdout().lock();
    writeln!(out, "artifact:  {reference}")?;
    writeln!(out, "digest:    {digest}")?;
    writeln!(
        out,
        "agent:     {} {}",
        sanitize(&config.name.clone().unwrap_or_else(none)),
        sanitize(&config.version.clone().unwrap_or_else(none))
    )?;
    writeln!(
        out,
        "signed by: {} (from the config: NOT checked; pass --key to verify the bundle)",
        sanitize(&config.key_id.clone().unwrap_or_else(none))
    )?;
    if let Some(e) = &config.expires {
        writeln!(out, "expires:   {}", sanitize(e))?;
    }
    writeln!(out, "bundle:    {} bytes, {}", artifact.layer_size, artifact.layer_digest)?;
    writeln!(out, "tools:     {}", config.tools.iter().map(|t| sanitize(t)).collect::<Vec<_>>().join(", "))?;
    Ok((Outcome::Ok, None))
}
