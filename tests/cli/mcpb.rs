//! MCP bundles (`.mcpb`): `bundle inspect` and `bundle import --from mcpb`, on files the real
//! mcpb CLI (`@anthropic-ai/mcpb` from npm, installed by .ci/run) packs and signs in the test,
//! and on hand-made hostile ZIPs.

use std::path::Path;
use std::process::Command;

use crate::snapshot::{in_env, shown};
use crate::support::{Env, require_tool};

const MANIFEST: &str = r#"{
  "manifest_version": "0.3",
  "name": "weather-tools",
  "display_name": "Weather ☂ tools",
  "version": "1.2.0",
  "description": "Forecasts and alerts",
  "author": {"name": "Example Ünïcode"},
  "server": {"type": "node", "entry_point": "server/index.js",
             "mcp_config": {"command": "node", "args": ["${__dirname}/server/index.js"]}},
  "tools": [{"name": "get_forecast", "description": "Forecast for a city"},
            {"name": "get-alerts", "description": "Active alerts ⚠"}],
  "user_config": {"api_key": {"type": "string", "title": "API key", "description": "key", "sensitive": true}}
}
"#;

/// Packs an extension folder with `manifest` by the real mcpb CLI into `out` (in the temp dir).
fn mcpb_pack(env: &Env, manifest: &str, out: &str) {
    let ext = env.path().join("ext");
    std::fs::create_dir_all(ext.join("server")).unwrap();
    std::fs::write(ext.join("manifest.json"), manifest).unwrap();
    std::fs::write(ext.join("server/index.js"), "console.log('weather')\n").unwrap();
    mcpb(env.path(), &["pack", "ext", out]);
}

fn mcpb(dir: &Path, args: &[&str]) {
    let out = Command::new("mcpb").args(args).current_dir(dir).output().expect("mcpb");
    assert!(
        out.status.success(),
        "mcpb {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn inspect_shows_what_an_mcp_bundle_claims() {
    if !require_tool("mcpb") {
        return;
    }
    let env = Env::new();
    mcpb_pack(&env, MANIFEST, "w.mcpb");
    insta::assert_snapshot!(shown(&mut in_env(&env, &["inspect", "w.mcpb"]), &[env.path()]));
}

#[test]
fn inspect_reports_the_eocd_defect_of_a_file_mcpb_signed() {
    if !require_tool("mcpb") {
        return;
    }
    let env = Env::new();
    mcpb_pack(&env, MANIFEST, "s.mcpb");
    let unsigned = std::fs::read(env.path().join("s.mcpb")).unwrap();
    mcpb(env.path(), &["sign", "s.mcpb", "--self-signed"]);
    let signed = std::fs::read(env.path().join("s.mcpb")).unwrap();
    assert!(signed.starts_with(&unsigned) && signed.ends_with(b"MCPB_SIG_END"), "mcpb appends its block");
    let run = env.run(&["inspect", "s.mcpb", "--format", "json"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(doc["signature"]["offset"], unsigned.len());
    assert_eq!(doc["signature"]["problem"], serde_json::Value::Null, "the PKCS#7 block is well-formed");
    assert_eq!(doc["zip"]["eocd"]["status"], "undeclared");
    assert_eq!(doc["zip"]["eocd"]["comment_length"], 0);
    assert_eq!(doc["zip"]["eocd"]["trailing"], signed.len() - unsigned.len());
    let text = env.run(&["inspect", "s.mcpb"]).stdout;
    assert!(text.contains("the defect of files signed by mcpb 2.1.2"), "{text}");
    // A block cut short is said, not a crash; the ZIP is then read whole.
    std::fs::write(env.path().join("cut.mcpb"), [&unsigned[..], b"MCPB_SIG_END"].concat()).unwrap();
    let cut = env.run(&["inspect", "cut.mcpb", "--format", "json"]);
    cut.expect_code(0);
    assert!(cut.json()["signature_problem"].as_str().unwrap().contains("no MCPB_SIG_V1"));
}

#[test]
fn import_from_mcpb_reads_the_claimed_tools_of_a_signed_file() {
    if !require_tool("mcpb") {
        return;
    }
    let env = Env::new();
    mcpb_pack(&env, MANIFEST, "s.mcpb");
    mcpb(env.path(), &["sign", "s.mcpb", "--self-signed"]);
    let run = env.run(&[
        "import",
        "--from",
        "mcpb",
        "s.mcpb",
        "--exec",
        "/opt/bin/mcp-call",
        "--arg",
        "{tool}",
        "--format",
        "json",
    ]);
    run.expect_code(0);
    let doc = run.json();
    let ids: Vec<&str> =
        doc["document"]["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["get_forecast", "get-alerts"]);
    let warnings: Vec<&str> =
        doc["diagnostics"].as_array().unwrap().iter().map(|d| d["message"].as_str().unwrap()).collect();
    assert!(warnings.iter().any(|w| w.contains("open input schema")), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("PKCS#7 signature is not carried over")), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("end-of-central-directory")), "{warnings:?}");
}

#[test]
fn import_from_mcpb_carries_full_definitions_from_a_static_tools_list() {
    if !require_tool("mcpb") {
        return;
    }
    let env = Env::new();
    let with_meta = MANIFEST.replace(
        "\"user_config\"",
        r#""_meta": {"com.microsoft.windows": {"static_responses": {"tools/list": {"tools": [
            {"name": "get_forecast", "description": "Forecast for a city",
             "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1}}, "required": ["city"]},
             "annotations": {"readOnlyHint": true, "openWorldHint": true}}]}}}},
  "user_config""#,
    );
    mcpb_pack(&env, &with_meta, "m.mcpb");
    let run = env.run(&[
        "import",
        "--from",
        "mcpb",
        "m.mcpb",
        "--http",
        "POST",
        "https://mcp.example/{tool}",
        "--format",
        "json",
    ]);
    run.expect_code(0);
    let tool = &run.json()["document"]["tools"][0];
    assert_eq!(tool["input_schema"]["required"], serde_json::json!(["city"]));
    // The same tools/list served by the server and imported with `--from mcp` gives the same
    // tools.json tool, so the same contract fingerprint: the bundle's static response is read
    // as the server's answer, nothing lost or added on the way.
    let list = r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": "get_forecast", "description": "Forecast for a city",
         "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1}}, "required": ["city"]},
         "annotations": {"readOnlyHint": true, "openWorldHint": true}}]}}"#;
    std::fs::write(env.path().join("list.json"), list).unwrap();
    let served = env.run(&[
        "import",
        "--from",
        "mcp",
        "list.json",
        "--http",
        "POST",
        "https://mcp.example/{tool}",
        "--format",
        "json",
    ]);
    served.expect_code(0);
    assert_eq!(&served.json()["document"]["tools"][0], tool);
}

/// A ZIP of stored entries, written by hand: `(name, bytes, declared size)`; the CRC is right
/// only for the bytes given (only manifest.json is ever decompressed).
fn stored_zip(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, data, size) in entries {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let head = |sig: u32, central: bool| {
            let mut h = sig.to_le_bytes().to_vec();
            if central {
                h.extend(20u16.to_le_bytes());
            }
            h.extend(20u16.to_le_bytes());
            h.extend([0u8; 2]); // flags
            h.extend([0u8; 2]); // stored
            h.extend([0u8; 4]); // time, date
            h.extend(crc.to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend(size.to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h.extend([0u8; 2]);
            if central {
                h.extend([0u8; 8]); // comment len, disk, internal attrs, (first 2 of external)
                h.extend([0u8; 2]);
                h.extend(offset.to_le_bytes());
            }
            h.extend(name.as_bytes());
            h
        };
        out.extend(head(0x0403_4b50, false));
        out.extend(*data);
        central.extend(head(0x0201_4b50, true));
    }
    let cd_offset = out.len() as u32;
    out.extend(&central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0u8; 4]);
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(cd_offset.to_le_bytes());
    out.extend([0u8; 2]);
    out
}

#[test]
fn hostile_mcp_bundles_are_refused_with_a_code_and_nothing_is_extracted() {
    let env = Env::new();
    let m = MANIFEST.as_bytes();
    let len = m.len() as u32;
    let cases: &[(&str, Vec<u8>, &str)] = &[
        ("ok.mcpb", stored_zip(&[("manifest.json", m, len)]), ""),
        ("traversal.mcpb", stored_zip(&[("manifest.json", m, len), ("../evil.js", b"x", 1)]), "unsafe_path"),
        ("absolute.mcpb", stored_zip(&[("manifest.json", m, len), ("/etc/evil", b"x", 1)]), "unsafe_path"),
        ("backslash.mcpb", stored_zip(&[("manifest.json", m, len), ("..\\evil", b"x", 1)]), "unsafe_path"),
        ("twice.mcpb", stored_zip(&[("manifest.json", m, len), ("manifest.json", m, len)]), "unsafe_path"),
        (
            "bomb.mcpb",
            stored_zip(&[("manifest.json", m, len), ("big.bin", &[0; 100], 2_000_000_000)]),
            "limit_exceeded",
        ),
        ("nomanifest.mcpb", stored_zip(&[("server.js", b"x", 1)]), "invalid_import"),
        ("garbage.mcpb", b"not a zip at all".to_vec(), "invalid_import"),
        (
            "badkey.mcpb",
            stored_zip(&[("manifest.json", br#"{"manifest_version": "0.3", "nme": 1}"#, 37)]),
            "invalid_import",
        ),
    ];
    for (name, bytes, code) in cases {
        std::fs::write(env.path().join(name), bytes).unwrap();
        let run = env.run(&["inspect", name, "--format", "json"]);
        let doc = run.json();
        if code.is_empty() {
            run.expect_code(0);
            continue;
        }
        run.expect_code(1);
        let codes: Vec<&str> =
            doc["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
        assert!(codes.contains(code), "{name}: {codes:?}");
        let import = env.run(&["import", "--from", "mcpb", name, "--exec", "/opt/x"]);
        import.expect_code(1);
    }
    let only: Vec<_> = std::fs::read_dir(env.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(only.len(), cases.len(), "nothing was extracted: {only:?}");
    insta::assert_snapshot!(shown(&mut in_env(&env, &["inspect", "badkey.mcpb"]), &[env.path()]));
}

/// More hostile shapes, each within its documented cap (reference/limits): a manifest.json over
/// 4 MiB, nested too deep, with a repeated key; compression methods the reader does not take
/// (bzip2, LZMA: only stored and deflate); a symbolic link; more than 100 000 entries. The
/// ZIPs that need other methods or attributes are written with Python's zipfile.
#[test]
fn hostile_mcp_bundles_beyond_the_first_shapes_are_refused_with_their_codes() {
    let env = Env::new();
    let m = MANIFEST.trim_end().trim_end_matches('}');
    let big = format!("{m}, \"pad\": \"{}\"}}", "x".repeat(5 << 20));
    let deep = format!("{m}, \"pad\": {}{}}}", "[".repeat(300), "]".repeat(300));
    let twice = MANIFEST.replacen("\"name\": \"weather-tools\"", "\"name\": \"evil\", \"name\": \"weather-tools\"", 1);
    assert_ne!(twice, MANIFEST);
    for (name, text) in [("big.mcpb", &big), ("deep.mcpb", &deep), ("twice.mcpb", &twice)] {
        std::fs::write(env.path().join(name), stored_zip(&[("manifest.json", text.as_bytes(), text.len() as u32)]))
            .unwrap();
    }
    std::fs::write(env.path().join("manifest.json"), MANIFEST).unwrap();
    let script = r#"
import sys, zipfile
m = open("manifest.json", encoding="utf-8").read()
for name, method in (("bzip2.mcpb", zipfile.ZIP_BZIP2), ("lzma.mcpb", zipfile.ZIP_LZMA)):
    with zipfile.ZipFile(name, "w", method) as z:
        z.writestr("manifest.json", m)
link = zipfile.ZipInfo("server/link")
link.external_attr = 0o120777 << 16
with zipfile.ZipFile("link.mcpb", "w") as z:
    z.writestr("manifest.json", m)
    z.writestr(link, "/etc/passwd")
with zipfile.ZipFile("many.mcpb", "w", zipfile.ZIP_STORED) as z:
    z.writestr("manifest.json", m)
    for i in range(100_001):
        z.writestr(f"d/{i}", b"")
"#;
    let out = Command::new("python3").args(["-c", script]).current_dir(env.path()).output().expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for (name, code, says) in [
        ("big.mcpb", "limit_exceeded", "larger than 4194304 bytes"),
        ("deep.mcpb", "limit_exceeded", "nested more than 64 deep"),
        ("twice.mcpb", "duplicate_key", "duplicate key `name`"),
        ("bzip2.mcpb", "invalid_import", "compression method not supported"),
        ("lzma.mcpb", "invalid_import", "compression method not supported"),
        ("link.mcpb", "unsafe_path", "symbolic link"),
        ("many.mcpb", "limit_exceeded", "100000"),
    ] {
        let run = env.run(&["inspect", name, "--format", "json"]);
        run.expect_code(1);
        let diags = run.json()["diagnostics"].clone();
        let found = diags.as_array().unwrap().iter().any(|d| {
            d["code"] == code
                && d["message"].as_str().unwrap().replace(['_', ' '], "").contains(&says.replace(['_', ' '], ""))
        });
        assert!(found, "{name}: {diags}");
        env.run(&["import", "--from", "mcpb", name, "--exec", "/opt/x"]).expect_code(1);
    }
}
