//! Loading keys for the commands that sign or verify: secret keys from a file or from
//! `BUNDLE_SIGNING_KEY`, passwords from an environment variable or a terminal prompt, public
//! keys from `--key` files or a `--trusted-keys` file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use agent_bundle::minisign::{KeyError, PublicKey, SecretKey};
use agent_bundle::trust::TrustedKeys;

use super::args::TrustArgs;

/// The environment variable that may hold a secret key file's text (for CI).
pub const SIGNING_KEY_ENV: &str = "BUNDLE_SIGNING_KEY";

/// Options shared by commands that sign.
#[derive(Debug, clap::Args)]
pub struct SecretKeyArgs {
    /// The minisign secret key file (default: the text of $BUNDLE_SIGNING_KEY).
    #[arg(long, value_name = "SECRET_KEY")]
    pub key: Option<PathBuf>,
    /// Read the key's password from this environment variable (encrypted keys); on a terminal
    /// you are prompted instead.
    #[arg(long, value_name = "VAR")]
    pub password_env: Option<String>,
}

pub fn password_from_env(var: &str) -> anyhow::Result<Vec<u8>> {
    match std::env::var_os(var) {
        Some(v) => Ok(v.into_encoded_bytes()),
        None => bail!("--password-env {var}: the environment variable {var} is not set"),
    }
}

pub fn load_secret_key(args: &SecretKeyArgs) -> anyhow::Result<SecretKey> {
    let (text, origin) = match &args.key {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("cannot read the secret key {}", path.display()))?,
            path.display().to_string(),
        ),
        None => match std::env::var(SIGNING_KEY_ENV) {
            Ok(text) => (text, format!("${SIGNING_KEY_ENV}")),
            Err(_) => bail!("no signing key: pass --key FILE or set {SIGNING_KEY_ENV} to the key file's text"),
        },
    };
    let encrypted = SecretKey::is_encrypted(&text).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
    let password = if !encrypted {
        None
    } else if let Some(var) = &args.password_env {
        Some(password_from_env(var)?)
    } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        Some(rpassword::prompt_password(format!("Password for {origin}: "))?.into_bytes())
    } else {
        bail!("{origin} is encrypted: pass --password-env VAR naming a variable that holds its password");
    };
    SecretKey::from_text(&text, password.as_deref()).map_err(|e| match e {
        KeyError::WrongPassword => anyhow::anyhow!("{origin}: wrong password"),
        other => anyhow::anyhow!("{origin}: {other}"),
    })
}

pub fn load_public_key(path: &Path) -> anyhow::Result<PublicKey> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read the public key {}", path.display()))?;
    PublicKey::from_text(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

pub fn load_trust(args: &TrustArgs) -> anyhow::Result<TrustedKeys> {
    if let Some(path) = &args.trusted_keys {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        return TrustedKeys::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    let keys = args.keys.iter().map(|p| load_public_key(p)).collect::<anyhow::Result<Vec<_>>>()?;
    Ok(TrustedKeys::from_keys(keys))
}
