//! The minisign secret key box: key id, Ed25519 key pair and BLAKE2b checksum, optionally
//! encrypted with a scrypt stream; parsing, writing, and signing with it.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use blake2::{Blake2b256, Digest as _};
use ed25519_dalek::{Signer as _, SigningKey};
use zeroize::Zeroizing;

use super::kdf::{KdfLimits, kdf_stream};
use super::{
    CHECKSUM_LEN, CHK_BLAKE2B, ENCRYPTED_SECRET_KEY_COMMENT, KDF_NONE, KDF_SCRYPT, KEY_ID_LEN, KEYPAIR_LEN, KeyError,
    MAX_UNTRUSTED_COMMENT_LEN, PublicKey, SALT_LEN, SECRET_BLOCK_LEN, SECRET_BOX_LEN, SECRET_KEY_WHAT, SIG_ALG,
    SK_BLOCK, SK_CHK, SK_KDF, SK_MEMLIMIT, SK_OPSLIMIT, SK_SALT, Signature, SignatureError,
    UNENCRYPTED_SECRET_KEY_COMMENT, UNTRUSTED_PREFIX, check_comment, decode_line, hex_key_id, split_lines, take_array,
    untrusted_comment_of,
};

/// minisign's secret key checksum: BLAKE2b-256("Ed" || key id || secret key).
pub(super) fn secret_key_checksum(key_id: &[u8], keypair: &[u8]) -> [u8; CHECKSUM_LEN] {
    let mut hasher = Blake2b256::new();
    hasher.update(SIG_ALG);
    hasher.update(key_id);
    hasher.update(keypair);
    hasher.finalize().into()
}
/// A minisign Ed25519 secret key. The key material is wiped when dropped and
/// never appears in `Debug` output.
pub struct SecretKey {
    pub(super) key_id: [u8; KEY_ID_LEN],
    // ed25519-dalek zeroizes the secret on drop (its default `zeroize` feature).
    pub(super) signing: SigningKey,
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
    /// also accepts). The text is wiped from memory when dropped.
    ///
    /// minisign reads passwords as a line of text: a password containing a
    /// line break or NUL byte, or longer than 1023 bytes, works here but cannot
    /// be typed into minisign.
    ///
    /// # Errors
    /// [`KeyError::Randomness`] if the OS random number generator fails while making the salt.
    pub fn to_text(&self, password: Option<&[u8]>) -> Result<Zeroizing<String>, KeyError> {
        let comment = if password.is_some() { ENCRYPTED_SECRET_KEY_COMMENT } else { UNENCRYPTED_SECRET_KEY_COMMENT };
        self.to_text_with(password, comment, KdfLimits::MINISIGN_DEFAULT)
    }

    /// Like [`SecretKey::to_text`], with a custom untrusted comment and scrypt
    /// cost limits (ignored without a password). minisign decrypts any limits
    /// accepted here; [`KdfLimits::MINISIGN_DEFAULT`] is what it writes itself.
    ///
    /// # Errors
    /// [`KeyError::InvalidComment`] for a comment minisign cannot read,
    /// [`KeyError::UnsupportedKdf`] for unusable limits,
    /// [`KeyError::Randomness`] if no salt can be made.
    pub fn to_text_with(
        &self,
        password: Option<&[u8]>,
        comment: &str,
        limits: KdfLimits,
    ) -> Result<Zeroizing<String>, KeyError> {
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
        // Every buffer the key text passes through is wiped: the base64 is encoded into one
        // allocation of the right size, and the file text is built in one allocated up front
        // (no `format!`, whose growing buffer would leave copies behind).
        let encoded = Zeroizing::new(BASE64.encode(&bytes[..]));
        let mut text =
            Zeroizing::new(String::with_capacity(UNTRUSTED_PREFIX.len() + comment.len() + encoded.len() + 2));
        for part in [UNTRUSTED_PREFIX, comment, "\n", encoded.as_str(), "\n"] {
            text.push_str(part);
        }
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
        Signature::create(self.key_id, data, trusted_comment, untrusted_comment, |message| {
            Ok::<_, SignatureError>(self.signing.sign(message).to_bytes())
        })
    }

    /// A plain Ed25519 signature of `message` (no minisign prehash or comments): what a DSSE
    /// envelope carries over its pre-authentication encoding.
    pub fn sign_ed25519(&self, message: &[u8]) -> [u8; 64] {
        self.signing.sign(message).to_bytes()
    }

    /// A secret key from a raw 32-byte Ed25519 seed (the secret half of an OpenSSH or PKCS#8
    /// Ed25519 key) and a key id: the way to put a key that lives elsewhere into a minisign
    /// file, or to check that an agent or token signs exactly as the file key does.
    pub fn from_seed(seed: &[u8; 32], key_id: [u8; KEY_ID_LEN]) -> SecretKey {
        SecretKey { key_id, signing: SigningKey::from_bytes(seed) }
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
