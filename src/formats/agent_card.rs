//! A2A agent cards (protocol 1.0, the `AgentCard` message in its JSON form) with the
//! signatures of the A2A specification §8.4: a JWS (RFC 7515, detached payload) over the
//! card's RFC 8785 canonical form, with `signatures` left out and empty values removed.
//!
//! What "empty values removed" means is what the reference SDK (`a2a-sdk`, after its
//! canonicalisation fix) does: the card is read as the protobuf `AgentCard`, written back as
//! JSON (which drops fields at their proto3 default that have no presence, such as an
//! extension's `required: false`), and every empty string, list and object, and every null,
//! is removed recursively. [`canonical`] does the same on the JSON itself. Numbers are IEEE
//! 754 doubles everywhere (protobuf's `Struct` holds doubles), so an integer beyond 2^53 is
//! compared as the double it becomes, as the SDK's verifier sees it.
//!
//! The card carries what A2A has no place for in an extension ([`EXTENSION_URI`]): the
//! bundle's SHA-256, the manifest's BLAKE3 and each tool's contract fingerprint, so that a
//! card can be tied to the signed bundle whose tools it describes.

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The extension that ties a card to a bundle.
pub const EXTENSION_URI: &str = "https://agent-bundle.dev/a2a/bundle-contract/v1";
/// The A2A protocol version of the cards written here.
pub const PROTOCOL_VERSION: &str = "1.0";

crate::codes::stable_codes! {
    /// Why `bundle verify --agent-card` refuses a card.
    pub enum CardReason;
    CardMalformed => "card_malformed": "The agent card is not a JSON object of the A2A AgentCard shape, or too deep, repeats a key in an object, or has no RFC 8785 form (a number that is not finite, an unpaired surrogate).",
    CardUnsigned => "card_unsigned": "The agent card has no `signatures`.",
    CardSignatureMalformed => "card_signature_malformed": "No signature could be read: a `protected` header that is not base64url JSON, no `kid`, a `crit` or `b64` parameter (never understood), an unsupported `alg`.",
    CardUntrustedKey => "card_untrusted_key": "No signature is by a trusted key (matched by `kid`; a `jku` is never fetched).",
    CardBadSignature => "card_bad_signature": "A signature by a trusted key does not verify over the card's canonical form: the card was changed after signing.",
    CardBundleMismatch => "card_bundle_mismatch": "The card's agent-bundle extension does not match the bundle given (SHA-256, manifest digest, tool fingerprints), or the card has no such extension.",
}

/// The parameters of the [`EXTENSION_URI`] extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleParams {
    pub agent: String,
    pub version: String,
    /// The bundle file's SHA-256 (absent for a card made from an agent folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_sha256: Option<String>,
    /// BLAKE3 of the signed manifest.toml.
    pub manifest_blake3: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolParam>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<SkillParam>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolParam {
    pub id: String,
    pub fingerprint: String,
    pub risk: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillParam {
    pub name: String,
    pub digest: String,
}

/// One A2A skill of the card (a tool of tools.json, or a skill of skills/).
#[derive(Debug, Clone)]
pub struct CardSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
}

/// What a card says, before it is signed.
#[derive(Debug, Clone)]
pub struct CardFacts {
    pub name: String,
    pub description: String,
    pub url: String,
    pub version: String,
    pub skills: Vec<CardSkill>,
    pub params: BundleParams,
}

/// The unsigned card. Nothing at its default is written (no `false`, no empty list), so the
/// card is its own canonical form's source as the SDK reads it.
pub fn unsigned_card(f: &CardFacts) -> Value {
    let skills: Vec<Value> = f
        .skills
        .iter()
        .map(|s| {
            let mut o = Map::new();
            o.insert("id".into(), s.id.clone().into());
            o.insert("name".into(), s.name.clone().into());
            o.insert("description".into(), s.description.clone().into());
            if !s.tags.is_empty() {
                o.insert("tags".into(), s.tags.clone().into());
            }
            Value::Object(o)
        })
        .collect();
    let params = serde_json::to_value(&f.params).expect("bundle params serialise");
    serde_json::json!({
        "name": f.name,
        "description": f.description,
        "supportedInterfaces": [{"url": f.url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}],
        "version": f.version,
        "capabilities": {
            "extensions": [{
                "uri": EXTENSION_URI,
                "description": "The signed agent-bundle this card describes: its SHA-256, manifest digest and tool contract fingerprints",
                "params": params,
            }]
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    })
}

/// The bytes §8.4 signs: the card without `signatures`, empty values and proto3 defaults
/// removed, numbers as doubles, in RFC 8785 form.
pub fn canonical(card: &Value) -> Result<String, String> {
    let Value::Object(map) = card else { return Err("the card is not a JSON object".into()) };
    let mut map = map.clone();
    map.remove("signatures");
    // AgentExtension.required has no presence: false is its default, which the SDK drops.
    if let Some(Value::Array(exts)) = map.get_mut("capabilities").and_then(|c| c.get_mut("extensions")) {
        for e in exts.iter_mut().filter_map(Value::as_object_mut) {
            if e.get("required") == Some(&Value::Bool(false)) {
                e.remove("required");
            }
        }
    }
    let cleaned = clean(Value::Object(map)).unwrap_or(Value::Object(Map::new()));
    serde_jcs::to_string(&cleaned).map_err(|e| format!("no RFC 8785 form: {e}"))
}

/// Removes empty strings, lists, objects and nulls, recursively; numbers become doubles.
fn clean(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let items: Vec<Value> = items.into_iter().filter_map(clean).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(map) => {
            let map: Map<String, Value> = map.into_iter().filter_map(|(k, v)| clean(v).map(|v| (k, v))).collect();
            (!map.is_empty()).then_some(Value::Object(map))
        }
        Value::Number(n) => n.as_f64().and_then(serde_json::Number::from_f64).map(Value::Number),
        other => Some(other),
    }
}

/// A JWS protected header as §8.4 uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protected {
    pub alg: String,
    pub kid: String,
    pub typ: String,
}

/// The JWS algorithm of cards signed with an Ed25519 (minisign) key; kid = its key id.
pub const EDDSA: &str = "EdDSA";
/// The JWS algorithm of cards signed with a P-256 key: ECDSA with SHA-256, the signature
/// `r || s` (RFC 7518 §3.4); kid = the key's RFC 7638 JWK thumbprint.
pub const ES256: &str = "ES256";

/// The `protected` and `signature` members of a new signature over `canonical` with `alg`,
/// signed by `sign` (the raw signature over the JWS signing input: 64 bytes for both
/// algorithms).
pub fn sign_jws<E>(
    canonical: &str,
    alg: &str,
    kid: &str,
    sign: impl FnOnce(&[u8]) -> Result<[u8; 64], E>,
) -> Result<Value, E> {
    let header = Protected { alg: alg.into(), kid: kid.into(), typ: "JOSE".into() };
    let protected = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).expect("header serialises"));
    let input = signing_input(&protected, canonical);
    let signature = sign(input.as_bytes())?;
    Ok(serde_json::json!({"protected": protected, "signature": URL_SAFE_NO_PAD.encode(signature)}))
}

/// `BASE64URL(protected) || '.' || BASE64URL(payload)` (RFC 7515 §5.1).
pub fn signing_input(protected: &str, canonical: &str) -> String {
    format!("{protected}.{}", URL_SAFE_NO_PAD.encode(canonical.as_bytes()))
}

/// base64url with or without padding (RFC 7515 says without; some writers pad).
pub fn b64url(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).or_else(|_| URL_SAFE.decode(text)).ok()
}

/// One entry of `signatures`, read: its header, or why it cannot be used.
#[derive(Debug, Clone)]
pub struct ReadSignature {
    pub protected: String,
    pub alg: String,
    pub kid: String,
    /// A `jku` the header names (never fetched; shown).
    pub jku: Option<String>,
    pub signature: Vec<u8>,
}

/// Reads one `signatures` entry; the error says what is wrong with it.
pub fn read_signature(entry: &Value) -> Result<ReadSignature, String> {
    let protected = entry.get("protected").and_then(Value::as_str).ok_or("no `protected` header")?;
    let bytes = b64url(protected).ok_or("`protected` is not base64url")?;
    let header: Map<String, Value> =
        serde_json::from_slice(&bytes).map_err(|_| "`protected` is not a JSON object".to_owned())?;
    for never in ["crit", "b64"] {
        if header.contains_key(never) {
            return Err(format!("the header has `{never}`, which is not understood here"));
        }
    }
    let alg = header.get("alg").and_then(Value::as_str).ok_or("the header has no `alg`")?.to_owned();
    let kid = header.get("kid").and_then(Value::as_str).ok_or("the header has no `kid`")?.to_owned();
    let jku = header.get("jku").and_then(Value::as_str).map(str::to_owned);
    let signature = entry
        .get("signature")
        .and_then(Value::as_str)
        .and_then(b64url)
        .ok_or("`signature` is missing or not base64url")?;
    Ok(ReadSignature { protected: protected.to_owned(), alg, kid, jku, signature })
}

/// The agent-bundle extension's parameters, if the card has the extension.
pub fn bundle_params(card: &Value) -> Option<Result<BundleParams, String>> {
    let exts = card.get("capabilities")?.get("extensions")?.as_array()?;
    let ext = exts.iter().find(|e| e.get("uri").and_then(Value::as_str) == Some(EXTENSION_URI))?;
    Some(
        ext.get("params")
            .cloned()
            .ok_or_else(|| "the extension has no params".to_owned())
            .and_then(|p| serde_json::from_value(p).map_err(|e| e.to_string())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_drops_signatures_empties_and_defaults() {
        let card = serde_json::json!({
            "name": "é", "description": "", "skills": [], "signatures": [{"protected": "x"}],
            "capabilities": {"extensions": [{"uri": "u", "required": false, "params": {"n": 1, "z": null, "f": 1.5e21}}]},
        });
        assert_eq!(
            canonical(&card).unwrap(),
            r#"{"capabilities":{"extensions":[{"params":{"f":1.5e+21,"n":1},"uri":"u"}]},"name":"é"}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+1F600 is a surrogate pair (D83D DE00) and sorts before U+FB01 in UTF-16.
        let card = serde_json::json!({"\u{FB01}": 1, "\u{1F600}": 2});
        assert_eq!(canonical(&card).unwrap(), "{\"\u{1F600}\":2,\"\u{FB01}\":1}");
    }
}
