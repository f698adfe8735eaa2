//! Reading until a buffer is full: the helpers the hashing hand-over (`hasher`), the reading
//! threads (`read_ahead`, under the registry's receiving thread too) and file hashing
//! (`digest`) share. `Read::read` may return fewer bytes than asked for at any time; these
//! callers want whole buffers, but `read_exact` treats a short end as an error and loses the
//! count.

use std::io::{self, Read};

/// Fills `buf` from `input` up to its end or the end of `input`; returns the bytes read
/// (fewer than `buf.len()` only at the end of `input`). Interrupted reads are retried.
pub(crate) fn read_full<R: Read + ?Sized>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    match read_until_error(input, buf) {
        (n, None) => Ok(n),
        (_, Some(e)) => Err(e),
    }
}

/// [`read_full`] that keeps the bytes read before an error: how many there are, and the error
/// that stopped the filling (`None`: `buf` is full or `input` ended).
pub(crate) fn read_until_error<R: Read + ?Sized>(input: &mut R, buf: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (filled, Some(e)),
        }
    }
    (filled, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns one byte per call, with an interruption before each.
    struct Trickle(Vec<u8>, bool);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.1 = !self.1;
            if self.1 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            if self.0.is_empty() || buf.is_empty() {
                return Ok(0);
            }
            buf[0] = self.0.remove(0);
            Ok(1)
        }
    }

    #[test]
    fn fills_through_short_and_interrupted_reads_and_stops_at_the_end() {
        let mut input = Trickle(b"abcdef".to_vec(), false);
        let mut buf = [0u8; 4];
        assert_eq!(read_full(&mut input, &mut buf).unwrap(), 4);
        assert_eq!(&buf, b"abcd");
        assert_eq!(read_full(&mut input, &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"ef");
        assert_eq!(read_full(&mut input, &mut buf).unwrap(), 0);
    }
}
