//! `bundle pubkey <KEY> [-o FILE]`: the minisign public key of any signing key.

use std::ffi::OsString;
use std::path::PathBuf;

use agent_bundle::ops::pubkey;

use agent_bundle::keys::KeyRef;
use agent_bundle::minisign::PublicKey;

use super::keys::{MAX_KEY_FILE, SecretKeyArgs, open_signer, read_key_file};
use super::{Global, Outcome, output};

/// Print (or write) the minisign public key of a signing key, for trusted-keys files.
///
/// KEY is what `pack --key` takes: a minisign secret key file, `ssh-agent:` /
/// `ssh-agent:SHA256:<fingerprint>`, or a `pkcs11:` URI. An agent's or token's key gets a key id
/// derived from its public key (the first 8 bytes of BLAKE2b-512 of it), the same every time.
/// A public key file is printed as it is (with minisign's standard comment line).
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  bundle pubkey ssh-agent: -o release.pub\n  bundle pubkey >> trusted-keys \\\n      'pkcs11:token=release;object=bundle?pin-source=/run/pin'\n  bundle pubkey release.key -o release.pub   # recreate a lost public key"
)]
pub struct Args {
    /// The signing key (default: $BUNDLE_SIGNING_KEY).
    #[arg(value_name = "KEY")]
    key: Option<OsString>,
    /// Write the public key file here instead of printing it.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Overwrite an existing output file.
    #[arg(long)]
    force: bool,
    /// Read the key file's password, or the token's PIN, from this environment variable.
    #[arg(long, value_name = "VAR")]
    password_env: Option<String>,
}

/// Never shows a PIN a `pkcs11:` URI may carry (see [`SecretKeyArgs`]'s Debug).
impl std::fmt::Debug for Args {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = SecretKeyArgs { key: self.key.clone(), password_env: self.password_env.clone() };
        f.debug_struct("Args").field("key", &key).field("output", &self.output).field("force", &self.force).finish()
    }
}

fn public_key_file(key: &SecretKeyArgs) -> Option<PublicKey> {
    let Ok(KeyRef::File(path)) = KeyRef::parse(key.key.as_ref()?) else { return None };
    let text = read_key_file(&path, "public key", MAX_KEY_FILE).ok()?;
    PublicKey::from_text(&text).ok()
}

pub fn run(args: Args, global: Global) -> anyhow::Result<Outcome> {
    let key = SecretKeyArgs { key: args.key, password_env: args.password_env };
    // A public key file is its own public key (normalised to minisign's comment line).
    let public = match public_key_file(&key) {
        Some(public) => public,
        None => open_signer(&key)?.public_key(),
    };
    let done = pubkey::pubkey(&public, args.output.as_deref(), args.force)?;
    match &done.path {
        Some(path) => output::status(global, &format!("public key {} -> {}", done.key_id, path.display())),
        None => output::print_line(done.text.trim_end())?,
    }
    Ok(Outcome::Ok)
}
