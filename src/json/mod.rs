//! Strict JSON parsing with bounded cost, and positions for the values that need one.
//!
//! serde_json decides what is valid JSON (RFC 8259, no comments, no trailing commas) and gives
//! the value, as a `serde_json::Value` ([`parse_within`]) or, for the tools.json validator that
//! `bundle check` runs on every agent, as a [`Json`] tree in an arena ([`parse_tree_within`],
//! see tree.rs for why); duplicate keys, which serde_json silently collapses, are errors (parsers
//! disagree on which duplicate wins). Every input is hostile: parsing takes each value from a
//! [`Budget`] and refuses nesting deeper than [`MAX_DEPTH`] before anything is kept, so a small
//! file of two million zeros costs nothing. Positions (`line:column` in diagnostics) come from
//! an [`Index`] built only when a diagnostic asks for one, or when the parse saw a duplicate
//! key (then the same scan says where).

use std::cell::{Cell, OnceCell};
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::diagnostic::{Code, Diagnostic, Source};

/// The deepest nesting of arrays and objects accepted in one JSON document.
pub const MAX_DEPTH: usize = crate::limits::MAX_JSON_DEPTH;
/// The most JSON values (every object, array, string, number, boolean and null counts one)
/// the documents read for one check may hold together: tools.json and the schema files it
/// references, or one imported document. Parsing stops at the first value over it, so memory
/// stays bounded whatever the file (a 4 MiB file could otherwise hold two million values).
pub const MAX_VALUES: u64 = crate::limits::MAX_JSON_VALUES;
/// The most duplicate keys reported for one document (each is an error; more add nothing).
const MAX_DUPLICATES_REPORTED: usize = 100;

/// How many JSON values may still be parsed; shared by the documents of one check.
#[derive(Debug)]
pub struct Budget {
    left: Cell<u64>,
}

impl Budget {
    pub fn new(values: u64) -> Self {
        Budget { left: Cell::new(values) }
    }

    /// Takes one value; false when none is left.
    fn take(&self) -> bool {
        let left = self.left.get();
        self.left.set(left.saturating_sub(1));
        left > 0
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(MAX_VALUES)
    }
}

mod path;
mod tree;
use path::Segment;
pub use path::{At, JsonPath, ToPath};
pub use tree::{Json, Object};

/// A parsed JSON document. Positions are not kept while parsing: the first time a diagnostic
/// asks for one, a compact index of the document's values (a few machine words per value, no
/// paths) is built from the text.
#[derive(Debug)]
pub struct Doc<V> {
    pub value: V,
    text: Arc<str>,
    index: OnceCell<Index>,
}

/// A document parsed into a `serde_json::Value`.
pub type JsonDoc = Doc<Value>;
/// A document parsed into a [`Json`] tree borrowing from its text.
pub type TreeDoc<'a> = Doc<Json<'a>>;

impl<V> Doc<V> {
    /// The byte range of the value at `path` (see [`JsonPath`]), falling back to the nearest
    /// ancestor that exists (for a missing key, the object that should hold it).
    pub fn value_span(&self, path: &JsonPath) -> Range<usize> {
        self.lookup(path, false)
    }

    /// The byte range of the key at `path` when it is an object member, else the value's.
    pub fn key_span(&self, path: &JsonPath) -> Range<usize> {
        self.lookup(path, true)
    }

    fn lookup(&self, path: &JsonPath, want_key: bool) -> Range<usize> {
        let index = self.index.get_or_init(|| Index::build(&self.text, None));
        let Some(mut at) = index.root() else {
            return 0..0;
        };
        let mut found_all = true;
        for seg in &path.0 {
            match index.child(&self.text, at, seg) {
                Some(child) => at = child,
                None => {
                    found_all = false;
                    break;
                }
            }
        }
        let node = &index.nodes[at as usize];
        match (want_key && found_all, node.key) {
            (true, Some((start, end))) => start as usize..end as usize,
            _ => node.start as usize..node.end as usize,
        }
    }
}

/// Decodes `bytes` as UTF-8 text, reporting the first bad byte's position.
pub fn decode_utf8(file: &str, bytes: Vec<u8>) -> Result<String, Diagnostic> {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(Diagnostic::error(Code::InvalidUtf8, file, "the file starts with a UTF-8 byte-order mark")
            .with_help("save the file as UTF-8 without a BOM"));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let prefix = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
        let source = Source::new(file, prefix);
        let (line, column) = source.line_column(valid);
        let mut d = Diagnostic::error(
            Code::InvalidUtf8,
            file,
            format!("invalid UTF-8 at byte {valid} (line {line}, column {column})"),
        )
        .with_help("save the file as UTF-8");
        d.line = Some(line);
        d.column = Some(column);
        d
    })
}

/// Parses strict JSON with a budget of its own (see [`parse_within`]).
pub fn parse(source: &Source, diagnostics: &mut Vec<Diagnostic>) -> Result<JsonDoc, Diagnostic> {
    parse_within(source, &Budget::default(), diagnostics)
}

/// Parses strict JSON, taking every value from `budget` and refusing nesting deeper than
/// [`MAX_DEPTH`] (`limit_exceeded`). Duplicate keys are reported as diagnostics (the document
/// is still returned so that the rest of it can be checked); a syntax error fails the parse.
pub fn parse_within(
    source: &Source,
    budget: &Budget,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<JsonDoc, Diagnostic> {
    parse_strict(source, &source.text, budget, diagnostics, |state, de| StrictValue { state, depth: 1 }.deserialize(de))
}

/// [`parse_within`], into a [`Json`] tree that lives in `arena` (with a copy of the text, from
/// which its strings are borrowed): the same values accepted, counted and refused, the same
/// diagnostics.
pub fn parse_tree_within<'a>(
    source: &Source,
    arena: &'a bumpalo::Bump,
    budget: &Budget,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<TreeDoc<'a>, Diagnostic> {
    let text: &'a str = arena.alloc_str(&source.text);
    parse_strict(source, text, budget, diagnostics, |state, de| {
        tree::StrictTree { parse: &tree::TreeParse::new(state, arena), depth: 1 }.deserialize(de)
    })
}

/// Parses `text`, which is `source`'s.
fn parse_strict<'a, V>(
    source: &Source,
    text: &'a str,
    budget: &Budget,
    diagnostics: &mut Vec<Diagnostic>,
    read: impl FnOnce(&ParseState<'_>, &mut serde_json::Deserializer<serde_json::de::StrRead<'a>>) -> serde_json::Result<V>,
) -> Result<Doc<V>, Diagnostic> {
    let state = ParseState { duplicates: Cell::new(false), budget, exceeded: Cell::new(None) };
    let mut de = serde_json::Deserializer::from_str(text);
    let value = read(&state, &mut de).and_then(|v| de.end().map(|()| v)).map_err(|e| {
        let offset = source.offset_of(e.line(), e.column().max(1));
        let d = match state.exceeded.get() {
            Some(Exceeded::Values) => Diagnostic::error(
                Code::LimitExceeded,
                &source.name,
                format!("more than {} JSON values (with the other JSON files of this check)", MAX_VALUES),
            )
            .with_help(
                "bundle reads at most 200000 JSON values per agent; move bulk data out of tools.json and its schemas",
            ),
            Some(Exceeded::Depth) => Diagnostic::error(
                Code::LimitExceeded,
                &source.name,
                format!("arrays and objects nested more than {MAX_DEPTH} deep"),
            )
            .with_help("flatten the structure; bundle reads JSON nested at most 64 levels deep"),
            None => Diagnostic::error(
                Code::InvalidJson,
                &source.name,
                format!("not valid JSON: {}", strip_position(&e.to_string())),
            )
            .with_help("JSON allows no comments, trailing commas or single quotes"),
        };
        d.at_span(source, offset..offset)
    })?;
    let index = OnceCell::new();
    if state.duplicates.get() {
        let built = Index::build(text, Some((source, &mut *diagnostics)));
        if !built.reported_duplicate {
            // The index could not place it (it never fails on text serde_json accepted, but a
            // duplicate is an error whether or not we can say where).
            diagnostics.push(
                Diagnostic::error(Code::DuplicateKey, &source.name, "a key appears twice in one object")
                    .with_help("remove one of the two entries"),
            );
        }
        let _ = index.set(built);
    }
    Ok(Doc { value, text: source.text.clone(), index })
}

#[derive(Debug, Clone, Copy)]
enum Exceeded {
    Values,
    Depth,
}

struct ParseState<'a> {
    duplicates: Cell<bool>,
    budget: &'a Budget,
    exceeded: Cell<Option<Exceeded>>,
}

impl ParseState<'_> {
    /// Takes one value from the budget.
    fn count<E: serde::de::Error>(&self) -> Result<(), E> {
        if self.budget.take() {
            Ok(())
        } else {
            self.exceeded.set(Some(Exceeded::Values));
            Err(E::custom("too many values"))
        }
    }

    /// Takes one value for an array or object at `depth` (the root is 1).
    fn enter<E: serde::de::Error>(&self, depth: usize) -> Result<(), E> {
        self.count()?;
        if depth > MAX_DEPTH {
            self.exceeded.set(Some(Exceeded::Depth));
            return Err(E::custom("nested too deep"));
        }
        Ok(())
    }
}

/// Deserializes a `serde_json::Value` within the budget and depth, noting whether any object
/// repeats a key (which `Value` itself would silently collapse).
struct StrictValue<'s, 'b> {
    state: &'s ParseState<'b>,
    /// The nesting depth of the value being read (the root is 1).
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_, '_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_, '_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.state.count()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.state.count()?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.state.count()?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.state.count()?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.state.count()?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.state.count()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.state.count()?;
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.state.enter(self.depth)?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue { state: self.state, depth: self.depth + 1 })? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.state.enter(self.depth)?;
        let mut obj = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let v = map.next_value_seed(StrictValue { state: self.state, depth: self.depth + 1 })?;
            if obj.insert(key, v).is_some() {
                self.state.duplicates.set(true);
            }
        }
        Ok(Value::Object(obj))
    }
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The byte ranges of a document's values, in document order, built by a small scanner over
/// text serde_json has already accepted. A container's children are listed contiguously in
/// `kids`, so an array index is found directly and a key by a scan of one object's keys.
#[derive(Debug, Default)]
struct Index {
    nodes: Vec<Node>,
    kids: Vec<u32>,
    reported_duplicate: bool,
}

#[derive(Debug, Clone, Copy)]
struct Node {
    start: u32,
    end: u32,
    /// The key's range (quotes included) when the value is an object member.
    key: Option<(u32, u32)>,
    kids_start: u32,
    kids_len: u32,
}

impl Index {
    /// Indexes `text`; with `report`, duplicate keys become diagnostics (with their paths).
    fn build(text: &str, report: Option<(&Source, &mut Vec<Diagnostic>)>) -> Index {
        let mut builder = Builder {
            bytes: text.as_bytes(),
            text,
            pos: 0,
            index: Index::default(),
            report,
            path: JsonPath::root(),
            reported: 0,
        };
        builder.skip_ws();
        // On text serde_json accepted the scan cannot fail; if it ever did, the positions
        // found so far are kept and the rest fall back to the root.
        let _ = builder.value(None);
        builder.index
    }

    fn root(&self) -> Option<u32> {
        (!self.nodes.is_empty()).then_some(0)
    }

    fn child(&self, text: &str, at: u32, seg: &Segment) -> Option<u32> {
        let node = self.nodes.get(at as usize)?;
        let kids = self.kids.get(node.kids_start as usize..(node.kids_start + node.kids_len) as usize)?;
        let is_object = text.as_bytes().get(node.start as usize) == Some(&b'{');
        match seg {
            Segment::Index(i) if !is_object => kids.get(*i).copied(),
            Segment::Key(k) if is_object => kids.iter().copied().find(|&kid| {
                self.nodes[kid as usize]
                    .key
                    .is_some_and(|(s, e)| decode_key(&text[s as usize..e as usize]).as_deref() == Some(&**k))
            }),
            _ => None,
        }
    }
}

/// A key's text (with its quotes) as a string.
fn decode_key(quoted: &str) -> Option<std::borrow::Cow<'_, str>> {
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(quoted).ok().map(std::borrow::Cow::Owned)
    } else {
        Some(std::borrow::Cow::Borrowed(inner))
    }
}

struct Builder<'t, 'r> {
    bytes: &'t [u8],
    text: &'t str,
    pos: usize,
    index: Index,
    report: Option<(&'r Source, &'r mut Vec<Diagnostic>)>,
    path: JsonPath,
    reported: usize,
}

impl Builder<'_, '_> {
    fn skip_ws(&mut self) {
        while self.bytes.get(self.pos).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        (self.bytes.get(self.pos) == Some(&byte)).then(|| self.pos += 1)
    }

    /// Scans one value at `pos` (after whitespace); returns its node.
    fn value(&mut self, key: Option<(u32, u32)>) -> Option<u32> {
        self.skip_ws();
        let start = self.pos;
        let id = u32::try_from(self.index.nodes.len()).ok()?;
        self.index.nodes.push(Node { start: start as u32, end: start as u32, key, kids_start: 0, kids_len: 0 });
        let kids = match self.bytes.get(start)? {
            b'{' => self.object()?,
            b'[' => self.array()?,
            b'"' => {
                self.string()?;
                Vec::new()
            }
            _ => {
                while self
                    .bytes
                    .get(self.pos)
                    .is_some_and(|b| !matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
                {
                    self.pos += 1;
                }
                Vec::new()
            }
        };
        let kids_start = self.index.kids.len() as u32;
        let node = &mut self.index.nodes[id as usize];
        node.end = self.pos as u32;
        node.kids_start = kids_start;
        node.kids_len = kids.len() as u32;
        self.index.kids.extend(kids);
        Some(id)
    }

    /// Skips a string starting at `pos`; returns its range, quotes included.
    fn string(&mut self) -> Option<(u32, u32)> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some((start as u32, self.pos as u32));
                }
                b'\\' => self.pos += 2,
                _ => self.pos += 1,
            }
        }
    }

    fn array(&mut self) -> Option<Vec<u32>> {
        self.pos += 1;
        let mut kids = Vec::new();
        if self.eat(b']').is_some() {
            return Some(kids);
        }
        loop {
            if self.report.is_some() {
                self.path.push_index(kids.len());
            }
            let kid = self.value(None);
            if self.report.is_some() {
                self.path.pop();
            }
            kids.push(kid?);
            if self.eat(b',').is_none() {
                self.eat(b']')?;
                return Some(kids);
            }
        }
    }

    fn object(&mut self) -> Option<Vec<u32>> {
        self.pos += 1;
        let mut kids = Vec::new();
        let mut seen: HashSet<std::borrow::Cow<'_, str>> = HashSet::new();
        if self.eat(b'}').is_some() {
            return Some(kids);
        }
        let text = self.text;
        loop {
            self.skip_ws();
            let (ks, ke) = self.string()?;
            let name = decode_key(&text[ks as usize..ke as usize])?;
            self.eat(b':')?;
            let duplicate = !seen.insert(name.clone());
            if duplicate {
                self.report_duplicate(&name, ks..ke);
            }
            if self.report.is_some() {
                self.path.push_key(&name);
            }
            let kid = self.value(Some((ks, ke)));
            if self.report.is_some() {
                self.path.pop();
            }
            // The first of two duplicates is the one positions point at.
            if !duplicate {
                kids.push(kid?);
            } else {
                kid?;
            }
            if self.eat(b',').is_none() {
                self.eat(b'}')?;
                return Some(kids);
            }
        }
    }

    fn report_duplicate(&mut self, name: &str, range: Range<u32>) {
        self.index.reported_duplicate = true;
        let Some((source, diagnostics)) = self.report.as_mut() else {
            return;
        };
        self.reported += 1;
        if self.reported > MAX_DUPLICATES_REPORTED {
            return;
        }
        let path = self.path.key(name);
        diagnostics.push(
            Diagnostic::error(
                Code::DuplicateKey,
                &source.name,
                format!("duplicate key `{name}`: JSON parsers disagree on which value wins"),
            )
            .at_path(path.to_string())
            .at_span(source, range.start as usize..range.end as usize)
            .with_help("remove one of the two entries"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_like_jq() {
        let p = JsonPath::root().key("tools").index(1).key("transport").key("command");
        assert_eq!(p.to_string(), "tools[1].transport.command");
        assert_eq!(JsonPath::root().key("headers").key("a.b").to_string(), "headers[\"a.b\"]");
        assert_eq!(JsonPath::root().to_string(), "$");
    }

    #[test]
    fn duplicate_keys_are_reported_with_position() {
        let src = Source::new("t.json", "{\n  \"a\": 1,\n  \"a\": 2\n}");
        let mut diags = Vec::new();
        let doc = parse(&src, &mut diags).unwrap();
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, Code::DuplicateKey);
        assert_eq!((diags[0].line, diags[0].column), (Some(3), Some(3)));
        assert_eq!(doc.key_span(&JsonPath::root().key("a")), 4..7);
    }

    #[test]
    fn syntax_errors_carry_position() {
        let src = Source::new("t.json", "{\n  \"a\": 1,\n}");
        let err = parse(&src, &mut Vec::new()).unwrap_err();
        assert_eq!(err.code, Code::InvalidJson);
        assert_eq!(err.line, Some(3));
    }
}
