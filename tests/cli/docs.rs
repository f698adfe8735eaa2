//! The book's generated pages: the tables of stable codes (diagnostics, verify's reasons, diff's
//! change kinds) come from the code's own `describe()` texts, and the command reference from
//! `bundle <command> --help`, as uv's `generate_cli_reference` does.
//!
//! Each generated region sits between `<!-- begin generated: NAME -->` and
//! `<!-- end generated: NAME -->`. Without `BUNDLE_UPDATE_DOCS` a test fails when a region
//! differs from what the code says; with `BUNDLE_UPDATE_DOCS=1` it rewrites the region:
//!
//!     BUNDLE_UPDATE_DOCS=1 cargo test --locked --test cli docs

use std::path::Path;

use agent_bundle::ErrorCode;
use agent_bundle::bundle::verify::Reason;
use agent_bundle::contract::ChangeKind;
use agent_bundle::diagnostic::Code;

use crate::support::{bin, repo};

const CODES_PAGE: &str = "docs/book/src/reference/codes.md";
const COMMANDS_PAGE: &str = "docs/book/src/reference/commands.md";
const EXIT_CODES_PAGE: &str = "docs/book/src/reference/exit-codes.md";

fn table<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str, describe: impl Fn(T) -> &'static str) -> String {
    let mut out = String::from("| code | meaning |\n| --- | --- |\n");
    for &item in all {
        // A `|` inside a cell would end it; Markdown tables take `\|`.
        out.push_str(&format!("| `{}` | {} |\n", name(item), describe(item).replace('|', "\\|")));
    }
    out
}

/// Replaces the text between the region's markers in `page` with `generated`, or checks that
/// it is already there.
#[track_caller]
fn check_region(page: &str, region: &str, generated: &str) {
    let path = repo().join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{page}: {e}"));
    let begin = format!("<!-- begin generated: {region} -->\n");
    let end = format!("<!-- end generated: {region} -->");
    let start = text.find(&begin).unwrap_or_else(|| panic!("{page} lacks the marker {begin}")) + begin.len();
    let stop = start + text[start..].find(&end).unwrap_or_else(|| panic!("{page} lacks the marker {end}"));
    if text[start..stop] == *generated {
        return;
    }
    if std::env::var_os("BUNDLE_UPDATE_DOCS").is_some() {
        let updated = format!("{}{generated}{}", &text[..start], &text[stop..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "{page}, region `{region}`, is out of date with the code; regenerate it with\n  \
         BUNDLE_UPDATE_DOCS=1 cargo test --locked --test cli docs\n--- page\n{}\n--- code\n{generated}",
        &text[start..stop]
    );
}

#[test]
fn book_lists_every_diagnostic_code_with_its_description() {
    check_region(CODES_PAGE, "diagnostic-codes", &table(Code::ALL, Code::as_str, Code::describe));
}

#[test]
fn book_lists_every_verify_reason_code_with_its_description() {
    check_region(CODES_PAGE, "reason-codes", &table(Reason::ALL, Reason::as_str, Reason::describe));
}

#[test]
fn book_lists_every_signing_key_code_with_its_meaning() {
    check_region(
        CODES_PAGE,
        "key-codes",
        &table(agent_bundle::keys::SignerError::CODES, ErrorCode::as_str, ErrorCode::describe),
    );
}

/// The security page lists every cap of `src/limits.rs`, with its value as the code has it.
#[test]
fn security_page_lists_every_input_cap() {
    let mut out = String::from("| input | cap | over it | constant |\n| --- | --- | --- | --- |\n");
    for cap in agent_bundle::limits::ALL {
        out.push_str(&format!("| {} | {} | {} | `{}` |\n", cap.input, cap.shown(), cap.over, cap.name));
    }
    check_region("docs/book/src/security/security.md", "input-caps", &out);
}

/// Every code a run that stops with exit 2 can print, from [`ErrorCode`]: the enum each error
/// type's exhaustive `code()` answers with.
#[test]
fn book_lists_every_exit_2_code_with_its_meaning() {
    check_region(EXIT_CODES_PAGE, "error-codes", &table(ErrorCode::ALL, ErrorCode::as_str, ErrorCode::describe));
}

/// `bundle guard`'s decisions, each with the JSON-RPC error code a refusal carries.
#[test]
fn book_lists_every_guard_code_with_its_json_rpc_code() {
    use agent_bundle::guard::GuardReason;
    let mut out = String::from("| code | JSON-RPC error | meaning |\n| --- | --- | --- |\n");
    for &r in GuardReason::ALL {
        let rpc = r.rpc_code().map_or_else(|| "none".to_owned(), |c| format!("`{c}`"));
        out.push_str(&format!("| `{}` | {rpc} | {} |\n", r.as_str(), r.describe().replace('|', "\\|")));
    }
    check_region(CODES_PAGE, "guard-codes", &out);
}

#[test]
fn book_lists_every_change_kind_with_its_description() {
    check_region(CODES_PAGE, "change-kinds", &table(ChangeKind::ALL, ChangeKind::as_str, ChangeKind::describe));
}

/// `bundle <path> --help`, at a fixed width so the page is the same on every machine.
fn help(path: &[&str]) -> String {
    let out = bin().args(path).arg("--help").env("COLUMNS", "100").env("NO_COLOR", "1").output().unwrap();
    assert!(out.status.success(), "bundle {path:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists under `Commands:` (without clap's `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect()
}

/// Every command, depth first, as its argument path (`[]` is `bundle` itself).
fn command_paths() -> Vec<Vec<String>> {
    fn walk(path: Vec<String>, out: &mut Vec<Vec<String>>) {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let children = subcommands(&help(&args));
        out.push(path.clone());
        for child in children {
            let mut next = path.clone();
            next.push(child);
            walk(next, out);
        }
    }
    let mut out = Vec::new();
    walk(Vec::new(), &mut out);
    out
}

#[test]
fn book_command_reference_is_every_commands_help() {
    let mut generated = String::new();
    for path in command_paths() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let title = if path.is_empty() { "bundle".to_owned() } else { format!("bundle {}", path.join(" ")) };
        generated.push_str(&format!("## `{title}`\n\n```text\n$ {title} --help\n{}```\n\n", help(&args)));
    }
    check_region(COMMANDS_PAGE, "commands", &generated);
}

/// The book builds with at least 10 pages, each listed in SUMMARY.md and present; `.ci/run`
/// builds it with mdbook, this only checks what needs no outside tool.
#[test]
fn book_summary_lists_existing_pages() {
    let src = repo().join("docs/book/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let pages: Vec<&str> =
        summary.split("](").skip(1).filter_map(|rest| rest.split(')').next()).filter(|p| p.ends_with(".md")).collect();
    assert!(pages.len() >= 10, "SUMMARY.md lists {} pages", pages.len());
    for page in pages {
        assert!(Path::new(&src.join(page)).is_file(), "SUMMARY.md lists {page}, which does not exist");
    }
}

/// Relative links in the book and the README lead to files that exist (mdbook does not check).
#[test]
fn book_and_readme_links_lead_to_existing_files() {
    let mut files = vec![repo().join("README.md"), repo().join("SECURITY.md")];
    let mut dirs = vec![repo().join("docs/book/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    let mut broken = Vec::new();
    for file in files {
        let text = prose(&std::fs::read_to_string(&file).unwrap());
        for rest in text.split("](").skip(1) {
            let Some(target) = rest.split(')').next() else { continue };
            let target = target.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !file.parent().unwrap().join(target).exists() {
                broken.push(format!("{}: {target}", file.strip_prefix(repo()).unwrap().display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// Markdown without its code: fenced blocks and `inline code` (where `](` is not a link).
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.extend(line.split('`').step_by(2));
            out.push('\n');
        }
    }
    out
}
