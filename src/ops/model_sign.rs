//! `bundle attest --model-signing --key P256KEY [AGENT_DIR]`: an OpenSSF model signature
//! ([`crate::attest::model_signing`]) of an agent folder, which the stock `model_signing verify
//! key` accepts for the folder and for the folder `bundle unpack` makes of its bundle.
//!
//! The resources are the files the bundle holds (the agent's files as `pack` collects them, and
//! `manifest.toml`); everything else in the folder (what `.bundleignore` and the default ignores
//! leave out) is named in `ignore_paths`, with the git paths `model_signing` ignores by default
//! and the bundle's own `manifest.toml.minisig`, which unpacking adds. A symbolic link anywhere in
//! the folder is refused: the stock verifier refuses one too.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::attest::model_signing::{self, GIT_PATHS, Resource};
use crate::diagnostic::{Report, Source};
use crate::error::Error;

/// What was signed.
#[derive(Debug)]
pub struct ModelSigned {
    /// The folder's name (the statement's subject).
    pub name: String,
    /// The root digest (SHA-256 hex over the resources' digests).
    pub root: String,
    pub resources: usize,
    pub output: PathBuf,
}

/// Why nothing was signed.
#[derive(Debug)]
pub enum ModelSignError {
    /// The folder has problems `bundle check` reports (each a diagnostic).
    Invalid(Report),
    Error(Error),
}

impl From<Error> for ModelSignError {
    fn from(e: Error) -> Self {
        ModelSignError::Error(e)
    }
}

/// The default signature file: `<folder name>.model.sig` beside the folder (inside it, the
/// signature would be one more file of the agent).
pub fn default_output(dir: &Path) -> Result<PathBuf, Error> {
    let full = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let name = full.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "agent".into());
    Ok(full.with_file_name(format!("{name}.model.sig")))
}

/// Signs the agent folder `dir` with `key` and writes the signature to `output` (atomically).
pub fn sign(dir: &Path, key: &mut crate::keys::P256Signer, output: &Path) -> Result<ModelSigned, ModelSignError> {
    let full = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let name = full.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let manifest_path = dir.join(crate::manifest::FILE_NAME);
    let text = crate::regular_file::read_to_string(
        &manifest_path,
        crate::limits::MAX_MANIFEST_BYTES,
        crate::regular_file::Links::Refuse,
    )
    .map_err(|e| Error::io(&manifest_path, e.into_io()))?;
    let mut diags = Vec::new();
    let source = Source::new(manifest_path.display().to_string(), text.as_str());
    let invalid = |diagnostics| {
        let mut report = Report { diagnostics, ..Report::default() };
        report.add_source(&source);
        ModelSignError::Invalid(report)
    };
    let Some(manifest) = crate::manifest::parse(&source, &mut diags) else {
        return Err(invalid(diags));
    };
    let files =
        crate::fileset::collect(dir, &crate::agent::display_prefix(dir), &manifest.allow_secret_files, &mut diags);
    if diags.iter().any(|d| d.severity == crate::diagnostic::Severity::Error) {
        return Err(invalid(diags));
    }
    let mut names: BTreeSet<String> = files.iter().map(|f| f.path.clone()).collect();
    names.insert(crate::manifest::FILE_NAME.to_owned());
    let ignore_paths = ignored(dir, &names)?;
    let mut resources = Vec::with_capacity(names.len());
    for name in &names {
        let path = dir.join(name);
        resources.push(Resource { name: name.clone(), sha256: file_sha256(&path)? });
    }
    model_signing::sort(&mut resources);
    let statement = model_signing::statement(&name, &resources, &ignore_paths);
    let bytes = model_signing::sign(&statement, key).map_err(Error::Signer)?;
    crate::atomic::write(output, &bytes, true).map_err(|e| Error::io(output, e))?;
    Ok(ModelSigned {
        name,
        root: statement.subject[0].digest["sha256"].clone(),
        resources: resources.len(),
        output: output.to_owned(),
    })
}

/// The folder's paths outside the bundle (`files`), as few as possible: a folder holding none of
/// the bundle's files is named once. Then the git paths and the bundle's signature entry. A
/// symbolic link anywhere is an error.
fn ignored(dir: &Path, files: &BTreeSet<String>) -> Result<Vec<String>, Error> {
    let mut out: BTreeSet<String> = GIT_PATHS.iter().map(|p| (*p).to_owned()).collect();
    out.insert(crate::entries::SIGNATURE_ENTRY.to_owned());
    let mut walker = walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name().min_depth(1).into_iter();
    while let Some(entry) = walker.next() {
        let entry = entry.map_err(|e| Error::io(dir, std::io::Error::other(e.to_string())))?;
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        if entry.path_is_symlink() {
            return Err(Error::Usage(format!(
                "{}: a symbolic link; OpenSSF model signing refuses folders with links (remove it)",
                entry.path().display()
            )));
        }
        if entry.file_type().is_dir() {
            let prefix = format!("{rel}/");
            if !files.iter().any(|f| f.starts_with(&prefix)) {
                if !out.contains(&rel) {
                    out.insert(rel);
                }
                walker.skip_current_dir();
            }
        } else if !files.contains(&rel) {
            out.insert(rel);
        }
    }
    Ok(out.into_iter().collect())
}

fn file_sha256(path: &Path) -> Result<[u8; 32], Error> {
    let mut file = crate::regular_file::open(path, crate::regular_file::Links::Refuse)
        .map_err(|e| Error::io(path, e.into_io()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf).map_err(|e| Error::io(path, e))? {
            0 => break,
            n => hasher.update(&buf[..n]),
        }
    }
    Ok(hasher.finalize().into())
}
