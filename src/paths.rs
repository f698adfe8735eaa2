//! The rules for a file path inside an agent folder and its bundle: relative, `/`-separated,
//! Unicode NFC, no `.`/`..`/empty components, no control characters or backslashes, at most
//! 255 bytes (the most a plain ustar header can hold, so bundles never need PAX headers).
//! Checked at lock time (so that nothing unpackable is ever signed) and again at verify time.

use unicode_normalization::{IsNormalized, is_nfc_quick};

use crate::archive;

/// Why a path is not acceptable, or `Ok`.
pub fn check(path: &str) -> Result<(), String> {
    archive::check_path(path).map_err(|p| p.to_string())?;
    if is_nfc_quick(path.chars()) != IsNormalized::Yes && !unicode_normalization::is_nfc(path) {
        return Err("the path is not in Unicode NFC form".to_owned());
    }
    if archive::split_ustar_path(path).is_none() {
        return Err("the path cannot be split into a ustar prefix (155 bytes) and name (100 bytes)".to_owned());
    }
    Ok(())
}

/// The key two paths collide on when a file system folds case (macOS, Windows).
pub fn fold_key(path: &str) -> String {
    path.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(check("a/b.json").is_ok());
        for bad in ["", "/a", "a//b", "a/./b", "../a", "a/..", "a\\b", "a\u{0}b", "e\u{301}"] {
            assert!(check(bad).is_err(), "{bad:?}");
        }
        assert!(check(&"a".repeat(101)).is_err());
        assert!(check(&format!("{}/{}", "a".repeat(150), "b".repeat(100))).is_ok());
    }
}
