//! Reading an `.mcpb` file as hostile input: its signature block (if any) is found and
//! checked for form, the ZIP before it is read with the `zip` crate from its central
//! directory only, every entry's name, size and compression ratio bounded, and only
//! `manifest.json` is decompressed (within its cap). Nothing is extracted.
//!
//! The signature block of `mcpb sign` follows the ZIP's end-of-central-directory record (EOCD).
//! A ZIP may only be followed by its comment, whose length the EOCD states; mcpb 2.1.2 leaves
//! that length at 0, so strict ZIP readers see trailing garbage. That is reported
//! ([`EocdComment::Undeclared`]), never a crash: the ZIP is read from the bytes before the
//! block.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use crate::limits::{
    MAX_IMPORT_BYTES, MAX_MCPB_BYTES, MAX_MCPB_CONTENT_BYTES, MAX_MCPB_ENTRIES, MAX_MCPB_RATIO,
    MAX_MCPB_SIGNATURE_BYTES,
};

pub const SIGNATURE_HEADER: &[u8] = b"MCPB_SIG_V1";
pub const SIGNATURE_FOOTER: &[u8] = b"MCPB_SIG_END";
const EOCD: &[u8] = b"PK\x05\x06";
const EOCD_LEN: u64 = 22;
/// The OID 1.2.840.113549.1.7.2 (PKCS#7 signedData), DER-encoded with its tag and length.
const SIGNED_DATA_OID: &[u8] = &[0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02];

/// What the EOCD's comment length says about the bytes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum EocdComment {
    /// Nothing follows the EOCD, or exactly its declared comment.
    Consistent { comment_length: u16 },
    /// Bytes follow the EOCD that its comment length does not declare (mcpb 2.1.2's `sign`).
    Undeclared { comment_length: u16, trailing: u64 },
}

/// The signature block, read for form only (no certificate is trusted here).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SignatureBlock {
    /// Where the block starts: the signed content is the file before it.
    pub offset: u64,
    pub der_bytes: u64,
    /// `None`: a DER SEQUENCE of exactly that length holding PKCS#7 signedData; else what is wrong.
    pub problem: Option<String>,
}

/// An `.mcpb` read.
#[derive(Debug, Clone)]
pub struct Archive {
    pub size: u64,
    /// The ZIP's bytes (the file without its signature block).
    pub zip_bytes: u64,
    pub entries: usize,
    /// The entries' declared uncompressed sizes together.
    pub content_bytes: u64,
    pub eocd: EocdComment,
    pub signature: Option<SignatureBlock>,
    /// A footer without a readable block before it.
    pub signature_garbled: Option<String>,
    /// manifest.json's text.
    pub manifest: String,
}

/// Why an `.mcpb` is refused. `Limit` and `UnsafePath` are hostile shapes; `NotMcpb` anything
/// else that is not an MCP bundle.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("not an MCP bundle: {0}")]
    NotMcpb(String),
    #[error("{0}")]
    Limit(String),
    #[error("{0}")]
    UnsafePath(String),
}

/// The first `len` bytes of a file, as a seekable reader (the ZIP without the block after it).
struct Prefix {
    file: File,
    len: u64,
    pos: u64,
}

impl Read for Prefix {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.len.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        let n = self.file.read(&mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for Prefix {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let target = target.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        self.pos = self.file.seek(SeekFrom::Start(target))?;
        Ok(self.pos)
    }
}

/// Reads `path` as an `.mcpb`.
pub fn read(path: &Path) -> Result<Archive, ArchiveError> {
    let mut file = File::open(path)?;
    let size = file.metadata()?.len();
    if size > MAX_MCPB_BYTES {
        return Err(ArchiveError::Limit(format!("the file is larger than {MAX_MCPB_BYTES} bytes")));
    }
    let tail_len = size.min(MAX_MCPB_SIGNATURE_BYTES + 65_557);
    let mut tail = vec![0; tail_len as usize];
    file.seek(SeekFrom::Start(size - tail_len))?;
    file.read_exact(&mut tail)?;
    let tail_start = size - tail_len;
    let (signature, signature_garbled) = signature_block(&tail, tail_start, size);
    let zip_bytes = signature.as_ref().map_or(size, |s| s.offset);
    let (eocd, listed) = eocd_comment(&tail, tail_start, zip_bytes, size)?;
    let mut zip = zip::ZipArchive::new(Prefix { file, len: zip_bytes, pos: 0 })
        .map_err(|e| ArchiveError::NotMcpb(format!("not a readable ZIP: {e}")))?;
    if zip.len() > MAX_MCPB_ENTRIES {
        return Err(ArchiveError::Limit(format!("more than {MAX_MCPB_ENTRIES} entries")));
    }
    // The zip crate keeps one entry per name: fewer than the directory lists means a name twice.
    if listed != u16::MAX && zip.len() != listed as usize {
        return Err(ArchiveError::UnsafePath(format!(
            "the central directory lists {listed} entries but only {} distinct names: an entry is in the ZIP twice",
            zip.len()
        )));
    }
    let content_bytes = check_entries(&mut zip)?;
    let manifest = read_manifest(&mut zip)?;
    Ok(Archive { size, zip_bytes, entries: zip.len(), content_bytes, eocd, signature, signature_garbled, manifest })
}

/// Every entry: a safe relative name, a declared size within the caps, no extreme ratio.
fn check_entries(zip: &mut zip::ZipArchive<Prefix>) -> Result<u64, ArchiveError> {
    let mut total = 0u64;
    let mut names = std::collections::HashSet::new();
    for i in 0..zip.len() {
        let entry = zip.by_index_raw(i).map_err(|e| ArchiveError::NotMcpb(format!("entry {i}: {e}")))?;
        let name = entry.name().map_err(|e| ArchiveError::NotMcpb(format!("entry {i}: {e}")))?.into_owned();
        let shown = crate::diagnostic::sanitize(&name);
        let unsafe_name = entry.enclosed_name().is_none()
            || name.starts_with('/')
            || name.as_bytes().get(1) == Some(&b':')
            || name.contains('\\')
            || name.chars().any(char::is_control)
            || name.split('/').any(|s| s == "..");
        if unsafe_name {
            return Err(ArchiveError::UnsafePath(format!("entry `{shown}` is not a safe relative path")));
        }
        if entry.is_symlink() {
            return Err(ArchiveError::UnsafePath(format!("entry `{shown}` is a symbolic link")));
        }
        if !names.insert(name.clone()) {
            return Err(ArchiveError::UnsafePath(format!("entry `{shown}` is in the ZIP twice")));
        }
        let (size, packed) = (entry.size(), entry.compressed_size());
        if size > (1 << 20) && size / packed.max(1) > MAX_MCPB_RATIO {
            return Err(ArchiveError::Limit(format!(
                "entry `{shown}` claims {size} bytes from {packed}: more than {MAX_MCPB_RATIO} times its compressed size"
            )));
        }
        total = total.saturating_add(size);
        if total > MAX_MCPB_CONTENT_BYTES {
            return Err(ArchiveError::Limit(format!(
                "the entries claim more than {MAX_MCPB_CONTENT_BYTES} bytes together"
            )));
        }
    }
    Ok(total)
}

fn read_manifest(zip: &mut zip::ZipArchive<Prefix>) -> Result<String, ArchiveError> {
    let entry = match zip.by_name("manifest.json") {
        Ok(e) => e,
        Err(zip::result::ZipError::FileNotFound) => {
            return Err(ArchiveError::NotMcpb("the ZIP has no manifest.json at its root".into()));
        }
        Err(e) => return Err(ArchiveError::NotMcpb(format!("manifest.json: {e}"))),
    };
    if entry.size() > MAX_IMPORT_BYTES {
        return Err(ArchiveError::Limit(format!("manifest.json is larger than {MAX_IMPORT_BYTES} bytes")));
    }
    let mut bytes = Vec::new();
    entry
        .take(MAX_IMPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ArchiveError::NotMcpb(format!("manifest.json cannot be decompressed: {e}")))?;
    if bytes.len() as u64 > MAX_IMPORT_BYTES {
        return Err(ArchiveError::Limit(format!("manifest.json is larger than {MAX_IMPORT_BYTES} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| ArchiveError::NotMcpb("manifest.json is not UTF-8".into()))
}

/// The signature block at the end of the file (`tail` holds its last bytes, from `tail_start`),
/// or a description of a footer without one.
fn signature_block(tail: &[u8], tail_start: u64, size: u64) -> (Option<SignatureBlock>, Option<String>) {
    if !tail.ends_with(SIGNATURE_FOOTER) {
        return (None, None);
    }
    let footer = tail.len() - SIGNATURE_FOOTER.len();
    let Some(header) = find_last(&tail[..footer], SIGNATURE_HEADER) else {
        return (
            None,
            Some(format!(
                "the file ends with {} but has no {} before it",
                show(SIGNATURE_FOOTER),
                show(SIGNATURE_HEADER)
            )),
        );
    };
    let len_at = header + SIGNATURE_HEADER.len();
    let Some(len) = tail.get(len_at..len_at + 4) else {
        return (None, Some("the signature block is cut short".into()));
    };
    let der_bytes = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
    let der_at = len_at + 4;
    if der_at + der_bytes != footer {
        return (
            None,
            Some(format!(
                "the signature block says {der_bytes} bytes of signature, but {} lie between its header and footer",
                footer.saturating_sub(der_at)
            )),
        );
    }
    let der = &tail[der_at..footer];
    let block =
        SignatureBlock { offset: tail_start + header as u64, der_bytes: der_bytes as u64, problem: der_problem(der) };
    debug_assert!(block.offset < size);
    (Some(block), None)
}

/// Whether `der` is one DER SEQUENCE of exactly its length whose first element is the
/// signedData OID (a PKCS#7 ContentInfo); what is wrong otherwise.
fn der_problem(der: &[u8]) -> Option<String> {
    if der.first() != Some(&0x30) {
        return Some("the signature is not a DER SEQUENCE".into());
    }
    let (len, header) = match der.get(1) {
        Some(&n) if n < 0x80 => (n as usize, 2),
        Some(&n) if (0x81..=0x84).contains(&n) => {
            let k = (n & 0x7f) as usize;
            let Some(bytes) = der.get(2..2 + k) else { return Some("the DER length is cut short".into()) };
            (bytes.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize), 2 + k)
        }
        _ => return Some("the DER length is not a definite length".into()),
    };
    if header + len != der.len() {
        return Some(format!("the DER SEQUENCE says {} bytes, the block holds {}", header + len, der.len()));
    }
    if !der[header..].starts_with(SIGNED_DATA_OID) {
        return Some("the signature is not PKCS#7 signedData".into());
    }
    None
}

/// The EOCD of the ZIP part (ending at `zip_bytes`) and what its comment length says about the
/// bytes after it in the file.
/// Also the number of entries the record lists.
fn eocd_comment(tail: &[u8], tail_start: u64, zip_bytes: u64, size: u64) -> Result<(EocdComment, u16), ArchiveError> {
    let end = (zip_bytes - tail_start) as usize;
    let not_zip = || ArchiveError::NotMcpb("no ZIP end-of-central-directory record".into());
    // The last EOCD whose comment ends at or before the ZIP part's end.
    let mut search = &tail[..end];
    loop {
        let at = find_last(search, EOCD).ok_or_else(not_zip)?;
        if let Some(c) = tail.get(at + 20..at + 22) {
            let comment_length = u16::from_le_bytes([c[0], c[1]]);
            let after = size - (tail_start + at as u64 + EOCD_LEN);
            let ends = tail_start + at as u64 + EOCD_LEN + comment_length as u64;
            if ends <= zip_bytes {
                let listed = u16::from_le_bytes([tail[at + 10], tail[at + 11]]);
                let comment = if after == comment_length as u64 {
                    EocdComment::Consistent { comment_length }
                } else {
                    EocdComment::Undeclared { comment_length, trailing: after - comment_length as u64 }
                };
                return Ok((comment, listed));
            }
        }
        search = &search[..at];
    }
}

fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
