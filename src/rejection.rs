//! Why a bundle is rejected: the stable reason codes every consumer of the verifier reports
//! (`bundle verify --format json` prints them as `code`), and the rejection that carries one.
//!
//! The vocabulary of verdicts sits below everything that judges (the verifier, the trust
//! policy, keyless signers, attestations, baselines), so that each of them can say why it
//! refuses without naming the others; what a judge learned besides the reason (each
//! signature's fate, each attestation's verdict) travels beside a rejection, in the types of
//! the layer that learned it.

use crate::archive::ArchiveError;

crate::codes::stable_codes! {
    /// Why a bundle was rejected. The string forms are stable.
    pub enum Reason;
    MissingSignature => "missing_signature": "The second entry is not manifest.toml.minisig.",
    BadSignature => "bad_signature": "The signature or its trusted comment does not verify with the trusted key, or is malformed.",
    UntrustedKey => "untrusted_key": "The signing key is not trusted, or not trusted for this agent name.",
    NameMismatch => "name_mismatch": "The trusted comment names another agent or version than the manifest (or than --name).",
    UnsupportedVersion => "unsupported_version": "The bundle format or tools.json version is not one this bundle supports.",
    MalformedManifest => "malformed_manifest": "manifest.toml is missing, not entry 1, or breaks the manifest rules.",
    DigestMismatch => "digest_mismatch": "An entry's BLAKE3 digest differs from the manifest's.",
    SizeMismatch => "size_mismatch": "An entry's size differs from the manifest's.",
    ModeMismatch => "mode_mismatch": "An entry's executable bit differs from the manifest's.",
    MissingEntry => "missing_entry": "A file the manifest lists is not in the bundle.",
    UnlistedEntry => "unlisted_entry": "An entry the manifest does not list.",
    DuplicateEntry => "duplicate_entry": "The same path twice in the bundle.",
    UnsafePath => "unsafe_path": "An entry path that is absolute, escapes with `..`, or breaks the path rules.",
    UnsafeMode => "unsafe_mode": "An entry mode other than 0644 or 0755 (setuid, setgid, sticky, group/world-writable).",
    UnsupportedEntryType => "unsupported_entry_type": "A link, directory, device, fifo, or PAX/GNU extension entry.",
    MalformedArchive => "malformed_archive": "Not checksummed zstd frames holding a well-formed ustar archive in canonical order.",
    TrailingData => "trailing_data": "Bytes after the tar end marker, or after the zstd frames and their seek table.",
    SeekTableMismatch => "seek_table_mismatch": "The seek table after the zstd frames is malformed or disagrees with the frames (their number or sizes); the frames are what is read.",
    LimitExceeded => "limit_exceeded": "A size, count or compression window beyond the limits.",
    Expired => "expired": "The signed manifest's `[bundle] expires` is past: a stale bundle offered again (freeze).",
    Rollback => "rollback": "Older than a version already accepted (--state, --min-version), or another bundle of an accepted version.",
    InvalidTools => "invalid_tools": "tools.json in the bundle breaks the tools.json rules.",
    ContractDrift => "contract_drift": "With --baseline: a write-capable, network, secret-using or destructive tool (or one whose http host moved) differs from its approved contract, or is new.",
    UnsupportedArtifact => "unsupported_artifact": "From a registry: the manifest is not a bundle artifact (another type, not exactly one layer, another layer media type).",
    BlobMismatch => "blob_mismatch": "From a registry: a layer or manifest whose bytes are not the ones its sha256 digest and size name.",
    AttestationMissing => "attestation_missing": "An attestation the gate requires (--require-provenance, or a source or builder flag) is not there.",
    AttestationMalformed => "attestation_malformed": "An attestation is not a Sigstore bundle v0.3 holding a DSSE envelope with an in-toto Statement v1, or is over the size or nesting caps.",
    AttestationPayloadType => "attestation_payload_type": "An attestation's DSSE payload type is not application/vnd.in-toto+json.",
    AttestationPredicateType => "attestation_predicate_type": "An attestation's predicate type is not SLSA Provenance v1 or the agent contract.",
    AttestationUnsigned => "attestation_unsigned": "An attestation has no signature that verifies (none, or tampered).",
    AttestationUntrusted => "attestation_untrusted": "An attestation is signed only by keys that are not trusted (for this agent).",
    AttestationSubjectMismatch => "attestation_subject_mismatch": "An attestation is about another file: no subject has the bundle's SHA-256.",
    AttestationContractMismatch => "attestation_contract_mismatch": "The agent-contract attestation says something other than the bundle's signed tools.json and policy.caps.",
    ProvenanceMismatch => "provenance_mismatch": "The provenance's source repository, ref or builder is not the one --source-repo, --source-ref or --builder-id requires.",
    ThresholdNotMet => "threshold_not_met": "With --trust-policy: fewer distinct counted keys (or keys of a required role) than a rule for the agent needs.",
    RevokedKey => "revoked_key": "With --trust-policy: a rule is not met, and a signature did not count because its key is revoked.",
    KeyOutsideWindow => "key_outside_window": "With --trust-policy: a rule is not met, and a signature did not count because its key is outside its not_before/not_after window.",
    NoPolicyRule => "no_policy_rule": "With --trust-policy: no rule of the policy applies to the agent, so no signer may release it.",
    PolicyUntrusted => "policy_untrusted": "A trust policy version is signed by fewer of its own root signers, or of the previous version's, than their threshold.",
    PolicyRollback => "policy_rollback": "The trust policy followed is older than a version followed before (--state): a replayed policy.",
    PolicyExpired => "policy_expired": "The newest trust policy version given has expired.",
    PolicyChainBroken => "policy_chain_broken": "The trust policy versions given do not follow one another (a gap, a repeat, another policy id).",
    KeylessMalformed => "keyless_malformed": "With --sigstore: the Sigstore bundle is not valid JSON or breaks the Sigstore bundle format.",
    KeylessUnsupportedVersion => "keyless_unsupported_version": "With --sigstore: a Sigstore bundle media type (version) other than v0.1, v0.2 or v0.3, or content this verifier cannot check.",
    KeylessUntrustedChain => "keyless_untrusted_chain": "With --sigstore: the signing certificate does not chain to a Fulcio CA of the trusted root valid at the signing time, lacks code signing, or was not valid then.",
    KeylessSctInvalid => "keyless_sct_invalid": "With --sigstore: the certificate's embedded SCT is missing or does not verify with a CT log key of the trusted root.",
    KeylessLogEntryMissing => "keyless_log_entry_missing": "With --sigstore: the Sigstore bundle has no transparency-log entry.",
    KeylessLogEntryInvalid => "keyless_log_entry_invalid": "With --sigstore: the transparency-log entry's inclusion proof, checkpoint or signed entry timestamp is missing or does not verify with a Rekor key of the trusted root, or the entry does not describe this signature (CVE-2022-36056).",
    KeylessTimestampInvalid => "keyless_timestamp_invalid": "With --sigstore: no trusted signing time (neither a signed entry timestamp nor an RFC 3161 timestamp that verifies with a TSA of the trusted root).",
    KeylessIdentityMismatch => "keyless_identity_mismatch": "With --sigstore: the certificate's identity, OIDC issuer or workflow claims are not the ones required.",
    KeylessSignatureInvalid => "keyless_signature_invalid": "With --sigstore: the signature does not verify with the certificate's key.",
    KeylessSubjectMismatch => "keyless_subject_mismatch": "With --sigstore: the Sigstore bundle signs another file (message digest or in-toto subject is not the bundle's sha256).",
    ModelSignatureMissing => "model_signature_missing": "A model folder named in manifest.toml `[[models]]` has no signature file (`model.sig`, or the `signature` given).",
    ModelSignatureMalformed => "model_signature_malformed": "A model signature is not an OpenSSF model signature v1.0 (a Sigstore bundle v0.3 with a DSSE envelope, `files` or `shards` serialization with SHA-256, no links), is over its caps, repeats a key, or is not serialized the way its `[[models]]` entry says (`shard_size`).",
    ModelKeyInvalid => "model_key_invalid": "The public key a `[[models]]` entry names is missing or not a P-256 public key in PEM.",
    ModelTrustedRootMissing => "model_trusted_root_missing": "A `[[models]]` entry names a Sigstore identity, and no trusted root was given to judge it by (`--trusted-root`, or a trust policy's `[sigstore] trusted_root`): the signature cannot be checked, so it is refused.",
    ModelSignatureWrongKey => "model_signature_wrong_key": "A model signature's key hint names another key than the one its `[[models]]` entry names.",
    ModelSignatureWrongIdentity => "model_signature_wrong_identity": "A Sigstore model signature verified, but its certificate's identity or OIDC issuer is not the one its `[[models]]` entry names.",
    ModelSignatureInvalid => "model_signature_invalid": "No signature of a model signature verifies with the key its `[[models]]` entry names (tampered, or another key); or, for a Sigstore identity, the signature, certificate chain, SCT, transparency-log entry or signing time does not verify under the trusted root (the message names the `keyless_*` reason).",
    ModelMismatch => "model_mismatch": "A model folder's files are not the ones its vendor signed: a SHA-256 differs, a signed file is missing, or a file is not signed.",
}

/// A rejected bundle: the reason code, the entry concerned, and a message.
#[derive(Debug, Clone)]
pub struct Rejection {
    pub reason: Reason,
    pub path: Option<String>,
    pub message: String,
    /// The agent and signer, when known at the time of rejection.
    pub agent: Option<(String, String)>,
    pub key_id: Option<String>,
}

impl Rejection {
    pub fn new(reason: Reason, path: Option<&str>, message: impl Into<String>) -> Self {
        Rejection { reason, path: path.map(str::to_owned), message: message.into(), agent: None, key_id: None }
    }

    /// Whether `other` is this rejection, whatever agent and key were learnt since.
    pub fn same_as(&self, other: &Rejection) -> bool {
        (self.reason, &self.path, &self.message) == (other.reason, &other.path, &other.message)
    }
}

/// An archive the reader refused is a rejection; an I/O error under the reader is not (it is no
/// verdict on the bundle) and is given back as the entry it happened at and its cause.
impl TryFrom<ArchiveError> for Rejection {
    type Error = (Option<String>, std::io::Error);

    fn try_from(e: ArchiveError) -> Result<Self, Self::Error> {
        let e = match e {
            ArchiveError::Io { path, source } => return Err((path, source)),
            e => e,
        };
        let reason = match e.code() {
            "unsupported_entry_type" => Reason::UnsupportedEntryType,
            "unsafe_path" => Reason::UnsafePath,
            "unsafe_mode" => Reason::UnsafeMode,
            "limit_exceeded" => Reason::LimitExceeded,
            "trailing_data" => Reason::TrailingData,
            "seek_table_mismatch" => Reason::SeekTableMismatch,
            _ => Reason::MalformedArchive,
        };
        let path = match &e {
            ArchiveError::UnsupportedEntryType { path, .. }
            | ArchiveError::UnsafePath { path, .. }
            | ArchiveError::UnsafeMode { path, .. } => Some(path.clone()),
            ArchiveError::Malformed { path, .. } | ArchiveError::LimitExceeded { path, .. } => path.clone(),
            _ => None,
        };
        Ok(Rejection { reason, path, message: e.to_string(), agent: None, key_id: None })
    }
}
