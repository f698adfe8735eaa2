//! `bundle pubkey`: the minisign public key of any signing key (a secret key file, an
//! ssh-agent key, a key on a PKCS#11 token), to put into trusted-keys files. Keys without a
//! minisign key id of their own get the derived one ([`crate::keys::derived_key_id`]).

use std::path::{Path, PathBuf};

use crate::atomic;
use crate::error::{Error, Result};
use crate::minisign::PublicKey;

/// A public key, and where it was written (nowhere: the caller prints `text`).
#[derive(Debug)]
pub struct Public {
    pub text: String,
    pub key_id: String,
    pub path: Option<PathBuf>,
}

/// The public key file text of `public` (a signer's, see [`crate::keys::Signer::public_key`]);
/// written atomically to `output` when given (an existing file only with `force`).
pub fn pubkey(public: &PublicKey, output: Option<&Path>, force: bool) -> Result<Public> {
    let text = public.to_text();
    if let Some(path) = output {
        if !force && std::fs::symlink_metadata(path).is_ok() {
            return Err(Error::Usage(format!("{} already exists; use --force to overwrite", path.display())));
        }
        atomic::write(path, text.as_bytes(), force).map_err(|e| Error::io(path, e))?;
    }
    Ok(Public { text, key_id: public.key_id_hex(), path: output.map(Path::to_path_buf) })
}
