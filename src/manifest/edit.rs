//! Writing digests into manifest.toml without disturbing what the author wrote: comments,
//! key order, blank lines and formatting survive; stale entries go, new files are inserted in
//! sorted position; values that did not change are not touched at all.

use std::collections::BTreeMap;

use toml_edit::{DocumentMut, InlineTable, Item, Table, Value};

use super::Digest;

/// The digests the manifest should hold.
#[derive(Debug, Default)]
pub struct Digests {
    pub tools: Option<Digest>,
    pub policy: Option<Digest>,
    /// Every other file, by relative path.
    pub files: BTreeMap<String, Digest>,
}

/// What `apply` changed, by path.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub updated: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.updated.is_empty()
    }
}

/// Rewrites `text` so that its digests are `digests`; returns the new text and what changed.
pub fn apply(text: &str, digests: &Digests) -> Result<(String, Changes), toml_edit::TomlError> {
    let mut doc: DocumentMut = text.parse()?;
    let mut changes = Changes::default();

    let named = [
        ("tools", crate::tools::FILE_NAME, &digests.tools, Some(crate::tools::SUPPORTED_VERSION as i64)),
        ("policy", crate::policy::FILE_NAME, &digests.policy, None),
    ];
    for (kind, path, digest, version) in named {
        match digest {
            Some(d) => {
                let artifacts = table_entry(doc.as_table_mut(), "artifacts", true);
                let created = !artifacts.contains_key(kind);
                let table = table_entry(artifacts, kind, false);
                let mut changed = set(table, "path", Value::from(path));
                changed |= set(table, "blake3", Value::from(d.blake3.to_hex().as_str()));
                changed |= set(table, "size", Value::from(d.size as i64));
                if let Some(v) = version {
                    changed |= set(table, "version", Value::from(v));
                }
                if created {
                    changes.added.push(path.to_owned());
                } else if changed {
                    changes.updated.push(path.to_owned());
                }
            }
            None => {
                if let Some(artifacts) = doc.get_mut("artifacts").and_then(Item::as_table_mut)
                    && artifacts.remove(kind).is_some()
                {
                    changes.removed.push(path.to_owned());
                }
            }
        }
    }

    files(&mut doc, &digests.files, &mut changes);
    Ok((doc.to_string(), changes))
}

/// Sets `[bundle] expires` (the copy `bundle pack --expires-in` signs; the author's file is
/// not touched).
pub fn set_expires(text: &str, expires: crate::timestamp::Timestamp) -> Result<String, toml_edit::TomlError> {
    let mut doc: DocumentMut = text.parse()?;
    let bundle = table_entry(doc.as_table_mut(), "bundle", false);
    set(bundle, "expires", Value::from(expires.to_string()));
    Ok(doc.to_string())
}

/// Records pins (`[pins."<file>"]` with format, where the definition is served from, and
/// blake3), replacing any pin of the same file (keys the new pin does not have are removed) and
/// leaving everything else as written.
pub fn set_pins(text: &str, pins: &[(String, super::Pin)]) -> Result<String, toml_edit::TomlError> {
    use super::{McpStart, PinSource};
    let mut doc: DocumentMut = text.parse()?;
    let table = table_entry(doc.as_table_mut(), "pins", true);
    for (file, pin) in pins {
        let entry = table_entry(table, file, false);
        let mut keys = vec!["format"];
        set(entry, "format", Value::from(pin.format().as_str()));
        match &pin.source {
            PinSource::Rap { url } => {
                set(entry, "url", Value::from(url.as_str()));
                keys.push("url");
            }
            PinSource::Mcp { server, start } => {
                set(entry, "server", Value::from(server.as_str()));
                keys.push("server");
                match start {
                    None => {}
                    Some(McpStart::Stdio { command }) => {
                        let array: toml_edit::Array = command.iter().map(String::as_str).collect();
                        set_array(entry, "command", array);
                        keys.push("command");
                    }
                    Some(McpStart::Http { url }) => {
                        set(entry, "url", Value::from(url.as_str()));
                        keys.push("url");
                    }
                }
            }
        }
        set(entry, "blake3", Value::from(pin.blake3.to_hex().as_str()));
        keys.push("blake3");
        let stale: Vec<String> =
            entry.iter().map(|(k, _)| k.to_owned()).filter(|k| !keys.contains(&k.as_str())).collect();
        for k in stale {
            entry.remove(&k);
        }
    }
    Ok(doc.to_string())
}

/// Sets an array value unless it already holds the same strings.
fn set_array(table: &mut Table, key: &str, array: toml_edit::Array) {
    let same_strings = table.get(key).and_then(Item::as_array).is_some_and(|old| {
        old.len() == array.len()
            && old.iter().zip(array.iter()).all(|(a, b)| a.as_str().is_some() && a.as_str() == b.as_str())
    });
    if !same_strings {
        table.insert(key, Item::Value(Value::Array(array)));
    }
}

fn files(doc: &mut DocumentMut, wanted: &BTreeMap<String, Digest>, changes: &mut Changes) {
    if wanted.is_empty() && !doc.contains_key("files") {
        return;
    }
    let table = table_entry(doc.as_table_mut(), "files", false);
    let existing: Vec<String> = table.iter().map(|(k, _)| k.to_owned()).collect();
    for key in &existing {
        if !wanted.contains_key(key) {
            table.remove(key);
            changes.removed.push(key.clone());
        }
    }
    let mut to_add = Vec::new();
    for (path, digest) in wanted {
        match table.get_mut(path) {
            Some(item) => {
                if let Some(entry) = item.as_table_like_mut() {
                    let mut changed = set_like(entry, "blake3", Value::from(digest.blake3.to_hex().as_str()));
                    changed |= set_like(entry, "size", Value::from(digest.size as i64));
                    if digest.executable {
                        changed |= set_like(entry, "executable", Value::from(true));
                    } else {
                        changed |= entry.remove("executable").is_some();
                    }
                    if changed {
                        changes.updated.push(path.clone());
                    }
                } else {
                    *item = Item::Value(Value::InlineTable(file_entry(digest)));
                    changes.updated.push(path.clone());
                }
            }
            None => to_add.push(path.clone()),
        }
    }
    if to_add.is_empty() {
        return;
    }
    // Insert each new path before the first existing key that sorts after it, so that a
    // sorted table stays sorted and an author's own order is kept.
    let mut order: Vec<(String, bool)> = table.iter().map(|(k, _)| (k.to_owned(), false)).collect();
    for path in &to_add {
        let at = order.iter().position(|(k, _)| k.as_bytes() > path.as_bytes()).unwrap_or(order.len());
        order.insert(at, (path.clone(), true));
    }
    let mut old = std::mem::replace(table, Table::new());
    *table = Table::new();
    table.set_implicit(old.is_implicit());
    *table.decor_mut() = old.decor().clone();
    table.set_position(old.position());
    for (key, new) in order {
        if new {
            let digest = &wanted[&key];
            table.insert(&key, Item::Value(Value::InlineTable(file_entry(digest))));
            changes.added.push(key);
        } else if let Some((k, item)) = old.remove_entry(&key) {
            table.insert_formatted(&k, item);
        }
    }
}

fn file_entry(digest: &Digest) -> InlineTable {
    let mut t = InlineTable::new();
    t.insert("blake3", Value::from(digest.blake3.to_hex().as_str()));
    t.insert("size", Value::from(digest.size as i64));
    if digest.executable {
        t.insert("executable", Value::from(true));
    }
    t.fmt();
    t
}

/// The sub-table `key` of `parent`, created (as a standard table) when absent.
fn table_entry<'t>(parent: &'t mut Table, key: &str, implicit: bool) -> &'t mut Table {
    if !parent.get(key).is_some_and(Item::is_table) {
        let mut t = Table::new();
        t.set_implicit(implicit);
        parent.insert(key, Item::Table(t));
    }
    parent[key].as_table_mut().expect("just ensured a table")
}

/// Sets `key` to `value` unless it already equals it; keeps the old value's comments and
/// spacing. Returns whether anything changed.
fn set(table: &mut Table, key: &str, value: Value) -> bool {
    set_like(table, key, value)
}

fn set_like(table: &mut dyn toml_edit::TableLike, key: &str, mut value: Value) -> bool {
    if let Some(old) = table.get(key).and_then(Item::as_value) {
        if same(old, &value) {
            return false;
        }
        *value.decor_mut() = old.decor().clone();
    }
    table.insert(key, Item::Value(value));
    true
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.value() == y.value(),
        (Value::Integer(x), Value::Integer(y)) => x.value() == y.value(),
        (Value::Boolean(x), Value::Boolean(y)) => x.value() == y.value(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(n: u8) -> Digest {
        Digest { blake3: blake3::hash(&[n]), size: n as u64, executable: false }
    }

    #[test]
    fn keeps_comments_and_order_and_is_idempotent() {
        let text = "# top comment\n[bundle]\nformat = 1 # fmt\n\n[agent]\nname = \"m\" # the name\nversion = \"1.0.0\"\n\n[files] # all the others\n\"b.md\" = { blake3 = \"00\", size = 1 } # keep me\n\"z.md\" = { blake3 = \"00\", size = 1 }\n\"gone.md\" = { blake3 = \"00\", size = 1 }\n";
        let mut digests = Digests { tools: Some(d(1)), policy: None, files: BTreeMap::new() };
        digests.files.insert("a.md".into(), d(2));
        digests.files.insert("b.md".into(), d(3));
        digests.files.insert("c.md".into(), d(4));
        digests.files.insert("z.md".into(), d(5));
        let (out, changes) = apply(text, &digests).unwrap();
        assert!(out.starts_with("# top comment\n[bundle]\nformat = 1 # fmt\n"), "{out}");
        assert!(out.contains("name = \"m\" # the name"), "{out}");
        assert!(out.contains("[files] # all the others"), "{out}");
        assert!(out.contains("# keep me"), "{out}");
        assert!(!out.contains("gone.md"));
        let a = out.find("\"a.md\"").unwrap();
        let b = out.find("\"b.md\"").unwrap();
        let c = out.find("\"c.md\"").unwrap();
        let z = out.find("\"z.md\"").unwrap();
        assert!(a < b && b < c && c < z, "{out}");
        assert_eq!(changes.added, vec!["tools.json", "a.md", "c.md"]);
        assert_eq!(changes.removed, vec!["gone.md"]);
        let (again, changes) = apply(&out, &digests).unwrap();
        assert_eq!(again, out);
        assert!(changes.is_empty());
    }
}
