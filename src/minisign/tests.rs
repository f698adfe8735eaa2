//! Tests of the minisign formats against files made by stock minisign, and of every way a
//! key or signature file can be malformed or tampered with.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::VerifyingKey;

use super::kdf::pick_scrypt_params;
use super::*;

const NOPW_KEY: &str = include_str!("../../testdata/keys/minisign-nopw.key");
const NOPW_PUB: &str = include_str!("../../testdata/keys/minisign-nopw.pub");
const PW_KEY: &str = include_str!("../../testdata/keys/minisign-pw.key");
const PW_PUB: &str = include_str!("../../testdata/keys/minisign-pw.pub");
const PASSWORD: &[u8] = b"test-password";
const MESSAGE: &[u8] = include_bytes!("../../testdata/keys/message.txt");
const MESSAGE_SIG: &str = include_str!("../../testdata/keys/message.txt.minisig");
const TEST_KEY: &str = include_str!("../../testdata/keys/test.key");
const TEST_PUB: &str = include_str!("../../testdata/keys/test.pub");

/// N = 2^10, r = 8, p = 1: 1 MiB, fast even in debug builds.
const CHEAP: KdfLimits = KdfLimits { opslimit: 32_768, memlimit: 1 << 20 };

/// The Ed25519 group order L, little-endian.
const ORDER_L: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

fn sig_lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

fn join(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Re-encodes line `index` of `text` after `edit` changed its decoded bytes.
fn edit_b64_line(text: &str, index: usize, edit: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut lines = sig_lines(text);
    let mut bytes = BASE64.decode(&lines[index]).unwrap();
    edit(&mut bytes);
    lines[index] = BASE64.encode(&bytes);
    join(&lines)
}

/// Adds L to the 32-byte little-endian scalar `s` (S < L < 2^253, so no overflow).
fn add_order(s: &mut [u8]) {
    let mut carry = 0u16;
    for (byte, l) in s.iter_mut().zip(ORDER_L) {
        let sum = u16::from(*byte) + u16::from(l) + carry;
        *byte = (sum & 0xff) as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0);
}

fn pub_box(alg: &[u8; 2], key_id: [u8; 8], point: [u8; 32]) -> String {
    let mut bytes = alg.to_vec();
    bytes.extend_from_slice(&key_id);
    bytes.extend_from_slice(&point);
    BASE64.encode(bytes)
}

#[test]
fn pick_scrypt_params_matches_libsodium() {
    assert_eq!(pick_scrypt_params(33_554_432, 1_073_741_824), (20, 8, 1));
    assert_eq!(pick_scrypt_params(524_288, 16_777_216), (14, 8, 1));
    assert_eq!(pick_scrypt_params(CHEAP.opslimit, CHEAP.memlimit), (10, 8, 1));
    // opslimit is raised to 32768; memory-bound branch with p > 1.
    assert_eq!(pick_scrypt_params(0, 0), (1, 8, 512));
    // ops-bound branch: opslimit < memlimit / 32.
    assert_eq!(pick_scrypt_params(1 << 20, 1 << 30), (15, 8, 1));
}

#[test]
fn parses_minisign_public_keys() {
    let pk = PublicKey::from_text(PW_PUB).unwrap();
    assert_eq!(pk.to_text(), PW_PUB, "to_text must reproduce minisign's file");
    assert!(PW_PUB.contains(&pk.key_id_hex()));
    // Bare base64, as given to `minisign -P`.
    let bare = PW_PUB.lines().nth(1).unwrap();
    assert_eq!(PublicKey::from_text(bare).unwrap(), pk);
    assert_eq!(PublicKey::from_text(&format!("  {bare}\n")).unwrap(), pk);
    assert_eq!(pk.to_base64(), bare);
    let nopw = PublicKey::from_text(NOPW_PUB).unwrap();
    assert_eq!(nopw.to_text(), NOPW_PUB);
    assert_ne!(nopw.key_id(), pk.key_id());
    // CRLF line endings are accepted.
    let crlf = NOPW_PUB.replace('\n', "\r\n");
    assert_eq!(PublicKey::from_text(&crlf).unwrap(), nopw);
}

#[test]
fn key_id_hex_is_little_endian_uppercase() {
    let pk = PublicKey::from_text(&pub_box(
        b"Ed",
        [0x0f, 0xe, 0xd, 0xc, 0xb, 0xa, 0x09, 0xa0],
        PublicKey::from_text(NOPW_PUB).unwrap().key.to_bytes(),
    ))
    .unwrap();
    assert_eq!(pk.key_id_hex(), "A0090A0B0C0D0E0F");
}

#[test]
fn parses_unencrypted_minisign_secret_key() {
    assert!(!SecretKey::is_encrypted(NOPW_KEY).unwrap());
    let sk = SecretKey::from_text(NOPW_KEY, None).unwrap();
    assert_eq!(sk.public_key(), PublicKey::from_text(NOPW_PUB).unwrap());
    // A password is ignored for unencrypted keys, like `minisign -W`.
    let again = SecretKey::from_text(NOPW_KEY, Some(b"anything")).unwrap();
    assert_eq!(again.public_key(), sk.public_key());
}

/// Decrypts a key made by `minisign -G` under a memory limit, so minisign
/// fell back to 16 MiB of scrypt memory (N = 2^14) and the test stays fast.
#[test]
fn parses_encrypted_minisign_secret_key() {
    assert!(SecretKey::is_encrypted(PW_KEY).unwrap());
    assert_eq!(SecretKey::from_text(PW_KEY, None).unwrap_err(), KeyError::PasswordRequired);
    let sk = SecretKey::from_text(PW_KEY, Some(PASSWORD)).unwrap();
    let pk = PublicKey::from_text(PW_PUB).unwrap();
    assert_eq!(sk.public_key(), pk);
    // Signing is deterministic: we reproduce minisign's signature file exactly.
    let minisig = Signature::from_text(MESSAGE_SIG).unwrap();
    let ours = sk.sign(MESSAGE, minisig.trusted_comment(), minisig.untrusted_comment()).unwrap();
    assert_eq!(ours.to_text(), MESSAGE_SIG);
    ours.verify(&pk, MESSAGE).unwrap();
    assert_eq!(SecretKey::from_text(PW_KEY, Some(b"wrong-password")).unwrap_err(), KeyError::WrongPassword);
}

/// A key made by plain `minisign -G`, with minisign's default scrypt cost
/// (1 GiB, N = 2^20): about 100 s unoptimised, 4 s optimised.
#[test]
#[ignore = "slow: minisign's default 1 GiB scrypt cost; run with `cargo test --release -- --ignored`"]
fn parses_minisign_default_cost_secret_key() {
    let text = include_str!("../../testdata/keys/minisign-pw-default.key");
    let pk = PublicKey::from_text(include_str!("../../testdata/keys/minisign-pw-default.pub")).unwrap();
    let bytes = BASE64.decode(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(bytes[SK_OPSLIMIT..SK_MEMLIMIT], KdfLimits::MINISIGN_DEFAULT.opslimit.to_le_bytes());
    assert_eq!(bytes[SK_MEMLIMIT..SK_BLOCK], KdfLimits::MINISIGN_DEFAULT.memlimit.to_le_bytes());
    let sk = SecretKey::from_text(text, Some(PASSWORD)).unwrap();
    assert_eq!(sk.public_key(), pk);
    sk.sign(MESSAGE, "t", "u").unwrap().verify(&pk, MESSAGE).unwrap();
}

#[test]
fn verifies_minisign_signature() {
    let pk = PublicKey::from_text(PW_PUB).unwrap();
    let sig = Signature::from_text(MESSAGE_SIG).unwrap();
    sig.verify(&pk, MESSAGE).unwrap();
    assert_eq!(sig.trusted_comment(), "agent-bundle fixture: message.txt signed by stock minisign 0.11");
    assert_eq!(sig.key_id(), pk.key_id());
    assert_eq!(sig.key_id_hex(), pk.key_id_hex());
    assert_eq!(sig.to_text(), MESSAGE_SIG);
    assert_eq!(sig.verify(&pk, b"tampered").unwrap_err(), SignatureError::BadSignature);
    let other = PublicKey::from_text(NOPW_PUB).unwrap();
    assert_eq!(
        sig.verify(&other, MESSAGE).unwrap_err(),
        SignatureError::KeyIdMismatch { expected: other.key_id_hex(), found: pk.key_id_hex() }
    );
}

#[test]
fn signs_with_unencrypted_minisign_key() {
    let sk = SecretKey::from_text(NOPW_KEY, None).unwrap();
    let pk = PublicKey::from_text(NOPW_PUB).unwrap();
    let sig = sk.sign(b"bundle bytes", "timestamp:1\tfile:x", "signature from bundle").unwrap();
    sig.verify(&pk, b"bundle bytes").unwrap();
    let reparsed = Signature::from_text(&sig.to_text()).unwrap();
    assert_eq!(reparsed, sig);
    reparsed.verify(&pk, b"bundle bytes").unwrap();
}

#[test]
fn unencrypted_round_trip() {
    let sk = SecretKey::generate();
    let text = sk.to_text(None).unwrap();
    assert!(text.starts_with("untrusted comment: minisign unencrypted secret key\n"));
    assert!(!SecretKey::is_encrypted(&text).unwrap());
    let back = SecretKey::from_text(&text, None).unwrap();
    assert_eq!(back.public_key(), sk.public_key());
    assert_eq!(back.key_id(), sk.key_id());
    let pk = PublicKey::from_text(&sk.public_key().to_text()).unwrap();
    assert_eq!(pk, sk.public_key());
    back.sign(b"x", "t", "u").unwrap().verify(&pk, b"x").unwrap();
}

#[test]
fn encrypted_round_trip() {
    let sk = SecretKey::generate();
    let text = sk.to_text_with(Some(b"hunter2"), "my key", CHEAP).unwrap();
    assert!(text.starts_with("untrusted comment: my key\n"));
    assert!(SecretKey::is_encrypted(&text).unwrap());
    let back = SecretKey::from_text(&text, Some(b"hunter2")).unwrap();
    assert_eq!(back.public_key(), sk.public_key());
    assert_eq!(SecretKey::from_text(&text, None).unwrap_err(), KeyError::PasswordRequired);
    assert_eq!(SecretKey::from_text(&text, Some(b"hunter3")).unwrap_err(), KeyError::WrongPassword);
    // Stored limits are what minisign reads back.
    let bytes = BASE64.decode(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(&bytes[..6], b"EdScB2");
    assert_eq!(bytes[SK_OPSLIMIT..SK_MEMLIMIT], CHEAP.opslimit.to_le_bytes());
    assert_eq!(bytes[SK_MEMLIMIT..SK_BLOCK], CHEAP.memlimit.to_le_bytes());
    // A fresh salt each time.
    let again = sk.to_text_with(Some(b"hunter2"), "my key", CHEAP).unwrap();
    assert_ne!(again, text);
}

#[test]
fn too_expensive_kdf_limits_are_refused() {
    let sk = SecretKey::generate();
    let huge = KdfLimits { opslimit: 1 << 40, memlimit: 1 << 40 };
    assert!(matches!(sk.to_text_with(Some(b"pw"), "c", huge), Err(KeyError::UnsupportedKdf(_))));
    // The same refusal when a file asks for it.
    let text = sk.to_text_with(Some(b"pw"), "c", CHEAP).unwrap();
    let hostile = edit_b64_line(&text, 1, |b| {
        b[SK_MEMLIMIT..SK_BLOCK].copy_from_slice(&(1u64 << 40).to_le_bytes());
        b[SK_OPSLIMIT..SK_MEMLIMIT].copy_from_slice(&(1u64 << 40).to_le_bytes());
    });
    assert!(matches!(SecretKey::from_text(&hostile, Some(b"pw")), Err(KeyError::UnsupportedKdf(_))));
}

#[test]
fn committed_test_key_pair() {
    assert!(TEST_KEY.starts_with("untrusted comment: TEST KEY - NEVER TRUST"));
    assert!(TEST_PUB.starts_with("untrusted comment: TEST KEY - NEVER TRUST"));
    let sk = SecretKey::from_text(TEST_KEY, None).unwrap();
    let pk = PublicKey::from_text(TEST_PUB).unwrap();
    assert_eq!(sk.public_key(), pk);
    sk.sign(b"data", "t", "u").unwrap().verify(&pk, b"data").unwrap();
}

#[test]
fn tampering_is_detected() {
    let sk = SecretKey::generate();
    let pk = sk.public_key();
    let sig = sk.sign(b"payload", "trusted", "untrusted").unwrap();
    let text = sig.to_text();

    assert_eq!(sig.verify(&pk, b"payloae").unwrap_err(), SignatureError::BadSignature);

    // Flipped bit in the data signature.
    let flipped = edit_b64_line(&text, 1, |b| b[20] ^= 0x01);
    assert_eq!(
        Signature::from_text(&flipped).unwrap().verify(&pk, b"payload").unwrap_err(),
        SignatureError::BadSignature
    );

    // Flipped bit in the global signature.
    let flipped = edit_b64_line(&text, 3, |b| b[5] ^= 0x80);
    assert_eq!(
        Signature::from_text(&flipped).unwrap().verify(&pk, b"payload").unwrap_err(),
        SignatureError::BadTrustedComment
    );

    // Edited trusted comment.
    let mut lines = sig_lines(&text);
    lines[2] = "trusted comment: trusted!".into();
    assert_eq!(
        Signature::from_text(&join(&lines)).unwrap().verify(&pk, b"payload").unwrap_err(),
        SignatureError::BadTrustedComment
    );

    // Trusted comment and global signature swapped in from a signature by
    // the same key over other data. (Over the same data the Ed25519
    // signature is deterministic, so that pair would legitimately verify.)
    let other = sk.sign(b"other payload", "other comment", "untrusted").unwrap().to_text();
    let other_lines = sig_lines(&other);
    let mut lines = sig_lines(&text);
    lines[2].clone_from(&other_lines[2]);
    lines[3].clone_from(&other_lines[3]);
    assert_eq!(
        Signature::from_text(&join(&lines)).unwrap().verify(&pk, b"payload").unwrap_err(),
        SignatureError::BadTrustedComment
    );

    // The untrusted comment is not covered.
    let mut lines = sig_lines(&text);
    lines[0] = "untrusted comment: anything".into();
    Signature::from_text(&join(&lines)).unwrap().verify(&pk, b"payload").unwrap();
}

#[test]
fn wrong_key_is_detected() {
    let sk = SecretKey::generate();
    let sig = sk.sign(b"payload", "t", "u").unwrap();
    let other = SecretKey::generate();
    assert!(matches!(sig.verify(&other.public_key(), b"payload"), Err(SignatureError::KeyIdMismatch { .. })));
    // Same key id, different key.
    let impostor = PublicKey { key_id: sk.key_id(), key: other.public_key().key };
    assert_eq!(sig.verify(&impostor, b"payload").unwrap_err(), SignatureError::BadSignature);
}

#[test]
fn key_id_is_checked_before_crypto() {
    let sk = SecretKey::generate();
    let pk = sk.public_key();
    let sig = sk.sign(b"payload", "t", "u").unwrap();
    let text = edit_b64_line(&sig.to_text(), 1, |b| b[2] ^= 1);
    let err = Signature::from_text(&text).unwrap().verify(&pk, b"other data").unwrap_err();
    assert!(matches!(err, SignatureError::KeyIdMismatch { .. }));
}

#[test]
fn non_canonical_s_is_rejected() {
    let sk = SecretKey::generate();
    let pk = sk.public_key();
    let text = sk.sign(b"payload", "t", "u").unwrap().to_text();
    let malleated = edit_b64_line(&text, 1, |b| add_order(&mut b[10 + 32..]));
    assert_eq!(
        Signature::from_text(&malleated).unwrap().verify(&pk, b"payload").unwrap_err(),
        SignatureError::BadSignature
    );
    let malleated = edit_b64_line(&text, 3, |b| add_order(&mut b[32..]));
    assert_eq!(
        Signature::from_text(&malleated).unwrap().verify(&pk, b"payload").unwrap_err(),
        SignatureError::BadTrustedComment
    );
}

#[test]
fn legacy_signatures_are_rejected() {
    let sig = edit_b64_line(MESSAGE_SIG, 1, |b| b[..2].copy_from_slice(b"Ed"));
    assert_eq!(Signature::from_text(&sig).unwrap_err(), SignatureError::UnsupportedAlgorithm);
    let sig = edit_b64_line(MESSAGE_SIG, 1, |b| b[..2].copy_from_slice(b"XX"));
    assert!(matches!(Signature::from_text(&sig), Err(SignatureError::Malformed(_))));
}

#[test]
fn weak_and_invalid_public_keys_are_rejected() {
    let id = [1, 2, 3, 4, 5, 6, 7, 8];
    // Identity point (y = 1) and a point of order 4 (y = 0).
    let mut identity = [0u8; 32];
    identity[0] = 1;
    for point in [identity, [0u8; 32]] {
        assert_eq!(PublicKey::from_text(&pub_box(b"Ed", id, point)).unwrap_err(), KeyError::WeakKey);
    }
    // Order-2 point y = -1 = p - 1.
    let mut minus_one = [0xff; 32];
    minus_one[0] = 0xec;
    minus_one[31] = 0x7f;
    assert_eq!(PublicKey::from_text(&pub_box(b"Ed", id, minus_one)).unwrap_err(), KeyError::WeakKey);
    // Not on the curve (y = 2 has no x).
    let mut not_on_curve = [0u8; 32];
    not_on_curve[0] = 2;
    assert!(matches!(PublicKey::from_text(&pub_box(b"Ed", id, not_on_curve)), Err(KeyError::Malformed(_))));
    // Non-canonical encodings (y + p for small y) of valid points.
    let mut non_canonical = 0;
    for k in 2u8..19 {
        let mut y_plus_p = [0xff; 32];
        y_plus_p[0] = 0xed + k;
        y_plus_p[31] = 0x7f;
        if VerifyingKey::from_bytes(&y_plus_p).is_ok_and(|p| !p.is_weak()) {
            non_canonical += 1;
            assert!(matches!(PublicKey::from_text(&pub_box(b"Ed", id, y_plus_p)), Err(KeyError::Malformed(_))));
        }
    }
    assert!(non_canonical > 0, "no non-canonical test point found");
    // Wrong algorithm bytes.
    let good = PublicKey::from_text(NOPW_PUB).unwrap();
    assert_eq!(
        PublicKey::from_text(&pub_box(b"ED", id, good.key.to_bytes())).unwrap_err(),
        KeyError::UnsupportedAlgorithm
    );
}

#[test]
fn malformed_public_keys() {
    let malformed = |text: &str| {
        assert!(matches!(PublicKey::from_text(text), Err(KeyError::Malformed(_))), "{text:?} should be malformed");
    };
    malformed("");
    malformed("\n\n");
    malformed("untrusted comment: minisign public key\n");
    malformed(&NOPW_PUB.replace("untrusted comment:", "comment:"));
    malformed(&format!("{NOPW_PUB}extra line\n"));
    let key_line = NOPW_PUB.lines().nth(1).unwrap();
    malformed(&key_line[..key_line.len() - 4]);
    malformed(&format!("{key_line}AAAA"));
    malformed(&key_line.replace('R', "*"));
    malformed(&format!("untrusted comment: x\r y\n{key_line}\n"));
}

#[test]
fn malformed_secret_keys() {
    let malformed = |text: &str| {
        assert!(
            matches!(SecretKey::from_text(text, None), Err(KeyError::Malformed(_))),
            "{text:?} should be malformed"
        );
    };
    malformed("");
    malformed(NOPW_KEY.lines().next().unwrap());
    malformed(NOPW_KEY.lines().nth(1).unwrap());
    malformed(&NOPW_KEY.replace("untrusted comment:", "untrusted:"));
    let key_line = NOPW_KEY.lines().nth(1).unwrap();
    malformed(&format!("untrusted comment: c\n{}\n", &key_line[..100]));
    malformed(&format!("untrusted comment: c\n{key_line}!\n"));
    malformed(&format!("{NOPW_KEY}more\n"));

    let wrong_alg = edit_b64_line(NOPW_KEY, 1, |b| b[..2].copy_from_slice(b"ED"));
    assert_eq!(SecretKey::from_text(&wrong_alg, None).unwrap_err(), KeyError::UnsupportedAlgorithm);
    let wrong_kdf = edit_b64_line(NOPW_KEY, 1, |b| b[SK_KDF..SK_KDF + 2].copy_from_slice(b"Ar"));
    assert!(matches!(SecretKey::from_text(&wrong_kdf, None), Err(KeyError::UnsupportedKdf(_))));
    assert!(matches!(SecretKey::is_encrypted(&wrong_kdf), Err(KeyError::UnsupportedKdf(_))));
    let wrong_chk = edit_b64_line(NOPW_KEY, 1, |b| b[SK_CHK..SK_CHK + 2].copy_from_slice(b"B3"));
    assert!(matches!(SecretKey::from_text(&wrong_chk, None), Err(KeyError::UnsupportedKdf(_))));
}

#[test]
fn corrupted_unencrypted_secret_key() {
    let sk = SecretKey::generate();
    let text = sk.to_text(None).unwrap();
    // A bit flip in the secret half breaks the checksum.
    let corrupted = edit_b64_line(&text, 1, |b| b[SK_BLOCK + KEY_ID_LEN + 3] ^= 1);
    assert_eq!(SecretKey::from_text(&corrupted, None).unwrap_err(), KeyError::ChecksumMismatch);
    // minisign -G -W writes an all-zero checksum: then only the
    // secret/public consistency check can catch corruption.
    let zero_chk = edit_b64_line(&corrupted, 1, |b| {
        b[SK_BLOCK + KEY_ID_LEN + KEYPAIR_LEN..].fill(0);
    });
    assert!(matches!(SecretKey::from_text(&zero_chk, None), Err(KeyError::Malformed(_))));
}

#[test]
fn malformed_signatures() {
    let malformed = |text: &str| {
        assert!(
            matches!(Signature::from_text(text), Err(SignatureError::Malformed(_))),
            "{text:?} should be malformed"
        );
    };
    let lines = sig_lines(MESSAGE_SIG);
    malformed("");
    malformed(&join(&lines[..3]));
    malformed(&join(&lines[..2]));
    malformed(&format!("{MESSAGE_SIG}extra\n"));
    let mut bad = lines.clone();
    bad[0] = "comment: x".into();
    malformed(&join(&bad));
    let mut bad = lines.clone();
    bad[2] = "trusted: x".into();
    malformed(&join(&bad));
    let mut bad = lines.clone();
    bad[2] = format!("{}\rhidden", lines[2]);
    malformed(&join(&bad));
    let mut bad = lines.clone();
    bad[2] = format!("{}\0hidden", lines[2]);
    malformed(&join(&bad));
    let mut bad = lines.clone();
    bad[1].truncate(40);
    malformed(&join(&bad));
    let mut bad = lines.clone();
    bad[3] = BASE64.encode([0u8; 63]);
    malformed(&join(&bad));
    let mut bad = lines.clone();
    bad[1] = bad[1].replace('=', "");
    malformed(&join(&bad));
    // Trailing newline optional, CRLF accepted.
    Signature::from_text(MESSAGE_SIG.trim_end()).unwrap();
    Signature::from_text(&MESSAGE_SIG.replace('\n', "\r\n")).unwrap();
}

#[test]
fn invalid_comments_are_refused_when_signing() {
    let sk = SecretKey::generate();
    for (trusted, untrusted) in [("two\nlines", "u"), ("cr\rhere", "u"), ("nul\0here", "u"), ("t", "two\nlines")] {
        assert!(matches!(sk.sign(b"x", trusted, untrusted), Err(SignatureError::InvalidComment(_))));
    }
    let max_trusted = "t".repeat(MAX_TRUSTED_COMMENT_LEN);
    let max_untrusted = "u".repeat(MAX_UNTRUSTED_COMMENT_LEN);
    let sig = sk.sign(b"x", &max_trusted, &max_untrusted).unwrap();
    Signature::from_text(&sig.to_text()).unwrap().verify(&sk.public_key(), b"x").unwrap();
    assert!(sk.sign(b"x", &format!("{max_trusted}t"), "u").is_err());
    assert!(sk.sign(b"x", "t", &format!("{max_untrusted}u")).is_err());
    assert!(matches!(sk.public_key().to_text_with_comment("a\nb"), Err(KeyError::InvalidComment(_))));
    assert!(matches!(sk.to_text_with(None, "a\nb", CHEAP), Err(KeyError::InvalidComment(_))));
}

#[test]
fn debug_and_errors_do_not_leak_secrets() {
    let sk = SecretKey::from_text(NOPW_KEY, None).unwrap();
    let debug = format!("{sk:?}");
    let seed = &sk.signing.to_bytes();
    assert!(debug.contains("<redacted>"));
    assert!(!debug.contains(&BASE64.encode(seed)));
    assert!(!debug.contains(&format!("{seed:?}")));
    assert!(!debug.contains(&format!("{:?}", &seed[..8])));
    let key_line = NOPW_KEY.lines().nth(1).unwrap();
    for err in [
        SecretKey::from_text(&format!("untrusted comment: c\n{key_line}x\n"), None).unwrap_err(),
        SecretKey::from_text(&format!("comment: c\n{key_line}\n"), None).unwrap_err(),
    ] {
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains(&key_line[84..124]), "{shown}");
    }
    for err in [
        KeyError::PasswordRequired,
        KeyError::WrongPassword,
        KeyError::WeakKey,
        KeyError::ChecksumMismatch,
        KeyError::UnsupportedAlgorithm,
    ] {
        assert!(err.to_string().len() > 30);
    }
}

/// The byte check of canonical encodings says what a compress round trip says, for valid keys
/// and for every encoding of y >= p.
#[test]
fn the_canonical_check_agrees_with_a_compress_round_trip() {
    let round_trip = |bytes: &[u8; 32]| {
        VerifyingKey::from_bytes(bytes)
            .ok()
            .filter(|k| !k.is_weak())
            .map(|k| k.to_edwards().compress().to_bytes() == *bytes)
    };
    let mut cases: Vec<[u8; 32]> = (0..64).map(|_| SecretKey::generate().public_key().ed25519_bytes()).collect();
    for low in 0xedu8..=0xff {
        for sign in [0x7f, 0xff] {
            let mut y = [0xff; 32];
            y[0] = low;
            y[31] = sign;
            cases.push(y);
        }
    }
    let mut checked = 0;
    for bytes in cases {
        if let Some(canonical) = round_trip(&bytes) {
            assert_eq!(super::public_key::y_is_canonical(&bytes), canonical, "{bytes:02x?}");
            checked += 1;
        }
    }
    assert!(checked > 64, "too few decodable encodings of y >= p: {checked}");
}
