//! What verify decides while a hash is still being computed, made deterministic by holding
//! the hashing thread ([`crate::hasher::held`]).

use std::io::BufReader;

use super::*;

fn hostile(name: &str) -> Vec<u8> {
    let path = format!("{}/testdata/hostile/{name}.agent.bundle", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// verify compares a large entry's digest only after it has read on (the hash is computed on
/// another thread), yet a digest that does not match is reported before a later entry's
/// problem. The hashing thread is held until verify waits for it, so a verifier that returned
/// the later entry's problem without waiting for the earlier hash answers `unlisted_entry`
/// on every run (it did in 12 of 20 runs, sampled, on a 2-vCPU VM).
#[test]
fn an_earlier_entrys_digest_is_reported_before_a_later_entrys_problem() {
    let bytes = hostile("digest_mismatch-large-then-unlisted");
    let refused = crate::hasher::held(|| {
        verify(BufReader::new(bytes.as_slice()), Trust::Unchecked, &Expect::default(), &mut Discard)
    })
    .expect_err("the bundle is refused");
    let r = refused.into_rejection();
    assert_eq!((r.reason, r.path.as_deref()), (Reason::DigestMismatch, Some("zz-large.bin")), "{}", r.message);
}
