//! A bundle as a runtime meets it (a file, bytes, or a stream) and the gate's options, then the
//! two ways to judge it: [`Bundle::verify`] (streaming, keeps nothing) and [`Bundle::load`]
//! (keeps every verified entry in memory, so the runtime never reads the bundle again).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::contracts::ContractGate;
use super::error::Error;
use super::keyless::Keyless;
use super::policy::TrustPolicy;
use super::verdict::Verdict;
use crate::archive::{BundleRead, InOrder};
use crate::bundle::verify::{self, Discard, Reason, Rejection, Sink};
use crate::error::ErrorCode;
use crate::evidence::judge::AttestPolicy;
use crate::ops::gate::{self, AttestOptions, Gate, GateError, GateOptions, PolicyOptions};
use crate::ops::input::{BundleInput, Evidence};
use crate::timestamp::Timestamp;

/// What [`Bundle::load`] holds in memory at most unless told otherwise: 1 GiB.
pub use crate::limits::DEFAULT_MAX_LOADED_BYTES;
/// The largest trusted-keys or public key file [`TrustedKeys::read`] reads: the command line's
/// cap for a trusted-keys file.
use crate::limits::MAX_TRUSTED_KEYS_BYTES as MAX_KEYS_FILE;

/// The keys a bundle must be signed by, each possibly limited to some agent names: a minisign
/// public key, or a trusted-keys file (one base64 key per line, then agent-name patterns), as
/// `bundle verify --key` and `--trusted-keys` take them.
#[derive(Debug, Clone)]
pub struct TrustedKeys(crate::trust::TrustedKeys);

impl TrustedKeys {
    /// Parses the text of a minisign public key file or a trusted-keys file.
    pub fn parse(text: &str) -> Result<TrustedKeys, Error> {
        crate::trust::TrustedKeys::parse(text).map(TrustedKeys).map_err(|e| Error::failed(ErrorCode::KeyError, e))
    }

    /// Reads and parses a minisign public key file or a trusted-keys file.
    pub fn read(path: impl AsRef<Path>) -> Result<TrustedKeys, Error> {
        let path = path.as_ref();
        let text = crate::regular_file::read_to_string(path, MAX_KEYS_FILE, crate::regular_file::Links::Follow)
            .map_err(|e| Error::failed(ErrorCode::IoError, format!("{}: {}", path.display(), e.into_io())))?;
        TrustedKeys::parse(&text).map_err(|e| {
            let why = crate::trust::secret_key_given_to_verify(path, &text);
            Error::failed(ErrorCode::KeyError, why.unwrap_or_else(|| format!("{}: {e}", path.display())))
        })
    }

    /// All the keys of `self` and `other`.
    pub fn merge(mut self, other: TrustedKeys) -> TrustedKeys {
        self.0.keys.extend(other.0.keys);
        self
    }
}

/// What the gate requires of a bundle: the same options as `bundle verify`. Built with
/// [`VerifyOptions::new`] (trusted keys) or [`VerifyOptions::with_trust_policy`] and the methods
/// that follow; more may be added in minor releases.
///
/// As with `bundle verify`, attestations beside a bundle file
/// (`<BUNDLE>.provenance.sigstore.json`, `<BUNDLE>.contract.sigstore.json`) are judged when
/// present unless [`VerifyOptions::discover_attestations`] turns that off, and under a trust
/// policy the co-signatures in `<BUNDLE>.cosig` are counted unless others are named. A bundle
/// given as bytes or a stream has no "beside": name those files.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    keys: TrustedKeys,
    policy: Option<TrustPolicy>,
    policy_updates: Vec<TrustPolicy>,
    cosignatures: Vec<PathBuf>,
    name: Option<String>,
    min_version: Option<String>,
    now: Option<SystemTime>,
    state: Option<PathBuf>,
    baseline: Option<PathBuf>,
    attestations: Vec<PathBuf>,
    discover_attestations: bool,
    attest: AttestPolicy,
    keyless: Option<Keyless>,
    models_trusted_root: Option<PathBuf>,
    max_loaded_bytes: u64,
}

impl VerifyOptions {
    /// Requires a signature by one of `keys` (`--key`, `--trusted-keys`); nothing else yet.
    pub fn new(keys: TrustedKeys) -> VerifyOptions {
        VerifyOptions {
            keys,
            policy: None,
            policy_updates: Vec::new(),
            cosignatures: Vec::new(),
            name: None,
            min_version: None,
            now: None,
            state: None,
            baseline: None,
            attestations: Vec::new(),
            discover_attestations: true,
            attest: AttestPolicy::default(),
            keyless: None,
            models_trusted_root: None,
            max_loaded_bytes: DEFAULT_MAX_LOADED_BYTES,
        }
    }

    /// Requires the bundle's signatures (the pack signature and the co-signatures) to meet the
    /// rules of a trust policy (`--trust-policy`): `threshold_not_met`, `policy_untrusted`, ...
    /// otherwise. The verdict's JSON (`signers`) says what became of each signature and each
    /// rule. As with the command line, no other key is trusted, so attestations, which are
    /// judged against trusted keys, are not trusted under a policy.
    pub fn with_trust_policy(policy: TrustPolicy) -> VerifyOptions {
        VerifyOptions { policy: Some(policy), ..VerifyOptions::new(TrustedKeys(Default::default())) }
    }

    /// A newer version of the trust policy to follow (`--policy-update`, repeatable, any order):
    /// each must be signed by a threshold of the previous version's root signers.
    pub fn policy_update(mut self, update: TrustPolicy) -> VerifyOptions {
        self.policy_updates.push(update);
        self
    }

    /// Reads co-signatures from this file instead of `<BUNDLE>.cosig` (`--cosignatures`,
    /// repeatable). Only used with a trust policy.
    pub fn cosignatures(mut self, path: impl Into<PathBuf>) -> VerifyOptions {
        self.cosignatures.push(path.into());
        self
    }

    /// The agent name the bundle must have (`--name`).
    pub fn name(mut self, name: impl Into<String>) -> VerifyOptions {
        self.name = Some(name.into());
        self
    }

    /// The lowest version accepted (`--min-version`); an older bundle is a `rollback`. A version
    /// that is not semver is an `Error` with code `usage` when the bundle is judged.
    pub fn min_version(mut self, version: impl Into<String>) -> VerifyOptions {
        self.min_version = Some(version.into());
        self
    }

    /// The time `[bundle] expires` is judged against; the system clock when not set.
    pub fn now(mut self, now: SystemTime) -> VerifyOptions {
        self.now = Some(now);
        self
    }

    /// The rollback state file (`--state`): locked while a bundle is judged, updated when it
    /// passes. Several processes may share one.
    pub fn state(mut self, path: impl Into<PathBuf>) -> VerifyOptions {
        self.state = Some(path.into());
        self
    }

    /// The approved baseline (`--baseline`): a risky tool whose contract is not the approved
    /// one refuses the bundle (`contract_drift`). A folder holds `<agent name>.toml` files.
    pub fn baseline(mut self, path: impl Into<PathBuf>) -> VerifyOptions {
        self.baseline = Some(path.into());
        self
    }

    /// Judges this attestation (a Sigstore bundle with an in-toto statement, as `pack --attest`
    /// writes them) instead of those found beside the bundle (`--attestation`, repeatable). It
    /// must be signed by a trusted key and be about the bundle file's SHA-256.
    pub fn attestation(mut self, path: impl Into<PathBuf>) -> VerifyOptions {
        self.attestations.push(path.into());
        self
    }

    /// Whether to judge the attestations found beside a bundle file (on unless set off, as
    /// `--no-discover-attestations` does; off anyway when attestations are named).
    pub fn discover_attestations(mut self, discover: bool) -> VerifyOptions {
        self.discover_attestations = discover;
        self
    }

    /// Requires a trusted SLSA provenance attestation about the bundle (`--require-provenance`);
    /// `attestation_missing` otherwise.
    pub fn require_provenance(mut self, required: bool) -> VerifyOptions {
        self.attest.require_provenance = required;
        self
    }

    /// Requires the provenance's source repository to be exactly `uri` (`--source-repo`);
    /// implies [`VerifyOptions::require_provenance`]. `provenance_mismatch` otherwise.
    pub fn source_repo(mut self, uri: impl Into<String>) -> VerifyOptions {
        self.attest.source_repo = Some(uri.into());
        self
    }

    /// Requires the provenance's source ref to be exactly `reference` (`--source-ref`, e.g.
    /// `refs/heads/main`); implies [`VerifyOptions::require_provenance`].
    pub fn source_ref(mut self, reference: impl Into<String>) -> VerifyOptions {
        self.attest.source_ref = Some(reference.into());
        self
    }

    /// Requires the provenance's `runDetails.builder.id` to be exactly `id` (`--builder-id`);
    /// implies [`VerifyOptions::require_provenance`].
    pub fn builder_id(mut self, id: impl Into<String>) -> VerifyOptions {
        self.attest.builder_id = Some(id.into());
        self
    }

    /// Also requires a keyless (Sigstore) signature over the bundle file (`--sigstore` and the
    /// identity options), judged offline; the verdict's JSON names the signer (`keyless`).
    pub fn keyless(mut self, keyless: Keyless) -> VerifyOptions {
        self.keyless = Some(keyless);
        self
    }

    /// The Sigstore trusted_root.json the identities of the bundle's vendor-signed models
    /// (manifest.toml `[[models]]`) are judged against (`--trusted-root`); never downloaded.
    /// Without it such a model is refused (`model_trusted_root_missing`). A trust policy
    /// names its own root: with one, giving this too is a usage error (as the command line's
    /// `--trust-policy` with `--trusted-root`).
    pub fn models_trusted_root(mut self, path: impl Into<PathBuf>) -> VerifyOptions {
        self.models_trusted_root = Some(path.into());
        self
    }

    /// The most [`Bundle::load`] holds in memory (the bundle's unpacked size); a larger bundle
    /// is refused with `limit_exceeded`. For a [`Bundle::open_lazy`] bundle, the most one
    /// [`LazyBundle::read`](super::LazyBundle::read) holds (one file's size).
    /// [`DEFAULT_MAX_LOADED_BYTES`] unless set.
    pub fn max_loaded_bytes(mut self, bytes: u64) -> VerifyOptions {
        self.max_loaded_bytes = bytes;
        self
    }

    /// The first option set that only a pass over every byte of the bundle at `origin` can
    /// judge, named as [`VerifyOptions`] names it.
    pub(super) fn needs_every_byte(&self, origin: &Path) -> Option<&'static str> {
        let discovered = self.discover_attestations && !crate::evidence::files::discover(origin).is_empty();
        [
            (self.policy.is_some(), "a trust policy"),
            (!self.policy_updates.is_empty(), "policy updates"),
            (!self.cosignatures.is_empty(), "co-signatures"),
            (self.state.is_some(), "a state file (state)"),
            (self.baseline.is_some(), "a baseline"),
            (!self.attestations.is_empty(), "attestations"),
            (
                self.attest.needs_provenance(),
                "provenance requirements (require_provenance, source_repo, source_ref, builder_id)",
            ),
            (
                discovered,
                "the attestations found beside the bundle (discover_attestations off opens it without judging them)",
            ),
            (self.keyless.is_some(), "a keyless signer"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }

    /// The most one read of [`super::LazyBundle::read`] (or [`Bundle::load`]) holds in memory.
    pub(super) fn max_loaded(&self) -> u64 {
        self.max_loaded_bytes
    }

    pub(super) fn gate_options(&self) -> Result<GateOptions, Error> {
        let min_version = self
            .min_version
            .as_deref()
            .map(|v| {
                semver::Version::parse(v).map_err(|e| {
                    Error::failed(ErrorCode::Usage, format!("min_version `{v}` is not a semver version: {e}"))
                })
            })
            .transpose()?;
        if self.policy.is_some() && self.models_trusted_root.is_some() {
            // As `--trust-policy` with `--trusted-root`: the policy pins the root its models'
            // identities are judged by, and a second root would be silently unused.
            return Err(Error::failed(
                ErrorCode::Usage,
                "a trust policy names the trusted root the models' identities are judged by: drop models_trusted_root",
            ));
        }
        Ok(GateOptions {
            keys: self.keys.0.clone(),
            name: self.name.clone(),
            min_version,
            now: self.now.map_or_else(Timestamp::now, timestamp),
            state: self.state.clone(),
            baseline: self.baseline.clone(),
            attest: AttestOptions {
                files: self.attestations.clone(),
                discover: self.discover_attestations,
                policy: self.attest.clone(),
            },
            policy: self.policy.as_ref().map(|p| PolicyOptions {
                pin: p.0.clone(),
                updates: self.policy_updates.iter().map(|u| u.0.clone()).collect(),
                cosignatures: self.cosignatures.clone(),
                require_threshold: true,
                // The policy's keyless signatures: `<bundle>.sigstore.json` beside a file.
                sigstore: Vec::new(),
            }),
            keyless: self.keyless.as_ref().map(Keyless::requirement).transpose()?,
            model_root: self
                .models_trusted_root
                .as_deref()
                .map(crate::keyless::TrustedRoot::read)
                .transpose()
                .map_err(|e| Error::coded(&e))?
                .map(Arc::new),
        })
    }
}

/// The time `seconds` after the Unix epoch (before it when negative), for a clock given as a
/// number ([`VerifyOptions::now`] from Python's `now=`); `None` when it is not finite or no
/// `SystemTime` can hold it. Never panics, whatever the number.
pub fn time_from_unix_seconds(seconds: f64) -> Option<SystemTime> {
    let span = Duration::try_from_secs_f64(seconds.abs()).ok()?;
    if seconds >= 0.0 { UNIX_EPOCH.checked_add(span) } else { UNIX_EPOCH.checked_sub(span) }
}

fn timestamp(t: SystemTime) -> Timestamp {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timestamp::from_unix(d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => Timestamp::from_unix(-(e.duration().as_secs_f64().ceil() as i64), 0),
    }
}

pub(super) enum Source {
    File(File),
    Bytes(Arc<[u8]>),
    Reader(Box<dyn Read + Send>),
}

/// A bundle to judge: a file, bytes, or a stream. It is read once, front to back, by whichever
/// of [`Bundle::verify`] or [`Bundle::load`] consumes it.
pub struct Bundle {
    pub(super) source: Source,
    pub(super) origin: PathBuf,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle").field("origin", &self.origin).finish_non_exhaustive()
    }
}

impl Bundle {
    /// Opens a bundle file now (so a missing file is an error here, code `io_error`); it is read
    /// when judged.
    pub fn open(path: impl AsRef<Path>) -> Result<Bundle, Error> {
        let path = path.as_ref();
        let file = File::open(path)
            .map_err(|e| Error::failed(ErrorCode::IoError, format!("cannot open {}: {e}", path.display())))?;
        Ok(Bundle { source: Source::File(file), origin: path.to_path_buf() })
    }

    /// A bundle held in memory.
    pub fn from_bytes(bytes: impl Into<Arc<[u8]>>) -> Bundle {
        Bundle { source: Source::Bytes(bytes.into()), origin: PathBuf::from("<bytes>") }
    }

    /// A bundle read from a stream (a download, a pipe).
    pub fn from_reader(reader: impl Read + Send + 'static) -> Bundle {
        Bundle { source: Source::Reader(Box::new(reader)), origin: PathBuf::from("<stream>") }
    }

    /// Names the bundle in messages (a registry reference, say) instead of its path.
    pub fn with_origin(mut self, origin: impl Into<PathBuf>) -> Bundle {
        self.origin = origin.into();
        self
    }

    /// Judges the bundle in one streaming pass, keeping none of its content: the same gate, the
    /// same codes as `bundle verify`. A refusal is an `Ok` verdict; `Err` means no judgement
    /// could be made (an unreadable baseline, a malformed state file, ...).
    pub fn verify(self, options: &VerifyOptions) -> Result<Verdict, Error> {
        let gate = Gate::open(options.gate_options()?).map_err(Error::from_gate)?;
        let verdict = self.run(gate, &mut Discard)?.map_err(Error::from_gate)?;
        Ok(Verdict::from_gate(&verdict))
    }

    /// Judges the bundle and, when it passes, keeps every entry as it was verified: the
    /// returned agent serves files from those bytes only, never from the bundle's path. A
    /// refusal is [`Error::Refused`].
    pub fn load(self, options: &VerifyOptions) -> Result<VerifiedAgent, Error> {
        let gate = Gate::open(options.gate_options()?).map_err(Error::from_gate)?;
        let mut sink = MemorySink { entries: Vec::new(), held: 0, cap: options.max_loaded_bytes, over: false };
        let verdict = match self.run(gate, &mut sink)? {
            // The sink refused to hold more: the loader's limit, not a failure to write.
            Err(GateError::Verify(failed)) if sink.over => {
                let message = format!(
                    "the bundle holds more than {} bytes, the most this loader keeps in memory (max_loaded_bytes)",
                    sink.cap
                );
                let path = failed.entry.as_deref();
                gate::Verdict::refused(failed.refused_as(Rejection::new(Reason::LimitExceeded, path, message)))
            }
            judged => judged.map_err(Error::from_gate)?,
        };
        let api_verdict = Verdict::from_gate(&verdict);
        let gate::Verdict::Passed { .. } = verdict else { return Err(Error::Refused(Box::new(api_verdict))) };
        let mut index = HashMap::with_capacity(sink.entries.len());
        for (i, (path, _, _)) in sink.entries.iter().enumerate() {
            index.insert(path.clone(), i);
        }
        Ok(VerifiedAgent { verdict: api_verdict, entries: sink.entries, index })
    }

    /// The gate's verdict; `Err` outside: the bundle could not be opened or its evidence read.
    fn run(self, gate: Gate, sink: &mut dyn Sink) -> Result<Result<gate::Verdict, GateError>, Error> {
        let origin = self.origin;
        // The evidence beside a file of the origin's name, as `bundle verify` gathers it.
        let beside = Some(origin.as_path()).filter(|p| p.is_file());
        let evidence = Evidence::gather(beside, &gate.wanted()).map_err(|e| Error::from_gate(e.into()))?;
        let reader: Box<dyn BundleRead> = match self.source {
            // As `bundle verify` reads.
            Source::File(file) => match crate::archive::FileAt::of_bundle(file) {
                Ok(by_position) => Box::new(by_position),
                Err((file, size)) => Box::new(InOrder(crate::read_ahead::sequential(file, size).map_err(|e| {
                    Error::failed(ErrorCode::IoError, format!("cannot read {}: {e}", origin.display()))
                })?)),
            },
            Source::Bytes(bytes) => Box::new(InOrder(std::io::Cursor::new(bytes))),
            Source::Reader(reader) => Box::new(InOrder(BufReader::with_capacity(1 << 20, reader))),
        };
        Ok(gate.judge(BundleInput::from_bundle_read(reader, &origin, evidence), sink))
    }
}

/// Keeps every entry in memory, up to a cap.
struct MemorySink {
    entries: Vec<(String, bool, Vec<u8>)>,
    held: u64,
    cap: u64,
    over: bool,
}

impl Sink for MemorySink {
    fn open(&mut self, path: &str, executable: bool) -> io::Result<Box<dyn Write + '_>> {
        self.entries.push((path.to_owned(), executable, Vec::new()));
        let MemorySink { entries, held, cap, over } = self;
        let buf = &mut entries.last_mut().expect("just pushed").2;
        Ok(Box::new(Capped { buf, held, cap: *cap, over }))
    }
}

struct Capped<'a> {
    buf: &'a mut Vec<u8>,
    held: &'a mut u64,
    cap: u64,
    over: &'a mut bool,
}

impl Write for Capped<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let after = *self.held + data.len() as u64;
        if after > self.cap {
            *self.over = true;
            return Err(io::Error::other("over max_loaded_bytes"));
        }
        *self.held = after;
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One file of a verified bundle, as its signed manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifiedFile {
    /// The path inside the bundle (`/`-separated, relative).
    pub path: String,
    /// The size in bytes.
    pub size: u64,
    /// The BLAKE3 digest, 64 lowercase hex digits.
    pub blake3: String,
    /// Whether the file is executable (mode 0755).
    pub executable: bool,
}

impl VerifiedFile {
    pub(crate) fn from_inner(f: &verify::VerifiedFile) -> VerifiedFile {
        VerifiedFile { path: f.path.clone(), size: f.size, blake3: f.blake3.clone(), executable: f.executable }
    }
}

/// A bundle that passed the gate, with every entry held as it was verified.
#[derive(Debug, Clone)]
pub struct VerifiedAgent {
    verdict: Verdict,
    entries: Vec<(String, bool, Vec<u8>)>,
    index: HashMap<String, usize>,
}

impl VerifiedAgent {
    /// The verdict (it passed): agent, signer, tools, warnings.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// The verified bytes of the entry at `path` (a file the manifest lists, or
    /// `manifest.toml` and `manifest.toml.minisig` themselves); `None` when there is none.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.index.get(path).map(|&i| &self.entries[i].2[..])
    }

    /// Every entry in bundle order: its path, whether it is executable, its verified bytes.
    pub fn entries(&self) -> impl Iterator<Item = (&str, bool, &[u8])> {
        self.entries.iter().map(|(p, x, b)| (p.as_str(), *x, &b[..]))
    }

    /// A gate for the tools the runtime is about to expose, against the contracts this bundle
    /// signed.
    /// `schema:` references in the live definitions resolve in this bundle's verified files.
    pub fn contract_gate(&self) -> ContractGate {
        ContractGate::from_verdict(&self.verdict).resolving_in(self)
    }
}
