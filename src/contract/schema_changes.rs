//! Classifying JSON Schema changes as breaking or compatible.
//!
//! Each change is first judged as a *tightening* (the new schema accepts fewer values: a
//! required property added, a type narrowed, an enum value removed, a bound raised) or a
//! *loosening* (more values). Which of the two breaks depends on the direction data flows: the
//! model writes inputs, so a tightened input schema rejects calls that used to work; the tool
//! writes results, so a loosened result schema hands consumers values they did not expect.
//! Changes that are neither (a new `pattern`) are `schema_changed`, breaking: fail closed.
//!
//! Schemas are compared with their `schema:` references already inlined (a finite tree: cycles
//! stay as references), so the walk needs no cycle tracking.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::changes::{Change, ChangeKind, Impact};

/// Which schema of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `input_schema`: the model writes these values.
    Input,
    /// `result_schema`: the tool writes these values.
    Result,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Input => "input_schema",
            Side::Result => "result_schema",
        }
    }
}

/// Keywords that describe but do not constrain.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "examples",
    "default",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
];
/// Bounds where a larger value accepts fewer values.
const LOWER_BOUNDS: &[&str] = &["minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"];
/// Bounds where a smaller value accepts fewer values.
const UPPER_BOUNDS: &[&str] = &["maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"];
/// Keywords holding one subschema that constrains in the same direction as the whole, and whose
/// absence means `true` (anything).
const SUBSCHEMAS: &[&str] =
    &["items", "additionalProperties", "unevaluatedProperties", "propertyNames", "additionalItems", "unevaluatedItems"];
/// Keywords holding an array of subschemas compared position by position.
const SUBSCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords holding a map of subschemas compared name by name.
const SUBSCHEMA_MAPS: &[&str] = &["patternProperties", "dependentSchemas", "$defs", "definitions"];

/// Appends the changes from `old` to `new`, one schema of tool `tool`.
pub fn compare(tool: &str, side: Side, old: &Value, new: &Value, out: &mut Vec<Change>) {
    compare_at(tool, side, side.name(), old, new, out);
}

/// [`compare`], the changes' paths starting at `root` (an MCP tool's `inputSchema`).
pub fn compare_at(tool: &str, side: Side, root: &str, old: &Value, new: &Value, out: &mut Vec<Change>) {
    Walk { tool, side, out }.schema(root, old, new);
}

struct Walk<'a> {
    tool: &'a str,
    side: Side,
    out: &'a mut Vec<Change>,
}

/// A change's direction before the side decides its impact.
#[derive(Clone, Copy)]
enum Dir {
    Tighter,
    Looser,
    /// Neither: breaking both ways.
    Other,
    /// Harmless both ways.
    Compatible,
    Annotation,
}

impl Walk<'_> {
    fn push(&mut self, kind: ChangeKind, dir: Dir, at: &str, old: Option<&Value>, new: Option<&Value>, what: String) {
        let impact = match (dir, self.side) {
            (Dir::Tighter, Side::Input) | (Dir::Looser, Side::Result) | (Dir::Other, _) => Impact::Breaking,
            (Dir::Tighter, Side::Result) | (Dir::Looser, Side::Input) | (Dir::Compatible, _) => Impact::Compatible,
            (Dir::Annotation, _) => Impact::Neutral,
        };
        let text = |v: Option<&Value>| v.map(|v| serde_json::to_string(v).unwrap_or_default());
        self.out.push(
            Change::new(Some(self.tool), kind, impact, at)
                .values(text(old), text(new))
                .message(format!("{at}: {what}")),
        );
    }

    fn schema(&mut self, at: &str, old: &Value, new: &Value) {
        if old == new {
            return;
        }
        let empty = Map::new();
        match (old, new) {
            (Value::Object(o), Value::Object(n)) => self.object(at, o, n),
            // `true` accepts anything, as `{}` does.
            (Value::Bool(true), Value::Object(n)) => self.object(at, &empty, n),
            (Value::Object(o), Value::Bool(true)) => self.object(at, o, &empty),
            // `false` accepts nothing.
            (_, Value::Bool(false)) => self.push(
                ChangeKind::ConstraintTightened,
                Dir::Tighter,
                at,
                Some(old),
                Some(new),
                "now accepts nothing (`false`)".into(),
            ),
            (Value::Bool(false), _) => self.push(
                ChangeKind::ConstraintLoosened,
                Dir::Looser,
                at,
                Some(old),
                Some(new),
                "no longer `false`".into(),
            ),
            _ => self.push(ChangeKind::SchemaChanged, Dir::Other, at, Some(old), Some(new), "schema changed".into()),
        }
    }

    fn object(&mut self, at: &str, o: &Map<String, Value>, n: &Map<String, Value>) {
        let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
        let mut properties_done = false;
        for key in keys {
            let (ov, nv) = (o.get(key.as_str()), n.get(key.as_str()));
            if ov == nv {
                continue;
            }
            let k = key.as_str();
            match k {
                "properties" | "required" => {
                    if !properties_done {
                        properties_done = true;
                        self.properties(at, o, n);
                    }
                }
                "type" => self.types(at, ov, nv),
                "enum" => self.enumeration(at, ov, nv),
                _ if ANNOTATIONS.contains(&k) => self.push(
                    ChangeKind::AnnotationChanged,
                    Dir::Annotation,
                    &format!("{at}/{k}"),
                    ov,
                    nv,
                    format!("`{k}` changed"),
                ),
                _ if LOWER_BOUNDS.contains(&k) || UPPER_BOUNDS.contains(&k) => self.bound(at, k, ov, nv),
                _ if SUBSCHEMAS.contains(&k) => {
                    let sub = match k {
                        "items" => format!("{at}[]"),
                        "additionalProperties" => format!("{at}.*"),
                        _ => format!("{at}/{k}"),
                    };
                    let anything = Value::Bool(true);
                    self.schema(&sub, ov.unwrap_or(&anything), nv.unwrap_or(&anything));
                }
                _ if SUBSCHEMA_LISTS.contains(&k) => match (ov, nv) {
                    (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
                        for (i, (x, y)) in a.iter().zip(b).enumerate() {
                            self.schema(&format!("{at}/{k}/{i}"), x, y);
                        }
                    }
                    _ => self.keyword(at, k, ov, nv),
                },
                _ if SUBSCHEMA_MAPS.contains(&k) => {
                    match (ov.and_then(Value::as_object), nv.and_then(Value::as_object)) {
                        (Some(a), Some(b)) => {
                            let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                            for name in names {
                                let sub = format!("{at}/{k}/{name}");
                                match (a.get(name.as_str()), b.get(name.as_str())) {
                                    (Some(x), Some(y)) => self.schema(&sub, x, y),
                                    (x, y) => self.keyword(&format!("{at}/{k}"), name, x, y),
                                }
                            }
                        }
                        _ => self.keyword(at, k, ov, nv),
                    }
                }
                "uniqueItems" => {
                    let (a, b) = (ov == Some(&Value::Bool(true)), nv == Some(&Value::Bool(true)));
                    if a != b {
                        let (kind, dir) = tighter_or_looser(b);
                        self.push(
                            kind,
                            dir,
                            &format!("{at}/{k}"),
                            ov,
                            nv,
                            format!("`{k}` {}", if b { "set" } else { "unset" }),
                        );
                    }
                }
                _ => self.keyword(at, k, ov, nv),
            }
        }
    }

    /// Any other keyword: added tightens, removed loosens, changed cannot be judged.
    fn keyword(&mut self, at: &str, k: &str, ov: Option<&Value>, nv: Option<&Value>) {
        let at = format!("{at}/{k}");
        match (ov, nv) {
            (None, Some(_)) => {
                self.push(ChangeKind::ConstraintTightened, Dir::Tighter, &at, ov, nv, format!("`{k}` added"))
            }
            (Some(_), None) => {
                self.push(ChangeKind::ConstraintLoosened, Dir::Looser, &at, ov, nv, format!("`{k}` removed"))
            }
            _ => self.push(ChangeKind::SchemaChanged, Dir::Other, &at, ov, nv, format!("`{k}` changed")),
        }
    }

    fn properties(&mut self, at: &str, o: &Map<String, Value>, n: &Map<String, Value>) {
        let props =
            |m: &Map<String, Value>| m.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        let required = |m: &Map<String, Value>| -> BTreeSet<String> {
            m.get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let (op, np, or, nr) = (props(o), props(n), required(o), required(n));
        let names: BTreeSet<&String> = op.keys().chain(np.keys()).chain(or.iter()).chain(nr.iter()).collect();
        for name in names {
            let sub = property_path(at, name);
            let (was_required, is_required) = (or.contains(name), nr.contains(name));
            match (op.get(name.as_str()), np.get(name.as_str())) {
                (Some(x), None) => {
                    self.push(ChangeKind::PropertyRemoved, Dir::Other, &sub, Some(x), None, "property removed".into());
                    continue;
                }
                (None, Some(y)) if is_required && !was_required => {
                    self.push(
                        ChangeKind::RequiredPropertyAdded,
                        Dir::Tighter,
                        &sub,
                        None,
                        Some(y),
                        "required property added".into(),
                    );
                    continue;
                }
                (None, Some(y)) => {
                    let what = if is_required { "property added" } else { "optional property added" };
                    self.push(ChangeKind::PropertyAdded, Dir::Compatible, &sub, None, Some(y), what.into());
                    continue;
                }
                (Some(x), Some(y)) => self.schema(&sub, x, y),
                (None, None) => {}
            }
            match (was_required, is_required) {
                (false, true) => self.push(
                    ChangeKind::PropertyRequired,
                    Dir::Tighter,
                    &sub,
                    None,
                    None,
                    "property now required".into(),
                ),
                (true, false) => self.push(
                    ChangeKind::PropertyOptional,
                    Dir::Looser,
                    &sub,
                    None,
                    None,
                    "property now optional".into(),
                ),
                _ => {}
            }
        }
    }

    fn types(&mut self, at: &str, ov: Option<&Value>, nv: Option<&Value>) {
        let at_type = format!("{at}/type");
        let set = |v: Option<&Value>| -> Option<BTreeSet<String>> {
            match v? {
                Value::String(s) => Some(BTreeSet::from([s.clone()])),
                Value::Array(a) => Some(a.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
                _ => None,
            }
        };
        let show = |s: &Option<BTreeSet<String>>| {
            s.as_ref().map_or_else(|| "any".to_owned(), |s| s.iter().cloned().collect::<Vec<_>>().join("|"))
        };
        let (os, ns) = (set(ov), set(nv));
        // `integer` is a subset of `number`.
        let within = |t: &String, s: &BTreeSet<String>| s.contains(t) || (t == "integer" && s.contains("number"));
        let subset = |a: &Option<BTreeSet<String>>, b: &Option<BTreeSet<String>>| match (a, b) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(a), Some(b)) => a.iter().all(|t| within(t, b)),
        };
        let (narrower, wider) = (subset(&ns, &os), subset(&os, &ns));
        let what = format!("type {} -> {}", show(&os), show(&ns));
        match (narrower, wider) {
            (true, false) => self.push(ChangeKind::TypeNarrowed, Dir::Tighter, &at_type, ov, nv, what),
            (false, true) => self.push(ChangeKind::TypeWidened, Dir::Looser, &at_type, ov, nv, what),
            (true, true) => self.push(ChangeKind::AnnotationChanged, Dir::Annotation, &at_type, ov, nv, what),
            (false, false) => self.push(ChangeKind::SchemaChanged, Dir::Other, &at_type, ov, nv, what),
        }
    }

    fn enumeration(&mut self, at: &str, ov: Option<&Value>, nv: Option<&Value>) {
        let at_enum = format!("{at}/enum");
        let values = |v: Option<&Value>| -> Option<BTreeMap<String, Value>> {
            v?.as_array().map(|a| a.iter().map(|x| (serde_jcs::to_string(x).unwrap_or_default(), x.clone())).collect())
        };
        match (values(ov), values(nv)) {
            (Some(a), Some(b)) => {
                for (text, v) in &b {
                    if !a.contains_key(text) {
                        self.push(
                            ChangeKind::EnumValueAdded,
                            Dir::Looser,
                            &at_enum,
                            None,
                            Some(v),
                            format!("enum value {text} added"),
                        );
                    }
                }
                for (text, v) in &a {
                    if !b.contains_key(text) {
                        self.push(
                            ChangeKind::EnumValueRemoved,
                            Dir::Tighter,
                            &at_enum,
                            Some(v),
                            None,
                            format!("enum value {text} removed"),
                        );
                    }
                }
            }
            _ => self.keyword(at, "enum", ov, nv),
        }
    }

    fn bound(&mut self, at: &str, k: &str, ov: Option<&Value>, nv: Option<&Value>) {
        let lower = LOWER_BOUNDS.contains(&k);
        let num = |v: Option<&Value>| v.and_then(Value::as_f64);
        let (a, b) = (num(ov), num(nv));
        let tighter = match (a, b) {
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) if a != b => (b > a) == lower,
            _ => return self.keyword(at, k, ov, nv),
        };
        let show = |v: Option<f64>| v.map_or_else(|| "none".to_owned(), |v| v.to_string());
        let (kind, dir) = tighter_or_looser(tighter);
        self.push(kind, dir, &format!("{at}/{k}"), ov, nv, format!("`{k}` {} -> {}", show(a), show(b)));
    }
}

fn tighter_or_looser(tighter: bool) -> (ChangeKind, Dir) {
    if tighter {
        (ChangeKind::ConstraintTightened, Dir::Tighter)
    } else {
        (ChangeKind::ConstraintLoosened, Dir::Looser)
    }
}

/// `input_schema.to`, or `input_schema["odd name"]` for names that are not identifiers.
fn property_path(at: &str, name: &str) -> String {
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain { format!("{at}.{name}") } else { format!("{at}[{}]", serde_json::to_string(name).unwrap_or_default()) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kinds(side: Side, old: Value, new: Value) -> Vec<(ChangeKind, Impact, String)> {
        let mut out = Vec::new();
        compare("t", side, &old, &new, &mut out);
        out.into_iter().map(|c| (c.kind, c.impact, c.at)).collect()
    }

    #[test]
    fn input_and_result_sides_judge_the_same_change_oppositely() {
        let old = json!({"type": "object", "properties": {"a": {"type": "number"}}});
        let new = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        assert_eq!(
            kinds(Side::Input, old.clone(), new.clone()),
            [(ChangeKind::TypeNarrowed, Impact::Breaking, "input_schema.a/type".into())]
        );
        assert_eq!(
            kinds(Side::Result, old, new),
            [(ChangeKind::TypeNarrowed, Impact::Compatible, "result_schema.a/type".into())]
        );
    }

    #[test]
    fn properties_required_and_enums() {
        let old = json!({"properties": {"a": {"enum": ["x", "y"]}, "b": {}, "c": {}}, "required": ["a"]});
        let new = json!({"properties": {"a": {"enum": ["x", "z"]}, "c": {}, "d": {}, "e": {}}, "required": ["c", "e"]});
        let got = kinds(Side::Input, old, new);
        let expect = [
            (ChangeKind::EnumValueAdded, Impact::Compatible, "input_schema.a/enum"),
            (ChangeKind::EnumValueRemoved, Impact::Breaking, "input_schema.a/enum"),
            (ChangeKind::PropertyOptional, Impact::Compatible, "input_schema.a"),
            (ChangeKind::PropertyRemoved, Impact::Breaking, "input_schema.b"),
            (ChangeKind::PropertyRequired, Impact::Breaking, "input_schema.c"),
            (ChangeKind::PropertyAdded, Impact::Compatible, "input_schema.d"),
            (ChangeKind::RequiredPropertyAdded, Impact::Breaking, "input_schema.e"),
        ];
        assert_eq!(got, expect.map(|(k, i, a)| (k, i, a.to_owned())));
    }

    #[test]
    fn bounds_subschemas_and_unknown_keywords() {
        let old = json!({"type": "array", "items": {"type": "string", "maxLength": 10}, "minItems": 1});
        let new = json!({"type": "array", "items": {"type": "string", "maxLength": 5, "pattern": "^a"}});
        assert_eq!(
            kinds(Side::Input, old, new),
            [
                (ChangeKind::ConstraintTightened, Impact::Breaking, "input_schema[]/maxLength".into()),
                (ChangeKind::ConstraintTightened, Impact::Breaking, "input_schema[]/pattern".into()),
                (ChangeKind::ConstraintLoosened, Impact::Compatible, "input_schema/minItems".into()),
            ]
        );
        assert_eq!(
            kinds(Side::Result, json!({"additionalProperties": false}), json!({})),
            [(ChangeKind::ConstraintLoosened, Impact::Breaking, "result_schema.*".into())]
        );
        assert_eq!(
            kinds(Side::Input, json!({"pattern": "a"}), json!({"pattern": "b", "description": "x"})),
            [
                (ChangeKind::AnnotationChanged, Impact::Neutral, "input_schema/description".into()),
                (ChangeKind::SchemaChanged, Impact::Breaking, "input_schema/pattern".into()),
            ]
        );
    }
}
