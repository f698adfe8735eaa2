//! The policy file and its rotation without the binary: every problem reported at once, typed
//! errors, and each way a chain of versions cannot be followed.

use super::chain::{ChainFault, SignedPolicy, follow};
use super::format::{PolicyError, TrustPolicy};
use crate::minisign::SecretKey;
use crate::timestamp::Timestamp;

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

fn key(n: u8) -> SecretKey {
    SecretKey::from_seed(&[n; 32], [n; 8])
}

/// Version `version` of policy `t` whose root signers are `roots` (threshold 2 of them when
/// there are two or more), expiring at `expires`, with `extra` signer lines for the last root.
fn text(version: u64, roots: &[(&str, &SecretKey)], expires: &str, extra: &str) -> String {
    let names: Vec<String> = roots.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    let signers: String = roots
        .iter()
        .enumerate()
        .map(|(i, (n, k))| {
            let more = if i + 1 == roots.len() { extra } else { "" };
            format!("[[signer]]\nname = \"{n}\"\npublic_key = \"{}\"\n{more}\n", k.public_key().to_base64())
        })
        .collect();
    format!(
        "format = 1\nid = \"t\"\nversion = {version}\nexpires = {expires}\n[root]\nthreshold = {}\nsigners = [{}]\n{signers}[[rule]]\nagents = [\"*\"]\nthreshold = 1\n",
        roots.len().min(2),
        names.join(", ")
    )
}

/// A version signed by `by`, each with the version's trusted comment (or `comment`).
fn signed(text: &str, by: &[&SecretKey], comment: Option<&str>) -> SignedPolicy {
    let policy = TrustPolicy::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let comment = comment.map_or_else(|| policy.signed_comment(), str::to_owned);
    let signatures = by.iter().map(|k| k.sign(text.as_bytes(), &comment, "u").unwrap()).collect();
    SignedPolicy { origin: format!("v{}", policy.version), bytes: text.as_bytes().to_vec(), policy, signatures }
}

const LATER: &str = "2099-01-01T00:00:00Z";
const NOW: &str = "2030-01-01T00:00:00Z";

#[test]
fn a_chain_is_followed_only_with_both_thresholds_in_order_and_never_backwards() {
    let (a, b, c) = (key(1), key(2), key(3));
    let v1 = text(1, &[("a", &a), ("b", &b)], LATER, "");
    let v2 = text(2, &[("a", &a), ("c", &c)], LATER, "");
    let pin = signed(&v1, &[&a, &b], None);

    // v2 signed by two of v1's roots (a, b) and two of its own (a, c): followed.
    let (policy, report) = follow(pin.clone(), vec![signed(&v2, &[&a, &b, &c], None)], at(NOW), None).unwrap();
    assert_eq!((policy.version, report.version), (2, Some(2)));
    assert_eq!(report.steps[1].tallies.iter().map(|t| t.counted).collect::<Vec<_>>(), [2, 2]);

    // Only a and c: one of v1's roots, so not followed.
    let e = follow(pin.clone(), vec![signed(&v2, &[&a, &c], None)], at(NOW), None).unwrap_err();
    assert_eq!(e.fault, ChainFault::Untrusted, "{}", e.message);
    assert!(e.message.contains("version 1's root signers"), "{}", e.message);

    // Signatures whose comment names another version are not signatures of this one.
    let other = signed(&v2, &[&a, &b, &c], Some("agent-bundle-policy/1 id=t version=3"));
    assert_eq!(follow(pin.clone(), vec![other], at(NOW), None).unwrap_err().fault, ChainFault::Untrusted);

    // A gap (v1 then v3) and a policy of another id break the chain.
    let v3 = text(3, &[("a", &a), ("c", &c)], LATER, "");
    assert_eq!(
        follow(pin.clone(), vec![signed(&v3, &[&a, &b, &c], None)], at(NOW), None).unwrap_err().fault,
        ChainFault::Broken
    );
    let renamed = v2.replace("id = \"t\"", "id = \"u\"");
    assert_eq!(
        follow(pin.clone(), vec![signed(&renamed, &[&a, &b, &c], None)], at(NOW), None).unwrap_err().fault,
        ChainFault::Broken
    );

    // Offered v1 after v2 was followed: a rollback.
    assert_eq!(follow(pin.clone(), Vec::new(), at(NOW), Some(2)).unwrap_err().fault, ChainFault::Rollback);
    // The newest version expired (a link on the way may have).
    let old = text(1, &[("a", &a), ("b", &b)], "2020-01-01T00:00:00Z", "");
    let expired = signed(&old, &[&a, &b], None);
    assert_eq!(follow(expired.clone(), Vec::new(), at(NOW), None).unwrap_err().fault, ChainFault::Expired);
    let v2_after_expired = text(2, &[("a", &a), ("b", &b)], LATER, "");
    assert!(follow(expired, vec![signed(&v2_after_expired, &[&a, &b], None)], at(NOW), None).is_ok());
}

#[test]
fn a_revoked_root_signer_and_an_unsigned_pin_do_not_count() {
    let (a, b) = (key(1), key(2));
    let revoked = text(1, &[("a", &a), ("b", &b)], LATER, "revoked = true");
    let e = follow(signed(&revoked, &[&a, &b], None), Vec::new(), at(NOW), None).unwrap_err();
    assert_eq!(e.fault, ChainFault::Untrusted);
    assert_eq!(e.report.steps[0].tallies[0].signers, ["a"]);
    let plain = text(1, &[("a", &a), ("b", &b)], LATER, "");
    assert_eq!(follow(signed(&plain, &[], None), Vec::new(), at(NOW), None).unwrap_err().fault, ChainFault::Untrusted);
}

#[test]
fn a_policy_is_parsed_into_typed_errors_with_every_problem_at_once() {
    assert!(matches!(TrustPolicy::parse("not toml ["), Err(PolicyError::Syntax(_))));
    assert!(matches!(TrustPolicy::parse("format = 1\nunknown = 2\n"), Err(PolicyError::Syntax(_))));
    let a = key(1);
    let text = format!(
        "format = 2\nid = \"t t\"\nversion = 0\nexpires = 2099-01-01T00:00:00Z\n[root]\nthreshold = 3\nsigners = [\"a\", \"ci\"]\n\
         [[signer]]\nname = \"a\"\npublic_key = \"{}\"\n\
         [[signer]]\nname = \"ci\"\ncertificate_identity = \"i\"\ncertificate_identity_regexp = \"i.*\"\ncertificate_oidc_issuer_regexp = \"(\"\n\
         [[rule]]\nagents = [\"*\"]\nthreshold = 5\nroles = {{ security = 1 }}\n",
        a.public_key().to_base64()
    );
    let Err(PolicyError::Invalid(problems)) = TrustPolicy::parse(&text) else { panic!("accepted:\n{text}") };
    for expected in [
        "format 2 is not supported",
        "id `t t`",
        "version must be 1 or more",
        "certificate_identity or certificate_identity_regexp, not both",
        "certificate_oidc_issuer_regexp: invalid pattern",
        "root: no signer is named `ci`",
        "threshold 3 must be between 1 and the 2 root signers",
        "threshold 5 can never be met",
        "fewer than 1 unrevoked signer(s) have role `security`",
    ] {
        assert!(problems.iter().any(|p| p.contains(expected)), "{expected}: {problems:#?}");
    }
    // The message lists them one after another, a line each.
    assert_eq!(PolicyError::Invalid(problems.clone()).to_string(), problems.join("\n"));
}

#[test]
fn the_signer_of_a_key_is_found_by_its_bytes_not_only_its_key_id() {
    let a = SecretKey::from_seed(&[1; 32], [7; 8]);
    let b = SecretKey::from_seed(&[2; 32], [7; 8]);
    let stranger = SecretKey::from_seed(&[3; 32], [7; 8]);
    let policy = TrustPolicy::parse(&text(1, &[("a", &a), ("b", &b)], LATER, "")).unwrap();
    assert_eq!(policy.signer_of_key(&b.public_key()).map(|s| s.name.as_str()), Some("b"));
    assert!(policy.signer_of_key(&stranger.public_key()).is_none());
}
