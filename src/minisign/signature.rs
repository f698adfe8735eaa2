//! The `.minisig` signature box: a prehashed ("ED") Ed25519 signature of the data, the trusted
//! comment, and the global signature that binds the two.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use blake2::{Blake2b512, Digest as _};

use super::{
    KEY_ID_LEN, MAX_TRUSTED_COMMENT_LEN, MAX_UNTRUSTED_COMMENT_LEN, PublicKey, SIG_ALG, SIG_ALG_PREHASHED,
    SIGNATURE_BOX_LEN, SIGNATURE_LEN, SignatureError, TRUSTED_PREFIX, UNTRUSTED_PREFIX, check_comment, decode_line,
    hex_key_id, split_lines, take_array, untrusted_comment_of,
};

/// What the global signature covers: `signature || trusted comment`.
pub(super) fn global_message(signature: &[u8; SIGNATURE_LEN], trusted_comment: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNATURE_LEN + trusted_comment.len());
    message.extend_from_slice(signature);
    message.extend_from_slice(trusted_comment.as_bytes());
    message
}

/// A minisign signature (`.minisig` file contents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub(super) key_id: [u8; KEY_ID_LEN],
    pub(super) signature: [u8; SIGNATURE_LEN],
    pub(super) untrusted_comment: String,
    pub(super) trusted_comment: String,
    pub(super) global_signature: [u8; SIGNATURE_LEN],
}

impl Signature {
    /// Signs `data` the way current minisign does, with any Ed25519 signer: `sign` is called
    /// once over BLAKE2b-512(data) (the "ED" signature) and once over `signature || trusted
    /// comment` (the global signature). A file key, an ssh-agent and a PKCS#11 token all sign
    /// through here, so their signatures are the same bytes for the same key.
    ///
    /// # Errors
    /// [`SignatureError::InvalidComment`] (converted into `E`) if a comment contains a line
    /// break or NUL byte, or is longer than minisign can read (1003 bytes untrusted, 8173
    /// bytes trusted); such a file would not verify with minisign. Errors of `sign` as they are.
    pub fn create<E: From<SignatureError>>(
        key_id: [u8; KEY_ID_LEN],
        data: &[u8],
        trusted_comment: &str,
        untrusted_comment: &str,
        mut sign: impl FnMut(&[u8]) -> Result<[u8; SIGNATURE_LEN], E>,
    ) -> Result<Self, E> {
        check_comment(trusted_comment, MAX_TRUSTED_COMMENT_LEN, "trusted comment")
            .map_err(SignatureError::InvalidComment)?;
        check_comment(untrusted_comment, MAX_UNTRUSTED_COMMENT_LEN, "untrusted comment")
            .map_err(SignatureError::InvalidComment)?;
        let digest: [u8; 64] = Blake2b512::digest(data).into();
        let signature = sign(&digest)?;
        let global_signature = sign(&global_message(&signature, trusted_comment))?;
        Ok(Signature {
            key_id,
            signature,
            untrusted_comment: untrusted_comment.to_owned(),
            trusted_comment: trusted_comment.to_owned(),
            global_signature,
        })
    }

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
