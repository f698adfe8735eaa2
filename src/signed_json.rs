//! Signed JSON is read with one value per key at every depth. serde_json keeps the last of two
//! equal keys in an object (a derived struct refuses them only at its own level), while other
//! readers keep the first (gjson, some policy engines): a signed statement whose predicate says
//! `"tools"` twice would mean one thing to the gate and another to the next reader. So every
//! signed document that is parsed (statements and their predicates, DSSE envelopes, Sigstore
//! bundles, trusted roots) is first walked once for a repeated key, refused if it has one.
//!
//! The walk is serde_json's own parser with a visitor that keeps nothing but each object's keys,
//! so what counts as JSON is the same as for the parse that follows; callers bound size and
//! nesting before (`crate::limits`).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// The path (`$.predicate.tools`) of the first key an object of `bytes` repeats, or `None`.
/// Bytes that are not JSON have no repeated key here (the parse that follows refuses them).
pub fn repeated_key(bytes: &[u8]) -> Option<String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match (Walk { path: "$" }).deserialize(&mut de) {
        Err(e) => {
            let message = e.to_string();
            message.strip_prefix(MARK).map(|rest| rest.split(" at line ").next().unwrap_or(rest).to_owned())
        }
        Ok(()) => None,
    }
}

/// Parses `bytes` into `T` after checking that no object repeats a key.
pub fn from_slice<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    if let Some(path) = repeated_key(bytes) {
        return Err(format!("the key {path} appears twice (signed JSON has one value per key)"));
    }
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

/// Marks the walk's own error among serde_json's.
const MARK: &str = "repeated key ";

struct Walk<'a> {
    path: &'a str,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let path = format!("{}[{i}]", self.path);
            if seq.next_element_seed(Walk { path: &path })?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = format!("{}.{key}", self.path);
            if !seen.insert(key) {
                return Err(de::Error::custom(format!("{MARK}{path}")));
            }
            map.next_value_seed(Walk { path: &path })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_repeated_at_any_depth_is_found_with_its_path() {
        assert_eq!(repeated_key(br#"{"a":1,"a":2}"#).as_deref(), Some("$.a"));
        let nested = br#"{"predicate":{"tools":[{"id":"x"}],"tools":[]}}"#;
        assert_eq!(repeated_key(nested).as_deref(), Some("$.predicate.tools"));
        let in_array = br#"{"s":[{"b":{"id":1,"id":1}}]}"#;
        assert_eq!(repeated_key(in_array).as_deref(), Some("$.s[0].b.id"));
        // An escaped spelling of the same key is the same key.
        assert_eq!(repeated_key(br#"{"id":1,"\u0069d":2}"#).as_deref(), Some("$.id"));
    }

    #[test]
    fn distinct_keys_and_non_json_have_no_repeat() {
        assert_eq!(repeated_key(br#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#), None);
        assert_eq!(repeated_key(b"not json"), None);
        assert!(from_slice::<serde_json::Value>(br#"{"a":{"b":1,"b":1}}"#).unwrap_err().contains("$.a.b"));
    }
}
