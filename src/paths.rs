//! The rules for a file path inside an agent folder and its bundle: relative, `/`-separated,
//! Unicode NFC, no `.`/`..`/empty components, no control characters or backslashes, at most
//! 255 bytes (the most a plain ustar header can hold, so bundles never need PAX headers).
//! Checked at lock time (so that nothing unpackable is ever signed) and again at verify time.

use unicode_normalization::{IsNormalized, is_nfc_quick};

/// Longest path (bytes) an entry may have: ustar `prefix` (155) + `/` + `name` (100).
pub const MAX_PATH_BYTES: usize = 255;

/// Why a path is not acceptable, or `Ok`.
pub fn check(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the path is empty".to_owned());
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(format!(
            "the path is {} bytes long; at most {MAX_PATH_BYTES} fit in a bundle",
            path.len()
        ));
    }
    if path.starts_with('/') {
        return Err("the path is absolute".to_owned());
    }
    if let Some(c) = path.chars().find(|&c| c.is_control() || c == '\\') {
        return Err(format!("the path contains {}", c.escape_debug()));
    }
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("the path has an empty, `.` or `..` component".to_owned());
    }
    if is_nfc_quick(path.chars()) != IsNormalized::Yes && !unicode_normalization::is_nfc(path) {
        return Err("the path is not in Unicode NFC form".to_owned());
    }
    if !fits_ustar(path) {
        return Err(
            "the path cannot be split into a ustar prefix (155 bytes) and name (100 bytes)"
                .to_owned(),
        );
    }
    Ok(())
}

/// Whether a path fits a plain ustar header: whole in `name` (100 bytes), or split at a `/`
/// into `prefix` (at most 155 bytes) and `name` (at most 100 bytes).
pub fn fits_ustar(path: &str) -> bool {
    path.len() <= 100
        || path
            .match_indices('/')
            .any(|(i, _)| i <= 155 && path.len() - i - 1 <= 100 && path.len() - i > 1)
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
        for bad in [
            "", "/a", "a//b", "a/./b", "../a", "a/..", "a\\b", "a\u{0}b", "e\u{301}",
        ] {
            assert!(check(bad).is_err(), "{bad:?}");
        }
        assert!(check(&"a".repeat(101)).is_err());
        assert!(check(&format!("{}/{}", "a".repeat(150), "b".repeat(100))).is_ok());
    }
}
