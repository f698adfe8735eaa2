//! A bundle opened to read one file at a time (`bundle cat`, the API's lazy open): the
//! signature and the manifest are checked at open exactly as `verify` checks them; each file is
//! read later by decoding only the frames that hold it (with a seek table, format reference
//! §2.1.1), and is returned only once its bytes have the BLAKE3 and size the signed manifest
//! gives. The rest of the bundle is not read, so this is not a verification of the whole bundle:
//! a damaged file that is never read goes unnoticed.
//!
//! Where each file's entry starts in the tar stream follows from the signed manifest alone: the
//! format fixes the entries' order and sizes (§3), so no untrusted offset is ever believed.
//! Every read goes back to the file and is checked again: a bundle changed after it was opened
//! gives a rejection (`digest_mismatch` when the frames still decode), never other bytes.
//! A read that finds other bytes than the signed ones holds the frames before its entry to the
//! seek table (decoding them), so that a table that lies about where frames start is
//! `seek_table_mismatch`, as the verifier that decodes every frame calls it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Seek, SeekFrom, Write};

use super::SIGNATURE_ENTRY;
use super::verify::{Expect, Head, LIMITS, Trust, VerifyError, VerifyIoError, head};
use crate::archive::{ArchiveError, ArchiveReader, BLOCK, Decoding, Seekable};
use crate::manifest::Manifest;
use crate::rejection::{Reason, Rejection};

/// Where a listed file is, and what it must be.
#[derive(Debug, Clone)]
struct Place {
    offset: u64,
    size: u64,
    blake3: blake3::Hash,
    executable: bool,
}

/// A bundle whose signature and manifest are verified; its files are read on demand.
pub struct OpenBundle {
    file: File,
    seekable: Option<Seekable<File>>,
    places: BTreeMap<String, Place>,
    pub manifest: Manifest,
    pub manifest_bytes: Vec<u8>,
    pub key_id: String,
    pub trusted_comment: String,
    /// Whether the signature was checked against trusted keys.
    pub signature_checked: bool,
}

/// Bytes one entry takes in the tar stream: header, data, padding.
fn entry_len(size: u64) -> u64 {
    BLOCK as u64 + size.div_ceil(BLOCK as u64) * BLOCK as u64
}

impl OpenBundle {
    /// Opens `file`: reads and checks entries 1 and 2 (signature, manifest, `expect`), and the
    /// seek table if there is one. A file that cannot be read is [`VerifyError::Io`].
    pub fn open(file: File, trust: Trust<'_>, expect: &Expect<'_>) -> Result<OpenBundle, VerifyError> {
        let (mut signer, mut agent) = (None, None);
        let opened = Self::open_inner(file, trust, expect, &mut signer, &mut agent);
        opened.map_err(|e| e.learned(agent, signer))
    }

    fn open_inner(
        mut file: File,
        trust: Trust<'_>,
        expect: &Expect<'_>,
        signer: &mut Option<String>,
        agent: &mut Option<(String, String)>,
    ) -> Result<OpenBundle, VerifyError> {
        let io_err = |e: io::Error| VerifyIoError::read(None, e);
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let head = {
            // Streamed: only the first two entries are wanted, not whole frames (format §2.1).
            let mut reader = ArchiveReader::with_decoding(BufReader::new(&file), LIMITS, Decoding::Streaming)?;
            head(&mut reader, trust, expect, signer, agent)?
        };
        let Head { manifest_bytes, signature_text, signature, signature_checked, manifest, .. } = head;
        let mut offset = entry_len(manifest_bytes.len() as u64) + entry_len(signature_text.len() as u64);
        let mut places = BTreeMap::new();
        // Entries 3 … n: every listed path, in byte-wise order (format reference §3).
        for (path, digest) in manifest.entries() {
            let Some(d) = digest else {
                return Err(Rejection::new(Reason::MalformedManifest, Some(path), "a listed file has no digest").into());
            };
            places.insert(path.to_owned(), Place { offset, size: d.size, blake3: d.blake3, executable: d.executable });
            offset += entry_len(d.size);
        }
        let seekable = Seekable::open(file.try_clone().map_err(io_err)?, LIMITS.max_window_log)?;
        Ok(OpenBundle {
            file,
            seekable,
            places,
            key_id: signature.key_id_hex(),
            trusted_comment: signature.trusted_comment().to_owned(),
            signature_checked,
            manifest,
            manifest_bytes,
        })
    }

    /// The listed files' paths, in bundle order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.places.keys().map(String::as_str)
    }

    /// Whether the bundle has a seek table (else every read decodes the bundle from its start).
    pub fn seekable(&self) -> bool {
        self.seekable.is_some()
    }

    /// The size the signed manifest gives `path`, if it lists it.
    pub fn size(&self, path: &str) -> Option<u64> {
        self.places.get(path).map(|p| p.size)
    }

    /// Writes the file `path` to `out`; `Ok(false)` if the manifest does not list it. Nothing
    /// written to `out` may be used unless this returns `Ok(true)`: the digest is compared
    /// after the last byte. A failure to read the bundle or to write to `out` is
    /// [`VerifyError::Io`].
    pub fn read_to(&mut self, path: &str, out: &mut dyn Write) -> Result<bool, VerifyError> {
        let Some(place) = self.places.get(path).cloned() else { return Ok(false) };
        let mut out = Written { inner: out, failed: false };
        let read = match &mut self.seekable {
            Some(s) => {
                let read = s.read_entry(place.offset, path, place.size, place.executable, &mut out);
                // Other bytes than the signed ones where the manifest puts the entry: the table
                // may lie about where the frames start (the frames are the truth).
                let other_bytes = match &read {
                    Ok(hash) => *hash != place.blake3,
                    Err(ArchiveError::Io { .. } | ArchiveError::SeekTable { .. }) => false,
                    Err(_) => true,
                };
                if other_bytes {
                    s.check_frames_before(place.offset)?;
                }
                read.map_err(VerifyError::from)
            }
            None => self.read_sequentially(path, &place, &mut out),
        };
        let hash = match read {
            // The archive reader reports a failed write as an I/O error like a failed read.
            Err(VerifyError::Io(e)) if out.failed => return Err(VerifyIoError::write(path, e.source).into()),
            read => read?,
        };
        if hash != place.blake3 {
            return Err(Rejection::new(
                Reason::DigestMismatch,
                Some(path),
                format!("`{path}` has BLAKE3 {}, the manifest says {}", hash.to_hex(), place.blake3.to_hex()),
            )
            .into());
        }
        Ok(true)
    }

    /// Reads `path` into memory (see [`read_to`](Self::read_to)); `Ok(None)` if not listed.
    pub fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, VerifyError> {
        let size = self.size(path).unwrap_or(0);
        let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        Ok(self.read_to(path, &mut out)?.then_some(out))
    }

    /// Without a seek table: decode from the start up to the entry.
    fn read_sequentially(
        &mut self,
        path: &str,
        place: &Place,
        out: &mut dyn Write,
    ) -> Result<blake3::Hash, VerifyError> {
        let io_err = |e: io::Error| VerifyIoError::read(None, e);
        self.file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let mut reader = ArchiveReader::new(BufReader::new(&self.file), LIMITS)?;
        let mut at = 0;
        while let Some(mut entry) = reader.next_entry()? {
            if at == place.offset {
                if entry.path != path || entry.size != place.size || entry.executable != place.executable {
                    break;
                }
                return Ok(entry.copy_to(out)?);
            }
            if entry.path == SIGNATURE_ENTRY && at > place.offset {
                break;
            }
            at += entry_len(entry.size);
            if at > place.offset {
                break;
            }
        }
        Err(Rejection::new(
            Reason::MalformedArchive,
            Some(path),
            format!("`{path}` is not where the signed manifest puts it in the archive"),
        )
        .into())
    }
}

/// The caller's output, noting whether writing to it failed (the archive reader reports its
/// output's errors and its input's alike).
struct Written<'a> {
    inner: &'a mut dyn Write,
    failed: bool,
}

impl Write for Written<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).inspect_err(|_| self.failed = true)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().inspect_err(|_| self.failed = true)
    }
}
