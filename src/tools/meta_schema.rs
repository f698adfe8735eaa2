//! A fast, conservative answer to "is this inline schema valid against the JSON Schema 2020-12
//! meta-schema?" for the plain schemas tool descriptions are made of (`type`, `properties`,
//! `required`, `items`, bounds, `enum`, ...).
//!
//! Compiling the 2020-12 meta-schema costs ~6 M instructions (about 2 ms), more than half of
//! `bundle verify` on a small bundle. [`surely_valid`] only ever says `true` for a schema the
//! meta-schema accepts: it knows a subset of keywords and the exact shapes the meta-schema
//! allows for them, and anything else (an unknown keyword, `$schema`, `$id`, a float where an
//! integer is required, deep nesting) makes it say `false`, which sends the schema to the full
//! meta-schema validator. The verdict is therefore the same either way; a test checks the
//! implication against the real validator on generated and hand-written schemas.

use std::collections::HashSet;

use crate::json::Json;

/// Deeper schemas go to the full validator (which has its own limits).
const MAX_DEPTH: usize = 32;

/// The `$schema` the fast path understands (also what a schema without `$schema` means).
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// True only if `schema` is certainly valid against the 2020-12 meta-schema; false means
/// "ask the meta-schema", not "invalid". `$schema` is understood at the root only, and only
/// as 2020-12.
pub fn surely_valid(schema: &Json<'_>) -> bool {
    match schema {
        Json::Object(obj) if obj.contains_key("$schema") => {
            obj.get("$schema").and_then(Json::as_str) == Some(DRAFT_2020_12)
                && obj.iter().all(|(k, v)| k == "$schema" || keyword_ok(k, v, 1))
        }
        _ => schema_ok(schema, 0),
    }
}

fn schema_ok(schema: &Json<'_>, depth: usize) -> bool {
    match schema {
        Json::Bool(_) => true,
        Json::Object(obj) if depth < MAX_DEPTH => obj.iter().all(|(k, v)| keyword_ok(k, v, depth + 1)),
        _ => false,
    }
}

fn keyword_ok(key: &str, value: &Json<'_>, depth: usize) -> bool {
    match key {
        "type" => type_ok(value),
        "title" | "description" | "$comment" | "format" | "pattern" | "$ref" | "contentEncoding"
        | "contentMediaType" => value.is_string(),
        "const" | "default" => true,
        "enum" | "examples" => value.is_array(),
        "deprecated" | "readOnly" | "writeOnly" | "uniqueItems" => value.is_boolean(),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => value.is_number(),
        "multipleOf" => value.as_f64().is_some_and(|n| n > 0.0),
        "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties" | "minContains"
        | "maxContains" => value.as_u64().is_some(),
        "required" => unique_strings(value),
        "items"
        | "additionalProperties"
        | "not"
        | "contains"
        | "propertyNames"
        | "if"
        | "then"
        | "else"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "contentSchema" => schema_ok(value, depth),
        "prefixItems" | "allOf" | "anyOf" | "oneOf" => {
            value.as_array().is_some_and(|items| !items.is_empty() && items.iter().all(|s| schema_ok(s, depth)))
        }
        "properties" | "$defs" | "dependentSchemas" => {
            value.as_object().is_some_and(|m| m.values().all(|s| schema_ok(s, depth)))
        }
        "dependentRequired" => value.as_object().is_some_and(|m| m.values().all(unique_strings)),
        _ => false,
    }
}

const SIMPLE_TYPES: [&str; 7] = ["array", "boolean", "integer", "null", "number", "object", "string"];

fn type_ok(value: &Json<'_>) -> bool {
    match value {
        Json::String(t) => SIMPLE_TYPES.contains(t),
        Json::Array(ts) => {
            !ts.is_empty()
                && ts.iter().all(|t| t.as_str().is_some_and(|t| SIMPLE_TYPES.contains(&t)))
                && unique_strings(value)
        }
        _ => false,
    }
}

fn unique_strings(value: &Json<'_>) -> bool {
    let Some(items) = value.as_array() else { return false };
    // Most such lists (`required`, `enum` of names) are a few items long: comparing each with
    // those before it costs less than hashing them.
    if items.len() <= 8 {
        return items
            .iter()
            .enumerate()
            .all(|(i, v)| v.as_str().is_some_and(|s| items[..i].iter().all(|before| before.as_str() != Some(s))));
    }
    let mut seen = HashSet::with_capacity(items.len());
    items.iter().all(|v| v.as_str().is_some_and(|s| seen.insert(s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn surely_valid(schema: &Value) -> bool {
        super::surely_valid(&Json::view(schema, &bumpalo::Bump::new()))
    }

    /// Every keyword the fast path knows (keep in step with `keyword_ok`), plus two it does not.
    const KEYWORDS: [&str; 54] = [
        "type",
        "title",
        "description",
        "$comment",
        "format",
        "pattern",
        "$ref",
        "contentEncoding",
        "contentMediaType",
        "const",
        "default",
        "enum",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "uniqueItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
        "required",
        "items",
        "additionalProperties",
        "not",
        "contains",
        "propertyNames",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
        "prefixItems",
        "allOf",
        "anyOf",
        "oneOf",
        "properties",
        "$defs",
        "dependentSchemas",
        "dependentRequired",
        "x-extra",
        "$id",
        "definitions",
        "$schema",
    ];

    fn meta_valid(schema: &Value) -> bool {
        jsonschema::meta::validator_for(schema).is_ok_and(|v| v.is_valid(schema))
    }

    /// Values of every JSON kind, including the near-misses the meta-schema cares about
    /// (negative and fractional numbers, duplicate strings, unknown type names, empty arrays).
    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            prop_oneof![Just(-1i64), Just(0), Just(1), Just(7)].prop_map(|n| json!(n)),
            prop_oneof![Just(0.0f64), Just(-0.5), Just(1.0), Just(2.5)].prop_map(|n| json!(n)),
            prop_oneof![
                Just("https://json-schema.org/draft/2020-12/schema"),
                Just("http://json-schema.org/draft-07/schema#"),
                Just("string"),
                Just("integer"),
                Just("object"),
                Just("bogus"),
                Just("a"),
                Just("")
            ]
            .prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((keyword(), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn keyword() -> impl Strategy<Value = String> {
        prop::sample::select(&KEYWORDS[..]).prop_map(str::to_owned)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]
        /// The fast path never accepts what the meta-schema rejects.
        #[test]
        fn never_accepts_what_the_meta_schema_rejects(schema in any_value()) {
            if surely_valid(&schema) {
                prop_assert!(meta_valid(&schema), "fast path accepted {schema}");
            }
        }
    }

    #[test]
    fn accepts_plain_tool_schemas() {
        let s = json!({
            "type": "object",
            "properties": {
                "to": {"type": "string", "format": "email", "minLength": 3},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10, "uniqueItems": true},
                "when": {"type": ["string", "null"], "default": null},
                "kind": {"enum": ["a", "b"]},
                "body": {"$ref": "schema:mail.body.v1"}
            },
            "required": ["to"],
            "additionalProperties": false
        });
        assert!(surely_valid(&s));
        assert!(meta_valid(&s));
        let file = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"});
        assert!(surely_valid(&file));
        assert!(meta_valid(&file));
    }

    #[test]
    fn defers_on_anything_it_does_not_know() {
        for s in [
            json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
            json!({"$schema": 7}),
            json!({"items": {"$schema": "https://json-schema.org/draft/2020-12/schema"}}),
            json!({"$id": "x"}),
            json!({"definitions": {}}),
            json!({"x-vendor": 1}),
            json!({"minLength": 1.0}),
            json!({"minLength": -1}),
            json!({"type": "text"}),
            json!({"type": []}),
            json!({"type": ["string", "string"]}),
            json!({"required": ["a", "a"]}),
            json!({"allOf": []}),
            json!({"multipleOf": 0}),
            json!({"properties": {"a": 1}}),
            json!(1),
        ] {
            assert!(!surely_valid(&s), "{s}");
        }
    }

    #[test]
    fn deep_nesting_defers() {
        let mut s = json!({"type": "string"});
        for _ in 0..MAX_DEPTH {
            s = json!({"items": s});
        }
        assert!(!surely_valid(&s));
    }
}
