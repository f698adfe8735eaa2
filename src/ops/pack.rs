//! `bundle pack`: check, lock, sign and write a reproducible agent.bundle atomically.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::agent::{self, Current, claimed_digests, display_prefix, lock_agent};
use crate::archive::ArchiveWriter;
use crate::bundle::{self, SIGNATURE_ENTRY, UNTRUSTED_COMMENT};
use crate::diagnostic::{Code, Diagnostic, Report};
use crate::error::Error;
use crate::keys::Signer;
use crate::manifest::{self, Digest};
use crate::progress::{Progress, ProgressRead};
use crate::timestamp::Timestamp;
use crate::{atomic, evidence, trust};

mod output;
use output::{BundleOutput, OnDifference};

#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Output file, or an existing folder for the default name; default
    /// `<name>-<version>.agent.bundle` in the working directory.
    pub output: Option<PathBuf>,
    /// Refuse a stale manifest instead of locking it (like `cargo --locked`).
    pub locked: bool,
    /// zstd level, 1..=19.
    pub level: i32,
    /// The mtime written in every header (`SOURCE_DATE_EPOCH`, else 0).
    pub mtime: u64,
    /// `SOURCE_DATE_EPOCH` when set: the build time in the provenance (none otherwise).
    pub source_date_epoch: Option<u64>,
    /// The time `[bundle] expires` is judged against: pack refuses an already expired manifest.
    pub now: Timestamp,
    /// `--expires`/`--expires-in`: the `[bundle] expires` written into the bundle's manifest
    /// (replacing the author's, if any); the agent folder's manifest.toml is not changed.
    pub expires: Option<Timestamp>,
    /// Replace an existing bundle with different bytes (`--force`). Without it, a released
    /// bundle is never silently replaced: the same bytes are "unchanged", others refused.
    pub force: bool,
    /// `--attest`: also write signed provenance and contract attestations beside the bundle
    /// (crate::evidence); without it, stale ones of an earlier pack are removed.
    pub attest: bool,
    /// The Sigstore trusted root a `[[models]]` identity is judged against (`--trusted-root`).
    pub trusted_root: Option<std::sync::Arc<crate::keyless::TrustedRoot>>,
}

/// A written bundle.
#[derive(Debug)]
pub struct Packed {
    pub path: PathBuf,
    pub name: String,
    pub version: String,
    pub key_id: String,
    pub files: usize,
    pub content_bytes: u64,
    pub bundle_bytes: u64,
    /// Whether the manifest was (re)locked on the way.
    pub relocked: bool,
    /// The output already held exactly these bytes; it was left as it was.
    pub unchanged: bool,
    /// The SHA-256 of the bundle file (lowercase hex), computed while it was written: with
    /// `attest` only (the attestations' subject digest).
    pub sha256: Option<String>,
    /// The attestation files written beside the bundle (`--attest`).
    pub attestations: Vec<PathBuf>,
}

/// Why a pack did not happen.
#[derive(Debug)]
pub enum PackFailure {
    /// The agent has problems (exit 1); nothing was written.
    Rejected(Report),
    /// Usage or I/O (exit 2); nothing was written.
    Error(Error),
}

impl From<Error> for PackFailure {
    fn from(e: Error) -> Self {
        PackFailure::Error(e)
    }
}

/// A rejection of the agent with one problem.
fn rejected(d: Diagnostic) -> PackFailure {
    let mut report = Report::default();
    report.push(d);
    PackFailure::Rejected(report)
}

pub fn pack(dir: &Path, key: &mut Signer, opts: &PackOptions, progress: &dyn Progress) -> Result<Packed, PackFailure> {
    if !crate::archive::LEVELS.contains(&opts.level) {
        return Err(Error::Usage(format!("--level must be between 1 and 19, not {}", opts.level)).into());
    }
    // Validate first: any error stops here. Digests are not compared yet: under --locked the
    // archive pass compares every file's hash with the manifest's as it reads it (so each file
    // is read once); otherwise `lock` hashes everything first (the manifest is entry 1, so its
    // digests must be known before anything is written).
    let checked = agent::check_agent_with(
        dir,
        agent::CheckOptions { digests: false, refresh: None, trusted_root: opts.trusted_root.as_deref() },
    )
    .map_err(|problems| PackFailure::Rejected(problems.report))?;
    refuse_expired(dir, &checked.manifest, opts)?;
    let (current, manifest_text, relocked) = if opts.locked {
        (claimed(dir, &checked.manifest)?, checked.manifest_text.to_string(), false)
    } else {
        let locked = lock_agent(dir).map_err(|refused| PackFailure::Rejected(refused.report))?;
        (locked.current, locked.manifest_text, locked.written)
    };
    let manifest_text = match opts.expires {
        Some(t) => manifest::edit::set_expires(&manifest_text, t).map_err(|e| Error::Usage(e.to_string()))?,
        None => manifest_text,
    };
    let manifest_bytes = manifest_text.into_bytes();
    refuse_what_verify_refuses(dir, &manifest_bytes, &current, &checked.schema_files)?;
    let m = &checked.manifest;
    let signature = sign(key, m, &manifest_bytes)?;
    let output = output_path(opts.output.as_deref(), m);
    let bundle = Contents {
        dir,
        output: &output,
        manifest: &manifest_bytes,
        signature: signature.as_bytes(),
        current: &current,
    };
    let written = bundle.write_atomically(m, key, opts, progress)?;
    Ok(Packed {
        path: output,
        name: checked.manifest.name,
        version: checked.manifest.version.to_string(),
        key_id: key.public_key().key_id_hex(),
        files: current.files.len(),
        content_bytes: written.content_bytes,
        bundle_bytes: written.bundle_bytes,
        relocked,
        unchanged: written.unchanged,
        sha256: written.sha256,
        attestations: written.attestations,
    })
}

/// Decides, before anything is written, where each of several agents goes (`into`: the `-o`
/// folder, else the working directory), and refuses agents that would share one bundle file
/// (the same name and version): every clash at once, naming both folders. An agent whose
/// manifest cannot be read is left to its own pack, which rejects it before writing.
pub fn refuse_shared_outputs(dirs: &[PathBuf], into: Option<&Path>) -> Result<(), Error> {
    let mut seen: Vec<(PathBuf, &Path)> = Vec::new();
    let mut clashes = Vec::new();
    for dir in dirs {
        let Some(m) = read_manifest(dir) else { continue };
        let name = bundle::default_file_name(&m.name, &m.version.to_string());
        let output = into.map_or_else(|| PathBuf::from(&name), |folder| folder.join(&name));
        match seen.iter().find(|(o, _)| *o == output) {
            Some((_, first)) => clashes.push(format!(
                "{} and {} are both {} {}: both would be packed to {}",
                first.display(),
                dir.display(),
                m.name,
                m.version,
                output.display()
            )),
            None => seen.push((output, dir)),
        }
    }
    if clashes.is_empty() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{}; nothing was written: rename one agent or bump [agent] version in one",
        clashes.join("; ")
    )))
}

/// An agent's manifest, if it can be read and parsed (its problems are reported by its pack).
fn read_manifest(dir: &Path) -> Option<manifest::Manifest> {
    use crate::regular_file::{Links, read_to_string};
    let text = read_to_string(&dir.join("manifest.toml"), crate::limits::MAX_MANIFEST_BYTES, Links::Refuse).ok()?;
    manifest::parse(&crate::diagnostic::Source::new("manifest.toml", text), &mut Vec::new())
}

/// Refuses a bundle whose `[bundle] expires` (from `--expires`, else the manifest) is past:
/// every verifier would reject it.
fn refuse_expired(dir: &Path, m: &manifest::Manifest, opts: &PackOptions) -> Result<(), PackFailure> {
    let Some(expires) = opts.expires.or(m.expires).filter(|e| opts.now >= *e) else {
        return Ok(());
    };
    Err(rejected(
        Diagnostic::error(
            Code::Expired,
            format!("{}{}", display_prefix(dir), manifest::FILE_NAME),
            format!(
                "`[bundle] expires` is {expires}, which is past (now {}): every verifier would reject the bundle",
                opts.now
            ),
        )
        .at_path("bundle.expires")
        .with_help("set a later `expires`, or remove it"),
    ))
}

/// Under `--locked`: the files with the digests the manifest claims, refusing any file the
/// manifest does not describe as it is.
fn claimed(dir: &Path, m: &manifest::Manifest) -> Result<Current, PackFailure> {
    let mut diags = Vec::new();
    let (current, stale) = claimed_digests(dir, &display_prefix(dir), m, &mut diags);
    let mut report = Report::default();
    report.diagnostics.extend(diags);
    for (key, message) in stale {
        report.push(
            Diagnostic::error(Code::StaleDigest, format!("{}{}", display_prefix(dir), manifest::FILE_NAME), message)
                .at_path(key)
                .with_help("run `bundle lock`, review, commit, then pack again (--locked ships only what was locked)"),
        );
    }
    if report.has_errors() { Err(PackFailure::Rejected(report)) } else { Ok(current) }
}

/// Never writes a bundle the verifier would refuse: for the size of manifest.toml or
/// tools.json, or because it would not hold a schema tools.json needs.
fn refuse_what_verify_refuses(
    dir: &Path,
    manifest_bytes: &[u8],
    current: &Current,
    schema_files: &[String],
) -> Result<(), PackFailure> {
    let tools_size = current.digest_of(crate::tools::FILE_NAME).map_or(0, |d| d.size);
    for (what, size, limit) in [
        (manifest::FILE_NAME, manifest_bytes.len() as u64, bundle::MAX_MANIFEST_BYTES),
        (crate::tools::FILE_NAME, tools_size, bundle::MAX_JSON_BYTES),
    ] {
        if size > limit {
            return Err(rejected(
                Diagnostic::error(
                    Code::LimitExceeded,
                    format!("{}{what}", display_prefix(dir)),
                    format!("{what} is {size} bytes; `bundle verify` accepts at most {limit}"),
                )
                .with_help("split the agent, or move data out of tools.json into files"),
            ));
        }
    }
    // verify re-validates tools.json against only the JSON files it holds: every schema the
    // check read must be one of them, or the bundle would verify as invalid_tools.
    let held = bundle::held_paths(current.files.iter().map(|f| (f.path.as_str(), f.size)));
    if let Some(rel) = schema_files.iter().find(|rel| !held.contains(rel.as_str())) {
        return Err(rejected(
            Diagnostic::error(
                Code::LimitExceeded,
                format!("{}{rel}", display_prefix(dir)),
                format!(
                    "`bundle verify` would not hold {rel} to check tools.json against it: it holds JSON files of at most {} bytes, {} in all, in bundle order",
                    bundle::MAX_JSON_BYTES,
                    bundle::MAX_JSON_TOTAL
                ),
            )
            .with_help("make the schema smaller, or move large .json data files out of the agent"),
        ));
    }
    Ok(())
}

/// The signature file's text over the manifest, within the size verify accepts.
fn sign(key: &mut Signer, m: &manifest::Manifest, manifest_bytes: &[u8]) -> Result<String, PackFailure> {
    let comment = trust::trusted_comment(&m.name, &m.version.to_string());
    let signature = key.sign(manifest_bytes, &comment, UNTRUSTED_COMMENT).map_err(Error::Signer)?.to_text();
    if signature.len() as u64 > bundle::MAX_SIGNATURE_BYTES {
        return Err(Error::Usage(format!(
            "the signature would be {} bytes; shorten the agent version",
            signature.len()
        ))
        .into());
    }
    Ok(signature)
}

/// Where the bundle goes: `-o FILE`, `-o FOLDER/<default name>`, or the default name here.
fn output_path(output: Option<&Path>, m: &manifest::Manifest) -> PathBuf {
    let default_name = bundle::default_file_name(&m.name, &m.version.to_string());
    match output {
        // An existing folder (a release job's dist/) gets the bundle under its default name.
        Some(dir) if dir.is_dir() => dir.join(default_name),
        Some(file) => file.to_path_buf(),
        None => PathBuf::from(default_name),
    }
}

/// An archive error that is not a failed write of the bundle: a read error names the agent
/// file it happened in; anything the archive format refuses (a limit, a path ustar cannot
/// hold) is a problem of the agent, reported against its file with the archive's reason.
fn archive_failure(e: crate::archive::ArchiveError, dir: &Path, output: &Path) -> PackFailure {
    use crate::archive::ArchiveError;
    let at = |path: Option<&str>| match path {
        Some(p) => format!("{}{p}", display_prefix(dir)),
        None => output.display().to_string(),
    };
    let (code, file) = match &e {
        ArchiveError::Io { path: Some(p), .. } => (Code::IoError, at(Some(p))),
        ArchiveError::Io { path: None, .. } => (Code::IoError, at(None)),
        ArchiveError::LimitExceeded { path, .. } => (Code::LimitExceeded, at(path.as_deref())),
        ArchiveError::PathTooLong { path } | ArchiveError::UnsafePath { path, .. } => {
            (Code::UnsafePath, at(Some(path)))
        }
        _ => (Code::IoError, at(None)),
    };
    if let ArchiveError::Io { path, source } = e {
        let full = path.map_or_else(|| output.to_path_buf(), |p| dir.join(p));
        return PackFailure::Error(Error::io(full, source));
    }
    let mut report = Report::default();
    report.push(Diagnostic::error(code, file, e.to_string()));
    PackFailure::Rejected(report)
}

/// What writing one bundle gave.
struct Written {
    content_bytes: u64,
    bundle_bytes: u64,
    unchanged: bool,
    /// The bundle file's SHA-256 (lowercase hex), computed while it was written (`--attest`).
    sha256: Option<String>,
    attestations: Vec<PathBuf>,
}

/// What one bundle holds, and where it goes.
struct Contents<'a> {
    /// The agent folder (for naming its files in problems).
    dir: &'a Path,
    output: &'a Path,
    manifest: &'a [u8],
    signature: &'a [u8],
    current: &'a Current,
}

impl Contents<'_> {
    /// Writes the bundle to a temporary file beside the output and renames it into place,
    /// with its attestations (`--attest`) beside it.
    fn write_atomically(
        &self,
        m: &manifest::Manifest,
        key: &mut Signer,
        opts: &PackOptions,
        progress: &dyn Progress,
    ) -> Result<Written, PackFailure> {
        let output = self.output;
        // The one rule for outputs: parents created, a link written through, never a device,
        // FIFO or folder replaced (`-o /dev/null` would replace the device node itself).
        let out = atomic::Output::new(output, "-o").map_err(Error::from)?;
        let temp = out.temp().map_err(Error::from)?;
        // A released bundle is never replaced silently: the same bytes are left as they are; other
        // bytes under the same name (same agent and version, tools changed) need --force. The
        // bundle already there is compared while the new one is written, in one read of it.
        let existing = match output.is_file() {
            true => Some(File::open(output).map_err(|e| Error::io(output, e))?),
            false => None,
        };
        let had_output = existing.is_some();
        let (content_bytes, sha256, unchanged) = self.write(temp.as_file(), existing, opts, progress)?;
        let bundle_bytes = temp.as_file().metadata().map_err(|e| Error::io(temp.path(), e))?.len();
        if !unchanged && had_output && !opts.force {
            return Err(Error::Usage(format!(
                "{} already holds a different bundle of {} {}: a released bundle is not replaced; bump [agent] version in {}/manifest.toml, or pass --force to replace it",
                output.display(),
                m.name,
                m.version,
                self.dir.display()
            ))
            .into());
        }
        // Signed before the bundle is put in place, so that a signer failure leaves nothing new.
        // The bundle's SHA-256 is taken while writing only with --attest, for the attestations.
        let attestations = match sha256 {
            Some(sha256) => {
                let facts = evidence::provenance::BuildFacts {
                    agent_dir: self.dir,
                    locked: opts.locked,
                    level: Some(opts.level),
                    expires: opts.expires,
                    source_date_epoch: opts.source_date_epoch,
                };
                let agent = crate::ops::contracts::load_folder_with_root(self.dir, opts.trusted_root.as_deref())
                    .map_err(|e| Error::Usage(format!("cannot attest the agent's contracts: {e}")))?;
                evidence::for_packed(&facts, &agent, output, &sha256, self.manifest, key)?
            }
            None => Vec::new(),
        };
        if !unchanged {
            out.commit(temp).map_err(Error::from)?;
        }
        let attestations = evidence::files::replace_beside(output, &attestations)?;
        let sha256 = sha256.map(hex::encode);
        Ok(Written { content_bytes, bundle_bytes, unchanged, sha256, attestations })
    }

    /// Writes the bundle to `file`; returns the bytes archived, the bundle's SHA-256 (when
    /// attesting), and whether
    /// `existing` (the output already there, if any) holds exactly the same bytes.
    fn write(
        &self,
        file: &File,
        existing: Option<File>,
        opts: &PackOptions,
        progress: &dyn Progress,
    ) -> Result<(u64, Option<[u8; 32]>, bool), PackFailure> {
        let (dir, output, current) = (self.dir, self.output, self.current);
        let failed = Arc::new(AtomicBool::new(false));
        let archive_err = |e: crate::archive::ArchiveError| {
            // The compressing thread has stored the flag before its error reached this thread.
            if failed.load(Ordering::Relaxed)
                && let crate::archive::ArchiveError::Io { source, .. } = e
            {
                return PackFailure::Error(Error::io(output, source));
            }
            if let crate::archive::ArchiveError::SourceChanged { path, reason } = &e {
                rejected(
                    Diagnostic::error(
                        Code::StaleDigest,
                        format!("{}{path}", display_prefix(dir)),
                        format!("{path} changed while packing: {reason}"),
                    )
                    .with_help("run `bundle pack` again when nothing is writing to the agent folder"),
                )
            } else {
                archive_failure(e, dir, output)
            }
        };
        let file = file.try_clone().map_err(|e| Error::io(output, e))?;
        let on_difference = match opts.force {
            true => OnDifference::Replace,
            false => OnDifference::Keep,
        };
        let existing = existing.map(|file| (file, on_difference));
        let out = BundleOutput::new(file, Arc::clone(&failed), existing, opts.attest);
        // No BufWriter: the encoder hands over up to 1 MiB of compressed data per write.
        let mut writer = ArchiveWriter::new(out, opts.level, opts.mtime).map_err(archive_err)?;
        writer.append_bytes(manifest::FILE_NAME, self.manifest).map_err(archive_err)?;
        writer.append_bytes(SIGNATURE_ENTRY, self.signature).map_err(archive_err)?;
        let mut total = 0;
        progress.begin("packing", current.files.iter().map(|f| f.size).sum());
        for f in &current.files {
            let expected = current.digest_of(&f.path);
            let mut source = ProgressRead { inner: File::open(&f.full).map_err(|e| Error::io(&f.full, e))?, progress };
            let hash = writer.append(&f.path, f.size, f.executable, &mut source).map_err(archive_err)?;
            if expected != Some(&Digest { blake3: hash, size: f.size, executable: f.executable }) {
                return Err(rejected(
                    Diagnostic::error(
                        Code::StaleDigest,
                        format!("{}{}", display_prefix(dir), f.path),
                        format!(
                            "{} differs from the digest in manifest.toml (changed since it was locked, or while packing)",
                            f.path
                        ),
                    )
                    .with_help("run `bundle pack` again when nothing is writing to the agent folder"),
                ));
            }
            total += f.size;
        }
        let out = writer.finish().map_err(archive_err)?;
        progress.end();
        let (unchanged, sha256) = out.finish().map_err(|e| Error::io(output, e))?;
        Ok((total, sha256, unchanged))
    }
}
