//! The shape of `src/` that STYLE.md asks for, kept by tests rather than by review:
//! - the top-level modules import one another without a cycle (arrows point one way: cli →
//!   operations → formats → mechanisms), and so do the operations in `src/ops/`;
//! - no file in `src/` is over 700 lines.
//!
//! A module's imports are read from its source: every `crate::NAME` (and `agent_bundle::NAME`,
//! the command line's name for the library), every name in a `crate::{...}` group, and
//! `super::NAME` where `super` is the crate root. Comments are skipped; the parse is plain
//! text, not Rust, which is enough for this code base's style of paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::repo;

/// The longest a file in `src/` may be (STYLE.md).
const MAX_LINES: usize = 700;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("a source folder").map(|e| e.expect("an entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file below `root` (`src/ops/gate/mod.rs` → `["ops", "gate"]`).
fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).expect("a file below the root");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a line without its `//` comment (a `//` inside a string is rare enough here).
fn code(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

fn ident_at(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The absolute module paths `text` names, as `(path, line number)`: each path starts at the
/// crate root and is at least two segments deep where the source names that much.
fn named_paths(text: &str, here: &[String]) -> Vec<(Vec<String>, usize)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = code(line);
        let mut rest = line;
        while let Some(i) = rest.find("::") {
            // The path's first segment: the identifier before `::`, if it starts a path.
            let before = &rest[..i];
            let start = before.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |j| j + 1);
            let head = &before[start..];
            let preceded_by_colons = before[..start].ends_with("::");
            let after = &rest[i + 2..];
            rest = after;
            if preceded_by_colons {
                continue;
            }
            let base: Option<Vec<String>> = match head {
                "crate" | "agent_bundle" => Some(Vec::new()),
                "super" => {
                    // `super::super::x` climbs twice.
                    let mut up = here.len().saturating_sub(1);
                    let mut tail = after;
                    while let Some(t) = tail.strip_prefix("super::") {
                        up = up.saturating_sub(1);
                        tail = t;
                    }
                    rest = tail;
                    Some(here[..up].to_vec())
                }
                _ => None,
            };
            let Some(base) = base else { continue };
            let tail = if head == "super" { rest } else { after };
            if let Some(group) = tail.strip_prefix('{') {
                // `crate::{a, b::c, d::{e, f}}`: the first segment of each top-level item.
                let mut depth = 0;
                let mut item = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            push_item(&base, &item, n, &mut found);
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        item.push(c);
                    }
                }
                push_item(&base, &item, n, &mut found);
            } else {
                let first = ident_at(tail);
                let second = tail[first.len()..].strip_prefix("::").map(ident_at).filter(|s| !s.is_empty());
                if !first.is_empty() {
                    let mut path = base.clone();
                    path.push(first.to_owned());
                    path.extend(second.map(str::to_owned));
                    found.push((path, n + 1));
                }
            }
        }
    }
    found
}

fn push_item(base: &[String], item: &str, n: usize, found: &mut Vec<(Vec<String>, usize)>) {
    let item = item.trim();
    let mut segments = item.split("::").map(|s| ident_at(s.trim())).filter(|s| !s.is_empty());
    if let Some(first) = segments.next() {
        let mut path = base.to_vec();
        path.push(first.to_owned());
        path.extend(segments.next().map(str::to_owned));
        found.push((path, n + 1));
    }
}

/// The edges between the modules at `depth` below `prefix` (depth 1 under `[]`: the top-level
/// modules; under `["ops"]`: the operations), each with one place that makes it.
fn graph(prefix: &[&str]) -> (BTreeSet<String>, BTreeMap<(String, String), String>) {
    let root = repo().join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut modules = BTreeSet::new();
    let mut edges = BTreeMap::new();
    let depth = prefix.len();
    for file in &files {
        let here = module_path(&root, file);
        if here.len() <= depth || here[..depth].iter().zip(prefix).any(|(a, b)| a != b) {
            continue;
        }
        let from = here[depth].clone();
        modules.insert(from.clone());
        let text = std::fs::read_to_string(file).expect("a source file");
        for (path, line) in named_paths(&text, &here) {
            if path.len() <= depth || path[..depth].iter().zip(prefix).any(|(a, b)| a != b) {
                continue;
            }
            let to = path[depth].clone();
            if to != from {
                let at = format!("{}:{line}", file.strip_prefix(repo()).unwrap_or(file).display());
                edges.entry((from.clone(), to)).or_insert(at);
            }
        }
    }
    // Only edges to modules that exist (not to items of the parent, `crate::Error`).
    let known: BTreeSet<String> = files
        .iter()
        .map(|f| module_path(&root, f))
        .filter(|p| p.len() > depth && p[..depth].iter().zip(prefix).all(|(a, b)| a == b))
        .map(|p| p[depth].clone())
        .collect();
    edges.retain(|(_, to), _| known.contains(to));
    (modules, edges)
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(modules: &BTreeSet<String>, edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    struct State<'a> {
        next: usize,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, out: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        for &w in out.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, out, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.stack.contains(&w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        out.entry(from).or_default().push(to);
    }
    let mut s = State { next: 0, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for m in modules {
        if !s.index.contains_key(m.as_str()) {
            visit(m, &out, &mut s);
        }
    }
    s.found
}

fn assert_acyclic(prefix: &[&str], what: &str) {
    let (modules, edges) = graph(prefix);
    assert!(modules.len() > 5, "the parse found the {what} ({modules:?})");
    let found = cycles(&modules, &edges);
    let described: Vec<String> = found
        .iter()
        .map(|component| {
            let inside: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| component.contains(a) && component.contains(b))
                .map(|((a, b), at)| format!("  {a} -> {b} ({at})"))
                .collect();
            format!("{component:?}:\n{}", inside.join("\n"))
        })
        .collect();
    assert!(found.is_empty(), "the {what} import each other in a cycle:\n{}", described.join("\n"));
}

/// Arrows point one way between the top-level modules of `src/` (issue 35: there was one
/// strongly connected component of 20 modules, through error.rs and `Reason` in `bundle`).
#[test]
fn the_modules_of_src_import_one_another_without_a_cycle() {
    assert_acyclic(&[], "top-level modules of src/");
}

/// No two operations import each other (ops/mod.rs): the gate is shared from below.
#[test]
fn the_operations_import_one_another_without_a_cycle() {
    assert_acyclic(&["ops"], "operations in src/ops/");
}

/// The parse itself: a cycle planted in text is found, through each kind of path.
#[test]
fn a_cycle_is_found_through_each_kind_of_path() {
    let here = vec!["a".to_owned(), "b".to_owned()];
    let text = "use crate::{x::Y, z};\nfn f() { agent_bundle::w::f(); }\nuse super::super::v::T; // crate::no\n";
    let named: Vec<Vec<String>> = named_paths(text, &here).into_iter().map(|(p, _)| p).collect();
    let firsts: Vec<&str> = named.iter().map(|p| p[0].as_str()).collect();
    assert_eq!(firsts, ["x", "z", "w", "v"]);
    let modules: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let edge = |a: &str, b: &str| ((a.to_owned(), b.to_owned()), String::new());
    let edges = BTreeMap::from([edge("a", "b"), edge("b", "c"), edge("c", "a")]);
    assert_eq!(cycles(&modules, &edges), [vec!["a", "b", "c"]]);
}

/// STYLE.md: no file in src/ over 700 lines; a longer one is split along its concerns.
#[test]
fn no_file_in_src_is_over_700_lines() {
    let mut files = Vec::new();
    rust_files(&repo().join("src"), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).expect("a source file").lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
}
