//! Strict JSON parsing that remembers where every value is.
//!
//! serde_json decides what is valid JSON (RFC 8259, no comments, no trailing commas) and gives
//! the value; jsonc-parser's AST gives the byte range of every key and value so diagnostics can
//! point at `line:column`, and lets us see duplicate keys, which serde_json silently collapses
//! (parsers disagree on which duplicate wins, so a duplicate is an error).
//!
//! The common case is a clean file, and `bundle check` runs as a pre-commit hook, so the
//! position map is built lazily: only when a diagnostic needs a position, or when the fast
//! parse saw a duplicate key (then the AST walk finds where).

use std::cell::{Cell, OnceCell};
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

use jsonc_parser::ast::{ObjectPropName, Value as Ast};
use jsonc_parser::common::Ranged;
use serde_json::Value;

use crate::diagnostic::{Code, Diagnostic, Source};

/// A parsed JSON document with the spans of its values.
#[derive(Debug)]
pub struct JsonDoc {
    pub value: Value,
    text: Arc<str>,
    spans: OnceCell<HashMap<String, Spans>>,
}

#[derive(Debug, Clone)]
struct Spans {
    key: Option<Range<usize>>,
    value: Range<usize>,
}

impl JsonDoc {
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
        let mut path = path.clone();
        loop {
            let spans = self.spans.get_or_init(|| spans_of(&self.text, None));
            if let Some(spans) = spans.get(&path.to_string()) {
                return match (&spans.key, want_key) {
                    (Some(key), true) => key.clone(),
                    _ => spans.value.clone(),
                };
            }
            if !path.pop() {
                return 0..0;
            }
        }
    }
}

/// A location inside a JSON document, printed as `tools[1].transport.command`; the root is `$`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct JsonPath(Vec<Segment>);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Segment {
    Key(String),
    Index(usize),
}

impl JsonPath {
    pub fn root() -> Self {
        JsonPath(Vec::new())
    }

    pub fn key(&self, key: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Segment::Key(key.to_owned()));
        p
    }

    pub fn index(&self, index: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Segment::Index(index));
        p
    }

    pub fn pop(&mut self) -> bool {
        self.0.pop().is_some()
    }

    pub fn push_key(&mut self, key: &str) {
        self.0.push(Segment::Key(key.to_owned()));
    }

    pub fn push_index(&mut self, index: usize) {
        self.0.push(Segment::Index(index));
    }
}

impl std::fmt::Display for JsonPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("$");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::Key(k) if is_plain_key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Segment::Key(k) => write!(f, "[{}]", serde_json::Value::String(k.clone()))?,
            }
        }
        Ok(())
    }
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$'))
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

/// Parses strict JSON. Duplicate keys are reported as diagnostics (the document is still
/// returned so that the rest of it can be checked); a syntax error fails the parse.
pub fn parse(source: &Source, diagnostics: &mut Vec<Diagnostic>) -> Result<JsonDoc, Diagnostic> {
    let text: &str = &source.text;
    let duplicates = Cell::new(false);
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue { duplicates: &duplicates }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            let offset = source.offset_of(e.line(), e.column().max(1));
            Diagnostic::error(
                Code::InvalidJson,
                &source.name,
                format!("not valid JSON: {}", strip_position(&e.to_string())),
            )
            .at_span(source, offset..offset)
            .with_help("JSON allows no comments, trailing commas or single quotes")
        })?;
    let spans = OnceCell::new();
    if duplicates.get() {
        let _ = spans.set(spans_of(text, Some((source, diagnostics))));
    }
    Ok(JsonDoc { value, text: source.text.clone(), spans })
}

/// The spans of every value, keyed by path; with `report`, duplicate keys become diagnostics.
fn spans_of(text: &str, mut report: Option<(&Source, &mut Vec<Diagnostic>)>) -> HashMap<String, Spans> {
    let strict = jsonc_parser::ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let mut spans = HashMap::new();
    // serde_json accepted the text, so this parse succeeding is expected; if the two parsers
    // ever disagree we still have the value and only lose positions.
    if let Ok(ast) = jsonc_parser::parse_to_ast(text, &Default::default(), &strict)
        && let Some(root) = ast.value
    {
        collect(&root, JsonPath::root(), None, &mut spans, &mut report);
    }
    spans
}

/// Deserializes a `serde_json::Value`, noting whether any object repeats a key (which
/// `Value` itself would silently collapse).
struct StrictValue<'a> {
    duplicates: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(StrictValue { duplicates: self.duplicates })? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut obj = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let v = map.next_value_seed(StrictValue { duplicates: self.duplicates })?;
            if obj.insert(key, v).is_some() {
                self.duplicates.set(true);
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

fn collect(
    node: &Ast<'_>,
    path: JsonPath,
    key: Option<Range<usize>>,
    spans: &mut HashMap<String, Spans>,
    report: &mut Option<(&Source, &mut Vec<Diagnostic>)>,
) {
    let r = node.range();
    spans.insert(path.to_string(), Spans { key, value: r.start..r.end });
    match node {
        Ast::Object(obj) => {
            let mut seen: HashMap<&str, ()> = HashMap::new();
            for prop in &obj.properties {
                let (name, name_range) = match &prop.name {
                    ObjectPropName::String(s) => (s.value.as_ref(), s.range),
                    ObjectPropName::Word(w) => (w.value, w.range),
                };
                let child = path.key(name);
                if seen.insert(name, ()).is_some() {
                    if let Some((source, diagnostics)) = report.as_mut() {
                        diagnostics.push(
                            Diagnostic::error(
                                Code::DuplicateKey,
                                &source.name,
                                format!("duplicate key `{name}`: JSON parsers disagree on which value wins"),
                            )
                            .at_path(child.to_string())
                            .at_span(source, name_range.start..name_range.end)
                            .with_help("remove one of the two entries"),
                        );
                    }
                    continue;
                }
                collect(&prop.value, child, Some(name_range.start..name_range.end), spans, report);
            }
        }
        Ast::Array(arr) => {
            for (i, el) in arr.elements.iter().enumerate() {
                collect(el, path.index(i), None, spans, report);
            }
        }
        _ => {}
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
