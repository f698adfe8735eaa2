//! `bundle inspect FILE.mcpb`: an MCP bundle's claims and signature block, rendered.

use std::io::Write as _;
use std::path::Path;

use agent_bundle::diagnostic::{Code, Diagnostic, Report, sanitize};
use agent_bundle::formats::mcpb::McpbManifest;
use agent_bundle::formats::mcpb_archive::{Archive, ArchiveError, EocdComment};
use agent_bundle::ops::inspect_mcpb::{self, McpbInspected};

use super::{Format, Global, Outcome, check, output};

pub fn run(path: &Path, format: Format, global: Global) -> anyhow::Result<Outcome> {
    let shown = path.display().to_string();
    let inspected = inspect_mcpb::inspect(path).map_err(|e| anyhow::anyhow!("cannot read {shown}: {e}"))?;
    let (archive, manifest) = match inspected {
        McpbInspected::Read { archive, manifest } => (archive, manifest),
        McpbInspected::Refused(e) => {
            let mut report = Report::default();
            report.push(refusal(&shown, &e));
            return refused(&report, format, global);
        }
    };
    let manifest = match *manifest {
        Ok(m) => m,
        Err((source, diags)) => {
            let mut report = Report::default();
            report.add_source(&source);
            report.diagnostics.extend(diags);
            return refused(&report, format, global);
        }
    };
    match format {
        Format::Json => output::print_json(&output::sanitize_json(json(&shown, &archive, &manifest)))?,
        Format::Github => output::notice(
            Some(&shown),
            "inspected",
            &format!(
                "MCP bundle {} {}: {} tools claimed; {}",
                manifest.name,
                manifest.version,
                manifest.tools.len(),
                signature_line(&archive)
            ),
        )?,
        Format::Human => human(&archive, &manifest)?,
    }
    Ok(Outcome::Ok)
}

fn refused(report: &Report, format: Format, global: Global) -> anyhow::Result<Outcome> {
    if format == Format::Json {
        output::print_json(&serde_json::json!({
            "ok": false,
            "diagnostics": super::json::diagnostics(report.diagnostics.iter()),
        }))?;
    } else {
        check::render_report(report, format, global, "inspect")?;
    }
    Ok(Outcome::Rejected)
}

fn refusal(shown: &str, e: &ArchiveError) -> Diagnostic {
    let (code, help) = match e {
        ArchiveError::Limit(_) => {
            (Code::LimitExceeded, "an MCP bundle this large or this compressed is refused as hostile input")
        }
        ArchiveError::UnsafePath(_) => (Code::UnsafePath, "an MCP bundle's entries must be relative paths inside it"),
        _ => (Code::InvalidImport, "give a `.mcpb` file made by `mcpb pack`"),
    };
    Diagnostic::error(code, shown, e.to_string()).with_help(help)
}

fn signature_line(a: &Archive) -> String {
    match (&a.signature, &a.signature_garbled) {
        (Some(s), _) => match &s.problem {
            None => format!(
                "PKCS#7 signature block, {} bytes, well-formed (its certificate is not verified here)",
                s.der_bytes
            ),
            Some(p) => format!("PKCS#7 signature block, {} bytes, NOT well-formed: {p}", s.der_bytes),
        },
        (None, Some(g)) => format!("signature block NOT well-formed: {g}"),
        (None, None) => "unsigned".to_owned(),
    }
}

fn eocd_line(a: &Archive) -> String {
    match a.eocd {
        EocdComment::Consistent { comment_length } => {
            format!("end-of-central-directory consistent (comment length {comment_length})")
        }
        EocdComment::Undeclared { comment_length, trailing } => format!(
            "end-of-central-directory comment length is {comment_length}, but {trailing} more bytes follow it: the defect of files signed by mcpb 2.1.2 (the signature block is not declared as the ZIP comment); strict ZIP readers refuse this file"
        ),
    }
}

fn tools_source(m: &McpbManifest) -> &'static str {
    if m.static_tools_list.is_some() {
        "full definitions in _meta (a static tools/list response)"
    } else {
        "names and descriptions only"
    }
}

fn human(a: &Archive, m: &McpbManifest) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let display = m.display_name.as_deref().map(|d| format!(" \"{}\"", sanitize(d))).unwrap_or_default();
    writeln!(
        out,
        "mcp bundle  {} {}{display} (manifest {})",
        sanitize(&m.name),
        sanitize(&m.version),
        m.manifest_version
    )?;
    writeln!(out, "author      {}", sanitize(&m.author))?;
    let args = if m.args.is_empty() { String::new() } else { format!(" {}", m.args.join(" ")) };
    writeln!(
        out,
        "server      {} {}: runs {}{}",
        m.server_type,
        sanitize(&m.entry_point),
        sanitize(&m.command),
        sanitize(&args)
    )?;
    writeln!(
        out,
        "zip         {} entries, {} bytes uncompressed, {} of {} bytes of the file",
        a.entries, a.content_bytes, a.zip_bytes, a.size
    )?;
    writeln!(out, "signature   {}", signature_line(a))?;
    writeln!(out, "zip end     {}", eocd_line(a))?;
    if !m.user_config.is_empty() {
        let cfg: Vec<String> = m
            .user_config
            .iter()
            .map(|(k, s)| if *s { format!("{} (sensitive)", sanitize(k)) } else { sanitize(k) })
            .collect();
        writeln!(out, "user config {}", cfg.join(", "))?;
    }
    let generated = if m.tools_generated { "; tools_generated: the server makes more at run time" } else { "" };
    writeln!(out, "\ntools claimed ({}; {}{generated}):", m.tools.len(), tools_source(m))?;
    let width = m.tools.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(0);
    for (name, description) in &m.tools {
        let name = sanitize(name);
        let pad = " ".repeat(width.saturating_sub(name.chars().count()));
        writeln!(out, "  {name}{pad}  {}", sanitize(description.as_deref().unwrap_or("-")))?;
    }
    out.flush()
}

fn json(shown: &str, a: &Archive, m: &McpbManifest) -> serde_json::Value {
    serde_json::json!({
        "ok": true,
        "file": shown,
        "name": m.name,
        "display_name": m.display_name,
        "version": m.version,
        "manifest_version": m.manifest_version,
        "author": m.author,
        "server": {"type": m.server_type, "entry_point": m.entry_point, "command": m.command, "args": m.args},
        "user_config": m.user_config.iter().map(|(k, s)| serde_json::json!({"key": k, "sensitive": s})).collect::<Vec<_>>(),
        "tools": m.tools.iter().map(|(n, d)| serde_json::json!({"name": n, "description": d})).collect::<Vec<_>>(),
        "tools_generated": m.tools_generated,
        "static_tools_list": m.static_tools_list.is_some(),
        "zip": {"size": a.size, "zip_bytes": a.zip_bytes, "entries": a.entries, "content_bytes": a.content_bytes, "eocd": a.eocd},
        "signature": a.signature,
        "signature_problem": a.signature_garbled,
    })
}
