//! The gate's judgement of a bundle's evidence ([`crate::ops::input::Evidence`]), in the order
//! trust is earned: each piece is read as what it claims to be (co-signature lists parsed,
//! keyless signatures verified over the digest they name), what can be judged before the
//! bundle's bytes is judged then (a registry's co-signatures against the policy's rules, its
//! attestations against the layer's digest), and after the pass each offer is bound to the
//! file's SHA-256 and counted.

use std::path::Path;

use super::{Gate, GateError, Verdict};
use crate::bundle::verify::{self, Refused, Rejection, Verified};
use crate::contract::release;
use crate::evidence::files::Kind;
use crate::evidence::judge::{self, AttestPolicy, Attestation};
use crate::keyless::KeylessSigner;
use crate::minisign::Signature;
use crate::oci::referrers::Listed;
use crate::ops::input::{BundleInput, Evidence, Piece};
use crate::rejection::Reason;
use crate::trust_policy::{FileDigest, KeylessOffer, bound, signatures};

/// The evidence read as what it claims to be, ready for the streaming pass.
#[derive(Debug)]
pub(super) struct Gathered {
    pub cosignatures: Vec<Signature>,
    /// Where each of `cosignatures` came from (same order).
    pub cosignature_origins: Vec<super::verdict::CosignatureOrigin>,
    pub offers: Vec<KeylessOffer>,
    /// Attestations not yet judged (a file's: its SHA-256 is known only after the pass).
    pub attestations: Vec<(String, Vec<u8>)>,
    /// Attestations judged before the bytes, against the digest a registry binds them to.
    pub judged: Option<Vec<Attestation>>,
    /// The SHA-256 the bytes are bound to before they are read (a registry layer's).
    pub sha256: Option<[u8; 32]>,
    /// Of a registry's attestation referrers, the first the gate accepted of each kind (what a
    /// pull keeps beside its file); the others' bytes were dropped once judged.
    pub kept: Vec<Piece>,
    /// The refusal of a registry's attestations as untrusted, judged before the layer, given
    /// once the bundle's signature has been judged (a wrong key is named as such, as for a file).
    pub refused: Option<Verdict>,
}

impl Gathered {
    /// Whether attestations are judged: some were found, or the policy requires provenance.
    pub fn attesting(&self, policy: &AttestPolicy) -> bool {
        self.judged.is_some() || !self.attestations.is_empty() || policy.needs_provenance()
    }
}

/// The attestations judged before the bytes, and the bytes of the first accepted of each kind.
type AttestationReferrers = (Vec<Attestation>, Vec<Piece>);

/// Judges a registry's attestation referrers one at a time against the layer's digest, and
/// the named files beside them, keeping of each only its verdict (and of the first accepted
/// of each kind its bytes, for a pull to keep).
fn judge_referred(
    gate: &Gate,
    input: &mut BundleInput<'_>,
    named: &[(String, Vec<u8>)],
    referred: &[Listed],
    sha256: &str,
) -> Result<Result<AttestationReferrers, Verdict>, GateError> {
    let (keys, policy) = (&gate.attest_keys, &gate.opts.attest.policy);
    let mut judged: Vec<Attestation> =
        named.iter().map(|(s, b)| judge::judge_one(s, b, sha256, keys, policy)).collect();
    let mut kept: Vec<(Option<Kind>, Piece)> = Vec::new();
    for listed in referred {
        let piece = match input.fetch_referred(listed)? {
            Ok(piece) => piece,
            Err(rejection) => {
                return Ok(Err(Verdict::Refused { rejection, baseline: None, signers: None, attestations: judged }));
            }
        };
        let one = judge::judge_one(&piece.source, &piece.bytes, sha256, keys, policy);
        if one.is_ok() && one.kind().is_some() && !kept.iter().any(|(k, _)| *k == one.kind()) {
            kept.push((one.kind(), piece));
        }
        judged.push(one);
    }
    if let Some(rejection) = judge::conclude(&judged, policy) {
        return Ok(Err(Verdict::Refused { rejection, baseline: None, signers: None, attestations: judged }));
    }
    Ok(Ok((judged, kept.into_iter().map(|(_, p)| p).collect())))
}

impl Gate {
    /// Reads `evidence` as what each piece claims to be, and judges what can be judged before
    /// the bundle's bytes: `Err` is the refusal (a registry's layer is then never requested).
    pub(super) fn gather(
        &self,
        evidence: Evidence,
        input: &mut BundleInput<'_>,
    ) -> Result<Result<Gathered, Verdict>, GateError> {
        let Evidence { cosignatures, keyless, keyless_named, attestations, referred, sha256, config } = evidence;
        let (cosignatures, cosignature_origins) = match parse_cosignatures(&cosignatures) {
            Ok(c) => c,
            Err(rejection) => return Ok(Err(Verdict::refused(rejection))),
        };
        // No version of the policy can be followed: nothing is trusted.
        if let Some(Err(e)) = &self.policy {
            return Ok(Err(Verdict::refused(super::chain_rejection(e))));
        }
        if let (Some(policy), Some(config)) = (self.followed(), &config)
            && let Some(agent) = &config.name
            && self.enforce()
            && let Some((refusal, message)) = bound::shortfall(
                policy,
                bound::Claimed {
                    agent,
                    version: config.version.as_deref(),
                    pack_key_id: config.key_id.as_deref(),
                    keyless: keyless_named,
                },
                &cosignatures,
                self.opts.now,
            )
        {
            let mut r = Rejection::new(verify::reason_of(refusal), None, message);
            r.agent = Some((agent.clone(), config.version.clone().unwrap_or_default()));
            return Ok(Err(Verdict::refused(r)));
        }
        let attestations: Vec<(String, Vec<u8>)> = attestations.into_iter().map(|p| (p.source, p.bytes)).collect();
        let mut gathered = Gathered {
            cosignatures,
            cosignature_origins,
            offers: Vec::new(),
            attestations,
            judged: None,
            sha256,
            kept: Vec::new(),
            refused: None,
        };
        // Bound before the bytes: a registry's attestations are judged against its layer digest
        // now, one at a time, so that a refusal stops the layer from moving.
        if let Some(sha256) = &sha256
            && (gathered.attesting(&self.opts.attest.policy) || !referred.is_empty())
        {
            let named = std::mem::take(&mut gathered.attestations);
            match judge_referred(self, input, &named, &referred, &hex::encode(sha256))? {
                Ok((judged, kept)) => {
                    gathered.judged = Some(judged);
                    gathered.kept = kept;
                }
                // Attestations signed by a key not trusted may mean the wrong key was given for
                // the whole release: the layer is then requested only as far as its signature,
                // so that a wrong key is named as such (`untrusted_key`, as for a file), and the
                // attestations' refusal stops the stream right after it. Every other refusal
                // (missing, malformed, the wrong builder) stops the layer from moving at all.
                Err(refused) if refused.rejection().is_some_and(|r| r.reason == Reason::AttestationUntrusted) => {
                    gathered.refused = Some(refused)
                }
                Err(refused) => return Ok(Err(refused)),
            }
        }
        gathered.offers = match self.keyless_offers(keyless, keyless_named)? {
            Ok(offers) => offers,
            Err(rejection) => return Ok(Err(Verdict::refused(rejection))),
        };
        Ok(Ok(gathered))
    }

    /// The keyless signatures offered to the trust policy's identity signers, each verified over
    /// the digest it names under the policy's trusted root; one that does not verify is an offer
    /// that will not count. Named (`--sigstore`) under a policy that names no trusted root: a
    /// usage error; found beside the bundle: nothing could count, so they are not offered.
    fn keyless_offers(
        &self,
        bundles: Vec<crate::keyless::SigstoreBundle>,
        named: bool,
    ) -> Result<Result<Vec<KeylessOffer>, Rejection>, GateError> {
        let Some(policy) = self.followed() else { return Ok(Ok(Vec::new())) };
        if bundles.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let Some(root) = &policy.trusted_root else {
            if !named {
                return Ok(Ok(Vec::new()));
            }
            return Err(crate::Error::Usage(format!(
                "--sigstore: trust policy `{}` version {} names no trusted root and no certificate-identity signer; add them ([sigstore], `bundle trust import-root`) or drop --sigstore",
                policy.id, policy.version
            ))
            .into());
        };
        let offers = bundles
            .iter()
            .map(|bundle| KeylessOffer {
                source: bundle.file.clone(),
                result: crate::keyless::verify_claimed(root, bundle),
            })
            .collect();
        Ok(Ok(offers))
    }

    /// Once the file is read: the signatures whose binding waited for the file's SHA-256
    /// ([`Verified::unbound`]) are bound to it (a keyless signature over another file is
    /// dropped) and counted again; refused when the rules are no longer met and enforced.
    pub(super) fn bind_keyless(&self, v: &mut Verified, sha256: Option<&[u8; 32]>) -> Result<(), Verdict> {
        let (Some(policy), Some(sha256), Some(auth)) = (self.followed(), sha256, v.unbound.take()) else {
            return Ok(());
        };
        let bound = auth.bind(FileDigest::Known(sha256));
        let signers = verify::count_for(policy, &bound, &v.manifest, self.opts.now);
        // Even unenforced (`bundle cosign`), the manifest was believed on a signature that must
        // still stand.
        let enforce = self.enforce() || !bound.any_verified();
        let refusal = signers.refusal().filter(|_| enforce);
        let Some((refusal, message)) = refusal else {
            v.signers = Some(signers);
            return Ok(());
        };
        let Refused { mut rejection, signers } = verify::policy_rejection(refusal, message, signers);
        rejection.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
        rejection.key_id = Some(v.key_id.clone());
        Err(Verdict::Refused { rejection, baseline: None, signers, attestations: Vec::new() })
    }

    /// Both steps of the attestation judgement on a verified bundle whose file has `sha256`:
    /// against the digest (unless a registry's were judged before the bytes), then against
    /// the bundle (key scopes for its agent, the contract against its own tools).
    pub(super) fn judge_attestations(
        &self,
        v: &Verified,
        origin: &Path,
        sha256: Option<&[u8; 32]>,
        gathered: Gathered,
    ) -> Result<Vec<Attestation>, Verdict> {
        let attesting = gathered.attesting(&self.opts.attest.policy);
        let Some(sha256) = sha256.filter(|_| attesting) else { return Ok(Vec::new()) };
        let (mut judged, early) = match gathered.judged {
            Some(judged) => (judged, None),
            None => {
                judge::judge(&gathered.attestations, &hex::encode(sha256), &self.attest_keys, &self.opts.attest.policy)
            }
        };
        let refuse = |mut r: Rejection, judged: Vec<Attestation>| {
            r.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            r.key_id = Some(v.key_id.clone());
            Verdict::Refused { rejection: r, baseline: None, signers: None, attestations: judged }
        };
        if let Some(r) = early {
            return Err(refuse(r, judged));
        }
        let contracts = release::from_verified(v, origin).map_err(|e| e.to_string());
        let expected = contracts.map(|c| crate::evidence::contract::predicate(&c, &v.manifest_blake3));
        match judge::judge_with_bundle(
            &mut judged,
            &v.manifest.name,
            &self.attest_keys,
            expected.as_ref().map_err(Clone::clone),
        ) {
            Some(r) => Err(refuse(r, judged)),
            None => Ok(judged),
        }
    }

    /// With `--sigstore`: the keyless signature over the whole file, whose SHA-256 the gate
    /// computed while verifying it.
    pub(super) fn judge_keyless(
        &self,
        sha256: Option<[u8; 32]>,
        v: &Verified,
    ) -> Result<Option<KeylessSigner>, Rejection> {
        let (Some(required), Some(sha256)) = (&self.opts.keyless, sha256) else { return Ok(None) };
        required.judge(sha256).map(Some).map_err(|mut r| {
            r.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            r.key_id = Some(v.key_id.clone());
            r
        })
    }
}

/// Each co-signature list parsed, with where each signature came from; one that is over the
/// cap or not a list of minisign signatures refuses the bundle.
fn parse_cosignatures(pieces: &[Piece]) -> Result<(Vec<Signature>, Vec<super::verdict::CosignatureOrigin>), Rejection> {
    use sha2::Digest as _;
    let mut all = Vec::new();
    let mut origins = Vec::new();
    for piece in pieces {
        let shown = &piece.source;
        if piece.bytes.len() as u64 > signatures::MAX_SIGNATURES_BYTES {
            return Err(Rejection::new(
                Reason::LimitExceeded,
                Some(shown),
                format!("{shown}: more than {} bytes of co-signatures", signatures::MAX_SIGNATURES_BYTES),
            ));
        }
        let text = String::from_utf8_lossy(&piece.bytes);
        let found = signatures::parse(&text)
            .map_err(|why| Rejection::new(Reason::BadSignature, Some(shown), format!("{shown}: {why}")))?;
        let origin = super::verdict::CosignatureOrigin {
            source: piece.source.clone(),
            sha256: hex::encode(sha2::Sha256::digest(&piece.bytes)),
        };
        origins.extend(std::iter::repeat_n(origin, found.len()));
        all.extend(found);
    }
    Ok((all, origins))
}
