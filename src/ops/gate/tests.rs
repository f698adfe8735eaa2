//! The gate's contract with its sink and state file.

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
    let key = PublicKey::from_text(include_str!("../../../testdata/keys/test.pub")).expect("test key");
    GateOptions {
        keys: TrustedKeys::from_keys([key]),
        name: None,
        min_version: None,
        now: Timestamp::parse("2026-01-01T00:00:00Z").expect("a timestamp"),
        state,
        baseline: None,
        attest: AttestOptions::default(),
        policy: None,
        keyless: None,
        model_root: None,
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
