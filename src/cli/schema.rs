//! `bundle schema <tools|manifest>`: print a published JSON Schema, for editors.

use std::io::Write;

use agent_bundle::schemas;

use super::Outcome;

/// Print the JSON Schema of tools.json or manifest.toml on stdout.
///
/// Editors use it for completion and inline errors: VS Code for tools.json, taplo (and the
/// Even Better TOML extension) for manifest.toml. See docs/book/src/guides/editors.md.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  bundle schema tools > schemas/tools.v1.schema.json
  bundle schema manifest > schemas/manifest.v1.schema.json   # for taplo")]
pub struct Args {
    /// Which file's schema.
    #[arg(value_enum)]
    file: SchemaFile,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SchemaFile {
    /// tools.json version 1.
    Tools,
    /// manifest.toml format 1.
    Manifest,
    /// The agent-contract predicate of `pack --attest` (for policy engines).
    ContractPredicate,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let text = match args.file {
        SchemaFile::Tools => schemas::TOOLS_V1,
        SchemaFile::Manifest => schemas::MANIFEST_V1,
        SchemaFile::ContractPredicate => schemas::AGENT_CONTRACT_V1,
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(Outcome::Ok)
}
