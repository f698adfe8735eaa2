//! schemas/manifest.v1.schema.json agrees with the manifest validator.

use agent_bundle::diagnostic::{Code, Source};
use agent_bundle::manifest;

use crate::support::{repo, testdata};

fn toml_to_json(item: &toml_edit::Item) -> serde_json::Value {
    use serde_json::Value as J;
    match item {
        toml_edit::Item::None => J::Null,
        toml_edit::Item::Value(v) => value_to_json(v),
        toml_edit::Item::Table(t) => J::Object(t.iter().map(|(k, v)| (k.to_owned(), toml_to_json(v))).collect()),
        toml_edit::Item::ArrayOfTables(a) => J::Array(
            a.iter().map(|t| J::Object(t.iter().map(|(k, v)| (k.to_owned(), toml_to_json(v))).collect())).collect(),
        ),
    }
}

fn value_to_json(v: &toml_edit::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        toml_edit::Value::String(s) => J::String(s.value().clone()),
        toml_edit::Value::Integer(i) => J::from(*i.value()),
        toml_edit::Value::Float(f) => J::from(*f.value()),
        toml_edit::Value::Boolean(b) => J::Bool(*b.value()),
        toml_edit::Value::Datetime(d) => J::String(d.value().to_string()),
        toml_edit::Value::Array(a) => J::Array(a.iter().map(value_to_json).collect()),
        toml_edit::Value::InlineTable(t) => {
            J::Object(t.iter().map(|(k, v)| (k.to_owned(), value_to_json(v))).collect())
        }
    }
}

const LOCKED: &str = "[bundle]\nformat = 1\n\n[agent]\nname = \"m\"\nversion = \"1.0.0\"\n\n[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262\"\nsize = 1\nversion = 1\n\n[files]\n\"a/b.md\" = { blake3 = \"af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262\", size = 1 }\n";

/// Variations of a locked manifest, each breaking (or not) one rule.
fn inline_cases() -> Vec<(String, String)> {
    let swap = |from: &str, to: &str| LOCKED.replacen(from, to, 1);
    let mut cases: Vec<(String, String)> = vec![
        ("locked".into(), LOCKED.into()),
        ("executable".into(), swap("size = 1 }", "size = 1, executable = true }")),
        ("executable-string".into(), swap("size = 1 }", "size = 1, executable = \"yes\" }")),
        ("digest-upper".into(), swap("af1349b9f5f9a1a6", "AF1349B9F5F9A1A6")),
        (
            "digest-short".into(),
            swap("= \"af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262\", size", "= \"af13\", size"),
        ),
        ("size-negative".into(), swap("size = 1 }", "size = -1 }")),
        ("file-unknown-key".into(), swap("size = 1 }", "size = 1, mode = 420 }")),
        ("file-escapes".into(), swap("\"a/b.md\"", "\"../b.md\"")),
        ("file-absolute".into(), swap("\"a/b.md\"", "\"/b.md\"")),
        ("file-is-tools".into(), swap("\"a/b.md\"", "\"tools.json\"")),
        ("tools-path".into(), swap("path = \"tools.json\"", "path = \"other.json\"")),
        ("tools-version-2".into(), swap("version = 1\n", "version = 2\n")),
        ("allow-secret-files".into(), swap("format = 1", "format = 1\nallow_secret_files = [\"certs/ca.pem\"]")),
        ("allow-secret-files-string".into(), swap("format = 1", "format = 1\nallow_secret_files = \"certs/ca.pem\"")),
        ("unknown-table".into(), format!("{LOCKED}\n[extra]\nx = 1\n")),
        ("unknown-artifact".into(), swap("[files]", "[artifacts.prompts]\npath = \"p\"\n\n[files]")),
        ("version-prerelease".into(), swap("\"1.0.0\"", "\"1.0.0-rc.1+build.5\"")),
        ("version-short".into(), swap("\"1.0.0\"", "\"1.0\"")),
        ("name-upper".into(), swap("name = \"m\"", "name = \"M\"")),
        ("format-string".into(), swap("format = 1", "format = \"1\"")),
        ("expires-utc".into(), swap("format = 1", "format = 1\nexpires = \"2027-01-01T00:00:00Z\"")),
        ("expires-offset".into(), swap("format = 1", "format = 1\nexpires = \"2027-01-01T02:00:00.25+02:00\"")),
        ("expires-toml-datetime".into(), swap("format = 1", "format = 1\nexpires = 2027-01-01T00:00:00Z")),
        ("expires-toml-local".into(), swap("format = 1", "format = 1\nexpires = 2027-01-01T00:00:00")),
        ("expires-toml-date".into(), swap("format = 1", "format = 1\nexpires = 2027-01-01")),
        ("expires-no-offset".into(), swap("format = 1", "format = 1\nexpires = \"2027-01-01T00:00:00\"")),
        ("expires-lowercase".into(), swap("format = 1", "format = 1\nexpires = \"2027-01-01t00:00:00z\"")),
        ("expires-hour-24".into(), swap("format = 1", "format = 1\nexpires = \"2027-01-01T24:00:00Z\"")),
        ("expires-integer".into(), swap("format = 1", "format = 1\nexpires = 1798761600")),
    ];
    // [pins]: RAP and MCP entries, and each way an entry can be wrong.
    let h = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";
    let pin = |name: &str, body: &str| {
        (format!("pin-{name}"), format!("{LOCKED}\n[pins.\"pins/p.json\"]\n{body}blake3 = \"{h}\"\n"))
    };
    cases.extend([
        pin("rap", "format = \"rap\"\nurl = \"https://a.example/\"\n"),
        pin("rap-with-server", "format = \"rap\"\nurl = \"https://a.example/\"\nserver = \"s\"\n"),
        pin("rap-no-url", "format = \"rap\"\n"),
        pin("mcp-stdio", "format = \"mcp\"\nserver = \"time\"\ncommand = [\"uvx\", \"mcp-server-time\"]\n"),
        pin("mcp-http", "format = \"mcp\"\nserver = \"time\"\nurl = \"http://127.0.0.1:9/mcp\"\n"),
        pin("mcp-file", "format = \"mcp\"\nserver = \"time\"\n"),
        pin("mcp-both", "format = \"mcp\"\nserver = \"t\"\ncommand = [\"x\"]\nurl = \"http://a/\"\n"),
        pin("mcp-empty-command", "format = \"mcp\"\nserver = \"t\"\ncommand = []\n"),
        pin("mcp-empty-program", "format = \"mcp\"\nserver = \"t\"\ncommand = [\"\", \"x\"]\n"),
        pin("mcp-command-string", "format = \"mcp\"\nserver = \"t\"\ncommand = \"x\"\n"),
        pin("mcp-bad-server", "format = \"mcp\"\nserver = \"-t\"\ncommand = [\"x\"]\n"),
        pin("mcp-no-server", "format = \"mcp\"\ncommand = [\"x\"]\n"),
        pin("other-format", "format = \"openapi\"\nurl = \"https://a.example/\"\n"),
    ]);
    // [[models]]: a key, or an identity and an issuer (each exactly or by pattern), and a shard size.
    let model = |name: &str, body: &str| {
        (format!("model-{name}"), format!("{LOCKED}\n[[models]]\npath = \"models/m\"\n{body}"))
    };
    cases.extend([
        model("key", "key = \"k.pub\"\n"),
        model("identity", "identity = \"a@example.com\"\nissuer = \"https://accounts.example.com\"\n"),
        model("patterns", "identity_regexp = \".*@example\\\\.com\"\nissuer_regexp = \"https://.*\"\n"),
        model("key-and-identity", "key = \"k.pub\"\nidentity = \"a\"\nissuer = \"i\"\n"),
        model("identity-no-issuer", "identity = \"a\"\n"),
        model("identity-both", "identity = \"a\"\nidentity_regexp = \"a\"\nissuer = \"i\"\n"),
        model("identity-empty", "identity = \"\"\nissuer = \"i\"\n"),
        model("neither", "signature = \"m.sig\"\n"),
        model("shards", "key = \"k.pub\"\nshard_size = 1000000000\n"),
        model("shards-small", "key = \"k.pub\"\nshard_size = 4096\n"),
        model("shards-string", "key = \"k.pub\"\nshard_size = \"1GB\"\n"),
    ]);
    // [skills] client_tools: Claude Code's built-in tools, bare or with a pattern, and each way an
    // entry can be wrong.
    let skills =
        |name: &str, list: &str| (format!("skills-{name}"), format!("{LOCKED}\n[skills]\nclient_tools = {list}\n"));
    let long_pattern = format!("[\"Bash({})\"]", "a".repeat(513));
    let longest_pattern = format!("[\"Bash({})\"]", "a".repeat(512));
    let many = format!("[{}]", (0..257).map(|i| format!("\"T{i}\"")).collect::<Vec<_>>().join(","));
    cases.extend([
        skills("claude-code", r#"["Read", "Grep", "Glob", "Bash(git diff *)", "Bash(git log:*)", "WebFetch"]"#),
        skills("nested-once", r#"["Bash(echo $(date))", "Bash(())", "read_file"]"#),
        skills("empty", "[]"),
        skills("duplicate", r#"["Read", "Read"]"#),
        skills("unclosed", r#"["Bash(git"]"#),
        skills("empty-pattern", r#"["Bash()"]"#),
        skills("space-pattern", r#"["Bash( )"]"#),
        skills("nested-twice", r#"["Bash(a((b)))"]"#),
        skills("closes-first", r#"["Bash(a)b)"]"#),
        skills("mcp", r#"["mcp__github__create_issue"]"#),
        skills("space-name", r#"["Web Fetch"]"#),
        skills("digit-first", r#"["1Read"]"#),
        skills("non-ascii", r#"["Bash(café)"]"#),
        skills("tab", r#"["Bash(a\tb)"]"#),
        skills("name-65", &format!("[\"{}\"]", "R".repeat(65))),
        skills("name-64", &format!("[\"{}\"]", "R".repeat(64))),
        skills("pattern-513", &long_pattern),
        skills("pattern-512", &longest_pattern),
        skills("too-many", &many),
        skills("not-a-list", r#""Read""#),
        skills("number", "[3]"),
        ("skills-unknown-key".into(), format!("{LOCKED}\n[skills]\nclient_tool = [\"Read\"]\n")),
    ]);
    cases
}

#[test]
fn published_manifest_schema_agrees_with_the_validator() {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("schemas/manifest.v1.schema.json")).unwrap())
            .unwrap();
    jsonschema::meta::validate(&schema).expect("the published schema is itself valid");
    let validator = jsonschema::validator_for(&schema).unwrap();

    let mut cases = inline_cases();
    for group in ["agents", "invalid", "manifests"] {
        for entry in std::fs::read_dir(testdata(group)).unwrap() {
            let path = entry.unwrap().path();
            let file = if path.is_dir() { path.join("manifest.toml") } else { path.clone() };
            if let Ok(text) = std::fs::read_to_string(&file) {
                cases.push((file.display().to_string(), text));
            }
        }
    }
    let mut disagreements = Vec::new();
    let mut compared = 0;
    for (name, text) in &cases {
        let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else { continue };
        let instance = toml_to_json(doc.as_item());
        let mut diags = Vec::new();
        manifest::parse(&Source::new("manifest.toml", text.as_str()), &mut diags);
        let validator_rejects = diags.iter().any(|d| d.is_error() && d.code != Code::InvalidToml);
        let schema_rejects = !validator.is_valid(&instance);
        compared += 1;
        if validator_rejects != schema_rejects {
            let codes: Vec<_> =
                diags.iter().map(|d| format!("{} {}", d.code, d.path.clone().unwrap_or_default())).collect();
            disagreements.push(format!("{name}: schema rejects {schema_rejects}, validator {codes:?}"));
        }
    }
    assert!(compared >= 30, "compared only {compared}");
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}
