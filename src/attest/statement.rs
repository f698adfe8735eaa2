//! The in-toto Statement v1 (in-toto/attestation, spec/v1/statement.md): which artifacts
//! (`subject`: a name and a digest map) a predicate of some type (`predicateType`, a URI) is
//! about. The envelope's signature covers all of it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{FormatError, parse_json};

/// `_type` of a Statement v1.
pub const STATEMENT_TYPE_V1: &str = "https://in-toto.io/Statement/v1";

/// An in-toto Statement v1. Field order is the specification's, so that the same statement
/// always serialises to the same bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Statement {
    #[serde(rename = "_type")]
    pub type_: String,
    pub subject: Vec<Subject>,
    pub predicate_type: String,
    #[serde(default)]
    pub predicate: serde_json::Value,
}

/// One artifact a statement is about: its name and digests (algorithm -> lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    #[serde(default)]
    pub name: String,
    pub digest: BTreeMap<String, String>,
}

impl Subject {
    /// A subject named `name` with one SHA-256 digest.
    pub fn sha256(name: &str, digest: &[u8; 32]) -> Self {
        Subject { name: name.to_owned(), digest: BTreeMap::from([("sha256".to_owned(), hex::encode(digest))]) }
    }
}

impl Statement {
    /// A Statement v1 about `subject`.
    pub fn new(subject: Vec<Subject>, predicate_type: &str, predicate: serde_json::Value) -> Self {
        Statement { type_: STATEMENT_TYPE_V1.to_owned(), subject, predicate_type: predicate_type.to_owned(), predicate }
    }

    /// The payload bytes: compact JSON in field order (deterministic for the same statement).
    pub fn to_payload(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a statement always serialises")
    }

    /// Parses a DSSE payload as a Statement v1, within the attestation caps; any other `_type`
    /// (v0.1 included) is refused.
    pub fn from_payload(bytes: &[u8]) -> Result<Self, FormatError> {
        let statement: Statement = parse_json(bytes, "the in-toto statement")?;
        if statement.type_ != STATEMENT_TYPE_V1 {
            return Err(FormatError::StatementType { found: statement.type_, expected: STATEMENT_TYPE_V1 });
        }
        if statement.subject.is_empty() {
            return Err(FormatError::Malformed("the in-toto statement has no subject".into()));
        }
        Ok(statement)
    }

    /// Whether some subject has this SHA-256 digest (given as lowercase hex).
    pub fn has_sha256(&self, hex: &str) -> bool {
        self.subject.iter().any(|s| s.digest.get("sha256").is_some_and(|d| d.eq_ignore_ascii_case(hex)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_and_order_follow_the_specification() {
        let s = Statement::new(
            vec![Subject::sha256("a.bundle", &[0xab; 32])],
            "https://example.com/p",
            serde_json::json!({"k": 1}),
        );
        let text = String::from_utf8(s.to_payload()).unwrap();
        assert!(
            text.starts_with(
                r#"{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a.bundle","digest":{"sha256":"abab"#
            ),
            "{text}"
        );
        assert!(text.ends_with(r#""predicateType":"https://example.com/p","predicate":{"k":1}}"#), "{text}");
        assert_eq!(Statement::from_payload(text.as_bytes()).unwrap(), s);
        assert!(s.has_sha256(&"ab".repeat(32)));
    }

    #[test]
    fn other_statement_types_are_refused() {
        let v01 = br#"{"_type":"https://in-toto.io/Statement/v0.1","subject":[{"name":"x","digest":{"sha256":"00"}}],"predicateType":"p"}"#;
        assert!(matches!(Statement::from_payload(v01), Err(FormatError::StatementType { .. })));
    }
}
