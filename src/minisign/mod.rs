//! Ed25519 keys and signatures in the exact [minisign] file formats.
//!
//! Release bundles are signed with minisign-compatible keys so that nobody has
//! to trust this tool to check a bundle: stock `minisign -V` verifies the
//! signatures we write, and key pairs made with `minisign -G` (password
//! protected or not, `-W`) can sign bundles here. This module reads and writes
//! the three minisign file formats byte for byte:
//!
//! * public key: `untrusted comment: …` line, then base64 of
//!   `"Ed" || key id (8) || Ed25519 public key (32)`;
//! * secret key: comment line, then base64 of
//!   `"Ed" || kdf ("Sc" or 0,0) || "B2" || salt (32) || opslimit (u64 LE) ||
//!   memlimit (u64 LE) || [key id (8) || Ed25519 secret key (64) || checksum (32)]`,
//!   where the checksum is BLAKE2b-256 of `"Ed" || key id || secret key` and the
//!   bracketed 104 bytes are XORed with scrypt output when a password is set;
//! * signature (`.minisig`): untrusted comment line, base64 of
//!   `"ED" || key id || Ed25519(BLAKE2b-512(data))`, `trusted comment: …` line,
//!   base64 of the global signature `Ed25519(signature || trusted comment)`.
//!
//! Only prehashed (`"ED"`) signatures are accepted; verification is strict
//! (canonical scalars, no small-order points or weak keys). The library never
//! prints and never exits; every failure is a typed error whose message says
//! what is wrong and what to do about it. (The only panic is in
//! [`SecretKey::generate`] if the operating system cannot provide random bytes;
//! [`SecretKey::try_generate`] reports that as an error instead.)
//!
//! [minisign]: https://jedisct1.github.io/minisign/

mod kdf;
mod public_key;
mod secret_key;
mod signature;
#[cfg(test)]
mod tests;

pub use kdf::KdfLimits;
pub use public_key::PublicKey;
pub use secret_key::SecretKey;
pub use signature::Signature;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use zeroize::Zeroizing;

const UNTRUSTED_PREFIX: &str = "untrusted comment: ";
const TRUSTED_PREFIX: &str = "trusted comment: ";

/// Key files and legacy signatures: plain Ed25519.
const SIG_ALG: [u8; 2] = *b"Ed";
/// Current signatures: Ed25519 over the BLAKE2b-512 hash of the data.
const SIG_ALG_PREHASHED: [u8; 2] = *b"ED";
const KDF_SCRYPT: [u8; 2] = *b"Sc";
const KDF_NONE: [u8; 2] = [0, 0];
const CHK_BLAKE2B: [u8; 2] = *b"B2";

const KEY_ID_LEN: usize = 8;
const PUBLIC_KEY_LEN: usize = 32;
const KEYPAIR_LEN: usize = 64;
const SIGNATURE_LEN: usize = 64;
const CHECKSUM_LEN: usize = 32;
const SALT_LEN: usize = 32;

/// `"Ed" || key id || public key`.
const PUBLIC_BOX_LEN: usize = 2 + KEY_ID_LEN + PUBLIC_KEY_LEN;
/// `"ED" || key id || signature`.
const SIGNATURE_BOX_LEN: usize = 2 + KEY_ID_LEN + SIGNATURE_LEN;
/// `key id || secret key || checksum`: the part encrypted with the scrypt stream.
const SECRET_BLOCK_LEN: usize = KEY_ID_LEN + KEYPAIR_LEN + CHECKSUM_LEN;
/// Offsets inside the decoded secret key box.
const SK_KDF: usize = 2;
const SK_CHK: usize = 4;
const SK_SALT: usize = 6;
const SK_OPSLIMIT: usize = SK_SALT + SALT_LEN;
const SK_MEMLIMIT: usize = SK_OPSLIMIT + 8;
const SK_BLOCK: usize = SK_MEMLIMIT + 8;
const SECRET_BOX_LEN: usize = SK_BLOCK + SECRET_BLOCK_LEN;

/// minisign reads comment lines with `fgets` into a 1024-byte buffer
/// (`COMMENTMAXBYTES`); prefix, comment and newline must fit in 1023 bytes.
const MAX_UNTRUSTED_COMMENT_LEN: usize = 1024 - UNTRUSTED_PREFIX.len() - 2;
/// Same for the trusted comment line (`TRUSTEDCOMMENTMAXBYTES` = 8192).
const MAX_TRUSTED_COMMENT_LEN: usize = 8192 - TRUSTED_PREFIX.len() - 2;

/// Untrusted comment minisign writes into password-protected secret key files.
const ENCRYPTED_SECRET_KEY_COMMENT: &str = "minisign encrypted secret key";
/// Untrusted comment for secret key files written without a password.
const UNENCRYPTED_SECRET_KEY_COMMENT: &str = "minisign unencrypted secret key";

/// How error messages name the secret key line.
const SECRET_KEY_WHAT: &str = "secret key";

/// Errors reading, writing or creating minisign keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The text is not a well-formed minisign key (missing lines, bad base64,
    /// wrong length, invalid point, …); the message says which.
    #[error("malformed minisign key: {0}; use the unmodified key file written by minisign or `bundle`")]
    Malformed(String),
    /// The key is not an Ed25519 minisign key (signature algorithm is not "Ed").
    #[error(
        "unsupported key algorithm: only Ed25519 minisign keys (algorithm \"Ed\") are supported; generate a new key pair with `minisign -G`"
    )]
    UnsupportedAlgorithm,
    /// The secret key uses a key derivation function, checksum algorithm or
    /// scrypt cost settings this implementation does not accept.
    #[error("unsupported secret key protection: {0}")]
    UnsupportedKdf(String),
    /// The public key is a small-order ("weak") point that would accept forged signatures.
    #[error(
        "weak public key: it is a small-order point for which signatures can be forged; do not trust anything signed with it and generate a new key pair"
    )]
    WeakKey,
    /// The secret key is password protected and no password was given.
    #[error("the secret key is encrypted: a password is required to use it")]
    PasswordRequired,
    /// Decrypting with the given password did not reproduce the key's checksum.
    #[error("wrong password for this secret key (or the key file is corrupted); try again with the right password")]
    WrongPassword,
    /// An unencrypted secret key does not match its embedded checksum.
    #[error(
        "secret key checksum mismatch: the key file is corrupted; restore it from a backup or generate a new key pair"
    )]
    ChecksumMismatch,
    /// A comment passed to a key writer cannot be stored in a minisign file.
    #[error("invalid key file comment: {0}")]
    InvalidComment(String),
    /// The operating system's random number generator failed.
    #[error("could not get random bytes from the operating system: {0}; retry, and check the system's entropy source")]
    Randomness(String),
}

impl crate::error_code::Coded for KeyError {
    fn code(&self) -> crate::error_code::ErrorCode {
        crate::error_code::ErrorCode::KeyError
    }
}

/// Errors reading, creating or verifying minisign signatures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The text is not a well-formed `.minisig` file; the message says which part is wrong.
    #[error("malformed minisign signature: {0}; use the unmodified .minisig file")]
    Malformed(String),
    /// A legacy, non-prehashed ("Ed") signature.
    #[error(
        "unsupported signature algorithm: legacy non-prehashed (\"Ed\") minisign signatures are not accepted; re-sign with a current minisign (without -l) or `bundle`"
    )]
    UnsupportedAlgorithm,
    /// The signature was made by a different key than the one given.
    #[error(
        "the signature was made with key {found}, but the public key is {expected}; verify with the matching public key"
    )]
    KeyIdMismatch {
        /// Key id of the public key used for verification (uppercase hex, as minisign shows it).
        expected: String,
        /// Key id recorded in the signature.
        found: String,
    },
    /// The Ed25519 signature over the data does not verify.
    #[error(
        "signature verification failed: the data was modified, or it was signed by a different key with the same id; do not trust this data"
    )]
    BadSignature,
    /// The global signature over the signature and trusted comment does not verify.
    #[error(
        "trusted comment verification failed: the trusted comment or the signature file was tampered with; do not trust this data"
    )]
    BadTrustedComment,
    /// A comment passed to `sign` cannot be stored in a minisign signature file.
    #[error("invalid signature comment: {0}")]
    InvalidComment(String),
}

fn hex_key_id(key_id: [u8; KEY_ID_LEN]) -> String {
    format!("{:016X}", u64::from_le_bytes(key_id))
}

/// Splits `text` into lines as minisign reads them: `\n` separated, an
/// optional `\r` before it, trailing blank lines ignored. A `\r` anywhere else
/// is rejected, because minisign would silently cut the line there.
fn split_lines(text: &str) -> Result<Vec<&str>, String> {
    let mut lines: Vec<&str> = text.split('\n').map(|line| line.strip_suffix('\r').unwrap_or(line)).collect();
    while lines.last().is_some_and(|line| line.trim().is_empty()) {
        lines.pop();
    }
    if let Some(index) = lines.iter().position(|line| line.contains('\r')) {
        return Err(format!("line {} contains a carriage return in the middle of the line", index + 1));
    }
    Ok(lines)
}

/// Checks an untrusted-comment line and returns the comment text.
fn untrusted_comment_of<'a>(line: &'a str, what: &str) -> Result<&'a str, String> {
    line.strip_prefix(UNTRUSTED_PREFIX)
        .ok_or_else(|| format!("the first line of a {what} must start with \"{UNTRUSTED_PREFIX}\""))
}

/// Decodes one base64 line into exactly `len` bytes. The buffer is wiped on
/// drop. For secret keys the decoder's detail (which can quote a symbol of the
/// line) is left out of the message.
fn decode_line(line: &str, len: usize, what: &str) -> Result<Zeroizing<Vec<u8>>, String> {
    let secret = what == SECRET_KEY_WHAT;
    let bytes = Zeroizing::new(BASE64.decode(line).map_err(|e| {
        if secret {
            format!("the {what} line is not valid base64")
        } else {
            format!("the {what} line is not valid base64 ({e})")
        }
    })?);
    if bytes.len() != len {
        return Err(format!("the {what} line decodes to {} bytes, expected {len}", bytes.len()));
    }
    Ok(bytes)
}

/// Checks that `comment` can be written on one minisign comment line.
fn check_comment(comment: &str, max_len: usize, what: &str) -> Result<(), String> {
    if comment.contains(['\n', '\r']) {
        return Err(format!("the {what} contains a line break; use a single line"));
    }
    if comment.contains('\0') {
        return Err(format!("the {what} contains a NUL byte, which minisign would cut off; remove it"));
    }
    if comment.len() > max_len {
        return Err(format!("the {what} is {} bytes long; minisign accepts at most {max_len}", comment.len()));
    }
    Ok(())
}

fn take_array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

impl crate::error_code::Coded for SignatureError {
    fn code(&self) -> crate::error_code::ErrorCode {
        crate::error_code::ErrorCode::Signature
    }
}
