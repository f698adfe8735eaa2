//! The one canonicalisation every fingerprint uses: RFC 8785 canonical JSON (serde_jcs) and
//! BLAKE3 over it. A low module of its own so that the formats (MCP pins) and the contracts
//! share it without importing each other.

use serde::Serialize;
use serde_json::Value;

/// The RFC 8785 canonical JSON of `value` and its fingerprint: BLAKE3 of those bytes, 64
/// lowercase hex digits. The one canonicalisation every fingerprint uses (tool contracts,
/// pinned MCP tools), so that two of them agree exactly when their canonical forms do.
pub fn canonical_fingerprint<T: Serialize + ?Sized>(value: &T) -> Result<(String, String), serde_json::Error> {
    let canonical = serde_jcs::to_string(value)?;
    let fingerprint = blake3::hash(canonical.as_bytes()).to_hex().to_string();
    Ok((canonical, fingerprint))
}

/// [`canonical_fingerprint`] of a JSON value. It cannot fail: serde_jcs refuses only
/// non-finite numbers and non-string keys, which a `serde_json::Value` cannot hold.
pub fn fingerprint_json(value: &Value) -> (String, String) {
    canonical_fingerprint(value).unwrap_or_else(|e| unreachable!("a serde_json::Value is always canonicalisable: {e}"))
}
