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
//! what is wrong and what to do about it. (The only panics are in
//! [`SecretKey::generate`] and [`SecretKey::to_text`] if the operating system
//! cannot provide random bytes; [`SecretKey::try_generate`] and
//! [`SecretKey::to_text_with`] report that as an error instead.)
//!
//! [minisign]: https://jedisct1.github.io/minisign/

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use blake2::{Blake2b256, Blake2b512, Digest as _};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use zeroize::{Zeroize as _, Zeroizing};

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

/// Refuse scrypt settings that need more memory than this (minisign's default
/// needs 1 GiB), instead of risking an out-of-memory abort on a hostile file.
const MAX_KDF_MEMORY: u128 = 2 << 30;
/// Refuse scrypt settings needing more than 16x the work of minisign's default
/// (N = 2^20, p = 1), so a crafted key file cannot stall us for hours.
const MAX_KDF_WORK: u128 = 1 << 24;

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

/// scrypt cost limits stored in an encrypted secret key, with libsodium's
/// `crypto_pwhash_scryptsalsa208sha256` meaning (they are turned into
/// N, r, p exactly as libsodium does, so minisign derives the same stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfLimits {
    /// libsodium `opslimit`.
    pub opslimit: u64,
    /// libsodium `memlimit`, in bytes.
    pub memlimit: u64,
}

impl KdfLimits {
    /// What `minisign -G` uses (libsodium's `*_SENSITIVE` limits):
    /// N = 2^20, r = 8, p = 1, i.e. 1 GiB of memory and a few seconds.
    pub const MINISIGN_DEFAULT: KdfLimits = KdfLimits { opslimit: 33_554_432, memlimit: 1_073_741_824 };
    /// libsodium's `*_INTERACTIVE` limits: N = 2^14, r = 8, p = 1 (16 MiB).
    /// Much cheaper to brute-force than [`KdfLimits::MINISIGN_DEFAULT`].
    pub const INTERACTIVE: KdfLimits = KdfLimits { opslimit: 524_288, memlimit: 16_777_216 };
}

/// Port of libsodium's `pickparams()` (crypto_pwhash_scryptsalsa208sha256):
/// maps (opslimit, memlimit) to (log2 N, r, p).
fn pick_scrypt_params(opslimit: u64, memlimit: u64) -> (u32, u32, u32) {
    let opslimit = opslimit.max(32_768);
    let r: u32 = 8;
    let first_n_log2_above = |max_n: u64| {
        let mut n_log2: u32 = 1;
        while n_log2 < 63 {
            if (1u64 << n_log2) > max_n / 2 {
                break;
            }
            n_log2 += 1;
        }
        n_log2
    };
    if opslimit < memlimit / 32 {
        let n_log2 = first_n_log2_above(opslimit / (u64::from(r) * 4));
        (n_log2, r, 1)
    } else {
        let n_log2 = first_n_log2_above(memlimit / (u64::from(r) * 128));
        let max_rp = ((opslimit / 4) / (1u64 << n_log2)).min(0x3fff_ffff);
        // max_rp <= 0x3fff_ffff, so this conversion cannot fail.
        let p = u32::try_from(max_rp).unwrap_or(0x3fff_ffff) / r;
        (n_log2, r, p)
    }
}

/// scrypt parameters for `limits`, refusing settings libsodium would reject
/// and settings too expensive to run safely.
fn scrypt_params(limits: KdfLimits) -> Result<scrypt::Params, KeyError> {
    let (n_log2, r, p) = pick_scrypt_params(limits.opslimit, limits.memlimit);
    let describe = || {
        format!(
            "scrypt settings opslimit={} memlimit={} (N=2^{n_log2}, r={r}, p={p})",
            limits.opslimit, limits.memlimit
        )
    };
    // libsodium's escrypt_kdf refuses p = 0 and N > u32::MAX.
    if p == 0 || n_log2 >= 32 {
        return Err(KeyError::UnsupportedKdf(format!(
            "{} are invalid (libsodium rejects them too); re-encrypt the key with `minisign -C`",
            describe()
        )));
    }
    let n = 1u128 << n_log2;
    let (r128, p128) = (u128::from(r), u128::from(p));
    if 128 * r128 * (n + p128) > MAX_KDF_MEMORY || n * r128 * p128 > MAX_KDF_WORK {
        return Err(KeyError::UnsupportedKdf(format!(
            "{} need more memory or time than allowed (at most 2 GiB and 16x minisign's default work); re-encrypt the key with `minisign -C`",
            describe()
        )));
    }
    let log_n = u8::try_from(n_log2).map_err(|_| KeyError::UnsupportedKdf(describe()))?;
    scrypt::Params::new(log_n, r, p).map_err(|_| KeyError::UnsupportedKdf(describe()))
}

/// The 104-byte scrypt stream minisign XORs over `key id || secret key || checksum`.
fn kdf_stream(password: &[u8], salt: &[u8], limits: KdfLimits) -> Result<Zeroizing<[u8; SECRET_BLOCK_LEN]>, KeyError> {
    let params = scrypt_params(limits)?;
    let mut stream = Zeroizing::new([0u8; SECRET_BLOCK_LEN]);
    scrypt::scrypt(password, salt, &params, &mut stream[..])
        .map_err(|e| KeyError::UnsupportedKdf(format!("scrypt failed: {e}")))?;
    Ok(stream)
}

/// minisign's secret key checksum: BLAKE2b-256("Ed" || key id || secret key).
fn secret_key_checksum(key_id: &[u8], keypair: &[u8]) -> [u8; CHECKSUM_LEN] {
    let mut hasher = Blake2b256::new();
    hasher.update(SIG_ALG);
    hasher.update(key_id);
    hasher.update(keypair);
    hasher.finalize().into()
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

/// A minisign Ed25519 public key: key id plus verifying key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey {
    key_id: [u8; KEY_ID_LEN],
    key: VerifyingKey,
}

impl PublicKey {
    /// Parses a minisign public key file (`"untrusted comment: ...\n<base64>\n"`)
    /// or a bare base64 line (as given to `minisign -P`).
    ///
    /// # Errors
    /// [`KeyError::Malformed`] for missing lines, a bad comment line, bad
    /// base64, a wrong length or a non-canonical/invalid point;
    /// [`KeyError::UnsupportedAlgorithm`] unless the algorithm is "Ed";
    /// [`KeyError::WeakKey`] for small-order points.
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        let lines = split_lines(text).map_err(KeyError::Malformed)?;
        match lines.as_slice() {
            [] => Err(KeyError::Malformed("the public key is empty".into())),
            [only] if only.starts_with(UNTRUSTED_PREFIX) => {
                Err(KeyError::Malformed("the public key file has a comment line but no key line".into()))
            }
            [only] => Self::from_base64(only.trim()),
            [comment, key] => {
                untrusted_comment_of(comment, "public key file").map_err(KeyError::Malformed)?;
                Self::from_base64(key)
            }
            more => Err(KeyError::Malformed(format!(
                "the public key file has {} lines, expected 2 (comment and key)",
                more.len()
            ))),
        }
    }

    /// Parses the base64 form of a public key (the second line of a key file).
    ///
    /// # Errors
    /// As [`PublicKey::from_text`].
    pub fn from_base64(line: &str) -> Result<Self, KeyError> {
        let bytes = decode_line(line, PUBLIC_BOX_LEN, "public key").map_err(KeyError::Malformed)?;
        if bytes[..2] != SIG_ALG {
            return Err(KeyError::UnsupportedAlgorithm);
        }
        let key_id = take_array::<KEY_ID_LEN>(&bytes[2..]);
        let encoded = take_array::<PUBLIC_KEY_LEN>(&bytes[2 + KEY_ID_LEN..]);
        let key = VerifyingKey::from_bytes(&encoded)
            .map_err(|_| KeyError::Malformed("the public key is not a valid Ed25519 point".into()))?;
        if key.is_weak() {
            return Err(KeyError::WeakKey);
        }
        if key.to_edwards().compress().to_bytes() != encoded {
            return Err(KeyError::Malformed("the public key uses a non-canonical point encoding".into()));
        }
        Ok(PublicKey { key_id, key })
    }

    /// The key file text exactly as minisign writes it:
    /// `"untrusted comment: minisign public key <KEYID>\n<base64>\n"`.
    pub fn to_text(&self) -> String {
        format!("{UNTRUSTED_PREFIX}minisign public key {}\n{}\n", self.key_id_hex(), self.to_base64())
    }

    /// The key file text with a custom untrusted comment.
    ///
    /// # Errors
    /// [`KeyError::InvalidComment`] if the comment has a line break or NUL
    /// byte, or is longer than minisign can read.
    pub fn to_text_with_comment(&self, comment: &str) -> Result<String, KeyError> {
        check_comment(comment, MAX_UNTRUSTED_COMMENT_LEN, "public key comment").map_err(KeyError::InvalidComment)?;
        Ok(format!("{UNTRUSTED_PREFIX}{comment}\n{}\n", self.to_base64()))
    }

    /// Base64 of `"Ed" || key id || public key`, as accepted by `minisign -P`.
    pub fn to_base64(&self) -> String {
        let mut bytes = [0u8; PUBLIC_BOX_LEN];
        bytes[..2].copy_from_slice(&SIG_ALG);
        bytes[2..2 + KEY_ID_LEN].copy_from_slice(&self.key_id);
        bytes[2 + KEY_ID_LEN..].copy_from_slice(self.key.as_bytes());
        BASE64.encode(bytes)
    }

    /// The 8-byte key id, in file order.
    pub fn key_id(&self) -> [u8; KEY_ID_LEN] {
        self.key_id
    }

    /// The key id as minisign displays it: 16 uppercase hex digits of the
    /// little-endian u64.
    pub fn key_id_hex(&self) -> String {
        hex_key_id(self.key_id)
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublicKey").field("key_id", &self.key_id_hex()).field("key", &self.to_base64()).finish()
    }
}

/// A minisign Ed25519 secret key. The key material is wiped when dropped and
/// never appears in `Debug` output.
pub struct SecretKey {
    key_id: [u8; KEY_ID_LEN],
    // ed25519-dalek zeroizes the secret on drop (its default `zeroize` feature).
    signing: SigningKey,
}

// Compile-time guard: the signing key must wipe itself on drop (ed25519-dalek's
// default `zeroize` feature), since `SecretKey` relies on it.
const _: fn() = || {
    fn wipes_on_drop<T: zeroize::ZeroizeOnDrop>() {}
    wipes_on_drop::<SigningKey>();
};

/// The decoded, structurally checked bytes of a secret key file.
struct SecretBox {
    bytes: Zeroizing<Vec<u8>>,
    encrypted: bool,
}

impl SecretBox {
    fn parse(text: &str) -> Result<Self, KeyError> {
        let lines = split_lines(text).map_err(KeyError::Malformed)?;
        let key_line = match lines.as_slice() {
            [] => return Err(KeyError::Malformed("the secret key file is empty".into())),
            [_] => {
                return Err(KeyError::Malformed(
                    "the secret key file has only one line, expected 2 (comment and key)".into(),
                ));
            }
            [comment, key] => {
                untrusted_comment_of(comment, "secret key file").map_err(KeyError::Malformed)?;
                key
            }
            more => {
                return Err(KeyError::Malformed(format!(
                    "the secret key file has {} lines, expected 2 (comment and key)",
                    more.len()
                )));
            }
        };
        let bytes = decode_line(key_line, SECRET_BOX_LEN, SECRET_KEY_WHAT).map_err(KeyError::Malformed)?;
        if bytes[..2] != SIG_ALG {
            return Err(KeyError::UnsupportedAlgorithm);
        }
        if bytes[SK_CHK..SK_CHK + 2] != CHK_BLAKE2B {
            return Err(KeyError::UnsupportedKdf(format!(
                "checksum algorithm \"{}\" is not BLAKE2b (\"B2\"); use a key made by minisign",
                bytes[SK_CHK..SK_CHK + 2].escape_ascii()
            )));
        }
        let kdf = &bytes[SK_KDF..SK_KDF + 2];
        let encrypted = if kdf == KDF_SCRYPT {
            true
        } else if kdf == KDF_NONE {
            false
        } else {
            return Err(KeyError::UnsupportedKdf(format!(
                "key derivation algorithm \"{}\" is neither scrypt (\"Sc\") nor none; use a key made by minisign",
                kdf.escape_ascii()
            )));
        };
        Ok(SecretBox { bytes, encrypted })
    }
}

impl SecretKey {
    /// A new random key pair with a random key id, from the OS random number generator.
    ///
    /// # Panics
    /// If the operating system cannot provide random bytes (see
    /// [`SecretKey::try_generate`] to handle that as an error).
    pub fn generate() -> SecretKey {
        match Self::try_generate() {
            Ok(key) => key,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`SecretKey::generate`], but reports a failing OS random number
    /// generator as [`KeyError::Randomness`].
    ///
    /// # Errors
    /// [`KeyError::Randomness`] if the OS random number generator fails.
    pub fn try_generate() -> Result<SecretKey, KeyError> {
        let mut key_id = [0u8; KEY_ID_LEN];
        let mut seed = Zeroizing::new([0u8; 32]);
        getrandom::fill(&mut key_id).map_err(|e| KeyError::Randomness(e.to_string()))?;
        getrandom::fill(&mut seed[..]).map_err(|e| KeyError::Randomness(e.to_string()))?;
        Ok(SecretKey { key_id, signing: SigningKey::from_bytes(&seed) })
    }

    /// Parses a minisign secret key file.
    ///
    /// Unencrypted keys (kdf algorithm bytes all zero, as `minisign -G -W`
    /// writes) need no password and ignore one if given. scrypt-encrypted keys
    /// ("Sc") need `password`. The embedded BLAKE2b checksum is verified;
    /// `minisign -G -W` stores an all-zero checksum, which is accepted for
    /// unencrypted keys only.
    ///
    /// # Errors
    /// [`KeyError::PasswordRequired`] for an encrypted key without password,
    /// [`KeyError::WrongPassword`] if decryption does not reproduce the
    /// checksum, [`KeyError::ChecksumMismatch`] for a corrupted unencrypted
    /// key, [`KeyError::UnsupportedKdf`] for unknown or too expensive
    /// protection settings, [`KeyError::UnsupportedAlgorithm`] and
    /// [`KeyError::Malformed`] for anything else that is not a minisign
    /// Ed25519 secret key.
    pub fn from_text(text: &str, password: Option<&[u8]>) -> Result<Self, KeyError> {
        let parsed = SecretBox::parse(text)?;
        let mut block = Zeroizing::new([0u8; SECRET_BLOCK_LEN]);
        block.copy_from_slice(&parsed.bytes[SK_BLOCK..]);
        if parsed.encrypted {
            let password = password.ok_or(KeyError::PasswordRequired)?;
            let limits = KdfLimits {
                opslimit: u64::from_le_bytes(take_array(&parsed.bytes[SK_OPSLIMIT..])),
                memlimit: u64::from_le_bytes(take_array(&parsed.bytes[SK_MEMLIMIT..])),
            };
            let stream = kdf_stream(password, &parsed.bytes[SK_SALT..SK_OPSLIMIT], limits)?;
            block.iter_mut().zip(stream.iter()).for_each(|(b, s)| *b ^= s);
        }
        let (key_id, rest) = block.split_at(KEY_ID_LEN);
        let (keypair, stored_checksum) = rest.split_at(KEYPAIR_LEN);
        let checksum = secret_key_checksum(key_id, keypair);
        if stored_checksum != checksum {
            if parsed.encrypted {
                return Err(KeyError::WrongPassword);
            }
            if stored_checksum.iter().any(|&b| b != 0) {
                return Err(KeyError::ChecksumMismatch);
            }
        }
        let mut keypair_bytes = Zeroizing::new([0u8; KEYPAIR_LEN]);
        keypair_bytes.copy_from_slice(keypair);
        let signing = SigningKey::from_keypair_bytes(&keypair_bytes).map_err(|_| {
            KeyError::Malformed("the public half stored in the secret key does not match the secret half".into())
        })?;
        Ok(SecretKey { key_id: take_array(key_id), signing })
    }

    /// Whether a secret key file is password protected (scrypt, "Sc").
    ///
    /// # Errors
    /// As [`SecretKey::from_text`] for files that are not minisign secret keys.
    pub fn is_encrypted(text: &str) -> Result<bool, KeyError> {
        Ok(SecretBox::parse(text)?.encrypted)
    }

    /// Serialises the key in minisign's format. `Some(password)` encrypts it
    /// with scrypt using minisign's default cost ([`KdfLimits::MINISIGN_DEFAULT`],
    /// about 1 GiB of memory and a few seconds); `None` writes an unencrypted
    /// key like `minisign -G -W` (but with a valid checksum, which minisign
    /// also accepts).
    ///
    /// minisign reads passwords as a line of text: a password containing a
    /// line break or NUL byte, or longer than 1023 bytes, works here but cannot
    /// be typed into minisign.
    ///
    /// # Panics
    /// If the OS random number generator fails while making the salt.
    pub fn to_text(&self, password: Option<&[u8]>) -> String {
        let comment = if password.is_some() { ENCRYPTED_SECRET_KEY_COMMENT } else { UNENCRYPTED_SECRET_KEY_COMMENT };
        match self.to_text_with(password, comment, KdfLimits::MINISIGN_DEFAULT) {
            Ok(text) => text,
            // The comment and limits are constants known to be valid, so only
            // the OS random number generator can fail here.
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`SecretKey::to_text`], with a custom untrusted comment and scrypt
    /// cost limits (ignored without a password). minisign decrypts any limits
    /// accepted here; [`KdfLimits::MINISIGN_DEFAULT`] is what it writes itself.
    ///
    /// # Errors
    /// [`KeyError::InvalidComment`] for a comment minisign cannot read,
    /// [`KeyError::UnsupportedKdf`] for unusable limits,
    /// [`KeyError::Randomness`] if no salt can be made.
    pub fn to_text_with(&self, password: Option<&[u8]>, comment: &str, limits: KdfLimits) -> Result<String, KeyError> {
        check_comment(comment, MAX_UNTRUSTED_COMMENT_LEN, "secret key comment").map_err(KeyError::InvalidComment)?;
        let mut bytes = Zeroizing::new([0u8; SECRET_BOX_LEN]);
        bytes[..2].copy_from_slice(&SIG_ALG);
        bytes[SK_CHK..SK_CHK + 2].copy_from_slice(&CHK_BLAKE2B);
        {
            let keypair = Zeroizing::new(self.signing.to_keypair_bytes());
            let block = &mut bytes[SK_BLOCK..];
            block[..KEY_ID_LEN].copy_from_slice(&self.key_id);
            block[KEY_ID_LEN..KEY_ID_LEN + KEYPAIR_LEN].copy_from_slice(&keypair[..]);
            block[KEY_ID_LEN + KEYPAIR_LEN..].copy_from_slice(&secret_key_checksum(&self.key_id, &keypair[..]));
        }
        if let Some(password) = password {
            let mut salt = [0u8; SALT_LEN];
            getrandom::fill(&mut salt).map_err(|e| KeyError::Randomness(e.to_string()))?;
            let stream = kdf_stream(password, &salt, limits)?;
            bytes[SK_KDF..SK_KDF + 2].copy_from_slice(&KDF_SCRYPT);
            bytes[SK_SALT..SK_OPSLIMIT].copy_from_slice(&salt);
            bytes[SK_OPSLIMIT..SK_MEMLIMIT].copy_from_slice(&limits.opslimit.to_le_bytes());
            bytes[SK_MEMLIMIT..SK_BLOCK].copy_from_slice(&limits.memlimit.to_le_bytes());
            bytes[SK_BLOCK..].iter_mut().zip(stream.iter()).for_each(|(b, s)| *b ^= s);
        }
        let mut encoded = BASE64.encode(&bytes[..]);
        let text = format!("{UNTRUSTED_PREFIX}{comment}\n{encoded}\n");
        encoded.zeroize();
        Ok(text)
    }

    /// The matching public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey { key_id: self.key_id, key: self.signing.verifying_key() }
    }

    /// The 8-byte key id, in file order.
    pub fn key_id(&self) -> [u8; KEY_ID_LEN] {
        self.key_id
    }

    /// The key id as minisign displays it (16 uppercase hex digits).
    pub fn key_id_hex(&self) -> String {
        hex_key_id(self.key_id)
    }

    /// Signs `data` the way current minisign does: an "ED" signature, i.e.
    /// Ed25519 over BLAKE2b-512(data), plus the global signature over
    /// `signature || trusted_comment`.
    ///
    /// # Errors
    /// [`SignatureError::InvalidComment`] if a comment contains a line break or
    /// NUL byte, or is longer than minisign can read (1003 bytes untrusted,
    /// 8173 bytes trusted); such a file would not verify with minisign.
    pub fn sign(
        &self,
        data: &[u8],
        trusted_comment: &str,
        untrusted_comment: &str,
    ) -> Result<Signature, SignatureError> {
        check_comment(trusted_comment, MAX_TRUSTED_COMMENT_LEN, "trusted comment")
            .map_err(SignatureError::InvalidComment)?;
        check_comment(untrusted_comment, MAX_UNTRUSTED_COMMENT_LEN, "untrusted comment")
            .map_err(SignatureError::InvalidComment)?;
        let digest: [u8; 64] = Blake2b512::digest(data).into();
        let signature = self.signing.sign(&digest).to_bytes();
        let global_signature = self.signing.sign(&global_message(&signature, trusted_comment)).to_bytes();
        Ok(Signature {
            key_id: self.key_id,
            signature,
            untrusted_comment: untrusted_comment.to_owned(),
            trusted_comment: trusted_comment.to_owned(),
            global_signature,
        })
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKey")
            .field("key_id", &hex_key_id(self.key_id))
            .field("public_key", &self.public_key().to_base64())
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// What the global signature covers: `signature || trusted comment`.
fn global_message(signature: &[u8; SIGNATURE_LEN], trusted_comment: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNATURE_LEN + trusted_comment.len());
    message.extend_from_slice(signature);
    message.extend_from_slice(trusted_comment.as_bytes());
    message
}

/// A minisign signature (`.minisig` file contents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    key_id: [u8; KEY_ID_LEN],
    signature: [u8; SIGNATURE_LEN],
    untrusted_comment: String,
    trusted_comment: String,
    global_signature: [u8; SIGNATURE_LEN],
}

impl Signature {
    /// Parses the 4-line `.minisig` format.
    ///
    /// # Errors
    /// [`SignatureError::UnsupportedAlgorithm`] for legacy "Ed" signatures,
    /// [`SignatureError::Malformed`] for anything else that is not a prehashed
    /// minisign signature.
    pub fn from_text(text: &str) -> Result<Self, SignatureError> {
        let malformed = SignatureError::Malformed;
        let lines = split_lines(text).map_err(malformed)?;
        let [untrusted_line, signature_line, trusted_line, global_line] = lines.as_slice() else {
            return Err(malformed(format!(
                "the signature file has {} lines, expected 4 (untrusted comment, signature, trusted comment, global signature)",
                lines.len()
            )));
        };
        let untrusted_comment = untrusted_comment_of(untrusted_line, "signature file").map_err(malformed)?;
        let signature_box = decode_line(signature_line, SIGNATURE_BOX_LEN, "signature").map_err(malformed)?;
        match [signature_box[0], signature_box[1]] {
            SIG_ALG_PREHASHED => {}
            SIG_ALG => return Err(SignatureError::UnsupportedAlgorithm),
            other => {
                return Err(malformed(format!(
                    "unknown signature algorithm \"{}\" (expected \"ED\")",
                    other.escape_ascii()
                )));
            }
        }
        let trusted_comment = trusted_line
            .strip_prefix(TRUSTED_PREFIX)
            .ok_or_else(|| malformed(format!("the third line must start with \"{TRUSTED_PREFIX}\"")))?;
        check_comment(trusted_comment, MAX_TRUSTED_COMMENT_LEN, "trusted comment").map_err(malformed)?;
        let global = decode_line(global_line, SIGNATURE_LEN, "global signature").map_err(malformed)?;
        Ok(Signature {
            key_id: take_array(&signature_box[2..]),
            signature: take_array(&signature_box[2 + KEY_ID_LEN..]),
            untrusted_comment: untrusted_comment.to_owned(),
            trusted_comment: trusted_comment.to_owned(),
            global_signature: take_array(&global),
        })
    }

    /// The `.minisig` file text, exactly as minisign writes it.
    pub fn to_text(&self) -> String {
        let mut signature_box = [0u8; SIGNATURE_BOX_LEN];
        signature_box[..2].copy_from_slice(&SIG_ALG_PREHASHED);
        signature_box[2..2 + KEY_ID_LEN].copy_from_slice(&self.key_id);
        signature_box[2 + KEY_ID_LEN..].copy_from_slice(&self.signature);
        format!(
            "{UNTRUSTED_PREFIX}{}\n{}\n{TRUSTED_PREFIX}{}\n{}\n",
            self.untrusted_comment,
            BASE64.encode(signature_box),
            self.trusted_comment,
            BASE64.encode(self.global_signature)
        )
    }

    /// The key id of the key that made this signature, in file order.
    pub fn key_id(&self) -> [u8; KEY_ID_LEN] {
        self.key_id
    }

    /// The key id as minisign displays it (16 uppercase hex digits).
    pub fn key_id_hex(&self) -> String {
        hex_key_id(self.key_id)
    }

    /// The trusted comment. Only meaningful after [`Signature::verify`] succeeded.
    pub fn trusted_comment(&self) -> &str {
        &self.trusted_comment
    }

    /// The untrusted comment; not covered by any signature.
    pub fn untrusted_comment(&self) -> &str {
        &self.untrusted_comment
    }

    /// Verifies this signature over `data` with `pk`, checking in order: the
    /// key id, the Ed25519 signature over BLAKE2b-512(data), and the global
    /// signature over `signature || trusted comment`. Both Ed25519 checks are
    /// strict (canonical S, no small-order R or key).
    ///
    /// # Errors
    /// [`SignatureError::KeyIdMismatch`] (checked before any cryptography),
    /// [`SignatureError::BadSignature`], [`SignatureError::BadTrustedComment`].
    pub fn verify(&self, pk: &PublicKey, data: &[u8]) -> Result<(), SignatureError> {
        if self.key_id != pk.key_id {
            return Err(SignatureError::KeyIdMismatch { expected: pk.key_id_hex(), found: self.key_id_hex() });
        }
        let digest: [u8; 64] = Blake2b512::digest(data).into();
        pk.key
            .verify_strict(&digest, &ed25519_dalek::Signature::from_bytes(&self.signature))
            .map_err(|_| SignatureError::BadSignature)?;
        pk.key
            .verify_strict(
                &global_message(&self.signature, &self.trusted_comment),
                &ed25519_dalek::Signature::from_bytes(&self.global_signature),
            )
            .map_err(|_| SignatureError::BadTrustedComment)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOPW_KEY: &str = include_str!("../testdata/keys/minisign-nopw.key");
    const NOPW_PUB: &str = include_str!("../testdata/keys/minisign-nopw.pub");
    const PW_KEY: &str = include_str!("../testdata/keys/minisign-pw.key");
    const PW_PUB: &str = include_str!("../testdata/keys/minisign-pw.pub");
    const PASSWORD: &[u8] = b"test-password";
    const MESSAGE: &[u8] = include_bytes!("../testdata/keys/message.txt");
    const MESSAGE_SIG: &str = include_str!("../testdata/keys/message.txt.minisig");
    const TEST_KEY: &str = include_str!("../testdata/keys/test.key");
    const TEST_PUB: &str = include_str!("../testdata/keys/test.pub");

    /// N = 2^10, r = 8, p = 1: 1 MiB, fast even in debug builds.
    const CHEAP: KdfLimits = KdfLimits { opslimit: 32_768, memlimit: 1 << 20 };

    /// The Ed25519 group order L, little-endian.
    const ORDER_L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];

    fn sig_lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    fn join(lines: &[String]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// Re-encodes line `index` of `text` after `edit` changed its decoded bytes.
    fn edit_b64_line(text: &str, index: usize, edit: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut lines = sig_lines(text);
        let mut bytes = BASE64.decode(&lines[index]).unwrap();
        edit(&mut bytes);
        lines[index] = BASE64.encode(&bytes);
        join(&lines)
    }

    /// Adds L to the 32-byte little-endian scalar `s` (S < L < 2^253, so no overflow).
    fn add_order(s: &mut [u8]) {
        let mut carry = 0u16;
        for (byte, l) in s.iter_mut().zip(ORDER_L) {
            let sum = u16::from(*byte) + u16::from(l) + carry;
            *byte = (sum & 0xff) as u8;
            carry = sum >> 8;
        }
        assert_eq!(carry, 0);
    }

    fn pub_box(alg: &[u8; 2], key_id: [u8; 8], point: [u8; 32]) -> String {
        let mut bytes = alg.to_vec();
        bytes.extend_from_slice(&key_id);
        bytes.extend_from_slice(&point);
        BASE64.encode(bytes)
    }

    #[test]
    fn pick_scrypt_params_matches_libsodium() {
        assert_eq!(pick_scrypt_params(33_554_432, 1_073_741_824), (20, 8, 1));
        assert_eq!(pick_scrypt_params(524_288, 16_777_216), (14, 8, 1));
        assert_eq!(pick_scrypt_params(CHEAP.opslimit, CHEAP.memlimit), (10, 8, 1));
        // opslimit is raised to 32768; memory-bound branch with p > 1.
        assert_eq!(pick_scrypt_params(0, 0), (1, 8, 512));
        // ops-bound branch: opslimit < memlimit / 32.
        assert_eq!(pick_scrypt_params(1 << 20, 1 << 30), (15, 8, 1));
    }

    #[test]
    fn parses_minisign_public_keys() {
        let pk = PublicKey::from_text(PW_PUB).unwrap();
        assert_eq!(pk.to_text(), PW_PUB, "to_text must reproduce minisign's file");
        assert!(PW_PUB.contains(&pk.key_id_hex()));
        // Bare base64, as given to `minisign -P`.
        let bare = PW_PUB.lines().nth(1).unwrap();
        assert_eq!(PublicKey::from_text(bare).unwrap(), pk);
        assert_eq!(PublicKey::from_text(&format!("  {bare}\n")).unwrap(), pk);
        assert_eq!(pk.to_base64(), bare);
        let nopw = PublicKey::from_text(NOPW_PUB).unwrap();
        assert_eq!(nopw.to_text(), NOPW_PUB);
        assert_ne!(nopw.key_id(), pk.key_id());
        // CRLF line endings are accepted.
        let crlf = NOPW_PUB.replace('\n', "\r\n");
        assert_eq!(PublicKey::from_text(&crlf).unwrap(), nopw);
    }

    #[test]
    fn key_id_hex_is_little_endian_uppercase() {
        let pk = PublicKey::from_text(&pub_box(
            b"Ed",
            [0x0f, 0xe, 0xd, 0xc, 0xb, 0xa, 0x09, 0xa0],
            PublicKey::from_text(NOPW_PUB).unwrap().key.to_bytes(),
        ))
        .unwrap();
        assert_eq!(pk.key_id_hex(), "A0090A0B0C0D0E0F");
    }

    #[test]
    fn parses_unencrypted_minisign_secret_key() {
        assert!(!SecretKey::is_encrypted(NOPW_KEY).unwrap());
        let sk = SecretKey::from_text(NOPW_KEY, None).unwrap();
        assert_eq!(sk.public_key(), PublicKey::from_text(NOPW_PUB).unwrap());
        // A password is ignored for unencrypted keys, like `minisign -W`.
        let again = SecretKey::from_text(NOPW_KEY, Some(b"anything")).unwrap();
        assert_eq!(again.public_key(), sk.public_key());
    }

    /// Decrypts a key made by `minisign -G` under a memory limit, so minisign
    /// fell back to 16 MiB of scrypt memory (N = 2^14) and the test stays fast.
    #[test]
    fn parses_encrypted_minisign_secret_key() {
        assert!(SecretKey::is_encrypted(PW_KEY).unwrap());
        assert_eq!(SecretKey::from_text(PW_KEY, None).unwrap_err(), KeyError::PasswordRequired);
        let sk = SecretKey::from_text(PW_KEY, Some(PASSWORD)).unwrap();
        let pk = PublicKey::from_text(PW_PUB).unwrap();
        assert_eq!(sk.public_key(), pk);
        // Signing is deterministic: we reproduce minisign's signature file exactly.
        let minisig = Signature::from_text(MESSAGE_SIG).unwrap();
        let ours = sk.sign(MESSAGE, minisig.trusted_comment(), minisig.untrusted_comment()).unwrap();
        assert_eq!(ours.to_text(), MESSAGE_SIG);
        ours.verify(&pk, MESSAGE).unwrap();
        assert_eq!(SecretKey::from_text(PW_KEY, Some(b"wrong-password")).unwrap_err(), KeyError::WrongPassword);
    }

    /// A key made by plain `minisign -G`, with minisign's default scrypt cost
    /// (1 GiB, N = 2^20): about 100 s unoptimised, 4 s optimised.
    #[test]
    #[ignore = "slow: minisign's default 1 GiB scrypt cost; run with `cargo test --release -- --ignored`"]
    fn parses_minisign_default_cost_secret_key() {
        let text = include_str!("../testdata/keys/minisign-pw-default.key");
        let pk = PublicKey::from_text(include_str!("../testdata/keys/minisign-pw-default.pub")).unwrap();
        let bytes = BASE64.decode(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(bytes[SK_OPSLIMIT..SK_MEMLIMIT], KdfLimits::MINISIGN_DEFAULT.opslimit.to_le_bytes());
        assert_eq!(bytes[SK_MEMLIMIT..SK_BLOCK], KdfLimits::MINISIGN_DEFAULT.memlimit.to_le_bytes());
        let sk = SecretKey::from_text(text, Some(PASSWORD)).unwrap();
        assert_eq!(sk.public_key(), pk);
        sk.sign(MESSAGE, "t", "u").unwrap().verify(&pk, MESSAGE).unwrap();
    }

    #[test]
    fn verifies_minisign_signature() {
        let pk = PublicKey::from_text(PW_PUB).unwrap();
        let sig = Signature::from_text(MESSAGE_SIG).unwrap();
        sig.verify(&pk, MESSAGE).unwrap();
        assert_eq!(sig.trusted_comment(), "agent-bundle fixture: message.txt signed by stock minisign 0.11");
        assert_eq!(sig.key_id(), pk.key_id());
        assert_eq!(sig.key_id_hex(), pk.key_id_hex());
        assert_eq!(sig.to_text(), MESSAGE_SIG);
        assert_eq!(sig.verify(&pk, b"tampered").unwrap_err(), SignatureError::BadSignature);
        let other = PublicKey::from_text(NOPW_PUB).unwrap();
        assert_eq!(
            sig.verify(&other, MESSAGE).unwrap_err(),
            SignatureError::KeyIdMismatch { expected: other.key_id_hex(), found: pk.key_id_hex() }
        );
    }

    #[test]
    fn signs_with_unencrypted_minisign_key() {
        let sk = SecretKey::from_text(NOPW_KEY, None).unwrap();
        let pk = PublicKey::from_text(NOPW_PUB).unwrap();
        let sig = sk.sign(b"bundle bytes", "timestamp:1\tfile:x", "signature from bundle").unwrap();
        sig.verify(&pk, b"bundle bytes").unwrap();
        let reparsed = Signature::from_text(&sig.to_text()).unwrap();
        assert_eq!(reparsed, sig);
        reparsed.verify(&pk, b"bundle bytes").unwrap();
    }

    #[test]
    fn unencrypted_round_trip() {
        let sk = SecretKey::generate();
        let text = sk.to_text(None);
        assert!(text.starts_with("untrusted comment: minisign unencrypted secret key\n"));
        assert!(!SecretKey::is_encrypted(&text).unwrap());
        let back = SecretKey::from_text(&text, None).unwrap();
        assert_eq!(back.public_key(), sk.public_key());
        assert_eq!(back.key_id(), sk.key_id());
        let pk = PublicKey::from_text(&sk.public_key().to_text()).unwrap();
        assert_eq!(pk, sk.public_key());
        back.sign(b"x", "t", "u").unwrap().verify(&pk, b"x").unwrap();
    }

    #[test]
    fn encrypted_round_trip() {
        let sk = SecretKey::generate();
        let text = sk.to_text_with(Some(b"hunter2"), "my key", CHEAP).unwrap();
        assert!(text.starts_with("untrusted comment: my key\n"));
        assert!(SecretKey::is_encrypted(&text).unwrap());
        let back = SecretKey::from_text(&text, Some(b"hunter2")).unwrap();
        assert_eq!(back.public_key(), sk.public_key());
        assert_eq!(SecretKey::from_text(&text, None).unwrap_err(), KeyError::PasswordRequired);
        assert_eq!(SecretKey::from_text(&text, Some(b"hunter3")).unwrap_err(), KeyError::WrongPassword);
        // Stored limits are what minisign reads back.
        let bytes = BASE64.decode(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(&bytes[..6], b"EdScB2");
        assert_eq!(bytes[SK_OPSLIMIT..SK_MEMLIMIT], CHEAP.opslimit.to_le_bytes());
        assert_eq!(bytes[SK_MEMLIMIT..SK_BLOCK], CHEAP.memlimit.to_le_bytes());
        // A fresh salt each time.
        let again = sk.to_text_with(Some(b"hunter2"), "my key", CHEAP).unwrap();
        assert_ne!(again, text);
    }

    #[test]
    fn too_expensive_kdf_limits_are_refused() {
        let sk = SecretKey::generate();
        let huge = KdfLimits { opslimit: 1 << 40, memlimit: 1 << 40 };
        assert!(matches!(sk.to_text_with(Some(b"pw"), "c", huge), Err(KeyError::UnsupportedKdf(_))));
        // The same refusal when a file asks for it.
        let text = sk.to_text_with(Some(b"pw"), "c", CHEAP).unwrap();
        let hostile = edit_b64_line(&text, 1, |b| {
            b[SK_MEMLIMIT..SK_BLOCK].copy_from_slice(&(1u64 << 40).to_le_bytes());
            b[SK_OPSLIMIT..SK_MEMLIMIT].copy_from_slice(&(1u64 << 40).to_le_bytes());
        });
        assert!(matches!(SecretKey::from_text(&hostile, Some(b"pw")), Err(KeyError::UnsupportedKdf(_))));
    }

    #[test]
    fn committed_test_key_pair() {
        assert!(TEST_KEY.starts_with("untrusted comment: TEST KEY - NEVER TRUST"));
        assert!(TEST_PUB.starts_with("untrusted comment: TEST KEY - NEVER TRUST"));
        let sk = SecretKey::from_text(TEST_KEY, None).unwrap();
        let pk = PublicKey::from_text(TEST_PUB).unwrap();
        assert_eq!(sk.public_key(), pk);
        sk.sign(b"data", "t", "u").unwrap().verify(&pk, b"data").unwrap();
    }

    #[test]
    fn tampering_is_detected() {
        let sk = SecretKey::generate();
        let pk = sk.public_key();
        let sig = sk.sign(b"payload", "trusted", "untrusted").unwrap();
        let text = sig.to_text();

        assert_eq!(sig.verify(&pk, b"payloae").unwrap_err(), SignatureError::BadSignature);

        // Flipped bit in the data signature.
        let flipped = edit_b64_line(&text, 1, |b| b[20] ^= 0x01);
        assert_eq!(
            Signature::from_text(&flipped).unwrap().verify(&pk, b"payload").unwrap_err(),
            SignatureError::BadSignature
        );

        // Flipped bit in the global signature.
        let flipped = edit_b64_line(&text, 3, |b| b[5] ^= 0x80);
        assert_eq!(
            Signature::from_text(&flipped).unwrap().verify(&pk, b"payload").unwrap_err(),
            SignatureError::BadTrustedComment
        );

        // Edited trusted comment.
        let mut lines = sig_lines(&text);
        lines[2] = "trusted comment: trusted!".into();
        assert_eq!(
            Signature::from_text(&join(&lines)).unwrap().verify(&pk, b"payload").unwrap_err(),
            SignatureError::BadTrustedComment
        );

        // Trusted comment and global signature swapped in from a signature by
        // the same key over other data. (Over the same data the Ed25519
        // signature is deterministic, so that pair would legitimately verify.)
        let other = sk.sign(b"other payload", "other comment", "untrusted").unwrap().to_text();
        let other_lines = sig_lines(&other);
        let mut lines = sig_lines(&text);
        lines[2].clone_from(&other_lines[2]);
        lines[3].clone_from(&other_lines[3]);
        assert_eq!(
            Signature::from_text(&join(&lines)).unwrap().verify(&pk, b"payload").unwrap_err(),
            SignatureError::BadTrustedComment
        );

        // The untrusted comment is not covered.
        let mut lines = sig_lines(&text);
        lines[0] = "untrusted comment: anything".into();
        Signature::from_text(&join(&lines)).unwrap().verify(&pk, b"payload").unwrap();
    }

    #[test]
    fn wrong_key_is_detected() {
        let sk = SecretKey::generate();
        let sig = sk.sign(b"payload", "t", "u").unwrap();
        let other = SecretKey::generate();
        assert!(matches!(sig.verify(&other.public_key(), b"payload"), Err(SignatureError::KeyIdMismatch { .. })));
        // Same key id, different key.
        let impostor = PublicKey { key_id: sk.key_id(), key: other.public_key().key };
        assert_eq!(sig.verify(&impostor, b"payload").unwrap_err(), SignatureError::BadSignature);
    }

    #[test]
    fn key_id_is_checked_before_crypto() {
        let sk = SecretKey::generate();
        let pk = sk.public_key();
        let sig = sk.sign(b"payload", "t", "u").unwrap();
        let text = edit_b64_line(&sig.to_text(), 1, |b| b[2] ^= 1);
        let err = Signature::from_text(&text).unwrap().verify(&pk, b"other data").unwrap_err();
        assert!(matches!(err, SignatureError::KeyIdMismatch { .. }));
    }

    #[test]
    fn non_canonical_s_is_rejected() {
        let sk = SecretKey::generate();
        let pk = sk.public_key();
        let text = sk.sign(b"payload", "t", "u").unwrap().to_text();
        let malleated = edit_b64_line(&text, 1, |b| add_order(&mut b[10 + 32..]));
        assert_eq!(
            Signature::from_text(&malleated).unwrap().verify(&pk, b"payload").unwrap_err(),
            SignatureError::BadSignature
        );
        let malleated = edit_b64_line(&text, 3, |b| add_order(&mut b[32..]));
        assert_eq!(
            Signature::from_text(&malleated).unwrap().verify(&pk, b"payload").unwrap_err(),
            SignatureError::BadTrustedComment
        );
    }

    #[test]
    fn legacy_signatures_are_rejected() {
        let sig = edit_b64_line(MESSAGE_SIG, 1, |b| b[..2].copy_from_slice(b"Ed"));
        assert_eq!(Signature::from_text(&sig).unwrap_err(), SignatureError::UnsupportedAlgorithm);
        let sig = edit_b64_line(MESSAGE_SIG, 1, |b| b[..2].copy_from_slice(b"XX"));
        assert!(matches!(Signature::from_text(&sig), Err(SignatureError::Malformed(_))));
    }

    #[test]
    fn weak_and_invalid_public_keys_are_rejected() {
        let id = [1, 2, 3, 4, 5, 6, 7, 8];
        // Identity point (y = 1) and a point of order 4 (y = 0).
        let mut identity = [0u8; 32];
        identity[0] = 1;
        for point in [identity, [0u8; 32]] {
            assert_eq!(PublicKey::from_text(&pub_box(b"Ed", id, point)).unwrap_err(), KeyError::WeakKey);
        }
        // Order-2 point y = -1 = p - 1.
        let mut minus_one = [0xff; 32];
        minus_one[0] = 0xec;
        minus_one[31] = 0x7f;
        assert_eq!(PublicKey::from_text(&pub_box(b"Ed", id, minus_one)).unwrap_err(), KeyError::WeakKey);
        // Not on the curve (y = 2 has no x).
        let mut not_on_curve = [0u8; 32];
        not_on_curve[0] = 2;
        assert!(matches!(PublicKey::from_text(&pub_box(b"Ed", id, not_on_curve)), Err(KeyError::Malformed(_))));
        // Non-canonical encodings (y + p for small y) of valid points.
        let mut non_canonical = 0;
        for k in 2u8..19 {
            let mut y_plus_p = [0xff; 32];
            y_plus_p[0] = 0xed + k;
            y_plus_p[31] = 0x7f;
            if VerifyingKey::from_bytes(&y_plus_p).is_ok_and(|p| !p.is_weak()) {
                non_canonical += 1;
                assert!(matches!(PublicKey::from_text(&pub_box(b"Ed", id, y_plus_p)), Err(KeyError::Malformed(_))));
            }
        }
        assert!(non_canonical > 0, "no non-canonical test point found");
        // Wrong algorithm bytes.
        let good = PublicKey::from_text(NOPW_PUB).unwrap();
        assert_eq!(
            PublicKey::from_text(&pub_box(b"ED", id, good.key.to_bytes())).unwrap_err(),
            KeyError::UnsupportedAlgorithm
        );
    }

    #[test]
    fn malformed_public_keys() {
        let malformed = |text: &str| {
            assert!(matches!(PublicKey::from_text(text), Err(KeyError::Malformed(_))), "{text:?} should be malformed");
        };
        malformed("");
        malformed("\n\n");
        malformed("untrusted comment: minisign public key\n");
        malformed(&NOPW_PUB.replace("untrusted comment:", "comment:"));
        malformed(&format!("{NOPW_PUB}extra line\n"));
        let key_line = NOPW_PUB.lines().nth(1).unwrap();
        malformed(&key_line[..key_line.len() - 4]);
        malformed(&format!("{key_line}AAAA"));
        malformed(&key_line.replace('R', "*"));
        malformed(&format!("untrusted comment: x\r y\n{key_line}\n"));
    }

    #[test]
    fn malformed_secret_keys() {
        let malformed = |text: &str| {
            assert!(
                matches!(SecretKey::from_text(text, None), Err(KeyError::Malformed(_))),
                "{text:?} should be malformed"
            );
        };
        malformed("");
        malformed(NOPW_KEY.lines().next().unwrap());
        malformed(NOPW_KEY.lines().nth(1).unwrap());
        malformed(&NOPW_KEY.replace("untrusted comment:", "untrusted:"));
        let key_line = NOPW_KEY.lines().nth(1).unwrap();
        malformed(&format!("untrusted comment: c\n{}\n", &key_line[..100]));
        malformed(&format!("untrusted comment: c\n{key_line}!\n"));
        malformed(&format!("{NOPW_KEY}more\n"));

        let wrong_alg = edit_b64_line(NOPW_KEY, 1, |b| b[..2].copy_from_slice(b"ED"));
        assert_eq!(SecretKey::from_text(&wrong_alg, None).unwrap_err(), KeyError::UnsupportedAlgorithm);
        let wrong_kdf = edit_b64_line(NOPW_KEY, 1, |b| b[SK_KDF..SK_KDF + 2].copy_from_slice(b"Ar"));
        assert!(matches!(SecretKey::from_text(&wrong_kdf, None), Err(KeyError::UnsupportedKdf(_))));
        assert!(matches!(SecretKey::is_encrypted(&wrong_kdf), Err(KeyError::UnsupportedKdf(_))));
        let wrong_chk = edit_b64_line(NOPW_KEY, 1, |b| b[SK_CHK..SK_CHK + 2].copy_from_slice(b"B3"));
        assert!(matches!(SecretKey::from_text(&wrong_chk, None), Err(KeyError::UnsupportedKdf(_))));
    }

    #[test]
    fn corrupted_unencrypted_secret_key() {
        let sk = SecretKey::generate();
        let text = sk.to_text(None);
        // A bit flip in the secret half breaks the checksum.
        let corrupted = edit_b64_line(&text, 1, |b| b[SK_BLOCK + KEY_ID_LEN + 3] ^= 1);
        assert_eq!(SecretKey::from_text(&corrupted, None).unwrap_err(), KeyError::ChecksumMismatch);
        // minisign -G -W writes an all-zero checksum: then only the
        // secret/public consistency check can catch corruption.
        let zero_chk = edit_b64_line(&corrupted, 1, |b| {
            b[SK_BLOCK + KEY_ID_LEN + KEYPAIR_LEN..].fill(0);
        });
        assert!(matches!(SecretKey::from_text(&zero_chk, None), Err(KeyError::Malformed(_))));
    }

    #[test]
    fn malformed_signatures() {
        let malformed = |text: &str| {
            assert!(
                matches!(Signature::from_text(text), Err(SignatureError::Malformed(_))),
                "{text:?} should be malformed"
            );
        };
        let lines = sig_lines(MESSAGE_SIG);
        malformed("");
        malformed(&join(&lines[..3]));
        malformed(&join(&lines[..2]));
        malformed(&format!("{MESSAGE_SIG}extra\n"));
        let mut bad = lines.clone();
        bad[0] = "comment: x".into();
        malformed(&join(&bad));
        let mut bad = lines.clone();
        bad[2] = "trusted: x".into();
        malformed(&join(&bad));
        let mut bad = lines.clone();
        bad[2] = format!("{}\rhidden", lines[2]);
        malformed(&join(&bad));
        let mut bad = lines.clone();
        bad[2] = format!("{}\0hidden", lines[2]);
        malformed(&join(&bad));
        let mut bad = lines.clone();
        bad[1].truncate(40);
        malformed(&join(&bad));
        let mut bad = lines.clone();
        bad[3] = BASE64.encode([0u8; 63]);
        malformed(&join(&bad));
        let mut bad = lines.clone();
        bad[1] = bad[1].replace('=', "");
        malformed(&join(&bad));
        // Trailing newline optional, CRLF accepted.
        Signature::from_text(MESSAGE_SIG.trim_end()).unwrap();
        Signature::from_text(&MESSAGE_SIG.replace('\n', "\r\n")).unwrap();
    }

    #[test]
    fn invalid_comments_are_refused_when_signing() {
        let sk = SecretKey::generate();
        for (trusted, untrusted) in [("two\nlines", "u"), ("cr\rhere", "u"), ("nul\0here", "u"), ("t", "two\nlines")] {
            assert!(matches!(sk.sign(b"x", trusted, untrusted), Err(SignatureError::InvalidComment(_))));
        }
        let max_trusted = "t".repeat(MAX_TRUSTED_COMMENT_LEN);
        let max_untrusted = "u".repeat(MAX_UNTRUSTED_COMMENT_LEN);
        let sig = sk.sign(b"x", &max_trusted, &max_untrusted).unwrap();
        Signature::from_text(&sig.to_text()).unwrap().verify(&sk.public_key(), b"x").unwrap();
        assert!(sk.sign(b"x", &format!("{max_trusted}t"), "u").is_err());
        assert!(sk.sign(b"x", "t", &format!("{max_untrusted}u")).is_err());
        assert!(matches!(sk.public_key().to_text_with_comment("a\nb"), Err(KeyError::InvalidComment(_))));
        assert!(matches!(sk.to_text_with(None, "a\nb", CHEAP), Err(KeyError::InvalidComment(_))));
    }

    #[test]
    fn debug_and_errors_do_not_leak_secrets() {
        let sk = SecretKey::from_text(NOPW_KEY, None).unwrap();
        let debug = format!("{sk:?}");
        let seed = &sk.signing.to_bytes();
        assert!(debug.contains("<redacted>"));
        assert!(!debug.contains(&BASE64.encode(seed)));
        assert!(!debug.contains(&format!("{seed:?}")));
        assert!(!debug.contains(&format!("{:?}", &seed[..8])));
        let key_line = NOPW_KEY.lines().nth(1).unwrap();
        for err in [
            SecretKey::from_text(&format!("untrusted comment: c\n{key_line}x\n"), None).unwrap_err(),
            SecretKey::from_text(&format!("comment: c\n{key_line}\n"), None).unwrap_err(),
        ] {
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains(&key_line[84..124]), "{shown}");
        }
        for err in [
            KeyError::PasswordRequired,
            KeyError::WrongPassword,
            KeyError::WeakKey,
            KeyError::ChecksumMismatch,
            KeyError::UnsupportedAlgorithm,
        ] {
            assert!(err.to_string().len() > 30);
        }
    }
}
