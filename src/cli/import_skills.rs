//! `bundle import --from skills DIR... -o AGENT_DIR`: Agent Skills folders into an agent.

use std::path::{Path, PathBuf};

use agent_bundle::agent::LockReport;
use agent_bundle::ops::import_skills;

use super::{Format, Global, Outcome, check, json, output};

pub fn run(
    inputs: &[String],
    agent: Option<&Path>,
    force: bool,
    format: Format,
    global: Global,
) -> anyhow::Result<Outcome> {
    let Some(agent) = agent else {
        anyhow::bail!("--from skills copies skill folders into an agent: name it with -o AGENT_DIR");
    };
    let inputs: Vec<PathBuf> = inputs.iter().map(PathBuf::from).collect();
    let result = import_skills::import_skills(&inputs, agent, force)?;
    let lock_diagnostics = result.lock.iter().flat_map(|l| &l.report().diagnostics);
    let ok = !result.report.has_errors();
    if format == Format::Json {
        output::print_json(&serde_json::json!({
            "ok": ok,
            "agent": agent.display().to_string(),
            "skills": result.imported,
            "relocked": result.lock.as_ref().map(Result::is_ok),
            "diagnostics": json::diagnostics(result.report.diagnostics.iter().chain(lock_diagnostics)),
        }))?;
    } else {
        check::render_report(&result.report, format, global, "import")?;
        for s in &result.imported {
            let tools =
                if s.allowed_tools.is_empty() { "no allowed tools".to_owned() } else { s.allowed_tools.join(" ") };
            output::status(
                global,
                &format!(
                    "imported skill {} into {} ({} file{}; {tools})",
                    s.name,
                    agent.display(),
                    s.files,
                    if s.files == 1 { "" } else { "s" }
                ),
            );
        }
        if let Some(lock) = &result.lock {
            if lock.is_err() {
                output::human(lock.report(), global)?;
                output::status(
                    global,
                    "the skills were copied, but manifest.toml could not be relocked: fix the above, then run `bundle lock`",
                );
            } else if lock.written() {
                output::status(global, &format!("relocked {}", lock.manifest_path().display()));
            }
        }
    }
    Ok(if ok { Outcome::Ok } else { check::outcome(&result.report) })
}
