//! `bundle agentcard BUNDLE|AGENT_DIR --url URL --key KEY`: a signed A2A agent card for an
//! agent (formats::agent_card), and `bundle verify --agent-card CARD [BUNDLE]`: its signatures
//! checked offline against trusted keys (a `jku` is never fetched), and, with a bundle, the
//! card's agent-bundle extension against that bundle.
//!
//! A card is made from a bundle (read once: every digest checked, hashed with SHA-256 as it
//! goes; its signature is the gate's business) or from an agent folder that passes `bundle
//! check` (no bundle SHA-256 then). One A2A skill per tool of tools.json, tagged with its risk
//! class, and one per skill of skills/.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::bundle::verify::{self, Discard, Expect, Rejection, Trust};
use crate::contract::{self, Contract, release};
use crate::error::{Error, Result};
pub use crate::formats::agent_card::CardReason as Reason;
use crate::formats::agent_card::{self, BundleParams, CardFacts, CardReason, CardSkill, SkillParam, ToolParam};
use crate::keyless::TrustedRoot;
use crate::keys::{Signer, SignerError, p256_key};
use crate::limits::MAX_AGENT_CARD_BYTES;
use crate::regular_file::{self, Links};
use crate::sha256_read::Sha256Read;
use crate::skill::facts::SkillFacts;
use crate::trust::TrustedKeys;

/// What the card says beyond what the agent says.
#[derive(Debug, Clone, Default)]
pub struct CardOptions {
    /// The A2A endpoint (JSON-RPC) the agent is served at.
    pub url: String,
    /// Default: the agent's name.
    pub name: Option<String>,
    /// Default: a line naming the agent, its tools and skills.
    pub description: Option<String>,
    /// Where the card is written (`-o`; an existing file needs `force`); `None`: returned only.
    pub output: Option<PathBuf>,
    pub force: bool,
    /// The root a `[[models]]` entry's Sigstore identity is judged under (`--trusted-root`);
    /// without one such an agent or bundle is refused (`model_trusted_root_missing`).
    pub trusted_root: Option<Arc<TrustedRoot>>,
}

/// The card made.
#[derive(Debug)]
pub struct Made {
    /// The card's JSON text.
    pub text: String,
    pub name: String,
    pub version: String,
    pub key_id: String,
    /// A2A skills: tools, then skills.
    pub tools: usize,
    pub skills: usize,
    pub bundle_sha256: Option<String>,
}

/// Why no card was made.
#[derive(Debug)]
pub enum CardFailure {
    /// The bundle is not one (exit 1).
    Rejected(Rejection),
    /// The agent folder has problems (exit 1).
    Invalid(crate::diagnostic::Report),
    Error(Error),
}

impl From<Error> for CardFailure {
    fn from(e: Error) -> Self {
        CardFailure::Error(e)
    }
}

/// The key a card is signed with.
#[derive(Debug)]
pub enum CardKey {
    /// A minisign key (a file, an ssh-agent's, a token's): `EdDSA`, kid = its key id.
    Minisign(Signer),
    /// A P-256 key (`bundle keygen --kind p256`): `ES256`, kid = its RFC 7638 JWK thumbprint.
    P256(p256::ecdsa::SigningKey),
}

impl CardKey {
    /// The JWS `alg` of its signatures.
    pub fn alg(&self) -> &'static str {
        match self {
            CardKey::Minisign(_) => agent_card::EDDSA,
            CardKey::P256(_) => agent_card::ES256,
        }
    }

    /// The JWS `kid` of its signatures.
    pub fn kid(&self) -> String {
        match self {
            CardKey::Minisign(s) => s.public_key().key_id_hex(),
            CardKey::P256(k) => p256_key::jwk_thumbprint(k.verifying_key()),
        }
    }

    fn sign(&mut self, input: &[u8]) -> std::result::Result<[u8; 64], SignerError> {
        match self {
            CardKey::Minisign(s) => s.sign_ed25519(input),
            CardKey::P256(k) => Ok(p256_key::sign_raw(k, input)),
        }
    }
}

/// The keys a card's signatures are checked against: minisign keys (`EdDSA`, and the bundle's
/// signature when a bundle is given), P-256 public keys (`ES256`, trusted for every agent).
#[derive(Debug, Clone, Default)]
pub struct CardTrust {
    pub keys: TrustedKeys,
    pub p256: Vec<p256::ecdsa::VerifyingKey>,
    /// The root a `[[models]]` identity of the bundle checked with the card is judged under
    /// (`--trusted-root`, or a trust policy's); without one such a bundle is refused.
    pub model_root: Option<Arc<TrustedRoot>>,
}

/// The agent a card describes.
struct Described {
    name: String,
    version: String,
    bundle_sha256: Option<String>,
    manifest_blake3: String,
    tools: Vec<crate::tools::Tool>,
    contracts: Vec<Contract>,
    skills: Vec<SkillFacts>,
}

/// Makes the signed card (JSON, pretty, with a final newline) and writes it to `opts.output`.
pub fn make(input: &Path, opts: &CardOptions, key: &mut CardKey) -> std::result::Result<Made, CardFailure> {
    let target = match &opts.output {
        Some(p) if p.exists() && !opts.force => {
            return Err(Error::Usage(format!("{} exists; add --force to overwrite it", p.display())).into());
        }
        Some(p) => Some(crate::atomic::Output::new(p, "-o").map_err(Error::from)?),
        None => None,
    };
    let root = opts.trusted_root.as_deref();
    let d = if input.is_dir() { from_folder(input, root)? } else { from_bundle(input, root)? };
    let facts = facts(&d, opts);
    let mut card = agent_card::unsigned_card(&facts);
    let canonical = agent_card::canonical(&card).map_err(|e| Error::Usage(format!("cannot sign the card: {e}")))?;
    let kid = key.kid();
    let signature =
        agent_card::sign_jws(&canonical, key.alg(), &kid, |input| key.sign(input)).map_err(Error::Signer)?;
    card["signatures"] = Value::Array(vec![signature]);
    let text = serde_json::to_string_pretty(&card).expect("a card serialises") + "\n";
    if let Some(t) = target {
        t.write(text.as_bytes()).map_err(Error::from)?;
    }
    Ok(Made {
        text,
        name: facts.name,
        version: d.version,
        key_id: kid,
        tools: d.contracts.len(),
        skills: d.skills.len(),
        bundle_sha256: d.bundle_sha256,
    })
}

fn from_bundle(path: &Path, root: Option<&TrustedRoot>) -> std::result::Result<Described, CardFailure> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut reader = Sha256Read::new(BufReader::with_capacity(1 << 20, file), true);
    let expect = Expect { model_root: root, ..Expect::default() };
    let verified = match verify::verify(&mut reader, Trust::Unchecked, &expect, &mut Discard) {
        Ok(v) => v,
        Err(e) => return Err(CardFailure::Rejected(e.rejection(path)?)),
    };
    let sha256 = reader.finish().map_err(|e| Error::io(path, e))?.expect("hashing");
    let agent = release::from_verified(&verified, path)
        .map_err(|e| Error::Usage(format!("cannot compute the tool contracts of {}: {e}", path.display())))?;
    Ok(Described {
        name: verified.manifest.name.clone(),
        version: verified.manifest.version.to_string(),
        bundle_sha256: Some(hex::encode(sha256)),
        manifest_blake3: verified.manifest_blake3.to_hex().to_string(),
        tools: verified.tools.as_ref().map(|t| t.tools.clone()).unwrap_or_default(),
        contracts: agent.contracts,
        skills: agent.skills,
    })
}

fn from_folder(dir: &Path, root: Option<&TrustedRoot>) -> std::result::Result<Described, CardFailure> {
    let options = crate::agent::CheckOptions { trusted_root: root, ..Default::default() };
    let checked =
        crate::agent::check_agent_with(dir, options).map_err(|problems| CardFailure::Invalid(problems.report))?;
    let tools = checked.tools.model().map_err(|d| {
        let mut report = crate::diagnostic::Report::default();
        report.push(d);
        CardFailure::Invalid(report)
    })?;
    let contracts = contract::tool_contracts(&tools, &dir.to_path_buf())
        .map_err(|e| Error::Usage(format!("{}: {e}", dir.display())))?;
    Ok(Described {
        name: checked.manifest.name.clone(),
        version: checked.manifest.version.to_string(),
        bundle_sha256: None,
        manifest_blake3: blake3::hash(checked.manifest_text.as_bytes()).to_hex().to_string(),
        tools: tools.tools,
        contracts,
        skills: checked.skills,
    })
}

fn facts(d: &Described, opts: &CardOptions) -> CardFacts {
    let mut skills: Vec<CardSkill> = d
        .tools
        .iter()
        .zip(&d.contracts)
        .map(|(t, c)| CardSkill {
            id: t.id.clone(),
            name: t.id.clone(),
            description: t.description.clone(),
            tags: c.risk.names().iter().map(|r| r.to_string()).chain(["tool".to_owned()]).collect(),
        })
        .collect();
    skills.extend(d.skills.iter().map(|s| CardSkill {
        id: format!("skill:{}", s.name),
        name: s.name.clone(),
        description: s.description.clone(),
        tags: vec!["skill".to_owned()],
    }));
    let description = opts.description.clone().unwrap_or_else(|| {
        format!(
            "{} {}: {} tool{} and {} skill{}, from a signed agent-bundle",
            d.name,
            d.version,
            d.tools.len(),
            if d.tools.len() == 1 { "" } else { "s" },
            d.skills.len(),
            if d.skills.len() == 1 { "" } else { "s" },
        )
    });
    CardFacts {
        name: opts.name.clone().unwrap_or_else(|| d.name.clone()),
        description,
        url: opts.url.clone(),
        version: d.version.clone(),
        skills,
        params: params(d),
    }
}

fn params(d: &Described) -> BundleParams {
    BundleParams {
        agent: d.name.clone(),
        version: d.version.clone(),
        bundle_sha256: d.bundle_sha256.clone(),
        manifest_blake3: d.manifest_blake3.clone(),
        tools: d
            .contracts
            .iter()
            .map(|c| ToolParam {
                id: c.id().to_owned(),
                fingerprint: c.fingerprint.clone(),
                risk: c.risk.names().iter().map(|r| r.to_string()).collect(),
            })
            .collect(),
        skills: d.skills.iter().map(|s| SkillParam { name: s.name.clone(), digest: s.digest.clone() }).collect(),
    }
}

/// What became of one signature.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SignatureVerdict {
    pub index: usize,
    pub kid: Option<String>,
    pub alg: Option<String>,
    /// `valid`, or the reason code of what is wrong with it.
    pub status: &'static str,
    pub message: String,
}

/// The verdict on a card.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CardVerdict {
    pub card: PathBuf,
    pub name: Option<String>,
    /// The first valid signature's key id.
    pub key_id: Option<String>,
    pub signatures: Vec<SignatureVerdict>,
    /// `None`: accepted.
    pub rejection: Option<CardRejection>,
    /// With a bundle: the bundle's agent and version.
    pub bundle: Option<(String, String)>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CardRejection {
    pub reason: CardReason,
    pub message: String,
}

/// Checks a card offline: at least one signature by a trusted key that verifies over the
/// canonical form; with `bundle`, the bundle's signature by a trusted key too, and the card's
/// extension naming exactly that bundle.
pub fn verify_card(card_path: &Path, bundle: Option<&Path>, trust: &CardTrust) -> Result<CardVerdict> {
    let bytes = regular_file::read(card_path, MAX_AGENT_CARD_BYTES, Links::Follow)
        .map_err(|e| Error::io(card_path, e.into_io()))?;
    let mut verdict = CardVerdict {
        card: card_path.to_path_buf(),
        name: None,
        key_id: None,
        signatures: Vec::new(),
        rejection: None,
        bundle: None,
    };
    let reject = |v: &mut CardVerdict, reason, message: String| {
        v.rejection.get_or_insert(CardRejection { reason, message });
    };
    // One value per key at every depth: readers that keep the first of two equal keys would
    // see another card than the one whose signature verified (crate::signed_json).
    if let Some(path) = crate::signed_json::repeated_key(&bytes) {
        let message = format!("the key {path} appears twice (a signed card has one value per key)");
        reject(&mut verdict, CardReason::CardMalformed, message);
        return Ok(verdict);
    }
    let card: Value = match serde_json::from_slice(&bytes) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            reject(&mut verdict, CardReason::CardMalformed, "the card is not a JSON object".into());
            return Ok(verdict);
        }
        Err(e) => {
            reject(&mut verdict, CardReason::CardMalformed, format!("the card is not JSON: {e}"));
            return Ok(verdict);
        }
    };
    verdict.name = card.get("name").and_then(Value::as_str).map(str::to_owned);
    judge_signatures(&card, trust, &mut verdict);
    if let Some(b) = bundle.filter(|b| b.is_dir()) {
        return Err(Error::Usage(format!(
            "{}: --agent-card is checked against a bundle file, not a folder",
            b.display()
        )));
    }
    if verdict.rejection.is_none()
        && let Some(bundle) = bundle
    {
        judge_bundle(&card, bundle, trust, &mut verdict)?;
    }
    Ok(verdict)
}

fn judge_signatures(card: &Value, trust: &CardTrust, verdict: &mut CardVerdict) {
    let entries = match card.get("signatures") {
        Some(Value::Array(s)) if !s.is_empty() => s.clone(),
        _ => {
            verdict.rejection =
                Some(CardRejection { reason: CardReason::CardUnsigned, message: "the card has no signatures".into() });
            return;
        }
    };
    let canonical = match agent_card::canonical(card) {
        Ok(c) => c,
        Err(e) => {
            verdict.rejection = Some(CardRejection { reason: CardReason::CardMalformed, message: e });
            return;
        }
    };
    let agent = agent_card::bundle_params(card).and_then(Result::ok).map(|p| p.agent);
    for (index, entry) in entries.iter().enumerate() {
        let mut v = SignatureVerdict { index, kid: None, alg: None, status: "valid", message: String::new() };
        match agent_card::read_signature(entry) {
            Err(e) => (v.status, v.message) = (CardReason::CardSignatureMalformed.as_str(), e),
            Ok(sig) => {
                v.kid = Some(sig.kid.clone());
                v.alg = Some(sig.alg.clone());
                (v.status, v.message) = judge_one(&sig, &canonical, trust, agent.as_deref());
                if v.status == "valid" && verdict.key_id.is_none() {
                    // Minisign key ids are shown in uppercase hex; a thumbprint is as written.
                    let eddsa = sig.alg == agent_card::EDDSA;
                    verdict.key_id = Some(if eddsa { sig.kid.to_ascii_uppercase() } else { sig.kid.clone() });
                }
            }
        }
        verdict.signatures.push(v);
    }
    if verdict.key_id.is_none() {
        // The most telling failure: a bad signature by a trusted key, then an untrusted key,
        // then a malformed signature.
        let order = [CardReason::CardBadSignature, CardReason::CardUntrustedKey, CardReason::CardSignatureMalformed];
        let (reason, message) = order
            .iter()
            .find_map(|r| verdict.signatures.iter().find(|s| s.status == r.as_str()).map(|s| (*r, s.message.clone())))
            .unwrap_or((CardReason::CardSignatureMalformed, "no signature could be read".into()));
        verdict.rejection = Some(CardRejection { reason, message });
    }
}

fn judge_one(
    sig: &agent_card::ReadSignature,
    canonical: &str,
    trust: &CardTrust,
    agent: Option<&str>,
) -> (&'static str, String) {
    let malformed = |m: String| (CardReason::CardSignatureMalformed.as_str(), m);
    let jku = sig.jku.as_ref().map(|u| format!(" (its jku {u} was not fetched)")).unwrap_or_default();
    let untrusted = || (CardReason::CardUntrustedKey.as_str(), format!("kid {} is not a trusted key{jku}", sig.kid));
    let input = agent_card::signing_input(&sig.protected, canonical);
    let verified = match sig.alg.as_str() {
        agent_card::EDDSA => {
            let Ok(signature) = <[u8; 64]>::try_from(sig.signature.as_slice()) else {
                return malformed("an Ed25519 signature is 64 bytes".into());
            };
            let trusted: Vec<_> =
                trust.keys.keys.iter().filter(|k| k.key.key_id_hex().eq_ignore_ascii_case(&sig.kid)).collect();
            if trusted.is_empty() {
                return untrusted();
            }
            match trusted.iter().find(|k| k.key.verify_ed25519(input.as_bytes(), &signature)) {
                Some(k) if agent.is_some_and(|a| !k.may_sign(a)) => {
                    return (
                        CardReason::CardUntrustedKey.as_str(),
                        format!("key {} is trusted, but not for agent `{}`", sig.kid, agent.unwrap_or_default()),
                    );
                }
                found => found.is_some(),
            }
        }
        agent_card::ES256 => {
            if sig.signature.len() != 64 {
                return malformed("an ES256 signature is 64 bytes (r || s, RFC 7518 §3.4), not DER".into());
            }
            let trusted: Vec<_> = trust.p256.iter().filter(|k| p256_key::jwk_thumbprint(k) == sig.kid).collect();
            if trusted.is_empty() {
                return untrusted();
            }
            trusted.iter().any(|k| p256_key::verify_raw(k, input.as_bytes(), &sig.signature))
        }
        other => {
            return malformed(format!(
                "alg `{other}` is not supported here ({} with Ed25519 keys and {} with P-256 keys are)",
                agent_card::EDDSA,
                agent_card::ES256
            ));
        }
    };
    if verified {
        return ("valid", format!("valid, by trusted key {}", sig.kid));
    }
    (
        CardReason::CardBadSignature.as_str(),
        format!(
            "the signature by {} does not verify over the card's canonical form: the card was changed after signing",
            sig.kid
        ),
    )
}

fn judge_bundle(card: &Value, path: &Path, trust: &CardTrust, verdict: &mut CardVerdict) -> Result<()> {
    let mismatch = |verdict: &mut CardVerdict, message: String| {
        verdict.rejection = Some(CardRejection { reason: CardReason::CardBundleMismatch, message });
    };
    let params = match agent_card::bundle_params(card) {
        None => {
            mismatch(verdict, format!("the card has no {} extension", agent_card::EXTENSION_URI));
            return Ok(());
        }
        Some(Err(e)) => {
            mismatch(verdict, format!("the card's agent-bundle extension cannot be read: {e}"));
            return Ok(());
        }
        Some(Ok(p)) => p,
    };
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut reader = Sha256Read::new(BufReader::with_capacity(1 << 20, file), true);
    let expect = Expect { model_root: trust.model_root.as_deref(), ..Expect::default() };
    let verified = match verify::verify(&mut reader, Trust::Keys(&trust.keys), &expect, &mut Discard) {
        Ok(v) => v,
        Err(e) => {
            let r = e.rejection(path)?;
            mismatch(verdict, format!("the bundle is refused: {} [{}]", r.message, r.reason.as_str()));
            return Ok(());
        }
    };
    let sha256 = hex::encode(reader.finish().map_err(|e| Error::io(path, e))?.expect("hashing"));
    verdict.bundle = Some((verified.manifest.name.clone(), verified.manifest.version.to_string()));
    let agent = release::from_verified(&verified, path).map_err(|e| Error::Usage(e.to_string()))?;
    let mut problems = Vec::new();
    if let Some(card_sha) = &params.bundle_sha256
        && *card_sha != sha256
    {
        problems.push(format!("the bundle's SHA-256 differs (the card names {})", &card_sha[..card_sha.len().min(16)]));
    }
    if params.manifest_blake3 != verified.manifest_blake3.to_hex().as_str() {
        problems.push("the manifest digest differs".to_owned());
    }
    if (params.agent.as_str(), params.version.as_str())
        != (verified.manifest.name.as_str(), &*verified.manifest.version.to_string())
    {
        problems.push(format!("the card is for {} {}", params.agent, params.version));
    }
    let card_tools: Vec<(&str, &str)> = params.tools.iter().map(|t| (t.id.as_str(), t.fingerprint.as_str())).collect();
    let bundle_tools: Vec<(&str, &str)> = agent.contracts.iter().map(|c| (c.id(), c.fingerprint.as_str())).collect();
    if card_tools != bundle_tools {
        problems.push("the tool contract fingerprints differ".to_owned());
    }
    let card_skills: Vec<(&str, &str)> = params.skills.iter().map(|s| (s.name.as_str(), s.digest.as_str())).collect();
    let bundle_skills: Vec<(&str, &str)> = agent.skills.iter().map(|s| (s.name.as_str(), s.digest.as_str())).collect();
    if card_skills != bundle_skills {
        problems.push("the skill digests differ".to_owned());
    }
    if !problems.is_empty() {
        mismatch(verdict, format!("the card does not describe {}: {}", path.display(), problems.join("; ")));
    }
    Ok(())
}
