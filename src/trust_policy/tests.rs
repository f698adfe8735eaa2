//! The policy's judgement without the binary: key-id collisions, comments, windows at their
//! edges, and the order in which a refusal names its cause.

use super::authenticate::{FileDigest, authenticate};
use super::judge::count;
use super::{PolicyError, Refusal, SignatureStatus, TrustPolicy};
use crate::minisign::{SecretKey, Signature};
use crate::timestamp::Timestamp;
use crate::trust::trusted_comment;

const MANIFEST: &[u8] = b"[agent]\nname = \"payments-eu\"\n";

fn policy(keys: &[(&str, &SecretKey, &str)], rules: &str) -> TrustPolicy {
    let signers: String = keys
        .iter()
        .map(|(name, key, extra)| {
            format!("[[signer]]\nname = \"{name}\"\npublic_key = \"{}\"\n{extra}\n", key.public_key().to_base64())
        })
        .collect();
    let text = format!(
        "format = 1\nid = \"t\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n[root]\nthreshold = 1\nsigners = [\"{}\"]\n{signers}{rules}",
        keys[0].0
    );
    TrustPolicy::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn sign(key: &SecretKey, comment: &str) -> Signature {
    key.sign(MANIFEST, comment, "u").unwrap()
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

#[test]
fn two_signers_sharing_a_key_id_are_told_apart_by_the_signature() {
    let a = SecretKey::from_seed(&[1; 32], [9; 8]);
    let b = SecretKey::from_seed(&[2; 32], [9; 8]);
    let p = policy(
        &[("a", &a, "roles = [\"x\"]"), ("b", &b, "roles = [\"security\"]")],
        "[[rule]]\nagents = [\"*\"]\nthreshold = 1\nroles = { security = 1 }\n",
    );
    let comment = trusted_comment("payments-eu", "1.0.0");
    let sig = sign(&b, &comment);
    let auth = authenticate(&p, &[("s".into(), &sig)], MANIFEST, &[]);
    let v = count(&p, &auth.bind(FileDigest::Unread), "payments-eu", &comment, at("2030-01-01T00:00:00Z"));
    assert!(v.accepted, "{v:?}");
    assert_eq!(v.signatures[0].signer.as_deref(), Some("b"));
}

#[test]
fn a_signature_for_another_version_does_not_count() {
    let a = SecretKey::from_seed(&[1; 32], [1; 8]);
    let p = policy(&[("a", &a, "")], "[[rule]]\nagents = [\"*\"]\nthreshold = 1\n");
    let sig = sign(&a, &trusted_comment("payments-eu", "0.9.0"));
    let auth = authenticate(&p, &[("s".into(), &sig)], MANIFEST, &[]);
    let v = count(
        &p,
        &auth.bind(FileDigest::Unread),
        "payments-eu",
        &trusted_comment("payments-eu", "1.0.0"),
        at("2030-01-01T00:00:00Z"),
    );
    assert_eq!(v.signatures[0].status, SignatureStatus::CommentMismatch);
    assert_eq!(v.refusal().map(|r| r.0), Some(Refusal::ThresholdNotMet));
}

#[test]
fn windows_include_their_ends_and_revocation_is_named_before_the_tally() {
    let a = SecretKey::from_seed(&[1; 32], [1; 8]);
    let b = SecretKey::from_seed(&[2; 32], [2; 8]);
    let window = "not_before = 2030-01-01T00:00:00Z\nnot_after = 2030-12-31T00:00:00Z";
    let p = policy(&[("a", &a, window), ("b", &b, "revoked = true")], "[[rule]]\nagents = [\"*\"]\nthreshold = 1\n");
    let comment = trusted_comment("payments-eu", "1.0.0");
    let (sa, sb) = (sign(&a, &comment), sign(&b, &comment));
    for (now, counted) in [
        ("2030-01-01T00:00:00Z", true),
        ("2030-12-31T00:00:00Z", true),
        ("2029-12-31T23:59:59Z", false),
        ("2030-12-31T00:00:01Z", false),
    ] {
        let auth = authenticate(&p, &[("a".into(), &sa)], MANIFEST, &[]);
        assert_eq!(
            count(&p, &auth.bind(FileDigest::Unread), "payments-eu", &comment, at(now)).accepted,
            counted,
            "{now}"
        );
    }
    let auth = authenticate(&p, &[("a".into(), &sa), ("b".into(), &sb)], MANIFEST, &[]);
    let v = count(&p, &auth.bind(FileDigest::Unread), "payments-eu", &comment, at("2031-06-01T00:00:00Z"));
    assert_eq!(v.refusal().map(|r| r.0), Some(Refusal::RevokedKey));
}

#[test]
fn the_same_key_under_two_names_is_refused() {
    let a = SecretKey::from_seed(&[1; 32], [1; 8]);
    let pk = a.public_key().to_base64();
    let text = format!(
        "format = 1\nid = \"t\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n[root]\nthreshold = 1\nsigners = [\"a\"]\n\
         [[signer]]\nname = \"a\"\npublic_key = \"{pk}\"\n[[signer]]\nname = \"b\"\npublic_key = \"{pk}\"\n\
         [[rule]]\nagents = [\"*\"]\nthreshold = 1\n"
    );
    let Err(PolicyError::Invalid(problems)) = TrustPolicy::parse(&text) else { panic!("accepted") };
    assert!(problems.iter().any(|p| p.contains("listed under another name too")), "{problems:?}");
    assert!(matches!(TrustPolicy::parse("format = 1\nunknown = 2\n"), Err(PolicyError::Syntax(_))));
}

/// Issue 35, defect 4: two keyless signatures by the same CI identity, an old one over another
/// file and the current one, count the same in either order once bound to the file (the one
/// over another file was counted first, the current one then marked a duplicate, and binding
/// withdrew the first without revisiting the second).
#[test]
fn keyless_signatures_of_one_identity_count_in_either_order_once_bound_to_the_file() {
    use super::authenticate::KeylessOffer;
    use crate::keyless::{Claimed, KeylessSigner};
    let a = SecretKey::from_seed(&[1; 32], [1; 8]);
    let text = format!(
        "format = 1\nid = \"t\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n[root]\nthreshold = 1\nsigners = [\"a\"]\n\
         [[signer]]\nname = \"a\"\npublic_key = \"{}\"\n\
         [[signer]]\nname = \"ci\"\ncertificate_identity = \"https://ci.example/release\"\ncertificate_oidc_issuer = \"https://issuer.example\"\n\
         [[rule]]\nagents = [\"*\"]\nthreshold = 2\n",
        a.public_key().to_base64()
    );
    let p = TrustPolicy::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (file, another) = ([1u8; 32], [2u8; 32]);
    let offer = |source: &str, subject: [u8; 32]| KeylessOffer {
        source: source.to_owned(),
        result: Ok(Claimed {
            signer: KeylessSigner {
                file: source.to_owned(),
                identity: "https://ci.example/release".to_owned(),
                issuer: "https://issuer.example".to_owned(),
                signed_at: None,
                kind: "message_signature",
            },
            claims: Default::default(),
            subjects: vec![subject],
        }),
    };
    let comment = trusted_comment("payments-eu", "1.0.0");
    let sig = sign(&a, &comment);
    for offers in [[offer("old", another), offer("current", file)], [offer("current", file), offer("old", another)]] {
        let auth = authenticate(&p, &[("s".into(), &sig)], MANIFEST, &offers);
        let v = count(&p, &auth.bind(FileDigest::Known(&file)), "payments-eu", &comment, at("2030-01-01T00:00:00Z"));
        let order: Vec<&str> = offers.iter().map(|o| o.source.as_str()).collect();
        assert!(v.accepted, "{order:?}: {:#?}", v.signatures);
        let status = |source: &str| v.signatures.iter().find(|s| s.source == source).map(|s| s.status);
        assert_eq!(status("old"), Some(SignatureStatus::SubjectMismatch), "{order:?}");
        assert_eq!(status("current"), Some(SignatureStatus::Counted), "{order:?}");
    }
}

fn ci_policy(threshold: usize) -> (TrustPolicy, SecretKey) {
    let a = SecretKey::from_seed(&[1; 32], [1; 8]);
    let text = format!(
        "format = 1\nid = \"t\"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n[root]\nthreshold = 1\nsigners = [\"a\"]\n\
         [[signer]]\nname = \"a\"\npublic_key = \"{}\"\n\
         [[signer]]\nname = \"ci\"\ncertificate_identity = \"https://ci.example/release\"\ncertificate_oidc_issuer = \"https://issuer.example\"\n\
         [[rule]]\nagents = [\"*\"]\nthreshold = {threshold}\n",
        a.public_key().to_base64()
    );
    (TrustPolicy::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}")), a)
}

fn keyless_offer(source: &str, subject: [u8; 32]) -> super::KeylessOffer {
    use crate::keyless::{Claimed, KeylessSigner};
    super::KeylessOffer {
        source: source.to_owned(),
        result: Ok(Claimed {
            signer: KeylessSigner {
                file: source.to_owned(),
                identity: "https://ci.example/release".to_owned(),
                issuer: "https://issuer.example".to_owned(),
                signed_at: None,
                kind: "message_signature",
            },
            claims: Default::default(),
            subjects: vec![subject],
        }),
    }
}

/// Binding is its own step: before the file is read a keyless signature counts on its word
/// (an upper bound, only for refusing early); bound to the file it signs it still counts;
/// bound to another file it is dropped, and when it was the only signature nothing verifies.
#[test]
fn an_offer_over_another_file_is_dropped_when_bound_and_never_counted() {
    let (p, _) = ci_policy(1);
    let (file, other) = ([1u8; 32], [2u8; 32]);
    let comment = trusted_comment("payments-eu", "1.0.0");
    let now = at("2030-01-01T00:00:00Z");
    let auth = authenticate(&p, &[], MANIFEST, &[keyless_offer("ci.sigstore.json", other)]);
    assert!(auth.any_verified() && auth.has_keyless());
    assert!(count(&p, &auth.bind(FileDigest::Unread), "payments-eu", &comment, now).accepted);
    let bound = auth.bind(FileDigest::Known(&file));
    assert!(!bound.any_verified());
    let v = count(&p, &bound, "payments-eu", &comment, now);
    assert_eq!(v.signatures[0].status, SignatureStatus::SubjectMismatch);
    assert_eq!(v.signatures[0].code, Some(crate::rejection::Reason::KeylessSubjectMismatch));
    assert_eq!(v.refusal().map(|r| r.0), Some(Refusal::Keyless(crate::rejection::Reason::KeylessSubjectMismatch)));
    let right = authenticate(&p, &[], MANIFEST, &[keyless_offer("ci.sigstore.json", file)]);
    let v = count(&p, &right.bind(FileDigest::Known(&file)), "payments-eu", &comment, now);
    assert!(v.accepted, "{v:#?}");
    assert_eq!((v.signatures[0].signer.as_deref(), v.signatures[0].identity.is_some()), (Some("ci"), true));
}

/// The report is only a report: `counted` in its JSON is derived from `status`, in the place
/// the format reference documents, and nothing else is hidden in it.
#[test]
fn the_signers_report_serialises_counted_from_its_status() {
    let (p, a) = ci_policy(1);
    let stranger = SecretKey::from_seed(&[5; 32], [5; 8]);
    let comment = trusted_comment("payments-eu", "1.0.0");
    let (sa, ss) = (sign(&a, &comment), sign(&stranger, &comment));
    let auth = authenticate(&p, &[("pack".into(), &sa), ("cosig:1".into(), &ss)], MANIFEST, &[]);
    let v = count(&p, &auth.bind(FileDigest::Unread), "payments-eu", &comment, at("2030-01-01T00:00:00Z"));
    let json = serde_json::to_value(&v).unwrap();
    let keys = |s: &serde_json::Value| s.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let first = &json["signatures"][0];
    assert_eq!((first["status"].as_str(), first["counted"].as_bool()), (Some("counted"), Some(true)));
    let second = &json["signatures"][1];
    assert_eq!((second["status"].as_str(), second["counted"].as_bool()), (Some("unknown_key"), Some(false)));
    assert_eq!(
        serde_json::to_string(&keys(second)).unwrap(),
        r#"["source","key_id","signer","roles","status","counted","why"]"#
    );
    assert_eq!(keys(&json), ["policy", "policy_version", "signatures", "rules", "accepted"]);
}
