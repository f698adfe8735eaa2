//! scrypt as libsodium runs it for minisign's encrypted secret keys: the (opslimit, memlimit)
//! pair a key file stores, turned into N, r, p exactly as libsodium does, with limits so that a
//! hostile key file cannot exhaust memory or time.

use zeroize::Zeroizing;

use super::{KeyError, SECRET_BLOCK_LEN};

// scrypt settings that need more memory or work than these are refused, instead of risking an
// out-of-memory abort or hours of work on a hostile key file.
use crate::limits::{MAX_KDF_MEMORY_BYTES as MAX_KDF_MEMORY, MAX_KDF_WORK};
/// scrypt cost limits stored in an encrypted secret key, with libsodium's
/// `crypto_pwhash_scryptsalsa208sha256` meaning (they are turned into
/// N, r, p exactly as libsodium does, so minisign derives the same stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfLimits {
    /// libsodium `opslimit`.
    pub opslimit: u64,
    /// libsodium `memlimit`, in bytes.
    pub memlimit: u64,
}

impl KdfLimits {
    /// What `minisign -G` uses (libsodium's `*_SENSITIVE` limits):
    /// N = 2^20, r = 8, p = 1, i.e. 1 GiB of memory and a few seconds.
    pub const MINISIGN_DEFAULT: KdfLimits = KdfLimits { opslimit: 33_554_432, memlimit: 1_073_741_824 };
    /// libsodium's `*_INTERACTIVE` limits: N = 2^14, r = 8, p = 1 (16 MiB).
    /// Much cheaper to brute-force than [`KdfLimits::MINISIGN_DEFAULT`].
    pub const INTERACTIVE: KdfLimits = KdfLimits { opslimit: 524_288, memlimit: 16_777_216 };
}

/// Port of libsodium's `pickparams()` (crypto_pwhash_scryptsalsa208sha256):
/// maps (opslimit, memlimit) to (log2 N, r, p).
pub(super) fn pick_scrypt_params(opslimit: u64, memlimit: u64) -> (u32, u32, u32) {
    let opslimit = opslimit.max(32_768);
    let r: u32 = 8;
    let first_n_log2_above = |max_n: u64| {
        let mut n_log2: u32 = 1;
        while n_log2 < 63 {
            if (1u64 << n_log2) > max_n / 2 {
                break;
            }
            n_log2 += 1;
        }
        n_log2
    };
    if opslimit < memlimit / 32 {
        let n_log2 = first_n_log2_above(opslimit / (u64::from(r) * 4));
        (n_log2, r, 1)
    } else {
        let n_log2 = first_n_log2_above(memlimit / (u64::from(r) * 128));
        let max_rp = ((opslimit / 4) / (1u64 << n_log2)).min(0x3fff_ffff);
        // max_rp <= 0x3fff_ffff, so this conversion cannot fail.
        let p = u32::try_from(max_rp).unwrap_or(0x3fff_ffff) / r;
        (n_log2, r, p)
    }
}

/// scrypt parameters for `limits`, refusing settings libsodium would reject
/// and settings too expensive to run safely.
fn scrypt_params(limits: KdfLimits) -> Result<scrypt::Params, KeyError> {
    let (n_log2, r, p) = pick_scrypt_params(limits.opslimit, limits.memlimit);
    let describe = || {
        format!(
            "scrypt settings opslimit={} memlimit={} (N=2^{n_log2}, r={r}, p={p})",
            limits.opslimit, limits.memlimit
        )
    };
    // libsodium's escrypt_kdf refuses p = 0 and N > u32::MAX.
    if p == 0 || n_log2 >= 32 {
        return Err(KeyError::UnsupportedKdf(format!(
            "{} are invalid (libsodium rejects them too); re-encrypt the key with `minisign -C`",
            describe()
        )));
    }
    let n = 1u128 << n_log2;
    let (r128, p128) = (u128::from(r), u128::from(p));
    if 128 * r128 * (n + p128) > MAX_KDF_MEMORY || n * r128 * p128 > MAX_KDF_WORK {
        return Err(KeyError::UnsupportedKdf(format!(
            "{} need more memory or time than allowed (at most 2 GiB and 16x minisign's default work); re-encrypt the key with `minisign -C`",
            describe()
        )));
    }
    let log_n = u8::try_from(n_log2).map_err(|_| KeyError::UnsupportedKdf(describe()))?;
    scrypt::Params::new(log_n, r, p).map_err(|_| KeyError::UnsupportedKdf(describe()))
}

/// The 104-byte scrypt stream minisign XORs over `key id || secret key || checksum`.
pub(super) fn kdf_stream(
    password: &[u8],
    salt: &[u8],
    limits: KdfLimits,
) -> Result<Zeroizing<[u8; SECRET_BLOCK_LEN]>, KeyError> {
    let params = scrypt_params(limits)?;
    let mut stream = Zeroizing::new([0u8; SECRET_BLOCK_LEN]);
    scrypt::scrypt(password, salt, &params, &mut stream[..])
        .map_err(|e| KeyError::UnsupportedKdf(format!("scrypt failed: {e}")))?;
    Ok(stream)
}
