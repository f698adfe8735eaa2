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
