//! The README documents every stable code.

use agent_bundle::diagnostic::Code;
use agent_bundle::ops::verify::Reason;

use crate::support::repo;

#[test]
fn readme_documents_every_diagnostic_and_reason_code() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(Reason::ALL.iter().map(|r| r.as_str()))
        .filter(|c| !readme.contains(&format!("| `{c}` |")))
        .collect();
    assert!(missing.is_empty(), "README lacks a table row for: {missing:?}");
}
