//! `verify --emit-vsa`: the flags that ask for a signed verification summary, and writing it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use agent_bundle::ops::gate::Verdict;
use agent_bundle::ops::input::BundleSource;
use agent_bundle::ops::vsa::{self, VsaKey, VsaRequest};

use super::args::{GateArgs, TrustArgs};
use super::keys::{SecretKeyArgs, open_signer};
use super::{Global, output};

/// A signed verdict for later admission steps (docs: the attestations guide, "A signed verdict").
#[derive(Debug, clap::Args)]
pub struct VsaArgs {
    /// Write the gate's verdict on the bundle as a SLSA Verification Summary Attestation v1 in a
    /// Sigstore bundle, PASSED or FAILED (with the refusal's code), signed with --vsa-key. With
    /// several bundles, FILE is a folder: one `<bundle name>.vsa.sigstore.json` each.
    #[arg(long, value_name = "FILE", requires_all = ["vsa_key", "verifier_id"])]
    pub emit_vsa: Option<PathBuf>,
    /// The key that signs the verification summary: a minisign secret key file, `ssh-agent:` or
    /// a `pkcs11:` URI (Ed25519), or a P-256 key: a PEM file (`bundle keygen --kind p256`), or an
    /// agent's or token's P-256 key where it holds no Ed25519 one (or the one named is P-256).
    #[arg(long, value_name = "KEY", requires = "emit_vsa")]
    pub vsa_key: Option<OsString>,
    /// Read --vsa-key's password (or PIN) from this environment variable.
    #[arg(long, value_name = "VAR", requires = "vsa_key")]
    pub vsa_password_env: Option<String>,
    /// The verifier's identity in the summary (`verifier.id`): a URI naming this gate, such as
    /// https://deploy.example.com/gates/production.
    #[arg(long, value_name = "URI", requires = "emit_vsa")]
    pub verifier_id: Option<String>,
}

/// What `--emit-vsa` needs for each bundle: the signer, opened once, and the request.
pub struct Emitter {
    target: PathBuf,
    several: bool,
    signer: VsaKey,
    request: VsaRequest,
}

/// The key --vsa-key names: a P-256 key where it is one (a PEM file; an ssh-agent or a token
/// that holds a P-256 key but no Ed25519 one, or whose named key is P-256), else Ed25519.
fn open_vsa_key(args: &SecretKeyArgs) -> anyhow::Result<VsaKey> {
    use agent_bundle::error_code::ErrorCode;
    use agent_bundle::keys::{KeyRef, SignerError};
    if let Some(reference) = &args.key
        && let Ok(KeyRef::File(path)) = KeyRef::parse(reference)
        && std::fs::read(&path).is_ok_and(|b| b.starts_with(b"-----BEGIN"))
    {
        return Ok(VsaKey::P256(super::keys::open_p256_signer(args)?));
    }
    match open_signer(args) {
        Ok(signer) => Ok(VsaKey::Ed25519(signer)),
        Err(e) => {
            let not_ed25519 = e
                .downcast_ref::<SignerError>()
                .is_some_and(|s| matches!(s.code(), ErrorCode::UnsupportedKey | ErrorCode::KeyNotFound));
            match not_ed25519 {
                true => super::keys::open_p256_signer(args).map(VsaKey::P256).map_err(|_| e),
                false => Err(e),
            }
        }
    }
}

impl VsaArgs {
    /// The emitter when --emit-vsa is given: the key opened and the verifier id checked before
    /// any bundle is judged.
    pub fn emitter(
        &self,
        trust: &TrustArgs,
        gate: &GateArgs,
        keyless: &[PathBuf],
        several: bool,
    ) -> anyhow::Result<Option<Emitter>> {
        let (Some(target), Some(key), Some(id)) = (&self.emit_vsa, &self.vsa_key, &self.verifier_id) else {
            return Ok(None);
        };
        let parsed = fluent_uri::Uri::parse(id.as_str())
            .map_err(|e| anyhow::anyhow!("--verifier-id {id:?} is not a URI: {e}"))?;
        if parsed.scheme().as_str().is_empty() {
            anyhow::bail!("--verifier-id {id:?} is not an absolute URI (https://…)");
        }
        if several && !target.is_dir() {
            anyhow::bail!(
                "--emit-vsa {}: with several bundles, name an existing folder (one summary per bundle)",
                target.display()
            );
        }
        let signer =
            open_vsa_key(&SecretKeyArgs { key: Some(key.clone()), password_env: self.vsa_password_env.clone() })?;
        let request = VsaRequest {
            verifier_id: id.clone(),
            time: super::args::source_date_epoch()?
                .map(|s| agent_bundle::timestamp::Timestamp::from_unix(i64::try_from(s).unwrap_or(i64::MAX), 0)),
            trust_policy: trust.trust_policy.clone(),
            policy_updates: trust.policy_update.clone(),
            trusted_keys: trust.trusted_keys.clone(),
            keys: trust.keys.clone(),
            baseline: gate.baseline.clone(),
            cosignatures: trust.cosignatures.clone(),
            sigstore: keyless.to_vec(),
            state: gate.state.is_some(),
        };
        Ok(Some(Emitter { target: target.clone(), several, signer, request }))
    }
}

impl Emitter {
    /// Writes the summary of `verdict` on the bundle `source` names (atomically; an existing
    /// file is replaced). `now` is the gate's time, used when SOURCE_DATE_EPOCH is not set.
    pub fn emit(
        &mut self,
        source: &BundleSource,
        verdict: &Verdict,
        now: agent_bundle::timestamp::Timestamp,
        global: Global,
    ) -> anyhow::Result<()> {
        let mut request = self.request.clone();
        request.time.get_or_insert(now);
        let statement = vsa::summarise(source, verdict, &request)?;
        let bytes = vsa::sign(&statement, &mut self.signer)?;
        let path = if self.several { self.target.join(file_name(&source.label())) } else { self.target.clone() };
        crate::atomic::write(&path, &bytes, true).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let result = statement.predicate["verificationResult"].as_str().unwrap_or_default();
        output::status(
            global,
            &format!("verification summary ({result}) of {} -> {}", source.label().display(), path.display()),
        );
        Ok(())
    }
}

/// `<bundle file name>.vsa.sigstore.json`; a registry reference's `/`, `:` and `@` become `_`.
fn file_name(label: &Path) -> String {
    let text = label.display().to_string();
    let base = if text.starts_with("oci://") {
        text.trim_start_matches("oci://").replace(['/', ':', '@'], "_")
    } else {
        label.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or(text)
    };
    format!("{base}.vsa.sigstore.json")
}
