//! The supported library API (`src/api/`) is pinned: every public item's signature is listed in
//! `tests/public-api.txt`, so a change to the surface that follows semver shows up in review as
//! a change to that file. Update it with
//!
//!     BUNDLE_UPDATE_API=1 cargo test --locked --test cli public_api
//!
//! (cargo-semver-checks would compare against a published baseline; the crate is not published
//! yet, so the checked-in list is the baseline.) The runtime example is run too: it is the
//! API's documentation by example, and CI must not let it rot.

use std::path::Path;

use crate::support::repo as repo_root;

/// `pub` items of one file, each signature on one line: free items at the margin, methods
/// indented under their `impl` header; trait impls of public types are listed (they are part of
/// the surface), `impl` blocks with nothing public are not.
fn public_items(text: &str) -> Vec<String> {
    let public_types: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("pub struct ").or_else(|| l.strip_prefix("pub enum ")))
        .map(|rest| rest.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or_default())
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    let mut in_impl = false;
    let mut impl_is_trait_of_public = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_none() {
            if trimmed.starts_with("//") || trimmed.starts_with("#[") {
                continue;
            }
            if line.starts_with("impl") {
                in_impl = true;
                let header = trimmed.trim_end_matches('{').trim().to_owned();
                impl_is_trait_of_public = header.split(" for ").nth(1).is_some_and(|t| {
                    public_types
                        .contains(&t.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or_default())
                });
                out.push(header);
                continue;
            }
            if line.starts_with('}') {
                // An inherent impl with nothing public, or a private type's trait impl, is dropped.
                if in_impl && out.last().is_some_and(|l| l.starts_with("impl")) && !impl_is_trait_of_public {
                    out.pop();
                }
                in_impl = false;
                continue;
            }
            if !trimmed.starts_with("pub ") {
                continue;
            }
            current = Some(String::new());
        }
        let item = current.as_mut().expect("inside an item");
        item.push(' ');
        item.push_str(trimmed);
        let balanced = item.matches('(').count() == item.matches(')').count();
        let end = if item.trim_start().starts_with("pub use") {
            item.find(';')
        } else {
            // A signature ends at its body or a `;`; a field at its `,`.
            item.find(['{', ';']).or_else(|| (balanced && item.ends_with(',')).then(|| item.len() - 1))
        };
        if let Some(end) = end {
            let signature = item[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            let signature = signature.replace("( ", "(").replace(", )", ")").replace("{ ", "{").replace(", }", "}");
            out.push(if in_impl { format!("    {signature}") } else { signature });
            current = None;
        }
    }
    out
}

fn surface(root: &Path) -> String {
    let dir = root.join("src/api");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("src/api").map(|e| e.expect("entry").path()).collect();
    files.retain(|f| f.file_name().is_some_and(|n| n != "tests.rs"));
    files.sort();
    let mut text = String::from("# The public API of agent_bundle::api (tests/cli/public_api.rs).\n");
    for file in files {
        let source = std::fs::read_to_string(&file).expect("readable source");
        text.push_str(&format!("\n## src/api/{}\n", file.file_name().expect("a name").to_string_lossy()));
        for item in public_items(&source) {
            text.push_str(&item);
            text.push('\n');
        }
    }
    text
}

#[test]
fn public_api_is_pinned() {
    let root = repo_root();
    let pinned = root.join("tests/public-api.txt");
    let now = surface(&root);
    if std::env::var_os("BUNDLE_UPDATE_API").is_some() {
        std::fs::write(&pinned, &now).expect("write tests/public-api.txt");
        return;
    }
    let before = std::fs::read_to_string(&pinned).unwrap_or_default();
    assert!(
        before == now,
        "the public API changed; review the change (semver!), then run\n  BUNDLE_UPDATE_API=1 cargo test --locked --test cli public_api\n--- pinned\n{before}\n--- now\n{now}"
    );
}

#[test]
fn public_api_list_sees_signatures_fields_and_impls() {
    let items = public_items(
        "impl A {\n    pub fn f(\n        x: u8,\n    ) -> u8 {\n        x\n    }\n    pub(crate) fn g() {}\n}\nimpl B {\n    fn h() {}\n}\npub struct S {\n    pub a: u8,\n    b: u8,\n}\nimpl Clone for S {\n    fn clone(&self) -> S {}\n}\npub use m::{\n    X,\n    Y,\n};\n",
    );
    assert_eq!(
        items,
        ["impl A", "    pub fn f(x: u8) -> u8", "pub struct S", "pub a: u8", "impl Clone for S", "pub use m::{X, Y}"]
    );
}

/// The runtime loader of examples/ loads a good bundle and refuses a hostile one with its code.
#[test]
fn public_api_example_runtime_loader_runs() {
    let root = repo_root();
    // `cargo test` builds the examples beside the binary.
    let example =
        Path::new(env!("CARGO_BIN_EXE_bundle")).parent().expect("target/debug").join("examples/runtime_loader");
    if !example.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--locked", "--quiet", "--example", "runtime_loader"])
            .current_dir(&root)
            .status()
            .expect("cargo build --example");
        assert!(status.success());
    }
    let key = root.join("testdata/keys/test.pub");
    let good = std::process::Command::new(&example)
        .arg(root.join("testdata/hostile/ok.agent.bundle"))
        .arg(&key)
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&good.stdout);
    assert!(good.status.success(), "{stdout}{}", String::from_utf8_lossy(&good.stderr));
    assert!(stdout.starts_with("loaded hostile 1.0.0 (signed by "), "{stdout}");
    let bad = std::process::Command::new(&example)
        .arg(root.join("testdata/hostile/digest_mismatch-prompt-replaced.agent.bundle"))
        .arg(&key)
        .output()
        .expect("run the example");
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("[digest_mismatch]"));
}
