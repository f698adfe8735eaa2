//! `bundle inspect FILE.mcpb`: what an MCP bundle claims (its manifest.json) and whether its
//! signature block is well-formed, read as hostile input (formats::mcpb_archive). The PKCS#7
//! signature itself is not verified: no certificate is trusted here, and the format's own
//! verification is broken upstream (mcpb issues #260 and #276).

use std::path::Path;

use crate::diagnostic::{Diagnostic, Source};
use crate::formats::mcpb::{self, McpbManifest};
use crate::formats::mcpb_archive::{self, Archive, ArchiveError};

/// What `inspect` found in an `.mcpb`.
#[derive(Debug)]
pub enum McpbInspected {
    /// The ZIP was read; the manifest, or its problems (with the source they point into).
    Read { archive: Box<Archive>, manifest: Box<Result<McpbManifest, (Source, Vec<Diagnostic>)>> },
    /// The file is refused (not an MCP bundle, or a hostile shape); I/O errors are `Err`.
    Refused(ArchiveError),
}

/// Whether `path` names an MCP bundle (by its extension: `.mcpb`, or `.dxt` as they were).
pub fn is_mcpb(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("mcpb") || e.eq_ignore_ascii_case("dxt"))
}

pub fn inspect(path: &Path) -> std::io::Result<McpbInspected> {
    let archive = match mcpb_archive::read(path) {
        Ok(a) => a,
        Err(ArchiveError::Io(e)) => return Err(e),
        Err(e) => return Ok(McpbInspected::Refused(e)),
    };
    let source = Source::new(format!("{}!manifest.json", path.display()), archive.manifest.as_str());
    let manifest = mcpb::parse(&source).map_err(|d| (source, d));
    Ok(McpbInspected::Read { archive: Box::new(archive), manifest: Box::new(manifest) })
}
