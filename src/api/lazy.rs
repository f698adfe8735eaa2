//! A bundle opened to read one file at a time ([`Bundle::open_lazy`]): the signature and the
//! signed manifest are judged at open with the gate's options, then each read decodes only the
//! frames that hold the file (with a seek table; an older one-frame bundle is decoded from its
//! start up to the file) and hands it out only once its BLAKE3 and size are the signed ones.
//!
//! Why this exists beside [`Bundle::load`]: a runtime that wants `tools.json` and a prompt from
//! a 4 GiB agent should not decompress 4 GiB first. The price is that the rest of the bundle is
//! never read, so this is not a verification of the whole bundle, and whatever the gate judges
//! over every byte (the file's SHA-256 for attestations and keyless signatures, a trust policy's
//! co-signatures and keyless signers, the rollback state it records, the tool contracts against
//! a baseline, vendor model signatures over every model file) cannot be judged here: those
//! options are refused at open (`usage`), never skipped.
//!
//! Every read goes back to the file and is checked again: a file changed after it was opened
//! gives a refusal (`digest_mismatch` when its frames still decode, else the verifier's code for
//! the damage), never other bytes.

use std::io::Write;

use super::bundle::{Bundle, Source, VerifiedFile, VerifyOptions};
use super::error::Error;
use super::verdict::{AgentId, Verdict};
use crate::bundle::open::OpenBundle;
use crate::bundle::verify::{Expect, Reason, Refused, Rejection, Trust, VerifyError};
use crate::error::ErrorCode;
use crate::ops::gate;

/// A bundle whose signature and manifest passed the gate's checks at open; its files are read
/// and checked one at a time. See [`Bundle::open_lazy`].
pub struct LazyBundle {
    open: OpenBundle,
    agent: AgentId,
    files: Vec<VerifiedFile>,
    max_read_bytes: u64,
}

impl std::fmt::Debug for LazyBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyBundle")
            .field("agent", &self.agent)
            .field("signer", &self.open.key_id)
            .field("files", &self.files.len())
            .field("seekable", &self.open.seekable())
            .finish_non_exhaustive()
    }
}

impl Bundle {
    /// Judges the bundle's signature and signed manifest (trusted key, agent name, lowest
    /// version, expiry) as [`Bundle::load`] does, reading only its first entries, and returns a
    /// [`LazyBundle`] whose reads each decode only the frames holding one file.
    ///
    /// Needs a bundle file ([`Bundle::open`]), not bytes or a stream. Options that need every
    /// byte of the bundle are an `Error` with code `usage`, naming the option: a trust policy,
    /// co-signatures, a state file, a baseline, attestations (named, required, or found beside
    /// the bundle while [`VerifyOptions::discover_attestations`] is on), a keyless signer, and a
    /// bundle whose manifest names vendor-signed models (`[[models]]`). A refusal is
    /// [`Error::Refused`] with the verifier's reason code.
    pub fn open_lazy(self, options: &VerifyOptions) -> Result<LazyBundle, Error> {
        let Source::File(file) = self.source else {
            return Err(Error::failed(ErrorCode::Usage, "a lazy open reads a bundle file: give its path, not bytes"));
        };
        if let Some(option) = options.needs_every_byte(&self.origin) {
            return Err(Error::failed(
                ErrorCode::Usage,
                format!(
                    "a lazy open cannot judge {option}: it reads only the files asked for; open the bundle eagerly"
                ),
            ));
        }
        let gate_options = options.gate_options()?;
        let expect = Expect {
            name: gate_options.name.as_deref(),
            now: Some(gate_options.now),
            min_version: gate_options.min_version.as_ref(),
            ..Expect::default()
        };
        let open = OpenBundle::open(file, Trust::Keys(&gate_options.keys), &expect).map_err(not_verified)?;
        let manifest = &open.manifest;
        if !manifest.models.is_empty() {
            return Err(Error::failed(
                ErrorCode::Usage,
                format!(
                    "{} {} names vendor-signed models ([[models]]), whose signatures are checked over every model file; open the bundle eagerly",
                    manifest.name, manifest.version
                ),
            ));
        }
        let agent = AgentId { name: manifest.name.clone(), version: manifest.version.to_string() };
        let files = manifest
            .entries()
            .into_iter()
            .filter_map(|(path, d)| {
                d.map(|d| VerifiedFile {
                    path: path.to_owned(),
                    size: d.size,
                    blake3: d.blake3.to_hex().to_string(),
                    executable: d.executable,
                })
            })
            .collect();
        Ok(LazyBundle { open, agent, files, max_read_bytes: options.max_loaded() })
    }
}

impl LazyBundle {
    /// The agent's name and version, as the signed manifest states them.
    pub fn agent(&self) -> &AgentId {
        &self.agent
    }

    /// The signing key's id (16 hex digits, as `minisign` shows it).
    pub fn signer(&self) -> &str {
        &self.open.key_id
    }

    /// Every file the signed manifest lists, in bundle order (`manifest.toml` and its signature
    /// are not files of the agent, and not listed).
    pub fn files(&self) -> &[VerifiedFile] {
        &self.files
    }

    /// The listed file at `path`, if any.
    pub fn file(&self, path: &str) -> Option<&VerifiedFile> {
        self.files.binary_search_by(|f| f.path.as_str().cmp(path)).ok().map(|i| &self.files[i])
    }

    /// Whether the bundle has a seek table, so that a read decodes only the frames of its file
    /// (else, a bundle of an earlier release, each read decodes from the start up to the file).
    pub fn is_seekable(&self) -> bool {
        self.open.seekable()
    }

    /// The signed manifest's bytes (`manifest.toml`), as the signature covers them.
    pub fn manifest_bytes(&self) -> &[u8] {
        &self.open.manifest_bytes
    }

    /// The bytes of the file at `path` once they have the signed BLAKE3 and size; `Ok(None)`
    /// when the manifest does not list it. The file is held in memory: one larger than
    /// [`VerifyOptions::max_loaded_bytes`] is refused (`limit_exceeded`) before it is read;
    /// [`LazyBundle::read_to`] streams instead. A file changed since it was opened is refused
    /// (`digest_mismatch`, or the verifier's code for frames that no longer decode).
    pub fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, Error> {
        let Some(size) = self.file(path).map(|f| f.size) else { return Ok(None) };
        if size > self.max_read_bytes {
            let why = Rejection::new(
                Reason::LimitExceeded,
                Some(path),
                format!(
                    "`{path}` is {size} bytes, more than the {} a read holds in memory (max_loaded_bytes); read it with read_to",
                    self.max_read_bytes
                ),
            );
            return Err(self.refused(why));
        }
        match self.open.read(path) {
            Ok(bytes) => Ok(bytes),
            Err(e) => Err(self.not_verified(e)),
        }
    }

    /// Streams the file at `path` into `out` and returns whether the manifest lists it. Nothing
    /// written to `out` may be used unless this returns `Ok(true)`: the digest is compared after
    /// the last byte (write to a temporary file, and keep it only then). Memory is one frame at a
    /// time, whatever the file's size.
    pub fn read_to(&mut self, path: &str, out: &mut dyn Write) -> Result<bool, Error> {
        match self.open.read_to(path, out) {
            Ok(listed) => Ok(listed),
            Err(e) => Err(self.not_verified(e)),
        }
    }

    /// A refusal of a read, naming the agent and the signer as a refusal at open does.
    fn refused(&self, mut why: Rejection) -> Error {
        why.key_id = Some(self.open.key_id.clone());
        why.agent = Some((self.agent.name.clone(), self.agent.version.clone()));
        refused(why.into())
    }
}

impl LazyBundle {
    /// A read that gave no file: refused (as above), or the bundle could not be read or `out`
    /// written (`io_error`).
    fn not_verified(&self, e: VerifyError) -> Error {
        match e {
            VerifyError::Refused(r) => self.refused(r.into_rejection()),
            VerifyError::Io(e) => Error::failed(ErrorCode::IoError, e.to_string()),
        }
    }
}

/// A failed open: refused, or the bundle could not be read (`io_error`).
fn not_verified(e: VerifyError) -> Error {
    match e {
        VerifyError::Refused(r) => refused(r),
        VerifyError::Io(e) => Error::failed(ErrorCode::IoError, e.to_string()),
    }
}

fn refused(r: Refused) -> Error {
    Error::Refused(Box::new(Verdict::from_gate(&gate::Verdict::refused(r))))
}
