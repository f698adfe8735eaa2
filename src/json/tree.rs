//! A JSON tree for the validator: strings borrow from the parsed text, everything else lives
//! in one arena ([`bumpalo::Bump`]) freed at once.
//!
//! `serde_json::Value` (with `preserve_order`) copies every key and string and hashes every key
//! (SipHash) into an `IndexMap`, one allocation per container freed one by one: building and
//! dropping it was over half of `bundle check`'s work on a tools.json. Here a string is a slice
//! of the text (a copy in the arena only where an escape had to be decoded), an array or an
//! object is a slice in the arena allocated once at its final length (children are gathered on
//! a stack shared by the whole parse), and a key is found by comparison (by binary search over
//! a sorted index in objects of more than [`SMALL`] members, so that a hostile object of
//! 100,000 keys does not make lookups quadratic). The rest of the program keeps `Value`:
//! [`Json::to_value`] and [`Json::view`] convert.

use std::cell::RefCell;
use std::fmt;

use bumpalo::Bump;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde_json::Value;

use super::ParseState;

/// Objects of at most this many members are searched member by member.
const SMALL: usize = 8;

/// A JSON value; what it points to lives in the text it was parsed from and in an arena.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Number(Num),
    String(&'a str),
    Array(&'a [Json<'a>]),
    Object(&'a Object<'a>),
}

/// A JSON number as serde_json reads it: an integer when it is one, else a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Unsigned(u64),
    Negative(i64),
    Float(f64),
}

impl Num {
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Num::Unsigned(n) => Some(n),
            _ => None,
        }
    }

    pub fn is_u64(self) -> bool {
        matches!(self, Num::Unsigned(_))
    }

    /// Always a value, as `serde_json::Number::as_f64` (an option there too).
    pub fn as_f64(self) -> Option<f64> {
        Some(match self {
            Num::Unsigned(n) => n as f64,
            Num::Negative(n) => n as f64,
            Num::Float(f) => f,
        })
    }

    fn to_number(self) -> serde_json::Number {
        match self {
            Num::Unsigned(n) => n.into(),
            Num::Negative(n) => n.into(),
            // Finite: serde_json reads no NaN or infinity.
            Num::Float(f) => serde_json::Number::from_f64(f).unwrap_or_else(|| 0.into()),
        }
    }
}

/// As `serde_json::Number` prints.
impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_number().fmt(f)
    }
}

/// One object member.
pub type Member<'a> = (&'a str, Json<'a>);

/// An object's members in document order; keys are unique (the parser reports duplicates).
#[derive(Debug)]
pub struct Object<'a> {
    members: &'a [Member<'a>],
    /// Member positions sorted by key when there are more than [`SMALL`] members, else empty.
    sorted: &'a [u32],
}

impl PartialEq for Object<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.members == other.members
    }
}

impl<'a> Object<'a> {
    /// An object of these members (keys must be unique), in `arena`.
    pub fn new(arena: &'a Bump, members: &'a [Member<'a>]) -> &'a Object<'a> {
        let sorted: &'a [u32] =
            if members.len() > SMALL { arena.alloc_slice_copy(&sorted_positions(members)) } else { &[] };
        arena.alloc(Object { members, sorted })
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&'a Json<'a>> {
        let members: &'a [Member<'a>] = self.members;
        if self.sorted.is_empty() {
            return members.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
        }
        let at = self.sorted.binary_search_by(|&i| members[i as usize].0.cmp(key)).ok()?;
        Some(&members[self.sorted[at] as usize].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Members in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a Json<'a>)> + use<'a> {
        let members: &'a [Member<'a>] = self.members;
        members.iter().map(|(k, v)| (*k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        let members: &'a [Member<'a>] = self.members;
        members.iter().map(|(k, _)| *k)
    }

    pub fn values(&self) -> impl Iterator<Item = &'a Json<'a>> + use<'a> {
        let members: &'a [Member<'a>] = self.members;
        members.iter().map(|(_, v)| v)
    }
}

fn sorted_positions(members: &[Member<'_>]) -> Vec<u32> {
    let mut sorted: Vec<u32> = (0..members.len() as u32).collect();
    sorted.sort_unstable_by(|&a, &b| members[a as usize].0.cmp(members[b as usize].0));
    sorted
}

impl<'a> Json<'a> {
    /// The member `key` when this is an object.
    pub fn get(&self, key: &str) -> Option<&'a Json<'a>> {
        self.as_object()?.get(key)
    }

    pub fn as_object(&self) -> Option<&'a Object<'a>> {
        match *self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&'a [Json<'a>]> {
        match *self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&'a str> {
        match *self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
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
    pub fn to_value(self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(b),
            Json::Number(n) => Value::Number(n.to_number()),
            Json::String(s) => Value::String(s.to_owned()),
            Json::Array(items) => Value::Array(items.iter().map(|v| v.to_value()).collect()),
            Json::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.to_owned(), v.to_value())).collect()),
        }
    }

    /// A tree of `value`, borrowing its strings, built in `arena`.
    pub fn view(value: &'a Value, arena: &'a Bump) -> Json<'a> {
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(if let Some(u) = n.as_u64() {
                Num::Unsigned(u)
            } else if let Some(i) = n.as_i64() {
                Num::Negative(i)
            } else {
                Num::Float(n.as_f64().unwrap_or_default())
            }),
            Value::String(s) => Json::String(s),
            Value::Array(items) => Json::Array(arena.alloc_slice_fill_iter(items.iter().map(|v| Json::view(v, arena)))),
            Value::Object(m) => {
                let members = arena.alloc_slice_fill_iter(m.iter().map(|(k, v)| (k.as_str(), Json::view(v, arena))));
                Json::Object(Object::new(arena, members))
            }
        }
    }
}

impl serde::Serialize for Json<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(b),
            Json::Number(Num::Unsigned(n)) => s.serialize_u64(n),
            Json::Number(Num::Negative(n)) => s.serialize_i64(n),
            Json::Number(Num::Float(f)) => s.serialize_f64(f),
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

/// What one parse shares: the budget and depth rules, the arena, and the stacks on which an
/// array's items and an object's members are gathered until the container is complete (then
/// they are copied into the arena at their final length and popped).
pub(super) struct TreeParse<'s, 'a> {
    pub(super) state: &'s ParseState<'s>,
    pub(super) arena: &'a Bump,
    items: RefCell<Vec<Json<'a>>>,
    members: RefCell<Vec<Member<'a>>>,
}

impl<'s, 'a> TreeParse<'s, 'a> {
    pub(super) fn new(state: &'s ParseState<'s>, arena: &'a Bump) -> Self {
        TreeParse { state, arena, items: RefCell::new(Vec::new()), members: RefCell::new(Vec::new()) }
    }
}

/// Reads one value within the parse's budget and depth, noting whether any object repeats a
/// key (see [`super::parse_tree_within`]).
pub(super) struct StrictTree<'p, 's, 'a> {
    pub(super) parse: &'p TreeParse<'s, 'a>,
    /// The nesting depth of the value being read (the root is 1).
    pub(super) depth: usize,
}

impl<'de> DeserializeSeed<'de> for StrictTree<'_, '_, 'de> {
    type Value = Json<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictTree<'_, '_, 'de> {
    type Value = Json<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Json<'de>, E> {
        self.parse.state.count()?;
        Ok(Json::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Json<'de>, E> {
        self.parse.state.count()?;
        Ok(Json::Number(if v >= 0 { Num::Unsigned(v as u64) } else { Num::Negative(v) }))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Json<'de>, E> {
        self.parse.state.count()?;
        Ok(Json::Number(Num::Unsigned(v)))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Json<'de>, E> {
        self.parse.state.count()?;
        // As `serde_json::Value` reads it: a float that is not finite is null.
        Ok(if v.is_finite() { Json::Number(Num::Float(v)) } else { Json::Null })
    }
    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Json<'de>, E> {
        self.parse.state.count()?;
        Ok(Json::String(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Json<'de>, E> {
        self.parse.state.count()?;
        Ok(Json::String(self.parse.arena.alloc_str(v)))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Json<'de>, E> {
        self.parse.state.count()?;
        Ok(Json::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        self.parse.state.enter(self.depth)?;
        let start = self.parse.items.borrow().len();
        let result = (|| {
            while let Some(v) = seq.next_element_seed(StrictTree { parse: self.parse, depth: self.depth + 1 })? {
                self.parse.items.borrow_mut().push(v);
            }
            Ok(())
        })();
        let mut items = self.parse.items.borrow_mut();
        let slice = result.map(|()| &*self.parse.arena.alloc_slice_copy(&items[start..]));
        items.truncate(start);
        slice.map(Json::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        self.parse.state.enter(self.depth)?;
        let start = self.parse.members.borrow().len();
        let result = (|| {
            while let Some(key) = map.next_key_seed(Key { arena: self.parse.arena })? {
                let v = map.next_value_seed(StrictTree { parse: self.parse, depth: self.depth + 1 })?;
                let mut members = self.parse.members.borrow_mut();
                let so_far = &members[start..];
                if so_far.len() < SMALL && so_far.iter().any(|(k, _)| *k == key) {
                    self.parse.state.duplicates.set(true);
                }
                members.push((key, v));
            }
            Ok(())
        })();
        let mut members = self.parse.members.borrow_mut();
        let slice = result.map(|()| &*self.parse.arena.alloc_slice_copy(&members[start..]));
        members.truncate(start);
        let object = Object::new(self.parse.arena, slice?);
        if object.sorted.windows(2).any(|w| object.members[w[0] as usize].0 == object.members[w[1] as usize].0) {
            self.parse.state.duplicates.set(true);
        }
        Ok(Json::Object(object))
    }
}

/// An object key, borrowed from the text unless it had escapes (then decoded into the arena).
struct Key<'a> {
    arena: &'a Bump,
}

impl<'de> DeserializeSeed<'de> for Key<'de> {
    type Value = &'de str;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<&'de str, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'de> {
    type Value = &'de str;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<&'de str, E> {
        Ok(v)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<&'de str, E> {
        Ok(self.arena.alloc_str(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Source;
    use serde_json::json;

    fn tree(text: &str, f: impl FnOnce(&Json<'_>, &[crate::diagnostic::Diagnostic])) {
        let source = Source::new("t.json", text.to_owned());
        let (arena, mut diags) = (Bump::new(), Vec::new());
        let doc =
            super::super::parse_tree_within(&source, &arena, &super::super::Budget::default(), &mut diags).unwrap();
        f(&doc.value, &diags);
    }

    #[test]
    fn converts_to_the_same_value_as_serde_json_parses() {
        let text = r#"{"b": [1, -2, 3.5, "x\"y", null, true], "a": {"k\u00e9": {}, "z": []}, "": ""}"#;
        tree(text, |t, diags| {
            assert!(diags.is_empty());
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(t.to_value(), v);
            assert_eq!(Json::view(&v, &Bump::new()), *t);
            assert_eq!(t.to_string(), v.to_string());
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
