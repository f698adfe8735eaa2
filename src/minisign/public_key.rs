//! The minisign public key box: `"Ed" || key id || Ed25519 public key`, base64 under an
//! untrusted comment line.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::VerifyingKey;

use super::{
    KEY_ID_LEN, KeyError, MAX_UNTRUSTED_COMMENT_LEN, PUBLIC_BOX_LEN, PUBLIC_KEY_LEN, SIG_ALG, UNTRUSTED_PREFIX,
    check_comment, decode_line, hex_key_id, split_lines, take_array, untrusted_comment_of,
};

/// A minisign Ed25519 public key: key id plus verifying key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey {
    pub(super) key_id: [u8; KEY_ID_LEN],
    pub(super) key: VerifyingKey,
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
        Self::from_ed25519(take_array(&bytes[2..]), take_array(&bytes[2 + KEY_ID_LEN..]))
    }

    /// A public key from its parts: a key id and a raw 32-byte Ed25519 public key (as an
    /// ssh-agent or a PKCS#11 token reports it), with the same checks as a key file gets.
    ///
    /// # Errors
    /// [`KeyError::Malformed`] for an invalid or non-canonical point, [`KeyError::WeakKey`]
    /// for a small-order one.
    pub fn from_ed25519(key_id: [u8; KEY_ID_LEN], encoded: [u8; PUBLIC_KEY_LEN]) -> Result<Self, KeyError> {
        let key = VerifyingKey::from_bytes(&encoded)
            .map_err(|_| KeyError::Malformed("the public key is not a valid Ed25519 point".into()))?;
        if key.is_weak() {
            return Err(KeyError::WeakKey);
        }
        if !y_is_canonical(&encoded) {
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

    /// The raw 32-byte Ed25519 public key.
    pub fn ed25519_bytes(&self) -> [u8; PUBLIC_KEY_LEN] {
        self.key.to_bytes()
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

    /// Whether `signature` is a valid plain Ed25519 signature of `message` by this key
    /// (RFC 8032 with the strict checks of `verify_strict`: no small-order R, canonical S).
    /// Not a minisign check: DSSE envelopes sign their pre-authentication encoding directly.
    pub fn verify_ed25519(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        self.key.verify_strict(message, &ed25519_dalek::Signature::from_bytes(signature)).is_ok()
    }
}

/// Whether an encoding's y (its low 255 bits, little-endian) is below p = 2^255 - 19. With the
/// two points of x = 0 (y = 1 and y = -1, the only ones whose sign bit could be wrong) refused
/// as weak before, that is exactly a canonical encoding. A compress round trip says the same
/// at the cost of a field inversion per key, which a trust policy of 100 keys paid 100 times.
pub(super) fn y_is_canonical(encoded: &[u8; PUBLIC_KEY_LEN]) -> bool {
    !(encoded[31] & 0x7f == 0x7f && encoded[1..31].iter().all(|&b| b == 0xff) && encoded[0] >= 0xed)
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublicKey").field("key_id", &self.key_id_hex()).field("key", &self.to_base64()).finish()
    }
}
