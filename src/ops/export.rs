//! `bundle export`: an agent's tools in a neighbouring format. The agent (a folder, or a
//! bundle) must pass validation first; exported schemas have every `schema:` reference inlined.
//! A bundle is read by `bundle::verify`: fully verified against trusted keys when the caller has
//! them, else with every digest and archive check but the signature unchecked (and a warning
//! saying so).

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use crate::agent;
use crate::bundle::verify::{self, Discard, Expect, Rejection, Trust};
use crate::contract::{self, Risk};
use crate::diagnostic::{Code, Diagnostic, Report};
use crate::error::{Error, Result};
use crate::formats::{self, ExportTool};
use crate::timestamp::Timestamp;
use crate::tools::{AgentFiles, Resolver, ToolsFile};
use crate::trust::TrustedKeys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    Openai,
    Rap,
    Mcp,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub to: To,
    pub input: PathBuf,
    /// RAP: the toolset name (default: the agent's name).
    pub name: Option<String>,
    /// RAP: the endpoint (default: the one URL all http tools share).
    pub endpoint: Option<String>,
    /// The root a `[[models]]` entry's Sigstore identity is judged under (`--trusted-root`);
    /// without one such an agent or bundle is refused (`model_trusted_root_missing`).
    pub trusted_root: Option<std::sync::Arc<crate::keyless::TrustedRoot>>,
}

#[derive(Debug, Default)]
pub struct Export {
    pub report: Report,
    pub document: Option<serde_json::Value>,
    /// A bundle that failed verification (nothing is exported then).
    pub rejection: Option<Rejection>,
}

/// How a bundle input is verified before its tools are exported.
pub enum BundleTrust<'a> {
    /// Fully, as `bundle verify --key` does: a trusted signature, expiry at `now`, every
    /// digest.
    Keys { keys: &'a TrustedKeys, now: Timestamp },
    /// Every digest and archive check, but not the signature (an `unchecked_signature`
    /// warning).
    Unchecked,
}

pub fn export(opts: &Options, trust: &BundleTrust<'_>) -> Result<Export> {
    let mut out = Export::default();
    let display = opts.input.display().to_string();
    let (tools, files, agent_name): (ToolsFile, Box<dyn AgentFiles>, String) = if opts.input.is_dir() {
        match agent::check_agent_with(
            &opts.input,
            agent::CheckOptions { digests: false, refresh: None, trusted_root: opts.trusted_root.as_deref() },
        ) {
            Ok(c) => match c.tools.model() {
                Ok(tools) => (tools, Box::new(opts.input.clone()), c.manifest.name),
                Err(d) => {
                    out.report.push(d);
                    return Ok(out);
                }
            },
            Err(problems) => {
                out.report = problems.report;
                return Ok(out);
            }
        }
    } else {
        let file = File::open(&opts.input).map_err(|e| Error::io(&opts.input, e))?;
        let reader = BufReader::with_capacity(1 << 20, file);
        let model_root = opts.trusted_root.as_deref();
        let verified = match trust {
            BundleTrust::Keys { keys, now } => {
                let expect = Expect { now: Some(*now), model_root, ..Expect::default() };
                verify::verify(reader, Trust::Keys(keys), &expect, &mut Discard)
            }
            BundleTrust::Unchecked => {
                out.report.push(
                    Diagnostic::warning(
                        Code::UncheckedSignature,
                        &display,
                        "the bundle's signature was not checked: its tools are exported as found, whoever made it",
                    )
                    .with_help(
                        "pass --key PUBLIC_KEY (or --trusted-keys FILE) to verify the bundle fully before exporting",
                    ),
                );
                verify::verify(reader, Trust::Unchecked, &Expect { model_root, ..Expect::default() }, &mut Discard)
            }
        };
        let v = match verified {
            Ok(v) => v,
            Err(e) => {
                out.rejection = Some(e.rejection(&opts.input)?);
                return Ok(out);
            }
        };
        let held: HashMap<String, Vec<u8>> = v.held;
        (v.tools.unwrap_or(ToolsFile { schema: None, version: 1, tools: Vec::new() }), Box::new(held), v.manifest.name)
    };
    let arena = bumpalo::Bump::new();
    let mut resolver = Resolver::new(files.as_ref(), &arena, String::new());
    let mut ready = Vec::new();
    for tool in tools.tools {
        match contract::document(&tool, &mut resolver) {
            Ok(doc) => {
                let risk = Risk::of(&doc);
                ready.push(ExportTool { tool, input_schema: doc.input_schema, result_schema: doc.result_schema, risk })
            }
            Err(e) => out.report.push(Diagnostic::error(Code::UnresolvedSchemaRef, &display, e.to_string())),
        }
    }
    if out.report.has_errors() {
        return Ok(out);
    }
    let result = match opts.to {
        To::Openai => formats::openai::export(&ready),
        To::Mcp => Ok(formats::mcp::export(&ready)),
        To::Rap => formats::rap::export(&ready, opts.name.as_deref().unwrap_or(&agent_name), opts.endpoint.as_deref()),
    };
    match result {
        Ok((doc, notes)) => {
            for n in &notes {
                out.report.push(n.diagnostic(&display));
            }
            out.document = Some(doc);
        }
        Err(errors) => {
            for e in errors {
                out.report.push(Diagnostic::error(Code::NotExportable, &display, e));
            }
        }
    }
    Ok(out)
}
