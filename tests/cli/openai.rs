//! `bundle import --from openai` and `bundle export --to openai`: the forms of OpenAI's
//! function-calling documentation (Chat Completions, Responses, legacy `functions`), round
//! trips, and function names that never break OpenAI's rule (`^[a-zA-Z0-9_-]{1,64}$`).

use crate::snapshot::assert_run_snapshot;
use crate::support::{Env, Run, edit_tools, run, testdata};

fn path(rel: &str) -> String {
    testdata(rel).display().to_string()
}

fn coded(out: &Run) -> Vec<(String, String)> {
    out.json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["code"].as_str().unwrap().to_owned(), d["path"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

const HTTP: [&str; 3] = ["--http", "POST", "https://fn.example.com/call/{tool}"];

fn import(file: &str) -> Run {
    run(&["import", "--from", "openai", &path(file), HTTP[0], HTTP[1], HTTP[2], "--format", "json"])
}

#[test]
fn import_openai_chat_completions_form_reports_strict() {
    let out = import("import/openai/chat-completions.json");
    out.expect_code(0);
    let j = out.json();
    let tool = &j["document"]["tools"][0];
    assert_eq!(tool["id"], "get_weather");
    assert_eq!(tool["description"], "Get current temperature for a given location.");
    assert_eq!(tool["input_schema"]["required"], serde_json::json!(["location"]));
    assert_eq!(tool["transport"]["url"], "https://fn.example.com/call/get_weather");
    assert_eq!(tool["capabilities"], serde_json::json!(["net:fn.example.com"]));
    assert_eq!(tool["result_schema"], serde_json::json!({}));
    let coded = coded(&out);
    assert!(coded.contains(&("not_carried_over".into(), "tools[0].function.strict".into())), "{coded:?}");
}

#[test]
fn import_openai_responses_form_skips_built_in_tools_with_a_warning() {
    let out = import("import/openai/responses.json");
    out.expect_code(0);
    let j = out.json();
    let ids: Vec<&str> = j["document"]["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["get_horoscope", "send_email"]);
    let coded = coded(&out);
    assert!(coded.contains(&("not_carried_over".into(), "[2]".into())), "{coded:?}");
    assert_run_snapshot!(out);
}

#[test]
fn import_openai_legacy_functions_without_description_or_parameters() {
    let out = import("import/openai/legacy-functions.json");
    out.expect_code(0);
    let j = out.json();
    let second = &j["document"]["tools"][1];
    assert_eq!(second["id"], "get_n_day_weather_forecast");
    assert_eq!(second["description"], "get_n_day_weather_forecast");
    assert_eq!(second["input_schema"], serde_json::json!({"type": "object", "properties": {}}));
    let notes = coded(&out).into_iter().filter(|(_, p)| p == "functions[1]").count();
    assert_eq!(notes, 2, "no description, no parameters");
}

#[test]
fn import_openai_definitions_the_api_refuses_are_errors() {
    let out = import("import/openai/invalid.json");
    out.expect_code(1);
    let errors: Vec<String> = coded(&out).into_iter().filter(|(c, _)| c == "invalid_import").map(|(_, p)| p).collect();
    assert_eq!(
        errors,
        ["[0].function.name", "[1].function.name", "[2].function", "[3].function.parameters", "[4].function.name"]
    );
}

#[test]
fn openai_import_export_import_gives_the_same_tools_json() {
    let env = Env::new();
    for file in ["chat-completions.json", "responses.json", "legacy-functions.json"] {
        let first = import(&format!("import/openai/{file}"));
        first.expect_code(0);
        let doc = first.json()["document"].clone();
        env.run(&["init", "rt"]).expect_code(0);
        std::fs::write(env.path().join("rt/tools.json"), serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        std::fs::write(env.path().join("rt/policy.caps"), "net:fn.example.com\n").unwrap();
        env.run(&["lock", "-q", "rt"]).expect_code(0);
        env.run(&["export", "--to", "openai", "rt", "-o", "exported.json"]).expect_code(0);
        let second =
            env.run(&["import", "--from", "openai", "exported.json", HTTP[0], HTTP[1], HTTP[2], "--format", "json"]);
        second.expect_code(0);
        assert_eq!(second.json()["document"], doc, "{file}");
        std::fs::remove_dir_all(env.path().join("rt")).unwrap();
    }
}

/// An agent whose tools.json is `tools` (http tools on net:fn.example.com).
fn agent_with(env: &Env, ids: &[&str]) {
    env.run(&["init", "ag"]).expect_code(0);
    let tools: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| {
            serde_json::json!({"id": id, "description": "A tool.",
                "transport": {"kind": "http", "method": "POST", "url": "https://fn.example.com/x"},
                "input_schema": {"type": "object"}, "result_schema": {}, "capabilities": ["net:fn.example.com"]})
        })
        .collect();
    edit_tools(&env.path().join("ag"), |doc| doc["tools"] = tools.into());
    std::fs::write(env.path().join("ag/policy.caps"), "net:fn.example.com\n").unwrap();
    env.run(&["lock", "-q", "ag"]).expect_code(0);
    env.run(&["check", "ag"]).expect_code(0);
}

#[test]
fn export_openai_dotted_ids_come_back_as_dotted_ids() {
    let env = Env::new();
    agent_with(&env, &["mail.send", "mail.search"]);
    env.run(&["export", "--to", "openai", "ag", "-o", "fns.json"]).expect_code(0);
    let out = env.run(&["import", "--from", "openai", "fns.json", HTTP[0], HTTP[1], HTTP[2], "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let ids: Vec<&str> = j["document"]["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mail.send", "mail.search"]);
}

#[test]
fn export_openai_never_writes_a_name_over_64_characters() {
    let env = Env::new();
    // 64 characters with three dots: `.` → `__` makes 67.
    let long = "billing.invoices.reminders.send_the_overdue_reminder_to_customer";
    assert_eq!(long.len(), 64);
    let twin = "billing.invoices.reminders.send_the_overdue_reminder_to_custome2";
    agent_with(&env, &[long, twin]);
    let out = env.run(&["export", "--to", "openai", "ag", "--format", "json"]);
    out.expect_code(0);
    let j = out.json();
    let names: Vec<String> =
        j["document"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect();
    for name in &names {
        assert!(name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{name}");
        assert!(name.starts_with("billing__invoices__reminders__send_the_overdue_"), "{name}");
    }
    assert_ne!(names[0], names[1], "a hash of the id keeps shortened names apart");
    // As the book shows it: 55 characters, `_`, 8 hex digits of BLAKE3(id).
    let hash = blake3::hash(long.as_bytes()).to_hex();
    assert_eq!(names[0], format!("billing__invoices__reminders__send_the_overdue_reminder_{}", &hash[..8]));
    assert_eq!(names[0], "billing__invoices__reminders__send_the_overdue_reminder_43a0e628");
    // The mapping is reported, and the same every time.
    assert!(j["diagnostics"].to_string().contains(&format!("is exported as `{}`", names[0])));
    let again = env.run(&["export", "--to", "openai", "ag", "--format", "json"]);
    assert_eq!(again.json()["document"], j["document"]);
}

#[test]
fn export_openai_refuses_two_tools_on_one_function_name() {
    let env = Env::new();
    agent_with(&env, &["mail.send", "mail__send"]);
    let out = env.run(&["export", "--to", "openai", "ag", "--format", "json"]);
    out.expect_code(1);
    assert!(out.json()["document"].is_null());
}

#[test]
fn repeated_identical_warnings_are_printed_once_with_a_count() {
    let env = Env::new();
    agent_with(&env, &["a", "b", "c"]);
    let out = env.run(&["export", "--to", "openai", "ag", "-o", "fns.json"]);
    out.expect_code(0);
    assert_eq!(out.stderr.matches("capabilities, secrets and budget").count(), 1, "{}", out.stderr);
    assert_run_snapshot!(out);
    // JSON keeps one diagnostic per place.
    let out = env.run(&["export", "--to", "openai", "ag", "--format", "json"]);
    assert_eq!(out.stdout.matches("capabilities, secrets and budget").count(), 3);
}
