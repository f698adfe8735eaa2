//! The README documents every stable code: diagnostics, verify's reasons, diff's change kinds.

use agent_bundle::bundle::verify::Reason;
use agent_bundle::contract::ChangeKind;
use agent_bundle::diagnostic::Code;

use crate::support::repo;

#[test]
fn readme_documents_every_diagnostic_reason_and_change_code() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(Reason::ALL.iter().map(|r| r.as_str()))
        .chain(ChangeKind::ALL.iter().map(|k| k.as_str()))
        .filter(|c| !readme.contains(&format!("| `{c}` |")))
        .collect();
    assert!(missing.is_empty(), "README lacks a table row for: {missing:?}");
}
