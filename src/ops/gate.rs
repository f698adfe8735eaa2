//! The deployment gate: everything `bundle verify` judges before a bundle may be deployed, as
//! one operation that `verify`, `unpack` and any later consumer (a registry pull) share, so
//! that none of them can skip a check the others make.
//!
//! In order: the baseline file is read and the state file opened and locked ([`Gate::open`]);
//! then, in one streaming pass over the bundle, the signature, versions, expiry, rollback and
//! every entry ([`crate::bundle::verify`]); then the release gate against the approved baseline
//! (failing closed when the tool contracts cannot be computed); then the sink is committed and
//! the acceptance recorded in the state file ([`Gate::run`]).

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bundle::verify::{self, Expect, Reason, Rejection, Sink, Trust, Verified};
use crate::contract::baseline::{self, Baseline, BaselineError, Findings};
use crate::contract::release;
use crate::keyless::{KeylessSigner, Sha256Read};
use crate::state::{StateError, StateFile};
use crate::timestamp::Timestamp;
use crate::trust::TrustedKeys;

/// What the gate requires of a bundle.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// The keys a bundle must be signed by (each possibly limited to some agent names).
    pub keys: TrustedKeys,
    /// The agent name the bundle must have (`--name`).
    pub name: Option<String>,
    /// The lowest version accepted (`--min-version`).
    pub min_version: Option<semver::Version>,
    /// The time `[bundle] expires` is judged against.
    pub now: Timestamp,
    /// The rollback state file (`--state`): read and locked by [`Gate::open`], updated when a
    /// bundle passes.
    pub state: Option<PathBuf>,
    /// The approved baseline (`--baseline`): risky tools must have their approved contracts.
    /// A folder holds one baseline per agent, `<agent name>.toml` (as `bundle baseline
    /// snapshot` writes them), picked once the bundle's agent is known.
    pub baseline: Option<PathBuf>,
    /// A keyless (Sigstore) signature the bundle file must carry (`--sigstore`), judged over
    /// the file's SHA-256 after the bundle itself verified.
    pub keyless: Option<std::sync::Arc<crate::keyless::Requirement>>,
}

/// Why the gate could not judge a bundle, or could not record that it passed (exit 2). A
/// bundle that was judged and refused is a [`Verdict::Refused`], not an error.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Baseline(#[from] BaselineError),
    #[error(transparent)]
    State(#[from] StateError),
    /// The bundle passed, but the gate could not record it: it fails rather than pass silently.
    #[error("the bundle verified, but the state file could not be updated")]
    Record(#[source] StateError),
    #[error(transparent)]
    Other(#[from] crate::Error),
}

impl GateError {
    /// The error this one wraps (for telling kinds of errors apart; the message is the same).
    pub fn wrapped(&self) -> &(dyn std::error::Error + 'static) {
        match self {
            GateError::Baseline(e) => e,
            GateError::State(e) => e,
            GateError::Record(e) => e,
            GateError::Other(e) => e,
        }
    }
}

/// The baseline's findings on a release that was compared with it.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineReport {
    /// The baseline file.
    #[serde(serialize_with = "display")]
    pub file: PathBuf,
    #[serde(flatten)]
    pub findings: Findings,
}

fn display<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&path.display())
}

/// The gate's judgement of one bundle.
#[derive(Debug)]
pub enum Verdict {
    /// Every check passed; the sink was committed and the state recorded.
    Passed { verified: Box<Verified>, baseline: Option<BaselineReport>, keyless: Option<KeylessSigner> },
    /// Refused with a stable reason code. `baseline` is set when the bundle itself verified
    /// and its contracts were compared: the drift that refused it is there.
    Refused { rejection: Rejection, baseline: Option<BaselineReport> },
}

/// A gate ready to judge one bundle: the baseline read, the state file (if any) locked until
/// the gate is dropped.
#[derive(Debug)]
pub struct Gate {
    opts: GateOptions,
    baseline: Option<Baseline>,
    state: Option<StateFile>,
}

impl Gate {
    /// Reads the baseline and opens (waiting for its lock) the state file, so that a gate that
    /// cannot judge stops before the bundle is read.
    pub fn open(opts: GateOptions) -> Result<Gate, GateError> {
        // A folder of baselines is read once the agent is known; it must exist now.
        let baseline = match opts.baseline.as_deref() {
            Some(dir) if dir.is_dir() => None,
            other => other.map(baseline::read).transpose()?,
        };
        let state = opts.state.as_deref().map(StateFile::open).transpose()?;
        Ok(Gate { opts, baseline, state })
    }

    /// Judges the bundle read from `input`, streaming its entries into `sink`. `origin` names
    /// the bundle in messages (a path, or a registry reference).
    ///
    /// Contract: `input` is read once, front to back, and not necessarily to its end (a
    /// rejection stops reading). Nothing written to `sink` may be used unless the verdict is
    /// [`Verdict::Passed`]; the gate calls [`Sink::commit`] only then, and only after the
    /// baseline check, then records the bundle in the state file. A commit or record failure
    /// is a [`GateError`]. A caller that buffers `input` elsewhere (a temp file of a download)
    /// may use that copy only after `Passed`.
    pub fn run(mut self, input: impl BufRead, origin: &Path, sink: &mut dyn Sink) -> Result<Verdict, GateError> {
        let expect = Expect {
            name: self.opts.name.as_deref(),
            now: Some(self.opts.now),
            state: self.state.as_ref().map(|s| &s.state),
            min_version: self.opts.min_version.as_ref(),
        };
        let mut input = Sha256Read::new(input, self.opts.keyless.is_some());
        let verified = match verify::verify(&mut input, Trust::Keys(&self.opts.keys), &expect, sink) {
            Ok(v) => v,
            Err(rejection) => return Ok(Verdict::Refused { rejection, baseline: None }),
        };
        let keyless = match self.judge_keyless(input, &verified) {
            Ok(signer) => signer,
            Err(rejection) => return Ok(Verdict::Refused { rejection, baseline: None }),
        };
        self.pick_baseline(&verified)?;
        let report = match self.judge_contracts(&verified, origin)? {
            Ok(report) => report,
            Err(refused) => return Ok(refused),
        };
        sink.commit()?;
        if let Some(state) = self.state.as_mut() {
            let m = &verified.manifest;
            state
                .record(&m.name, &verified.key_id, &m.version, &verified.manifest_blake3)
                .map_err(GateError::Record)?;
        }
        Ok(Verdict::Passed { verified: Box::new(verified), baseline: report, keyless })
    }

    /// With `--sigstore`: the keyless signature over the whole file (read to its end here).
    fn judge_keyless(&self, input: Sha256Read<impl BufRead>, v: &Verified) -> Result<Option<KeylessSigner>, Rejection> {
        let Some(required) = &self.opts.keyless else { return Ok(None) };
        let identify = |mut r: Rejection| {
            r.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            r.key_id = Some(v.key_id.clone());
            r
        };
        let sha256 = input.finish().map_err(|e| identify(Rejection::new(Reason::IoError, None, e.to_string())))?;
        let Some(sha256) = sha256 else { return Ok(None) };
        required.judge(sha256).map(Some).map_err(identify)
    }

    /// With a folder of baselines, reads the verified agent's: `DIR/<agent>.toml`. A missing
    /// one stops the gate (exit 2) naming the file it looked for.
    fn pick_baseline(&mut self, v: &Verified) -> Result<(), GateError> {
        let Some(dir) = self.opts.baseline.as_ref().filter(|_| self.baseline.is_none()) else { return Ok(()) };
        let name = &v.manifest.name;
        crate::manifest::check_agent_name(name).map_err(crate::Error::Usage)?;
        let file = dir.join(format!("{name}.toml"));
        if !file.is_file() {
            let why = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "no baseline for agent `{name}` in {}; approve its tools first with `bundle baseline snapshot`",
                    dir.display()
                ),
            );
            return Err(crate::Error::io(&file, why).into());
        }
        self.baseline = Some(baseline::read(&file)?);
        self.opts.baseline = Some(file);
        Ok(())
    }

    /// The release gate against the baseline, if one was given: `Err` holds the refusal.
    fn judge_contracts(
        &self,
        v: &Verified,
        origin: &Path,
    ) -> Result<Result<Option<BaselineReport>, Verdict>, GateError> {
        let (Some(approved), Some(path)) = (&self.baseline, &self.opts.baseline) else { return Ok(Ok(None)) };
        let refuse = |mut rejection: Rejection, baseline| {
            rejection.agent = Some((v.manifest.name.clone(), v.manifest.version.to_string()));
            rejection.key_id = Some(v.key_id.clone());
            Verdict::Refused { rejection, baseline }
        };
        let agent = match release::from_verified(v, origin) {
            Ok(agent) => agent,
            Err(e) => {
                // Contracts that cannot be computed cannot be approved: fail closed.
                let r = Rejection::new(
                    Reason::ContractDrift,
                    Some(crate::tools::FILE_NAME),
                    format!("cannot compute the tool contracts: {e}"),
                );
                return Ok(Err(refuse(r, None)));
            }
        };
        let findings = baseline::judge(approved, &agent, path)?;
        let rejection = findings.rejection(path);
        let report = BaselineReport { file: path.clone(), findings };
        Ok(match rejection {
            Some(r) => Err(refuse(r, Some(report))),
            None => Ok(Some(report)),
        })
    }
}

/// Opens a gate and judges one bundle with it: [`Gate::open`] then [`Gate::run`].
pub fn gate(input: impl BufRead, origin: &Path, opts: GateOptions, sink: &mut dyn Sink) -> Result<Verdict, GateError> {
    Gate::open(opts)?.run(input, origin, sink)
}

/// The JSON document `verify` and `unpack` print: the verdict, then the baseline's findings
/// when the contracts were compared. Strings are as found; the renderer sanitises them.
#[derive(Debug, Serialize)]
pub struct VerdictReport<'a> {
    pub ok: bool,
    pub code: Option<Reason>,
    pub path: Option<&'a str>,
    pub message: Option<&'a str>,
    pub agent: Option<AgentId<'a>>,
    pub key_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<&'a BaselineReport>,
    /// The keyless signer that verified (`--sigstore`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyless: Option<&'a KeylessSigner>,
}

/// An agent's name and version.
#[derive(Debug, Serialize)]
pub struct AgentId<'a> {
    pub name: &'a str,
    pub version: String,
}

impl<'a> VerdictReport<'a> {
    /// The report of a bundle that verified.
    pub fn passed(v: &'a Verified, baseline: Option<&'a BaselineReport>) -> Self {
        VerdictReport {
            ok: true,
            code: None,
            path: None,
            message: None,
            agent: Some(AgentId { name: &v.manifest.name, version: v.manifest.version.to_string() }),
            key_id: Some(&v.key_id),
            files: Some(v.files.len()),
            bytes: Some(v.files.iter().map(|f| f.size).sum()),
            baseline,
            keyless: None,
        }
    }

    /// The report of a refused bundle.
    pub fn refused(r: &'a Rejection, baseline: Option<&'a BaselineReport>) -> Self {
        VerdictReport {
            ok: false,
            code: Some(r.reason),
            path: r.path.as_deref(),
            message: Some(&r.message),
            agent: r.agent.as_ref().map(|(name, version)| AgentId { name, version: version.clone() }),
            key_id: r.key_id.as_deref(),
            files: None,
            bytes: None,
            baseline,
            keyless: None,
        }
    }
}

impl Verdict {
    /// The verdict as the JSON document `verify` prints.
    pub fn report(&self) -> VerdictReport<'_> {
        match self {
            Verdict::Passed { verified, baseline, keyless } => {
                VerdictReport { keyless: keyless.as_ref(), ..VerdictReport::passed(verified, baseline.as_ref()) }
            }
            Verdict::Refused { rejection, baseline } => VerdictReport::refused(rejection, baseline.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, Write};

    use super::*;
    use crate::bundle::verify::Sink;
    use crate::minisign::PublicKey;

    /// Counts what the gate asks of its sink.
    #[derive(Default)]
    struct Recorder {
        opened: usize,
        commits: usize,
    }

    impl Sink for Recorder {
        fn open(&mut self, _: &str, _: bool) -> io::Result<Box<dyn Write + '_>> {
            self.opened += 1;
            Ok(Box::new(io::sink()))
        }
        fn commit(&mut self) -> crate::Result<()> {
            self.commits += 1;
            Ok(())
        }
    }

    fn options(state: Option<PathBuf>) -> GateOptions {
        let key = PublicKey::from_text(include_str!("../../testdata/keys/test.pub")).expect("test key");
        GateOptions {
            keys: TrustedKeys::from_keys([key]),
            name: None,
            min_version: None,
            now: Timestamp::parse("2026-01-01T00:00:00Z").expect("a timestamp"),
            state,
            baseline: None,
            keyless: None,
        }
    }

    fn run(case: &str, state: Option<PathBuf>, sink: &mut Recorder) -> Verdict {
        let path = PathBuf::from(format!("testdata/hostile/{case}.agent.bundle"));
        let bytes = std::fs::read(&path).expect("the hostile corpus");
        gate(&bytes[..], &path, options(state), sink).expect("the gate judges")
    }

    /// The contract a consumer (unpack, a registry pull) relies on: the sink is committed once,
    /// only for a bundle that passed, and only then is the state recorded.
    #[test]
    fn the_sink_is_committed_and_the_state_recorded_only_when_the_bundle_passes() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let state = dir.path().join("state.json");

        let mut sink = Recorder::default();
        let refused = run("digest_mismatch-prompt-replaced", Some(state.clone()), &mut sink);
        assert!(matches!(&refused, Verdict::Refused { rejection, .. } if rejection.reason == Reason::DigestMismatch));
        assert_eq!(sink.commits, 0);
        assert!(sink.opened > 0, "entries streamed into the sink before the refusal");
        assert!(!state.exists(), "a refused bundle is not recorded");

        let mut sink = Recorder::default();
        let passed = run("ok", Some(state.clone()), &mut sink);
        assert!(matches!(passed, Verdict::Passed { .. }));
        assert_eq!(sink.commits, 1);
        let text = std::fs::read_to_string(&state).expect("the state file");
        assert!(text.contains("\"hostile\""), "{text}");
    }
}
