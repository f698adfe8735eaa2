//! Editor support as the book documents it (docs/book/src/guides/editors.md): `bundle schema`,
//! the VS Code settings, and taplo validating manifests with `.taplo.toml`.

use std::process::Command;

use crate::support::{Env, repo, require_tool, run};

/// The `.taplo.toml` the editors guide tells users to write.
const GUIDE_TAPLO: &str = r#"[[rule]]
include = ["**/agents/*/manifest.toml"]

[rule.schema]
path = "schemas/manifest.v1.schema.json"
"#;

/// The `.vscode/settings.json` the editors guide tells users to write.
const GUIDE_VSCODE: &str = r#"{
  "json.schemas": [
    {
      "fileMatch": ["**/agents/*/tools.json"],
      "url": "./schemas/tools.v1.schema.json"
    }
  ]
}
"#;

fn guide() -> String {
    std::fs::read_to_string(repo().join("docs/book/src/guides/editors.md")).unwrap()
}

#[test]
fn bundle_schema_prints_the_published_schemas() {
    for (which, file) in [("tools", "tools.v1.schema.json"), ("manifest", "manifest.v1.schema.json")] {
        let out = run(&["schema", which]);
        out.expect_code(0);
        assert_eq!(out.stdout, std::fs::read_to_string(repo().join("schemas").join(file)).unwrap(), "{which}");
    }
    run(&["schema", "policy"]).expect_code(2);
}

#[test]
fn guide_vscode_settings_point_at_the_schema_bundle_writes() {
    assert!(guide().contains(GUIDE_VSCODE), "the editors guide's VS Code settings changed; update this test");
    let settings: serde_json::Value = serde_json::from_str(GUIDE_VSCODE).unwrap();
    assert_eq!(settings["json.schemas"][0]["url"], "./schemas/tools.v1.schema.json");
    // The guide offers both ways; bundle accepts either form of tools.json.
    let env = Env::new();
    env.run(&["init", "agents/a"]).expect_code(0);
    let tools = env.path().join("agents/a/tools.json");
    let text = std::fs::read_to_string(&tools).unwrap();
    let url = "https://agent-bundle.dev/schemas/tools.v1.schema.json";
    assert!(text.contains(url), "{text}");
    std::fs::write(&tools, text.replace(url, "../../schemas/tools.v1.schema.json")).unwrap();
    env.run(&["lock"]).expect_code(0);
    env.run(&["check"]).expect_code(0);
    std::fs::write(&tools, "{\n  \"version\": 1,\n  \"tools\": []\n}\n").unwrap();
    env.run(&["lock"]).expect_code(0);
    env.run(&["check"]).expect_code(0);
}

fn taplo(dir: &std::path::Path) -> (bool, String) {
    let out = Command::new("taplo")
        .args(["lint", "--no-auto-config", "--config", ".taplo.toml"])
        .current_dir(dir)
        .output()
        .expect("taplo");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn taplo_checks_manifests_with_the_documented_config() {
    if !require_tool("taplo") {
        return;
    }
    // This repository's own fixtures.
    let (ok, out) = taplo(&repo());
    assert!(ok, "{out}");

    // A new user's repository, set up as the guide says.
    assert!(guide().contains(GUIDE_TAPLO), "the editors guide's .taplo.toml changed; update this test");
    let env = Env::new();
    std::fs::write(env.path().join(".taplo.toml"), GUIDE_TAPLO).unwrap();
    std::fs::create_dir(env.path().join("schemas")).unwrap();
    std::fs::write(env.path().join("schemas/manifest.v1.schema.json"), run(&["schema", "manifest"]).stdout).unwrap();
    env.run(&["init", "agents/mailer"]).expect_code(0);
    let (ok, out) = taplo(env.path());
    assert!(ok, "{out}");

    let manifest = env.path().join("agents/mailer/manifest.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("[agent]\n", "[agent]\ndescripton = \"typo\"\n")).unwrap();
    let (ok, out) = taplo(env.path());
    assert!(!ok && out.contains("descripton"), "taplo must reject what bundle rejects:\n{out}");
    env.run(&["check", "agents/mailer"]).expect_code(1);
}
