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
    let Some(Refused { rejection: r, .. }) = refused.refused() else { panic!("not refused: {refused:?}") };
    assert_eq!((r.reason, r.path.as_deref()), (Reason::DigestMismatch, Some("zz-large.bin")), "{}", r.message);
}

/// A sink that cannot take an entry (a full disk under `unpack`) is no verdict on the bundle:
/// an I/O failure naming the entry and the operating system's cause, and the agent and signer
/// known by then. It was a rejection with the reason `io_error` before.
#[test]
fn a_sink_that_cannot_write_is_an_io_failure_not_a_rejection() {
    struct Full;
    impl Sink for Full {
        fn open(&mut self, _: &str, _: bool) -> io::Result<Box<dyn Write + '_>> {
            Err(io::Error::from_raw_os_error(28)) // ENOSPC
        }
    }
    let bytes = hostile("ok-foreign-owner-mtime");
    let e = verify(BufReader::new(bytes.as_slice()), Trust::Unchecked, &Expect::default(), &mut Full)
        .expect_err("nothing can be written");
    let VerifyError::Io(failed) = e else { panic!("not an I/O failure: {e:?}") };
    assert_eq!((failed.direction, failed.entry.as_deref()), (IoDirection::Write, Some(manifest::FILE_NAME)));
    assert_eq!(failed.source.raw_os_error(), Some(28));
    assert!(failed.agent.is_some() && failed.key_id.is_some(), "{failed:?}");
    assert!(failed.to_string().starts_with("cannot write `manifest.toml`: "), "{failed}");
}

/// A bundle whose bytes cannot be read is no verdict on it either: an I/O failure with the
/// cause, not `malformed_archive` nor any other rejection.
#[test]
fn a_bundle_that_cannot_be_read_is_an_io_failure_not_a_rejection() {
    struct Failing<'a>(&'a [u8]);
    impl Read for Failing<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::from_raw_os_error(5)); // EIO
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let bytes = hostile("ok-foreign-owner-mtime");
    for cut in [0, 100, bytes.len() / 2, bytes.len() - 1] {
        let input = BufReader::with_capacity(64, Failing(&bytes[..cut]));
        let e = verify(input, Trust::Unchecked, &Expect::default(), &mut Discard).expect_err("the read fails");
        let VerifyError::Io(failed) = e else { panic!("cut at {cut}: not an I/O failure: {e:?}") };
        assert_eq!(failed.direction, IoDirection::Read, "cut at {cut}");
        assert_eq!(failed.source.raw_os_error(), Some(5), "cut at {cut}: {failed}");
    }
}
