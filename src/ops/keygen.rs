//! `bundle keygen`: a minisign-compatible key pair. The secret key file is created with mode
//! 0600 and create-new semantics (never overwritten without `force`).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::atomic;
use crate::error::{Error, Result};
use crate::minisign::SecretKey;

#[derive(Debug)]
pub struct Generated {
    pub secret_path: PathBuf,
    pub public_path: PathBuf,
    pub key_id: String,
}

/// Writes `<base>.key` and `<base>.pub`; `password` encrypts the secret key as minisign does.
pub fn keygen(base: &Path, password: Option<&[u8]>, force: bool) -> Result<Generated> {
    let secret_path = with_suffix(base, "key");
    let public_path = with_suffix(base, "pub");
    if !force {
        for p in [&secret_path, &public_path] {
            if p.exists() {
                return Err(Error::Usage(format!("{} already exists; use --force to overwrite", p.display())));
            }
        }
    }
    let key_error = |e: crate::minisign::KeyError| Error::Key { message: e.to_string() };
    let key = SecretKey::try_generate().map_err(key_error)?;
    let secret_text = key.to_text(password).map_err(key_error)?;
    write_secret(&secret_path, secret_text.as_bytes(), force)?;
    atomic::write(&public_path, key.public_key().to_text().as_bytes(), force)
        .map_err(|e| Error::io(&public_path, e))?;
    Ok(Generated { secret_path, public_path, key_id: key.key_id_hex() })
}

/// Writes `<base>.key` (PKCS#8 PEM, mode 0600) and `<base>.pub` (SubjectPublicKeyInfo PEM): a
/// P-256 key pair for the signatures that need an elliptic-curve key (OpenSSF model signing).
/// `key_id` is the SHA-256 (hex) of the public key file, the hint `model_signing` names it by.
pub fn keygen_p256(base: &Path, force: bool) -> Result<Generated> {
    use sha2::{Digest as _, Sha256};
    let secret_path = with_suffix(base, "key");
    let public_path = with_suffix(base, "pub");
    if !force {
        for p in [&secret_path, &public_path] {
            if p.exists() {
                return Err(Error::Usage(format!("{} already exists; use --force to overwrite", p.display())));
            }
        }
    }
    let key = crate::keys::p256_key::generate().map_err(|e| Error::Key { message: e.to_string() })?;
    write_secret(&secret_path, crate::keys::p256_key::secret_pem(&key).as_bytes(), force)?;
    let public = crate::keys::p256_key::public_pem(key.verifying_key());
    atomic::write(&public_path, public.as_bytes(), force).map_err(|e| Error::io(&public_path, e))?;
    let key_id = hex::encode(Sha256::digest(public.as_bytes()));
    Ok(Generated { secret_path, public_path, key_id })
}

fn with_suffix(base: &Path, ext: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// Creates the secret key file readable by its owner only. Without `force` it must not exist
/// (create-new); with `force` it replaces the old file atomically.
fn write_secret(path: &Path, bytes: &[u8], force: bool) -> Result<()> {
    let err = |e| Error::io(path, e);
    if force {
        let mut temp = atomic::temp_beside(path).map_err(err)?;
        restrict(temp.as_file()).map_err(err)?;
        temp.write_all(bytes).map_err(err)?;
        return atomic::commit(temp, path, true).map_err(err);
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(err)?;
    file.write_all(bytes).map_err(err)?;
    file.sync_all().map_err(err)
}

fn restrict(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}
