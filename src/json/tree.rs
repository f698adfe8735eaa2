//! A JSON tree that borrows from the text it was parsed from, for the validator.
//!
//! `serde_json::Value` (with `preserve_order`) copies every key and string and hashes every key
//! (SipHash) into an `IndexMap`: building it was over half of `bundle check`'s parse of a
//! tools.json and a fifth of the whole check. Here strings and keys point into the text (a copy
//! only where an escape had to be decoded), an object is its members in document order, and a
//! key is found by comparison (by binary search over a sorted index in objects of more than
//! [`SMALL`] members, so a hostile object of 100,000 keys does not make lookups quadratic).
//! The rest of the program keeps `Value`: [`Json::to_value`] and [`Json::view`] convert.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde_json::{Number, Value};

use super::ParseState;

/// Objects of at most this many members are searched member by member.
const SMALL: usize = 8;

/// A JSON value whose strings borrow from the parsed text.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Object<'a>),
}

/// An object's members in document order; keys are unique (the parser reports duplicates).
#[derive(Debug, Clone, Default)]
pub struct Object<'a> {
    members: Vec<(Cow<'a, str>, Json<'a>)>,
    /// Member positions sorted by key, for objects of more than [`SMALL`] members: built by the
    /// parser (which checks for duplicates with it) or at the first lookup.
    sorted: OnceCell<Box<[u32]>>,
}

impl PartialEq for Object<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.members == other.members
    }
}

impl<'a> Object<'a> {
    /// An object of these members (keys must be unique).
    pub fn from_members(members: Vec<(Cow<'a, str>, Json<'a>)>) -> Self {
        Object { members, sorted: OnceCell::new() }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        if self.members.len() <= SMALL {
            return self.members.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        }
        let sorted = self.sorted.get_or_init(|| sorted_positions(&self.members));
        let at = sorted.binary_search_by(|&i| self.members[i as usize].0.as_ref().cmp(key)).ok()?;
        Some(&self.members[sorted[at] as usize].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Members in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json<'a>)> {
        self.members.iter().map(|(k, v)| (k.as_ref(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|(k, _)| k.as_ref())
    }

    pub fn values(&self) -> impl Iterator<Item = &Json<'a>> {
        self.members.iter().map(|(_, v)| v)
    }
}

fn sorted_positions(members: &[(Cow<'_, str>, Json<'_>)]) -> Box<[u32]> {
    let mut sorted: Vec<u32> = (0..members.len() as u32).collect();
    sorted.sort_unstable_by(|&a, &b| members[a as usize].0.cmp(&members[b as usize].0));
    sorted.into_boxed_slice()
}

impl<'a> Json<'a> {
    /// The member `key` when this is an object.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.as_object()?.get(key)
    }

    pub fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    pub fn is_boolean(&self) -> bool {
        matches!(self, Json::Bool(_))
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Json::String(_))
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Json::Number(_))
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Json::Array(_))
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Json::Object(_))
    }

    /// The same document as a `serde_json::Value`.
    pub fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.as_ref().to_owned()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.to_owned(), v.to_value())).collect()),
        }
    }

    /// A tree borrowing the strings of `value`.
    pub fn view(value: &'a Value) -> Json<'a> {
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(n.clone()),
            Value::String(s) => Json::String(Cow::Borrowed(s)),
            Value::Array(items) => Json::Array(items.iter().map(Json::view).collect()),
            Value::Object(m) => Json::Object(Object::from_members(
                m.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), Json::view(v))).collect(),
            )),
        }
    }

    /// The same tree owning its strings.
    pub fn into_owned(self) -> Json<'static> {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(b),
            Json::Number(n) => Json::Number(n),
            Json::String(s) => Json::String(Cow::Owned(s.into_owned())),
            Json::Array(items) => Json::Array(items.into_iter().map(Json::into_owned).collect()),
            Json::Object(o) => Json::Object(Object {
                members: o.members.into_iter().map(|(k, v)| (Cow::Owned(k.into_owned()), v.into_owned())).collect(),
                sorted: o.sorted,
            }),
        }
    }
}

impl serde::Serialize for Json<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(o) => {
                let mut map = s.serialize_map(Some(o.len()))?;
                for (k, v) in o.iter() {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// Compact JSON, as `serde_json::Value` prints.
impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| fmt::Error)?)
    }
}

/// Reads one value within the parse's budget and depth, noting whether any object repeats a
/// key (see [`super::parse_tree_within`]).
pub(super) struct StrictTree<'s, 'b> {
    pub(super) state: &'s ParseState<'b>,
    /// The nesting depth of the value being read (the root is 1).
    pub(super) depth: usize,
}

impl<'de> DeserializeSeed<'de> for StrictTree<'_, '_> {
    type Value = Json<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictTree<'_, '_> {
    type Value = Json<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Json<'de>, E> {
        self.state.count()?;
        Ok(Json::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Json<'de>, E> {
        self.state.count()?;
        Ok(Json::Number(v.into()))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Json<'de>, E> {
        self.state.count()?;
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Json<'de>, E> {
        self.state.count()?;
        Ok(Number::from_f64(v).map_or(Json::Null, Json::Number))
    }
    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Json<'de>, E> {
        self.state.count()?;
        Ok(Json::String(Cow::Borrowed(v)))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Json<'de>, E> {
        self.state.count()?;
        Ok(Json::String(Cow::Owned(v.to_owned())))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Json<'de>, E> {
        self.state.count()?;
        Ok(Json::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        self.state.enter(self.depth)?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictTree { state: self.state, depth: self.depth + 1 })? {
            items.push(v);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        self.state.enter(self.depth)?;
        let mut members: Vec<(Cow<'de, str>, Json<'de>)> = Vec::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let v = map.next_value_seed(StrictTree { state: self.state, depth: self.depth + 1 })?;
            if members.len() < SMALL && members.iter().any(|(k, _)| *k == key) {
                self.state.duplicates.set(true);
            }
            members.push((key, v));
        }
        let object = Object::from_members(members);
        if object.members.len() > SMALL {
            let sorted = sorted_positions(&object.members);
            if sorted.windows(2).any(|w| object.members[w[0] as usize].0 == object.members[w[1] as usize].0) {
                self.state.duplicates.set(true);
            }
            let _ = object.sorted.set(sorted);
        }
        Ok(Json::Object(object))
    }
}

/// An object key, borrowed from the text unless it had escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Source;
    use serde_json::json;

    fn tree(text: &str, f: impl FnOnce(&Json<'_>, &[crate::diagnostic::Diagnostic])) {
        let source = Source::new("t.json", text.to_owned());
        let mut diags = Vec::new();
        let doc = super::super::parse_tree_within(&source, &super::super::Budget::default(), &mut diags).unwrap();
        f(&doc.value, &diags);
    }

    #[test]
    fn converts_to_the_same_value_as_serde_json_parses() {
        let text = r#"{"b": [1, -2, 3.5, "x\"y", null, true], "a": {"k\u00e9": {}, "z": []}, "": ""}"#;
        tree(text, |t, diags| {
            assert!(diags.is_empty());
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(t.to_value(), v);
            assert_eq!(Json::view(&v), *t);
            assert_eq!(t.to_string(), v.to_string());
            assert_eq!(t.clone().into_owned(), *t);
        });
    }

    #[test]
    fn finds_members_of_small_and_large_objects() {
        let big: serde_json::Map<String, Value> = (0..50).rev().map(|i| (format!("k{i}"), json!(i))).collect();
        let text = Value::Object(big).to_string();
        tree(&text, |t, diags| {
            assert!(diags.is_empty());
            for i in 0..50 {
                assert_eq!(t.get(&format!("k{i}")).and_then(Json::as_u64), Some(i));
            }
            assert!(t.get("k50").is_none());
            assert_eq!(t.as_object().unwrap().keys().next(), Some("k49"), "document order");
        });
        tree(r#"{"a": 1, "b": 2}"#, |t, _| {
            assert_eq!(t.get("b").and_then(Json::as_u64), Some(2));
            assert!(t.get("c").is_none());
        });
    }

    #[test]
    fn duplicate_keys_are_found_in_small_and_large_objects() {
        tree(r#"{"a": 1, "a": 2}"#, |_, diags| assert_eq!(diags.len(), 1, "{diags:?}"));
        let mut members: Vec<String> = (0..20).map(|i| format!("\"k{i}\": {i}")).collect();
        members.push("\"k3\": 0".to_owned());
        tree(&format!("{{{}}}", members.join(",")), |_, diags| assert_eq!(diags.len(), 1, "{diags:?}"));
        // An escaped key equal to a plain one is the same key.
        tree(r#"{"a": 1, "\u0061": 2}"#, |_, diags| assert_eq!(diags.len(), 1, "{diags:?}"));
    }
}
