//! `bundle pack`: check, lock, sign and write a reproducible agent.bundle atomically.

use std::fs::File;
use std::io::{BufWriter, Write};
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
use sha2::{Digest as _, Sha256};

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
    /// `--attest`: also write signed provenance and contract attestations beside the bundle
    /// (crate::evidence); without it, stale ones of an earlier pack are removed.
    pub attest: bool,
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
    /// The SHA-256 of the bundle file (lowercase hex), computed while it was written.
    pub sha256: String,
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

pub fn pack(dir: &Path, key: &mut Signer, opts: &PackOptions, progress: &dyn Progress) -> Result<Packed, PackFailure> {
    if !crate::archive::LEVELS.contains(&opts.level) {
        return Err(Error::Usage(format!("--level must be between 1 and 19, not {}", opts.level)).into());
    }
    // Validate first: any error stops here. Digests are not compared yet: under --locked the
    // archive pass compares every file's hash with the manifest's as it reads it (so each file
    // is read once); otherwise `lock` hashes everything first (the manifest is entry 1, so its
    // digests must be known before anything is written).
    let checked = agent::check_agent_with(dir, agent::CheckOptions { digests: false, refresh: None });
    if checked.report.has_errors() {
        return Err(PackFailure::Rejected(checked.report));
    }
    if let Some(expires) = opts.expires.or_else(|| checked.manifest.as_ref().and_then(|m| m.expires))
        && opts.now >= expires
    {
        let mut report = Report::default();
        report.push(
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
        );
        return Err(PackFailure::Rejected(report));
    }
    let (current, manifest_text, relocked) = if opts.locked {
        let m = checked.manifest.as_ref().expect("a clean check has a manifest");
        let mut diags = Vec::new();
        let (current, stale) = claimed_digests(dir, &display_prefix(dir), m, &mut diags);
        let mut report = Report::default();
        report.diagnostics.extend(diags);
        for (key, message) in stale {
            report.push(
                Diagnostic::error(
                    Code::StaleDigest,
                    format!("{}{}", display_prefix(dir), manifest::FILE_NAME),
                    message,
                )
                .at_path(key)
                .with_help("run `bundle lock`, review, commit, then pack again (--locked ships only what was locked)"),
            );
        }
        if report.has_errors() {
            return Err(PackFailure::Rejected(report));
        }
        (current, checked.manifest_text.as_deref().unwrap_or_default().to_owned(), false)
    } else {
        let locked = lock_agent(dir);
        if locked.report.has_errors() {
            return Err(PackFailure::Rejected(locked.report));
        }
        let text = locked.manifest_text.expect("present when lock succeeded");
        (locked.current.expect("present when lock succeeded"), text, locked.written)
    };
    let manifest_text = match opts.expires {
        Some(t) => manifest::edit::set_expires(&manifest_text, t).map_err(|e| Error::Usage(e.to_string()))?,
        None => manifest_text,
    };
    let manifest_bytes = manifest_text.into_bytes();
    // Never write a bundle the verifier would refuse for its size.
    let tools_size = current.digest_of(crate::tools::FILE_NAME).map_or(0, |d| d.size);
    for (what, size, limit) in [
        (manifest::FILE_NAME, manifest_bytes.len() as u64, bundle::MAX_MANIFEST_BYTES),
        (crate::tools::FILE_NAME, tools_size, bundle::MAX_JSON_BYTES),
    ] {
        if size > limit {
            let mut report = Report::default();
            report.push(
                Diagnostic::error(
                    Code::LimitExceeded,
                    format!("{}{what}", display_prefix(dir)),
                    format!("{what} is {size} bytes; `bundle verify` accepts at most {limit}"),
                )
                .with_help("split the agent, or move data out of tools.json into files"),
            );
            return Err(PackFailure::Rejected(report));
        }
    }
    // verify re-validates tools.json against only the JSON files it holds: every schema the
    // check read must be one of them, or the bundle would verify as invalid_tools.
    let held = bundle::held_paths(current.files.iter().map(|f| (f.path.as_str(), f.size)));
    if let Some(rel) = checked.schema_files.iter().find(|rel| !held.contains(rel.as_str())) {
        let mut report = Report::default();
        report.push(
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
        );
        return Err(PackFailure::Rejected(report));
    }
    let m = checked.manifest.expect("a clean check has a manifest");
    let comment = trust::trusted_comment(&m.name, &m.version.to_string());
    let signature = key.sign(&manifest_bytes, &comment, UNTRUSTED_COMMENT).map_err(Error::Signer)?;

    let signature_text = signature.to_text();
    if signature_text.len() as u64 > bundle::MAX_SIGNATURE_BYTES {
        return Err(Error::Usage(format!(
            "the signature would be {} bytes; shorten the agent version",
            signature_text.len()
        ))
        .into());
    }
    let default_name = bundle::default_file_name(&m.name, &m.version.to_string());
    let output = match &opts.output {
        // An existing folder (a release job's dist/) gets the bundle under its default name.
        Some(dir) if dir.is_dir() => dir.join(default_name),
        Some(file) => file.clone(),
        None => PathBuf::from(default_name),
    };
    // The bundle replaces the output by a rename; never rename over a device, FIFO or folder
    // (`-o /dev/null` would replace the device node itself).
    if let Ok(meta) = std::fs::metadata(&output)
        && !meta.is_file()
    {
        return Err(Error::Usage(format!(
            "{} exists and is not a regular file; -o must name a bundle file to create or replace",
            output.display()
        ))
        .into());
    }
    let temp = atomic::temp_beside(&output).map_err(|e| Error::io(&output, e))?;
    atomic::release_cache(&output);
    let (content_bytes, sha256) = write_bundle(
        temp.as_file(),
        &output,
        &manifest_bytes,
        signature_text.as_bytes(),
        &current,
        opts,
        dir,
        progress,
    )?;
    let bundle_bytes = temp.as_file().metadata().map_err(|e| Error::io(temp.path(), e))?.len();
    // Signed before the bundle is put in place, so that a signer failure leaves nothing new.
    let attestations = match opts.attest {
        true => {
            let facts = evidence::provenance::BuildFacts {
                agent_dir: dir,
                locked: opts.locked,
                level: Some(opts.level),
                expires: opts.expires,
                source_date_epoch: opts.source_date_epoch,
            };
            evidence::for_packed(&facts, &output, &sha256, &manifest_bytes, key)?
        }
        false => Vec::new(),
    };
    atomic::commit(temp, &output, true).map_err(|e| Error::io(&output, e))?;
    let attestations = evidence::files::replace_beside(&output, &attestations)?;
    Ok(Packed {
        path: output,
        name: m.name,
        version: m.version.to_string(),
        key_id: key.public_key().key_id_hex(),
        files: current.files.len(),
        content_bytes,
        bundle_bytes,
        relocked,
        sha256: evidence::hex(&sha256),
        attestations,
    })
}

/// How much written bundle to gather before asking for it to go to disk.
const WRITEBACK_CHUNK: u64 = 32 << 20;

/// The bundle file being written, remembering whether a write to it failed, so that a full
/// disk is reported against the bundle rather than the agent file being archived. Writeback
/// starts every [`WRITEBACK_CHUNK`] so that it overlaps compression instead of following it.
/// It is written on the archive writer's compressing thread, so it owns its handle.
struct Output {
    file: File,
    failed: Arc<AtomicBool>,
    writeback: atomic::Writeback,
    unsynced: u64,
    /// The SHA-256 of the bundle file, on the compressing thread as the bytes go by (the
    /// subject digest of its attestations and the registry's layer digest), not in a second pass.
    sha256: Sha256,
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf).inspect_err(|_| self.failed.store(true, Ordering::Relaxed))?;
        self.sha256.update(&buf[..n]);
        self.unsynced += n as u64;
        if self.unsynced >= WRITEBACK_CHUNK {
            self.writeback.request();
            self.unsynced = 0;
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().inspect_err(|_| self.failed.store(true, Ordering::Relaxed))
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

// The pieces of one pack, passed once; a struct for them would only be used here.
#[allow(clippy::too_many_arguments)]
fn write_bundle(
    file: &File,
    output: &Path,
    manifest: &[u8],
    signature: &[u8],
    current: &Current,
    opts: &PackOptions,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<(u64, [u8; 32]), PackFailure> {
    let failed = Arc::new(AtomicBool::new(false));
    let archive_err = |e: crate::archive::ArchiveError| {
        // The compressing thread has stored the flag before its error reached this thread.
        if failed.load(Ordering::Relaxed)
            && let crate::archive::ArchiveError::Io { source, .. } = e
        {
            return PackFailure::Error(Error::io(output, source));
        }
        if let crate::archive::ArchiveError::SourceChanged { path, reason } = &e {
            let d = Diagnostic::error(
                Code::StaleDigest,
                format!("{}{path}", display_prefix(dir)),
                format!("{path} changed while packing: {reason}"),
            )
            .with_help("run `bundle pack` again when nothing is writing to the agent folder");
            let mut report = Report::default();
            report.push(d);
            PackFailure::Rejected(report)
        } else {
            archive_failure(e, dir, output)
        }
    };
    let out = Output {
        file: file.try_clone().map_err(|e| Error::io(output, e))?,
        failed: Arc::clone(&failed),
        writeback: atomic::Writeback::new(file),
        unsynced: 0,
        sha256: Sha256::new(),
    };
    let mut writer =
        ArchiveWriter::new(BufWriter::with_capacity(1 << 20, out), opts.level, opts.mtime).map_err(archive_err)?;
    writer.append_bytes(manifest::FILE_NAME, manifest).map_err(archive_err)?;
    writer.append_bytes(SIGNATURE_ENTRY, signature).map_err(archive_err)?;
    let mut total = 0;
    progress.begin("packing", current.files.iter().map(|f| f.size).sum());
    for f in &current.files {
        let expected = current.digest_of(&f.path);
        let mut source = ProgressRead { inner: File::open(&f.full).map_err(|e| Error::io(&f.full, e))?, progress };
        let hash = writer.append(&f.path, f.size, f.executable, &mut source).map_err(archive_err)?;
        if expected != Some(&Digest { blake3: hash, size: f.size, executable: f.executable }) {
            let mut report = Report::default();
            report.push(
                Diagnostic::error(
                    Code::StaleDigest,
                    format!("{}{}", display_prefix(dir), f.path),
                    format!(
                        "{} differs from the digest in manifest.toml (changed since it was locked, or while packing)",
                        f.path
                    ),
                )
                .with_help("run `bundle pack` again when nothing is writing to the agent folder"),
            );
            return Err(PackFailure::Rejected(report));
        }
        total += f.size;
    }
    let mut out = writer.finish().map_err(archive_err)?;
    progress.end();
    out.flush().map_err(|e| Error::io(output, e))?;
    let out = out.into_inner().map_err(|e| Error::io(output, e.into_error()))?;
    Ok((total, out.sha256.finalize().into()))
}
