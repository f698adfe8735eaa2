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

/// Issue 35: a rejection is a verdict on the bundle (exit 1), an exit-2 code is the absence of
/// one; no code is both (`io_error` was, a rejection whose reason exited 2), so the book's
/// table of verify's reasons lists none of the exit-2 codes.
#[test]
fn no_verify_reason_is_an_exit_2_code() {
    let exit_2: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    let both: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).filter(|r| exit_2.contains(r)).collect();
    assert_eq!(both, Vec::<&str>::new(), "codes that are both a rejection reason and an exit-2 error");
    let page = std::fs::read_to_string(repo().join(CODES_PAGE)).unwrap();
    let begin = page.find("<!-- begin generated: reason-codes -->").expect("the reason table");
    let table = &page[begin..begin + page[begin..].find("<!-- end generated: reason-codes -->").unwrap()];
    for code in exit_2 {
        assert!(!table.contains(&format!("| `{code}` |")), "{CODES_PAGE} lists `{code}` as a rejection reason");
    }
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

/// Constants named like caps (`MAX_*`, `*_BYTES`, `*_LIMIT`, `*_CAP`) that are not caps on an
/// input, each with why: a cap defined anywhere but `src/limits.rs` would be missing from the
/// security page's table.
const NOT_INPUT_CAPS: &[(&str, &str)] = &[
    ("MAX_BATCH", "how many agents one `check` worker takes at once"),
    ("MAX_REPORTED", "how many diagnostics are shown"),
    ("MAX_DUPLICATES_REPORTED", "how many repeated keys are shown"),
    ("MAX_NAME", "a format's rule for tool names (OpenAI, RAP), reported as a diagnostic"),
    ("MAX_MTIME", "the largest mtime a tar header can hold"),
    ("MAX_CHARS", "a column's width in `inspect`"),
    ("MAX_DEPTH", "which schemas the fast path takes (deeper ones go to the full validator)"),
    ("MAX_FRAME_HEADER", "the zstd format's largest frame header"),
    ("MAX_BLOCK", "the zstd format's largest block"),
    ("MAX_OCTAL_11", "the largest number a tar header field holds"),
    ("MAX_BUFFERED_FRAME", "which frames are read whole before decoding (within the zstd window)"),
    ("MAX_FRAME_CONTENT", "which frames may be decoded on another thread"),
    ("MAX_CVS", "how many subtrees of an entry a decoding thread hashes ahead per frame (the rest is hashed anyway)"),
    ("MAX_RECORDS", "how many entries of a frame a decoding thread hashes ahead (the rest are hashed anyway)"),
    ("MAX_PATH_LEN", "the format's rule for entry names (format §3), a rejection reason"),
    ("MAX_NAME_CHARS", "the Agent Skills rule for a skill's name, a diagnostic"),
    ("MAX_DESCRIPTION_CHARS", "the Agent Skills rule for a skill's description, a diagnostic"),
    ("MAX_COMPATIBILITY_CHARS", "the Agent Skills rule for `compatibility`, a diagnostic"),
    ("MAX_UNTRUSTED_COMMENT_LEN", "minisign's comment line, as minisign writes it"),
    ("MAX_TRUSTED_COMMENT_LEN", "minisign's trusted comment, as minisign writes it"),
    ("SPREAD_FROM_BYTES", "from which size hashing is spread over threads"),
    ("KEPT_BYTES", "how much of an agent's files a check keeps from hashing to parsing (the rest is read again)"),
    ("MAX_DECODING_THREADS", "how many threads decode a bundle's frames, whatever the CPUs"),
    ("MAX_COMPRESSING_THREADS", "how many threads compress a pack's frames, whatever the CPUs"),
    (
        "JSON_AT_ONCE_BYTES",
        "how much JSON `check`'s threads parse at once (a memory budget shared by threads, not a cap on an input)",
    ),
];

/// Every cap is defined in `src/limits.rs` (and so listed by the table above): a constant named
/// like a cap elsewhere in `src/` takes its value from there, or is listed in
/// [`NOT_INPUT_CAPS`] with why it is not one.
#[test]
fn every_cap_is_defined_in_limits_rs() {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = repo().join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut elsewhere = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("limits.rs")) {
        for (n, line) in std::fs::read_to_string(file).unwrap().lines().enumerate() {
            // `const NAME: T = value;`, `pub const ...`, `pub(crate) const ...`.
            let Some((before, rest)) = line.trim_start().split_once("const ") else { continue };
            if !(before.is_empty() || before.starts_with("pub")) {
                continue;
            }
            let Some((name, value)) = rest.split_once(':').map(|(n, r)| (n.trim(), r)) else { continue };
            let cap_like = name.starts_with("MAX_")
                || name.ends_with("_BYTES")
                || name.ends_with("_LIMIT")
                || name.ends_with("_CAP");
            let from_limits = value.split_once('=').is_some_and(|(_, v)| v.contains("limits::"));
            if cap_like && !from_limits && !NOT_INPUT_CAPS.iter().any(|(known, _)| *known == name) {
                elsewhere.push(format!("{}:{}: {}", file.strip_prefix(repo()).unwrap().display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "caps defined outside src/limits.rs (move them there, or list them in NOT_INPUT_CAPS with why):\n{}",
        elsewhere.join("\n")
    );
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
fn book_lists_every_agent_card_reason_with_its_description() {
    use agent_bundle::ops::agentcard::Reason;
    check_region(CODES_PAGE, "card-reasons", &table(Reason::ALL, Reason::as_str, Reason::describe));
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
