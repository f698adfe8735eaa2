//! `bundle keygen <NAME>`: a minisign-compatible key pair.

use std::io::IsTerminal;
use std::path::PathBuf;

use agent_bundle::ops::keygen;
use zeroize::Zeroizing;

use super::keys::password_from_env;
use super::{Global, Outcome, output};

/// Create NAME.key (minisign secret key, mode 0600) and NAME.pub (minisign public key).
///
/// The secret key is unencrypted unless a password is given (--password-env, or the prompt on
/// a terminal with --password); encrypted keys use minisign's scrypt parameters.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  bundle keygen release                       # release.key + release.pub\n  BUNDLE_KEY_PW=... bundle keygen release --password-env BUNDLE_KEY_PW\n  minisign -V -p release.pub -m manifest.toml # stock minisign reads our keys"
)]
pub struct Args {
    /// Base name of the key files.
    name: PathBuf,
    /// Overwrite existing key files.
    #[arg(long)]
    force: bool,
    /// Encrypt the secret key with the password in this environment variable.
    #[arg(long, value_name = "VAR", conflicts_with = "password")]
    password_env: Option<String>,
    /// Encrypt the secret key with a password typed at the terminal.
    #[arg(long)]
    password: bool,
    /// The kind of key: `minisign` (Ed25519, what bundles are signed with) or `p256` (ECDSA
    /// P-256 in PEM files, for OpenSSF model signatures: `attest --model-signing`).
    #[arg(long, value_enum, default_value_t = Kind::Minisign)]
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Kind {
    Minisign,
    P256,
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    if args.kind == Kind::P256 {
        if args.password || args.password_env.is_some() {
            anyhow::bail!("--kind p256 writes an unencrypted PKCS#8 key; keep it in a secret store (no --password)");
        }
        let done = keygen::keygen_p256(&args.name, args.force)?;
        output::status(
            global,
            &format!(
                "P-256 key {}: secret {} (keep it private), public {}",
                &done.key_id[..16],
                done.secret_path.display(),
                done.public_path.display()
            ),
        );
        return Ok(Outcome::Ok);
    }
    let password = match (&args.password_env, args.password) {
        (Some(var), _) => Some(password_from_env(var)?),
        (None, true) => {
            if !std::io::stdin().is_terminal() {
                anyhow::bail!("--password needs a terminal; use --password-env VAR in scripts");
            }
            let mut first = Zeroizing::new(rpassword::prompt_password("Password for the new key: ")?);
            let again = Zeroizing::new(rpassword::prompt_password("Password (again): ")?);
            if first != again {
                anyhow::bail!("the passwords differ");
            }
            Some(Zeroizing::new(std::mem::take(&mut *first).into_bytes()))
        }
        (None, false) => None,
    };
    let done = keygen::keygen(&args.name, password.as_ref().map(|p| p.as_slice()), args.force)?;
    output::status(
        global,
        &format!(
            "key {}: secret {} (keep it private), public {}",
            done.key_id,
            done.secret_path.display(),
            done.public_path.display()
        ),
    );
    Ok(Outcome::Ok)
}
