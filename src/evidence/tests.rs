//! The attestation judgement without the binary: each refusal with its code, the two steps,
//! and a report that is only a report (its JSON as documented, nothing hidden in it).

use serde_json::json;
use sha2::Digest as _;

use super::files::Kind;
use super::judge::{self, AttestPolicy, Attestation};
use crate::attest::{SigstoreBundle, Statement, Subject};
use crate::minisign::SecretKey;
use crate::rejection::Reason;
use crate::trust::{TrustedKey, TrustedKeys};

const FILE: [u8; 32] = [7; 32];

fn trusting(key: &SecretKey, scopes: &[&str]) -> TrustedKeys {
    let scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
    TrustedKeys { keys: vec![TrustedKey { key: key.public_key(), scopes }] }
}

fn attestation(key: &SecretKey, kind: Kind, subject: [u8; 32], predicate: serde_json::Value) -> Vec<u8> {
    let statement = Statement::new(vec![Subject::sha256("x.agent.bundle", &subject)], kind.predicate_type(), predicate);
    SigstoreBundle::sign_statement(&statement, &key.key_id_hex(), |m| Ok::<_, ()>(key.sign_ed25519(m)))
        .unwrap()
        .to_json()
}

fn provenance(builder: &str) -> serde_json::Value {
    json!({
        "buildDefinition": {"buildType": "t", "externalParameters": {},
            "resolvedDependencies": [{"uri": "git+https://example.com/acme/agents@refs/heads/main"}]},
        "runDetails": {"builder": {"id": builder}},
    })
}

fn one(bytes: &[u8], keys: &TrustedKeys, policy: &AttestPolicy) -> Attestation {
    judge::judge_one("a.sigstore.json", bytes, &hex::encode(FILE), keys, policy)
}

#[test]
fn each_refusal_has_its_code_and_the_report_says_ok_or_the_code() {
    let (key, stranger) = (SecretKey::from_seed(&[1; 32], [1; 8]), SecretKey::from_seed(&[2; 32], [2; 8]));
    let keys = trusting(&key, &[]);
    let policy = AttestPolicy { builder_id: Some("https://ci.example/b".into()), ..AttestPolicy::default() };
    let good = attestation(&key, Kind::Provenance, FILE, provenance("https://ci.example/b"));
    let cases: [(Vec<u8>, Option<Reason>); 5] = [
        (good.clone(), None),
        (attestation(&stranger, Kind::Provenance, FILE, provenance("x")), Some(Reason::AttestationUntrusted)),
        (
            attestation(&key, Kind::Provenance, [8; 32], provenance("https://ci.example/b")),
            Some(Reason::AttestationSubjectMismatch),
        ),
        (
            attestation(&key, Kind::Provenance, FILE, provenance("https://evil.example")),
            Some(Reason::ProvenanceMismatch),
        ),
        (b"{\"a\": 1, \"a\": 2}".to_vec(), Some(Reason::AttestationMalformed)),
    ];
    for (bytes, expected) in cases {
        let judged = one(&bytes, &keys, &policy);
        assert_eq!(judged.report.verdict, expected, "{:?}", judged.report.message);
        let shown = serde_json::to_value(&judged.report).unwrap();
        assert_eq!(shown["verdict"], expected.map_or("ok", Reason::as_str));
        // The digest of the attestation's own bytes rides beside the report, not in it.
        let digest: [u8; 32] = sha2::Sha256::digest(&bytes).into();
        assert_eq!(judged.sha256, digest);
        assert!(shown.get("sha256").is_none() && shown.get("statement").is_none());
    }
}

#[test]
fn the_second_step_judges_key_scopes_and_the_contract_against_the_bundle() {
    let key = SecretKey::from_seed(&[1; 32], [1; 8]);
    let contract = json!({"tools": []});
    let bytes = attestation(&key, Kind::Contract, FILE, contract.clone());
    let attached = vec![("c.sigstore.json".to_owned(), bytes)];
    let policy = AttestPolicy::default();
    for (scopes, expected, agent_contract, verdict) in [
        (vec![], &contract, "mailer", None),
        (vec!["pay*"], &contract, "mailer", Some(Reason::AttestationUntrusted)),
        (vec![], &json!({"tools": [1]}), "mailer", Some(Reason::AttestationContractMismatch)),
    ] {
        let keys = trusting(&key, &scopes);
        let (mut judged, early) = judge::judge(&attached, &hex::encode(FILE), &keys, &policy);
        assert!(early.is_none());
        let rejection = judge::judge_with_bundle(&mut judged, agent_contract, &keys, Ok(expected));
        assert_eq!(rejection.map(|r| r.reason), verdict, "{scopes:?}");
        assert_eq!(judged[0].report.verdict, verdict);
    }
    // A required provenance that is not there is the conclusion, not an attestation's verdict.
    let required = AttestPolicy { require_provenance: true, ..AttestPolicy::default() };
    let (judged, rejection) = judge::judge(&attached, &hex::encode(FILE), &trusting(&key, &[]), &required);
    assert!(judged[0].is_ok());
    assert_eq!(rejection.map(|r| r.reason), Some(Reason::AttestationMissing));
}
