//! Loading keys for the commands that sign or verify: signing keys from a file, from
//! `BUNDLE_SIGNING_KEY`, from an ssh-agent or a PKCS#11 token; passwords and PINs from an
//! environment variable or a terminal prompt; public keys from `--key` files or a
//! `--trusted-keys` file. A key of the wrong kind (a public key given to sign, a secret key
//! given to verify) is named as such, with the file to use instead.

use std::ffi::OsString;
use std::io::{IsTerminal, Read as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use zeroize::Zeroizing;

use agent_bundle::keys::pkcs11::{MODULE_ENV, TokenKey};
use agent_bundle::keys::ssh_agent::{AUTH_SOCK_ENV, AgentKey};
use agent_bundle::keys::{KeyRef, Signer};
use agent_bundle::minisign::{KeyError, PublicKey, SecretKey};
use agent_bundle::ops::gate::PolicyOptions;
use agent_bundle::trust::TrustedKeys;

use super::args::TrustArgs;

/// The environment variable that may hold a secret key file's text, or a key reference (for CI).
pub const SIGNING_KEY_ENV: &str = "BUNDLE_SIGNING_KEY";

/// Key files are a few hundred bytes; anything much larger is not a key file.
pub const MAX_KEY_FILE: u64 = agent_bundle::limits::MAX_KEY_FILE_BYTES;
/// A trusted-keys file lists about 60 bytes per key.
const MAX_TRUSTED_KEYS_FILE: u64 = agent_bundle::limits::MAX_TRUSTED_KEYS_BYTES;

/// Options shared by commands that sign.
#[derive(clap::Args)]
pub struct SecretKeyArgs {
    /// The signing key: a minisign secret key file, `ssh-agent:` (the running agent's Ed25519
    /// key; `ssh-agent:SHA256:<fingerprint>` picks one), or a `pkcs11:` URI naming a key on a
    /// token (RFC 7512). Default: $BUNDLE_SIGNING_KEY (a key file's text, or a reference).
    #[arg(long, value_name = "KEY")]
    pub key: Option<OsString>,
    /// Read the key file's password, or the token's PIN, from this environment variable; on a
    /// terminal you are prompted instead.
    #[arg(long, value_name = "VAR")]
    pub password_env: Option<String>,
}

/// A `pkcs11:` URI may carry `pin-value`: Debug shows only what kind of key is meant.
impl std::fmt::Debug for SecretKeyArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = self.key.as_ref().map(|k| match KeyRef::parse(k) {
            Ok(KeyRef::File(path)) => path.display().to_string(),
            Ok(KeyRef::SshAgent { fingerprint }) => format!("ssh-agent:{}", fingerprint.unwrap_or_default()),
            Ok(KeyRef::Pkcs11(uri)) => uri.to_string(),
            Err(_) => "<invalid key reference>".to_owned(),
        });
        f.debug_struct("SecretKeyArgs").field("key", &key).field("password_env", &self.password_env).finish()
    }
}

pub fn password_from_env(var: &str) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    match std::env::var_os(var) {
        Some(v) => Ok(Zeroizing::new(v.into_encoded_bytes())),
        None => bail!("--password-env {var}: the environment variable {var} is not set"),
    }
}

/// The signer `--key` (or `BUNDLE_SIGNING_KEY`) names.
pub fn open_signer(args: &SecretKeyArgs) -> anyhow::Result<Signer> {
    if let Some(reference) = &args.key {
        return match KeyRef::parse(reference)? {
            KeyRef::File(path) => {
                let text = read_key_file(&path, "secret key", MAX_KEY_FILE)?;
                Ok(Signer::File(secret_from_text(&text, &path.display().to_string(), Some(&path), args)?))
            }
            external => open_external(external, args),
        };
    }
    let Some(value) = std::env::var_os(SIGNING_KEY_ENV) else {
        bail!(
            "no signing key: pass --key (a key file, ssh-agent: or a pkcs11: URI) or set {SIGNING_KEY_ENV} to the key file's text"
        );
    };
    let text =
        Zeroizing::new(value.into_string().map_err(|_| anyhow::anyhow!("${SIGNING_KEY_ENV} is not UTF-8 text"))?);
    let trimmed = text.trim();
    if KeyRef::is_external(trimmed) {
        return open_external(KeyRef::parse(trimmed.as_ref())?, args);
    }
    if !trimmed.contains('\n') {
        // One line: never echo it (it could be a secret key's base64 line), unless it is a
        // path that exists.
        if Path::new(trimmed).exists() {
            bail!(
                "${SIGNING_KEY_ENV} holds a file path ({trimmed}), not the key file's text: use --key {trimmed}, or set {SIGNING_KEY_ENV}=\"$(cat {trimmed})\""
            );
        }
        bail!(
            "${SIGNING_KEY_ENV} holds one line, not a minisign secret key file's text (a comment line and a key line): set it with {SIGNING_KEY_ENV}=\"$(cat release.key)\""
        );
    }
    Ok(Signer::File(secret_from_text(&text, &format!("${SIGNING_KEY_ENV}"), None, args)?))
}

fn open_external(reference: KeyRef, args: &SecretKeyArgs) -> anyhow::Result<Signer> {
    Ok(match reference {
        KeyRef::SshAgent { fingerprint } => {
            Signer::SshAgent(AgentKey::open(std::env::var_os(AUTH_SOCK_ENV), fingerprint.as_deref())?)
        }
        KeyRef::Pkcs11(uri) => {
            let module = std::env::var_os(MODULE_ENV).map(PathBuf::from);
            let pin = |token: &str| token_pin(token, args);
            Signer::Pkcs11(TokenKey::open(&uri, module, &pin)?)
        }
        KeyRef::File(path) => {
            let text = read_key_file(&path, "secret key", MAX_KEY_FILE)?;
            Signer::File(secret_from_text(&text, &path.display().to_string(), Some(&path), args)?)
        }
    })
}

/// The P-256 signer `--key` names (`attest --model-signing`): a PEM secret key file,
/// `ssh-agent:` (its only ecdsa-sha2-nistp256 key, or `ssh-agent:SHA256:...`), or a `pkcs11:`
/// URI naming a P-256 key on a token.
pub fn open_p256_signer(args: &SecretKeyArgs) -> anyhow::Result<agent_bundle::keys::P256Signer> {
    use agent_bundle::keys::{P256Signer, p256_key, pkcs11_p256::TokenP256, ssh_agent_p256::AgentP256};
    let Some(reference) = &args.key else {
        bail!(
            "--model-signing needs --key: a P-256 secret key file (make one with `bundle keygen --kind p256 NAME`), ssh-agent: or a pkcs11: URI"
        );
    };
    Ok(match KeyRef::parse(reference)? {
        KeyRef::File(path) => P256Signer::File(p256_key::read_secret(&path)?),
        KeyRef::SshAgent { fingerprint } => {
            P256Signer::SshAgent(AgentP256::open(std::env::var_os(AUTH_SOCK_ENV), fingerprint.as_deref())?)
        }
        KeyRef::Pkcs11(uri) => {
            let module = std::env::var_os(MODULE_ENV).map(PathBuf::from);
            let pin = |token: &str| token_pin(token, args);
            P256Signer::Pkcs11(TokenP256::open(&uri, module, &pin)?)
        }
    })
}

/// A token's PIN when the URI has none: from --password-env, else a prompt on a terminal.
fn token_pin(token: &str, args: &SecretKeyArgs) -> Option<Zeroizing<String>> {
    if let Some(var) = &args.password_env {
        return std::env::var(var).ok().map(Zeroizing::new);
    }
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        return rpassword::prompt_password(format!("PIN for token \"{token}\": ")).ok().map(Zeroizing::new);
    }
    None
}

/// Reads a key file into a buffer that is wiped when dropped.
pub fn read_key_file(path: &Path, what: &str, limit: u64) -> anyhow::Result<Zeroizing<String>> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot read the {what} file {}", path.display()))?;
    // Room for the whole file up front, so that reading never moves (and leaves behind) a copy.
    let size = file.metadata().map_or(0, |m| m.len()).min(limit);
    let mut bytes = Zeroizing::new(Vec::with_capacity(size as usize + 1));
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the {what} file {}", path.display()))?;
    if bytes.len() as u64 > limit {
        bail!("{} is larger than {limit} bytes, so it is not a {what} file", path.display());
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| anyhow::anyhow!("{} is not a text file, so it is not a {what} file", path.display()))?;
    let mut owned = Zeroizing::new(String::with_capacity(text.len()));
    owned.push_str(text);
    Ok(owned)
}

/// The file beside `path` with extension `ext`, if it exists (release.pub -> release.key).
fn sibling(path: Option<&Path>, ext: &str) -> Option<PathBuf> {
    let other = path?.with_extension(ext);
    (other != path? && other.is_file()).then_some(other)
}

fn secret_from_text(text: &str, origin: &str, path: Option<&Path>, args: &SecretKeyArgs) -> anyhow::Result<SecretKey> {
    if PublicKey::from_text(text).is_ok() {
        let fix = match sibling(path, "key") {
            Some(secret) => format!("pass --key {}", secret.display()),
            None => {
                "pass the secret key file made with it (`bundle keygen` writes NAME.key beside NAME.pub)".to_owned()
            }
        };
        bail!("{origin} is a public key, but signing needs the secret key: {fix}");
    }
    let encrypted = SecretKey::is_encrypted(text).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
    let password = if !encrypted {
        None
    } else if let Some(var) = &args.password_env {
        Some(password_from_env(var)?)
    } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        Some(Zeroizing::new(rpassword::prompt_password(format!("Password for {origin}: "))?.into_bytes()))
    } else {
        bail!("{origin} is encrypted: pass --password-env VAR naming a variable that holds its password");
    };
    SecretKey::from_text(text, password.as_ref().map(|p| p.as_slice())).map_err(|e| match e {
        KeyError::WrongPassword => anyhow::anyhow!("{origin}: wrong password"),
        other => anyhow::anyhow!("{origin}: {other}"),
    })
}

pub fn load_public_key(path: &Path) -> anyhow::Result<PublicKey> {
    let text = read_key_file(path, "public key", MAX_KEY_FILE)?;
    PublicKey::from_text(&text)
        .map_err(|e| not_a_public_key(path, &text).unwrap_or_else(|| anyhow::anyhow!("{}: {e}", path.display())))
}

/// The error for a secret key given where a public key belongs (nothing of it is shown).
fn not_a_public_key(path: &Path, text: &str) -> Option<anyhow::Error> {
    agent_bundle::trust::secret_key_given_to_verify(path, text).map(|m| anyhow::anyhow!(m))
}

/// The trust policy of `--trust-policy` and its `--policy-update` versions, read and checked
/// (their chain is followed by the gate, under the state file's lock).
pub fn load_policy(args: &TrustArgs) -> anyhow::Result<Option<PolicyOptions>> {
    let Some(pin) = &args.trust_policy else { return Ok(None) };
    let pin = agent_bundle::ops::trust::read_signed(pin)?;
    let updates =
        args.policy_update.iter().map(|p| agent_bundle::ops::trust::read_signed(p)).collect::<Result<Vec<_>, _>>()?;
    Ok(Some(PolicyOptions {
        pin,
        updates,
        cosignatures: args.cosignatures.clone(),
        require_threshold: true,
        sigstore: Vec::new(),
    }))
}

pub fn load_trust(args: &TrustArgs) -> anyhow::Result<TrustedKeys> {
    if args.trust_policy.is_some() {
        // The policy decides; the keys are not used.
        return Ok(TrustedKeys::default());
    }
    if let Some(path) = &args.trusted_keys {
        let text = read_key_file(path, "trusted-keys", MAX_TRUSTED_KEYS_FILE)?;
        return TrustedKeys::parse(&text)
            .map_err(|e| not_a_public_key(path, &text).unwrap_or_else(|| anyhow::anyhow!("{}: {e}", path.display())));
    }
    let keys = args.keys.iter().map(|p| load_public_key(p)).collect::<anyhow::Result<Vec<_>>>()?;
    Ok(TrustedKeys::from_keys(keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_pin_value() {
        let args = SecretKeyArgs { key: Some("pkcs11:token=t?pin-value=s3cr3t".into()), password_env: None };
        let shown = format!("{args:?}");
        assert!(shown.contains("pkcs11:token=t") && !shown.contains("s3cr3t"), "{shown}");
    }
}
