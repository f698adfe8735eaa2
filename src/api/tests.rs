//! The API against the hostile corpus and the example agent: the same codes as cases.tsv (the
//! command line's are compared in tests/cli/hostile.rs and by the Python suite), every input
//! kind judged alike, loaded files equal to the verified ones.

use std::time::{Duration, UNIX_EPOCH};

use super::*;
use crate::contract::Contract;
use crate::contract::baseline::Baseline;

fn keys() -> TrustedKeys {
    TrustedKeys::read("testdata/keys/test.pub").expect("the test key")
}

fn cases() -> Vec<(String, String)> {
    let text = std::fs::read_to_string("testdata/hostile/cases.tsv").expect("cases.tsv");
    text.lines()
        .skip(1)
        .map(|l| {
            let mut cols = l.split('\t');
            (cols.next().unwrap_or_default().to_owned(), cols.next().unwrap_or_default().to_owned())
        })
        .collect()
}

fn code(v: &Verdict) -> String {
    v.code().map_or("ok".to_owned(), |c| c.as_str().to_owned())
}

#[test]
fn every_hostile_case_gets_its_code_from_a_file_bytes_and_a_reader() {
    let options = VerifyOptions::new(keys());
    for (case, expected) in cases() {
        let path = format!("testdata/hostile/{case}.agent.bundle");
        let from_file = Bundle::open(&path).and_then(|b| b.verify(&options)).expect("judged");
        assert_eq!(code(&from_file), expected, "{case}");
        assert_eq!(from_file.is_ok(), expected == "ok");
        assert_eq!(from_file.to_json()["ok"], serde_json::Value::Bool(from_file.is_ok()));
        let bytes = std::fs::read(&path).expect("readable");
        if bytes.len() > 1 << 20 {
            continue;
        }
        let from_bytes = Bundle::from_bytes(bytes.clone()).verify(&options).expect("judged");
        let from_reader = Bundle::from_reader(std::io::Cursor::new(bytes)).verify(&options).expect("judged");
        assert_eq!((code(&from_bytes), code(&from_reader)), (expected.clone(), expected), "{case}");
    }
}

#[test]
fn load_holds_the_verified_entries_and_refuses_with_the_verdict() {
    let options = VerifyOptions::new(keys());
    let agent = Bundle::open("testdata/hostile/ok.agent.bundle").and_then(|b| b.load(&options)).expect("loads");
    for f in agent.verdict().files() {
        let bytes = agent.file(&f.path).expect("held");
        assert_eq!(blake3::hash(bytes).to_hex().as_str(), f.blake3, "{}", f.path);
        assert_eq!(bytes.len() as u64, f.size);
    }
    assert!(agent.file("manifest.toml").is_some() && agent.file("nope").is_none());
    let refused = Bundle::open("testdata/hostile/digest_mismatch-prompt-replaced.agent.bundle")
        .and_then(|b| b.load(&options))
        .expect_err("refused");
    assert_eq!(refused.code(), "digest_mismatch");
    assert!(refused.verdict().is_some_and(|v| !v.is_ok()));
    let capped = Bundle::open("testdata/hostile/ok.agent.bundle")
        .and_then(|b| b.load(&options.clone().max_loaded_bytes(10)))
        .expect_err("over the cap");
    assert_eq!(capped.code(), "limit_exceeded");
}

#[test]
fn the_clock_and_the_version_floor_are_options() {
    let path = "testdata/hostile/expired-2020.agent.bundle";
    let judge = |o: VerifyOptions| Bundle::open(path).and_then(|b| b.verify(&o)).map(|v| code(&v));
    assert_eq!(judge(VerifyOptions::new(keys())).expect("judged"), "expired");
    let before = UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    assert_eq!(judge(VerifyOptions::new(keys()).now(before)).expect("judged"), "ok");
    let floor = VerifyOptions::new(keys()).now(before).min_version("2.0.0");
    assert_eq!(judge(floor).expect("judged"), "rollback");
    let bad = judge(VerifyOptions::new(keys()).min_version("two")).expect_err("not semver");
    assert_eq!(bad.code(), "usage");
    assert_eq!(Bundle::open("testdata/hostile/absent.agent.bundle").expect_err("no file").code(), "io_error");
}

/// Issue 35, defect 6: a clock given as a number (Python's `now=1e20`) never panics: a number
/// no `SystemTime` can hold, or not finite, is `None` (the binding raises `ValueError`).
#[test]
fn a_clock_of_any_number_is_a_time_or_none_and_never_a_panic() {
    use super::time_from_unix_seconds as at;
    assert_eq!(at(1_500_000_000.0), Some(UNIX_EPOCH + Duration::from_secs(1_500_000_000)));
    assert_eq!(at(-1.5), UNIX_EPOCH.checked_sub(Duration::from_millis(1500)));
    for far in [1e20, 1e300, -1e300, 2f64.powi(70), -(2f64.powi(70)), f64::MAX, f64::MIN, f64::NAN, f64::INFINITY] {
        let found = std::panic::catch_unwind(|| at(far));
        assert!(found.is_ok(), "{far} panicked");
        // Whatever a platform's SystemTime holds, an impossible time is never returned.
        if let Ok(Some(t)) = found {
            assert!(far.is_finite() && far.abs() < 1e20, "{far} gave {t:?}");
        }
    }
}

#[test]
fn contract_fingerprint_is_the_fingerprint_of_the_verified_tools() {
    let text = std::fs::read_to_string("testdata/agents/mailer/tools.json").expect("mailer");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let tools = crate::ops::contracts::load(std::path::Path::new("testdata/agents/mailer")).expect("contracts");
    for (tool, contract) in doc["tools"].as_array().expect("tools").iter().zip(&tools.contracts) {
        // A definition that names the agent's schema files needs them (see VerifiedAgent::contract_gate).
        let fp = match contract_fingerprint(&tool.to_string()) {
            Err(e) if tool.to_string().contains("\"schema:") => {
                assert_eq!(e.code(), "invalid_tool");
                continue;
            }
            other => other.expect("a tool"),
        };
        assert_eq!(fp.fingerprint(), contract.fingerprint);
        assert_eq!(fp.risk().names(), contract.risk.names());
    }
    assert_eq!(contract_fingerprint("{\"id\": 1}").expect_err("not a tool").code(), "invalid_tool");
}

#[test]
fn contract_gate_blocks_risky_drift_and_reports_read_only_drift() {
    let read_only = serde_json::json!({"id": "r.get", "description": "d",
        "transport": {"kind": "http", "method": "GET", "url": "https://a.example/"},
        "input_schema": true, "result_schema": true});
    let writer = serde_json::json!({"id": "w.post", "description": "d",
        "transport": {"kind": "http", "method": "POST", "url": "https://a.example/"},
        "input_schema": true, "result_schema": true});
    let signed: Vec<Contract> =
        [&read_only, &writer].iter().map(|t| contract_fingerprint(&t.to_string()).expect("a tool").0).collect();
    let gate = ContractGate {
        reference: Baseline {
            agent: None,
            tools: signed.into_iter().map(|c| (c.id().to_owned(), c)).collect(),
            skills: Default::default(),
            mcp: Default::default(),
        },
        agent: None,
        label: "test".into(),
        files: Default::default(),
    };
    let same = gate.check(&[&read_only.to_string(), &writer.to_string()]).expect("checked");
    assert!(same.is_ok() && same.warnings.is_empty() && same.missing.is_empty());
    let mut r2 = read_only.clone();
    r2["description"] = "e".into();
    let mut w2 = writer.clone();
    w2["description"] = "e".into();
    let report = gate.check(&[&r2.to_string(), &w2.to_string()]).expect("checked");
    assert_eq!(report.drift.iter().map(|d| d.tool.as_str()).collect::<Vec<_>>(), ["w.post"]);
    assert_eq!(report.warnings.iter().map(|d| d.tool.as_str()).collect::<Vec<_>>(), ["r.get"]);
    assert!(!report.is_ok());
}

#[test]
fn diff_classifies_the_changes_of_two_releases() {
    let d = diff("testdata/agents/minimal", "testdata/agents/mailer").expect("compared");
    assert!(d.tools.iter().all(|t| t.status == ToolChangeStatus::Added));
    assert!(d.impacts().any(|i| i == "widening"));
}

#[test]
fn a_trust_policy_decides_instead_of_keys_and_an_unsigned_one_trusts_nothing() {
    let key = std::fs::read_to_string("testdata/keys/test.pub").expect("the test key");
    let key = key.lines().nth(1).expect("the key line");
    let policy = format!(
        "format = 1\nid = \"acme\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n\n[root]\nthreshold = 1\n\
         signers = [\"test\"]\n\n[[signer]]\nname = \"test\"\npublic_key = \"{key}\"\n\n\
         [[rule]]\nagents = [\"*\"]\nthreshold = 1\n"
    );
    let unsigned = TrustPolicy::parse(&policy, "").expect("a valid policy");
    assert_eq!((unsigned.id(), unsigned.version()), ("acme", 1));
    let options = VerifyOptions::with_trust_policy(unsigned);
    let verdict = Bundle::open("testdata/hostile/ok.agent.bundle").and_then(|b| b.verify(&options)).expect("judged");
    assert_eq!(code(&verdict), "policy_untrusted");
    let bad = TrustPolicy::parse("format = 1\n", "").expect_err("not a policy");
    assert_eq!(bad.code(), "policy_error");
    assert_eq!(TrustPolicy::read("testdata/nope.toml").expect_err("missing").code(), "io_error");
}

#[test]
fn required_provenance_is_attestation_missing_for_a_bundle_without_one() {
    let options = VerifyOptions::new(keys()).require_provenance(true);
    let verdict = Bundle::open("testdata/hostile/ok.agent.bundle").and_then(|b| b.verify(&options)).expect("judged");
    assert_eq!(code(&verdict), "attestation_missing");
    let options = VerifyOptions::new(keys()).builder_id("https://ci.example/");
    let bytes = std::fs::read("testdata/hostile/ok.agent.bundle").expect("readable");
    assert_eq!(code(&Bundle::from_bytes(bytes).verify(&options).expect("judged")), "attestation_missing");
}

#[test]
fn a_keyless_requirement_without_an_identity_or_root_stops_the_gate_with_its_code() {
    let verify = |k: Keyless| {
        let options = VerifyOptions::new(keys()).keyless(k);
        Bundle::open("testdata/hostile/ok.agent.bundle").and_then(|b| b.verify(&options)).expect_err("not judged")
    };
    let root = "testdata/sigstore/trusted_root.staging.json";
    let sig = "testdata/sigstore/bundle.txt.sigstore";
    assert_eq!(verify(Keyless::new(sig, root).issuer("https://issuer.example")).code(), "usage");
    assert_eq!(verify(Keyless::new(sig, root).identity("a@b").issuer_regexp("(")).code(), "usage");
    assert_eq!(verify(Keyless::new(sig, "testdata/nope.json").identity("a@b").issuer("i")).code(), "io_error");
    assert_eq!(
        verify(Keyless::new(sig, "testdata/keys/test.pub").identity("a@b").issuer("i")).code(),
        "trusted_root_error"
    );
}
