//! The book runs as written: every ```` ```console ```` block of the guides
//! (`docs/book/src/guides/*.md`) and of README.md is run, command after command, and its output
//! compared, so that a guide cannot drift from the binary (trycmd's idea, over a real shell).
//!
//! How a page is run (the rules are in the book's "Repository layout" page too):
//! - each page gets a fresh temp folder as its working directory and a fresh `HOME`; pages run
//!   in parallel, the commands of one page in order, each in `bash` with the environment and the
//!   working directory the previous command left (`export`, `cd` and `eval "$(ssh-agent)"` carry
//!   over);
//! - `$ ` starts a command (a line ending in `\` continues it; a here-document runs to its end
//!   marker), and the lines up to the next `$ ` are its expected output, stdout and stderr
//!   together. `...` alone on a line stands for any number of lines, `[..]` for any text within
//!   a line. Signing key ids, public keys and compressed sizes (which move with the signature's
//!   bytes) differ in every run and are compared as `[KEYID]`, `[PUBKEY]` and `[SIZE]`; but a
//!   page's key ids must name one key each throughout, as in one run;
//! - a command must exit 0, unless its line ends in a comment `# exit N` (or `# exits N`) or the
//!   next command is `echo $?`, which then prints the status;
//! - placeholders the harness fills: `$AGENT_BUNDLE` is this repository (its example agents are
//!   under `$AGENT_BUNDLE/testdata`), and README.md's `cargo run --locked -q --` is the built
//!   `bundle`, run in a temp folder holding a link to `testdata/`;
//! - a ```` ```python ```` block is a command too (`python3 -`, which must print nothing), unless
//!   it uses the package `agent_bundle`: those are run by python/tests/test_book_example.py,
//!   which has the wheel;
//! - a block that cannot run here (GitHub-hosted steps, a terminal, the network) is marked in
//!   the page's source, out of a reader's way: the paragraph before it is an HTML comment
//!   `<!-- Not run by the book's tests: WHY -->`. A ```` ```sh ```` (or `bash`, `shell`) block
//!   must be marked the same way, and an indented code block is refused: every shell command of
//!   a guide is either run or visibly not;
//! - a guide says under its title which outside tools its commands use (the `> Needs` line,
//!   generated from the commands and scripts/tools.txt); a command whose tool is missing stops
//!   its page there, a skip that is printed and counted (`scripts/test` sums them up), and a
//!   failure under `BUNDLE_REQUIRE_TOOLS`.
//!
//! A page without console blocks passes. After changing output on purpose, rewrite the expected
//! output of every command that differs (the `...` of matching ones are kept):
//!
//!     BUNDLE_UPDATE_DOCS=1 cargo test --locked --test cli book
//!
//! (`BUNDLE_BOOK_PAGE=first-agent` runs only the pages whose path holds that text;
//! `BUNDLE_BOOK_TIMES=1` prints each command's wall time.)

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::repo;

/// The marker that makes a block visibly not run: an HTML comment just before it, which the
/// page's source shows and its rendering (mdBook, GitHub) does not:
/// `<!-- Not run by the book's tests: WHY -->`.
const NOT_RUN: &str = "<!-- Not run by the book's tests";

/// One `$ ` command of a console block and the output the page shows for it.
/// How a ```` ```python ```` block runs, as a command whose output must be empty.
const PYTHON_BLOCK: &str = "python3 - <<'BOOK_PYTHON_EOF'";

struct Cmd {
    /// The page's line numbers (0-based) of the command and of its expected output.
    line: usize,
    output: std::ops::Range<usize>,
    script: String,
    expected: Vec<String>,
    status: Option<i32>,
}

struct Page {
    rel: String,
    lines: Vec<String>,
    commands: Vec<Cmd>,
    problems: Vec<String>,
}

fn pages() -> Vec<PathBuf> {
    let guides = repo().join("docs/book/src/guides");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&guides)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.push(repo().join("README.md"));
    // BUNDLE_BOOK_PAGE=first-agent runs only the pages whose path holds it.
    match std::env::var("BUNDLE_BOOK_PAGE") {
        Ok(only) => pages.into_iter().filter(|p| p.display().to_string().contains(&only)).collect(),
        Err(_) => pages,
    }
}

fn fence(line: &str) -> Option<(&str, &str)> {
    let t = line.trim_start_matches(' ');
    if line.len() - t.len() > 3 {
        return None;
    }
    let marker = if t.starts_with("```") {
        "```"
    } else if t.starts_with("~~~") {
        "~~~"
    } else {
        return None;
    };
    Some((marker, t.trim_start_matches(marker.chars().next().unwrap()).trim()))
}

/// The status a command's trailing comment promises (`# exit 1`, `# exits 2: ...`).
fn promised_status(first_line: &str) -> Option<i32> {
    let comment = first_line.rsplit_once(" # ")?.1.trim();
    let rest = comment.strip_prefix("exits ").or_else(|| comment.strip_prefix("exit "))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The end marker of a here-document the command opens (`<<'EOF'`, `<<EOF`, `<<-EOF`).
fn heredoc_end(line: &str) -> Option<String> {
    let at = line.find("<<")?;
    let rest = line[at + 2..].trim_start_matches('-').trim_start();
    let word: String =
        rest.trim_start_matches(['\'', '"']).chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!word.is_empty()).then_some(word)
}

/// The paragraph just before a block starts with the not-run marker.
fn marked_not_run(before: &[String]) -> bool {
    let end = before.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |e| e + 1);
    let start = before[..end].iter().rposition(|l| l.trim().is_empty()).map_or(0, |b| b + 1);
    before.get(start).is_some_and(|l| l.starts_with(NOT_RUN))
}

/// Line `i` starts an indented code block: four spaces after a blank line, under a paragraph
/// that is not a list item (whose continuation lines are indented too).
fn indented_block_starts(lines: &[String], i: usize) -> bool {
    if !lines[i].starts_with("    ") || lines[i].trim().is_empty() || i == 0 || !lines[i - 1].trim().is_empty() {
        return false;
    }
    let Some(prev) = lines[..i].iter().rposition(|l| !l.trim().is_empty()) else { return true };
    // The paragraph above, from its first line.
    let first = lines[..prev].iter().rposition(|l| l.trim().is_empty()).map_or(0, |b| b + 1);
    let para = &lines[first];
    let list = |l: &str| {
        let t = l.trim_start();
        t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ") || {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            digits > 0 && t[digits..].starts_with(". ")
        }
    };
    !(para.starts_with(' ') || list(para) || lines[first..=prev].iter().any(|l| list(l)))
}

fn parse_console(lines: &[String], from: usize, to: usize, commands: &mut Vec<Cmd>) {
    let mut i = from;
    while i < to {
        let Some(first) = lines[i].strip_prefix("$ ") else {
            // Output before the first command has no command to belong to.
            i += 1;
            continue;
        };
        let start = i;
        let mut script = first.to_string();
        let mut last = first.to_string();
        while last.ends_with('\\') && i + 1 < to {
            i += 1;
            last = lines[i].clone();
            script.push('\n');
            script.push_str(&last);
        }
        if let Some(end) = heredoc_end(&script) {
            while i + 1 < to {
                i += 1;
                script.push('\n');
                script.push_str(&lines[i]);
                if lines[i].trim() == end {
                    break;
                }
            }
        }
        let status = promised_status(first).or_else(|| promised_status(&last));
        i += 1;
        let out_start = i;
        while i < to && !lines[i].starts_with("$ ") {
            i += 1;
        }
        commands.push(Cmd {
            line: start,
            output: out_start..i,
            script,
            expected: lines[out_start..i].to_vec(),
            status,
        });
    }
}

fn parse(path: &Path) -> Page {
    let text = std::fs::read_to_string(path).unwrap();
    parse_text(&path.strip_prefix(repo()).unwrap().display().to_string(), &text)
}

fn parse_text(rel: &str, text: &str) -> Page {
    let rel = rel.to_string();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut page = Page { rel, lines: lines.clone(), commands: Vec::new(), problems: Vec::new() };
    let mut i = 0;
    while i < lines.len() {
        if let Some((marker, info)) = fence(&lines[i]) {
            let close = (i + 1..lines.len())
                .find(|&j| fence(&lines[j]).is_some_and(|(m, rest)| m == marker && rest.is_empty()))
                .unwrap_or(lines.len());
            let lang = info.split([',', ' ']).next().unwrap_or("");
            let marked = marked_not_run(&lines[..i]);
            match lang {
                "console" if !marked => parse_console(&lines, i + 1, close, &mut page.commands),
                "sh" | "bash" | "shell" | "zsh" if !marked => page.problems.push(format!(
                    "{}:{}: a ```{lang} block is neither run nor marked: make it ```console, or put \
                     `{NOT_RUN}: WHY -->` on the line before it",
                    page.rel,
                    i + 1
                )),
                // A Python block runs as one command that must print nothing (`python3 -`, in the
                // page's folder, after the commands above it); one that uses the package
                // `agent_bundle` is run by the Python package's tests
                // (python/tests/test_book_example.py), which have its wheel.
                "python" if !marked && !lines[i + 1..close].iter().any(|l| l.contains("agent_bundle")) => {
                    let code = lines[i + 1..close].join("\n");
                    page.commands.push(Cmd {
                        line: i,
                        output: close..close,
                        script: format!("{PYTHON_BLOCK}\n{code}\nBOOK_PYTHON_EOF"),
                        expected: Vec::new(),
                        status: None,
                    });
                }
                _ => {}
            }
            i = close + 1;
            continue;
        }
        // An indented code block (not a list item's continuation) would hide a command from the
        // harness, and a reader cannot tell whether it ran: every code block is fenced.
        if indented_block_starts(&lines, i) && !marked_not_run(&lines[..i]) {
            page.problems.push(format!(
                "{}:{}: an indented code block is neither run nor marked: put it in a ```console block (`$ ` \
                 before each command), ```text for what is not a command, or mark it `{NOT_RUN}: WHY -->`",
                page.rel,
                i + 1
            ));
            while i < lines.len() && (lines[i].starts_with("    ") || lines[i].trim().is_empty()) {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    page
}

/// Values that differ in every run, written the same way on both sides.
fn normalize(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let bytes = line.as_bytes();
    let mut i = 0;
    let boundary = |j: usize| j >= bytes.len() || !bytes[j].is_ascii_alphanumeric();
    while i < bytes.len() {
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        // A minisign key id: 16 upper-case hex digits.
        if before_ok
            && i + 16 <= bytes.len()
            && bytes[i..i + 16].iter().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b))
            && boundary(i + 16)
        {
            out.push_str("[KEYID]");
            i += 16;
            continue;
        }
        // A minisign public key: `RW` and 54 more base64 characters.
        if before_ok
            && line[i..].starts_with("RW")
            && i + 56 <= bytes.len()
            && bytes[i..i + 56].iter().all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
            && (i + 56 == bytes.len() || !(bytes[i + 56].is_ascii_alphanumeric() || bytes[i + 56] == b'+'))
        {
            out.push_str("[PUBKEY]");
            i += 56;
            continue;
        }
        let c = line[i..].chars().next().unwrap();
        out.push(c);
        i += c.len_utf8();
    }
    // The compressed size moves by a few bytes with the signature's random bytes.
    let mut out = out.trim_end().to_string();
    if let Some(at) = out.find(" compressed") {
        let digits = out[..at].bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.replace_range(at - digits..at, "[SIZE]");
        }
    }
    out
}

/// The minisign key ids of `lines` (16 upper-case hex digits, as [`normalize`] finds them), each
/// once, in order.
fn key_ids(lines: &[String]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for id in lines.iter().filter(|l| l.as_str() != "...").flat_map(|l| hex_ids(l)) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

fn hex_ids(line: &str) -> impl Iterator<Item = String> + '_ {
    let b = line.as_bytes();
    let hex = |c: &u8| c.is_ascii_digit() || (b'A'..=b'F').contains(c);
    (0..b.len().saturating_sub(15)).filter_map(move |i| {
        let edge = |j: usize| j >= b.len() || !b[j].is_ascii_alphanumeric();
        let start = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        (start && b[i..i + 16].iter().all(hex) && edge(i + 16)).then(|| line[i..i + 16].to_owned())
    })
}

/// The page's key ids against one run's: each must name one key throughout the page.
#[derive(Default)]
struct KeyIds {
    /// (command, page's id, run's id) for each command whose output matched (or is rewritten).
    pairs: Vec<(usize, String, String)>,
    conflict: Option<(usize, String)>,
}

impl KeyIds {
    /// Pairs the ids command `n` shows (`shown`: the page's lines, or the run's where the update
    /// rewrites them) with the run's.
    fn pair(&mut self, page: &Page, n: usize, shown: &[String], actual: &[String]) {
        let (shown, seen) = (key_ids(shown), key_ids(actual));
        if shown.len() != seen.len() {
            return; // an elision hides some: no pairing
        }
        for (p, a) in shown.into_iter().zip(seen) {
            let earlier = self.pairs.iter().find(|(_, q, b)| (*q == p) != (*b == a));
            if let (Some((m, q, _)), None) = (earlier, &self.conflict) {
                let line = page.commands[*m].line;
                self.conflict = Some((
                    page.commands[n].line,
                    format!(
                        "key id {p} and the {q} of line {} {} in one run: a page's key ids must be one run's",
                        line + 1,
                        if *q == p { "are two keys" } else { "are the same key" }
                    ),
                ));
            }
            self.pairs.push((n, p, a));
        }
    }

    /// Command `n`'s expected lines with the run's key ids for the page's.
    fn as_run(&self, n: usize, expected: &[String]) -> Vec<String> {
        let subs: Vec<&(usize, String, String)> = self.pairs.iter().filter(|(m, _, _)| *m == n).collect();
        expected.iter().map(|l| subs.iter().fold(l.clone(), |l, (_, p, a)| l.replace(p.as_str(), a))).collect()
    }
}

/// `expected` (with `[..]` inside a line) matches `actual`.
fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("[..]");
    let first = parts.next().unwrap();
    let Some(mut rest) = actual.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    for (k, part) in parts.iter().enumerate() {
        if k + 1 == parts.len() {
            return rest.len() >= part.len() && rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// The expected lines (with `...` lines) match the actual ones.
fn lines_match(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e == "..." => (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..])),
        Some((e, rest)) => {
            actual.split_first().is_some_and(|(a, arest)| line_matches(e, a) && lines_match(rest, arest))
        }
    }
}

struct Sandbox {
    _dir: tempfile::TempDir,
    work: PathBuf,
    home: PathBuf,
    state: PathBuf,
}

impl Sandbox {
    fn new(readme: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (work, home, state) = (dir.path().join("work"), dir.path().join("home"), dir.path().join("state"));
        for d in [&work, &home, &state] {
            std::fs::create_dir(d).unwrap();
        }
        if readme {
            std::os::unix::fs::symlink(repo().join("testdata"), work.join("testdata")).unwrap();
        }
        std::fs::write(state.join("cwd"), work.as_os_str().as_encoded_bytes()).unwrap();
        std::fs::write(state.join("env"), "").unwrap();
        Sandbox { _dir: dir, work, home, state }
    }

    /// Runs one command as a page shows it: its combined output and exit status.
    fn run(&self, script: &str, previous_status: i32) -> (Vec<String>, i32) {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_bundle"));
        let script = script.replace("cargo run --locked -q --", &bin.display().to_string());
        let wrapped = format!(
            "exec 2>&1\n. \"$BOOK_STATE/env\"\ncd \"$(cat \"$BOOK_STATE/cwd\")\"\n(exit {previous_status})\n{script}\n\
             __book_status=$?\nexport -p > \"$BOOK_STATE/env\"\npwd > \"$BOOK_STATE/cwd\"\nexit $__book_status\n"
        );
        let out = Command::new("bash")
            .arg("--noprofile")
            .arg("--norc")
            .arg("-c")
            .arg(&wrapped)
            .env_clear()
            .env("PATH", book_path())
            .env("HOME", &self.home)
            .env("BOOK_STATE", &self.state)
            .env("AGENT_BUNDLE", repo())
            .env("LANG", "C.UTF-8")
            .env("TZ", "UTC")
            .env("TERM", "dumb")
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .output()
            .expect("run bash");
        let text = String::from_utf8_lossy(&out.stdout).replace(&self.work.display().to_string(), "[WORK]");
        (text.lines().map(str::to_string).collect(), out.status.code().unwrap_or(-1))
    }
}

/// The PATH of the page's commands: the built `bundle` first, then the test run's own (which
/// `scripts/test` begins with its tools venv and npm folder).
fn book_path() -> std::ffi::OsString {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_bundle"));
    let mut path = bin.parent().unwrap().as_os_str().to_owned();
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    path
}

/// `word` appears in `text` as a word of its own (not inside a file name or a longer word).
fn has_word(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    text.match_indices(word).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(part) && !text[at + word.len()..].chars().next().is_some_and(part)
    })
}

/// The outside tools a command uses, as scripts/tools.txt names them (`minisign`,
/// `py:securesystemslib.dsse`): the commands its script names, and the modules its Python
/// imports, in a here-document or in a `.py` file of this repository it runs.
fn tools_used(script: &str) -> Vec<String> {
    let mut python = script.to_string();
    for word in script.split_whitespace() {
        let word = word.trim_matches(['"', '\'']);
        if let Some(rel) = word.strip_prefix("$AGENT_BUNDLE/").filter(|r| r.ends_with(".py")) {
            python.push_str(&std::fs::read_to_string(repo().join(rel)).unwrap_or_default());
        }
    }
    let imports = |module: &str| {
        let root = module.split('.').next().unwrap();
        python.lines().map(str::trim).any(|l| {
            ["import ", "from "]
                .iter()
                .any(|k| l.strip_prefix(k).is_some_and(|r| r.split([' ', '.', ',']).next() == Some(root)))
        })
    };
    crate::support::tools_table()
        .into_iter()
        .flat_map(|(_, _, provides)| provides)
        .filter(|what| match what.strip_prefix("py:") {
            Some(module) => imports(module),
            // A Python block's words are Python, not commands.
            None if script.starts_with(PYTHON_BLOCK) => false,
            // GNU tar's --zstd runs the zstd command.
            None => {
                !what.starts_with("node:") && (has_word(script, what) || (what == "zstd" && script.contains("--zstd")))
            }
        })
        .collect()
}

/// Whether the tool (as [`tools_used`] names it) is there for the page's commands.
fn installed(what: &str) -> bool {
    static SEEN: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());
    if let Some((_, known)) = SEEN.lock().unwrap().iter().find(|(w, _)| w == what) {
        return *known;
    }
    let present = match what.strip_prefix("py:") {
        Some(module) => Command::new("python3")
            .env("PATH", book_path())
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success()),
        None => std::env::split_paths(&book_path()).any(|dir| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(dir.join(what)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        }),
    };
    SEEN.lock().unwrap().push((what.to_owned(), present));
    present
}

/// How a page's "needs" line names a tool: `minisign`, or Python's `securesystemslib`.
fn tool_name(what: &str) -> String {
    match what.strip_prefix("py:") {
        Some(module) => format!("Python's `{}`", module.split('.').next().unwrap()),
        None => format!("`{what}`"),
    }
}

/// The line under a guide's title that names the outside tools its commands use, generated
/// from what they run (and scripts/tools.txt), so that it cannot drift.
const NEEDS: &str = "> Needs";

fn needs_line(page: &Page) -> String {
    let mut used: Vec<String> = Vec::new();
    for cmd in &page.commands {
        for what in tools_used(&cmd.script) {
            if !used.contains(&what) {
                used.push(what);
            }
        }
    }
    if used.is_empty() {
        return format!("{NEEDS} nothing besides `bundle`.");
    }
    // One entry per package: `ssh-agent`, `ssh-add` (`apt install openssh-client`).
    let mut by_package: Vec<(String, Vec<String>)> = Vec::new();
    for what in &used {
        let fix = crate::support::install_hint(what);
        match by_package.iter_mut().find(|(f, _)| *f == fix) {
            Some((_, names)) => names.push(tool_name(what)),
            None => by_package.push((fix, vec![tool_name(what)])),
        }
    }
    let named: Vec<String> = by_package.iter().map(|(fix, names)| format!("{} (`{fix}`)", names.join(", "))).collect();
    format!("{NEEDS}, besides `bundle`: {}.", named.join("; "))
}

/// Where a guide's needs line is (or goes): the first paragraph under its `# ` title.
fn needs_at(lines: &[String]) -> Option<(usize, bool)> {
    let title = lines.iter().position(|l| l.starts_with("# "))?;
    let next = (title + 1..lines.len()).find(|&i| !lines[i].trim().is_empty())?;
    Some((next, lines[next].starts_with(NEEDS)))
}

/// Runs every command of a page; the problems found (empty when the page runs as written).
fn run_page(path: &Path) -> Vec<String> {
    let mut page = parse(path);
    let update = std::env::var_os("BUNDLE_UPDATE_DOCS").is_some();
    let mut needs_rewrite = None;
    if page.rel.starts_with("docs/book/src/guides/") {
        let want = needs_line(&page);
        match needs_at(&page.lines) {
            Some((at, true)) if page.lines[at] == want => {}
            Some((at, exists)) if update => needs_rewrite = Some((at, exists, want)),
            found => page.problems.push(format!(
                "{}:{}: under its title, a guide says what it needs (BUNDLE_UPDATE_DOCS=1 writes it):\n{want}",
                page.rel,
                found.map_or(1, |(at, _)| at + 1)
            )),
        }
    }
    if page.commands.is_empty() && needs_rewrite.is_none() {
        return page.problems;
    }
    let sandbox = Sandbox::new(page.rel == "README.md");
    let mut rewrites: Vec<(std::ops::Range<usize>, Vec<String>)> = Vec::new();
    let mut keys = KeyIds::default();
    let mut previous = 0;
    for (n, cmd) in page.commands.iter().enumerate() {
        // A command whose tool is missing: the rest of the page depends on it, so it stops
        // here, visibly (a failure under BUNDLE_REQUIRE_TOOLS).
        if let Some(what) = tools_used(&cmd.script).into_iter().find(|w| !installed(w)) {
            let (name, fix) = (tool_name(&what).replace('`', ""), crate::support::install_hint(&what));
            let at = format!("{}:{}", page.rel, cmd.line + 1);
            if std::env::var_os("BUNDLE_REQUIRE_TOOLS").is_some() {
                page.problems
                    .push(format!("{at}: needs {name}, which is missing ({fix}; BUNDLE_REQUIRE_TOOLS is set)"));
            } else {
                let rest = page.commands.len() - n;
                crate::support::skipped(
                    &format!("book {at}, {rest} commands to the page's end"),
                    &format!("tool {name}"),
                    &fix,
                );
            }
            break;
        }
        let started = std::time::Instant::now();
        let (actual, status) = sandbox.run(&cmd.script, previous);
        if std::env::var_os("BUNDLE_BOOK_TIMES").is_some() {
            eprintln!("{:>6.2} s  {}:{}", started.elapsed().as_secs_f64(), page.rel, cmd.line + 1);
        }
        previous = status;
        let shown_by_echo = page.commands.get(n + 1).is_some_and(|next| next.script.trim() == "echo $?");
        let want = cmd.status.unwrap_or(0);
        if status != want && !(shown_by_echo && cmd.status.is_none() && status != 0) {
            page.problems.push(format!(
                "{}:{}: `{}` exited {status}, the page says {want} (end the line with `# exit {status}` if that \
                 is right)\n{}",
                page.rel,
                cmd.line + 1,
                cmd.script,
                actual.join("\n")
            ));
        }
        let expected: Vec<String> = cmd.expected.iter().map(|l| normalize(l)).collect();
        let normalized: Vec<String> = actual.iter().map(|l| normalize(l)).collect();
        let matches = lines_match(&expected, &normalized);
        if matches {
            keys.pair(&page, n, &cmd.expected, &actual);
        }
        if !matches {
            if update && !cmd.script.starts_with(PYTHON_BLOCK) {
                keys.pair(&page, n, &actual, &actual);
                rewrites.push((cmd.output.clone(), actual.iter().map(|l| l.trim_end().to_string()).collect()));
            } else {
                page.problems.push(format!(
                    "{}:{}: the output of `{}` differs from the page\n--- page\n{}\n--- actual\n{}",
                    page.rel,
                    cmd.line + 1,
                    cmd.script,
                    cmd.expected.join("\n"),
                    actual.join("\n")
                ));
            }
        }
    }
    if let Some((line, problem)) = keys.conflict.clone() {
        if update {
            // The whole page's key ids, as this run had them.
            for (n, cmd) in page.commands.iter().enumerate() {
                if !rewrites.iter().any(|(r, _)| *r == cmd.output) {
                    rewrites.push((cmd.output.clone(), keys.as_run(n, &cmd.expected)));
                }
            }
            rewrites.sort_by_key(|(r, _)| r.start);
        } else {
            page.problems.push(format!("{}:{}: {problem} (BUNDLE_UPDATE_DOCS=1 rewrites them)", page.rel, line + 1));
        }
    }
    if !rewrites.is_empty() || needs_rewrite.is_some() {
        let mut lines = page.lines.clone();
        for (range, new) in rewrites.into_iter().rev() {
            lines.splice(range, new);
        }
        // Above every command, so last.
        match needs_rewrite {
            Some((at, true, want)) => lines[at] = want,
            Some((at, false, want)) => lines.splice(at..at, [want, String::new()]).for_each(drop),
            None => {}
        }
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }
    page.problems
}

#[test]
fn every_guide_and_the_readme_run_as_written() {
    let pages = pages();
    let problems: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = pages.iter().map(|p| s.spawn(move || run_page(p))).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(problems.is_empty(), "{} problems in the book's commands:\n\n{}", problems.len(), problems.join("\n\n"));
}

#[test]
fn the_harness_matches_wildcards_and_ellipses() {
    let v = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(lines_match(&v(&["a", "...", "z"]), &v(&["a", "b", "c", "z"])));
    assert!(lines_match(&v(&["a", "...", "z"]), &v(&["a", "z"])));
    assert!(!lines_match(&v(&["a", "z"]), &v(&["a", "b", "z"])));
    assert!(!lines_match(&v(&["a"]), &v(&["a", "b"])));
    assert!(line_matches("packed [..] bytes", "packed 3 files, 810 bytes"));
    assert!(!line_matches("packed [..] bytes", "packed 3 files, 810 bytes!"));
    assert!(!line_matches("x[..]y[..]z", "xyy"));
    assert_eq!(normalize("key 5545CDC44C766EC5: secret"), "key [KEYID]: secret");
    assert_eq!(normalize("digest 5545cdc44c766ec5"), "digest 5545cdc44c766ec5");
    assert_eq!(normalize("RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3 kb"), "[PUBKEY] kb");
    assert_eq!(normalize("(3 files, 810 bytes, 1191 compressed; x)"), "(3 files, 810 bytes, [SIZE] compressed; x)");
    assert_eq!(promised_status("bundle check   # exit 1: stale"), Some(1));
    assert_eq!(normalize("(3 files, 810 bytes, 1191 compressed; x)"), "(3 files, 810 bytes, [SIZE] compressed; x)");
    assert_eq!(promised_status("bundle check   # --version"), None);
    assert_eq!(heredoc_end("patch -p1 <<'EOF'"), Some("EOF".into()));
}

#[test]
fn a_shell_block_that_is_neither_run_nor_marked_is_refused() {
    let text = "```sh\nbundle check\n```\n\n    $ bundle lock\n\n<!-- Not run by the book's tests: x. -->\n\n```sh\nok\n\
                ```\n\nText:\n\n    pip install x\n    maturin build\n\n- a list\n\n    its paragraph\n";
    let problems = parse_text("p.md", text).problems;
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].starts_with("p.md:1: a ```sh block"), "{problems:?}");
    assert!(problems[1].starts_with("p.md:5: an indented code block"), "{problems:?}");
    assert!(problems[2].starts_with("p.md:15: an indented code block"), "{problems:?}");
}

#[test]
fn a_python_block_is_a_command_unless_the_python_tests_run_it_and_its_tools_are_named() {
    let text = "# T\n\n```python\nfrom securesystemslib.dsse import Envelope\n```\n\n```python\nimport agent_bundle\n```\n\n\
                ```console\n$ tar --zstd -tf x | jq .\n```\n";
    let page = parse_text("p.md", text);
    assert!(page.problems.is_empty(), "{:?}", page.problems);
    assert_eq!(page.commands.len(), 2);
    assert!(page.commands[0].script.starts_with("python3 - <<'BOOK_PYTHON_EOF'\nfrom securesystemslib"));
    assert_eq!(tools_used(&page.commands[0].script), ["py:securesystemslib.dsse"]);
    assert_eq!(tools_used(&page.commands[1].script), ["zstd", "tar", "jq"]);
    assert_eq!(
        needs_line(&page),
        "> Needs, besides `bundle`: Python's `securesystemslib` (`pip install securesystemslib`); `zstd` (`apt \
         install zstd`); `tar` (`apt install tar`); `jq` (`apt install jq`)."
    );
}

#[test]
fn a_page_whose_key_ids_are_not_one_runs_is_refused() {
    let text = "```console\n$ a\nkey F508393154441D95\n$ b\nsigner 857C7335350E1352\n$ c\nby F508393154441D95\n```\n";
    let page = parse_text("p.md", text);
    let v = |s: &str| vec![s.to_string()];
    // The run: a and b name one key, which the page gives two ids.
    let mut keys = KeyIds::default();
    keys.pair(&page, 0, &page.commands[0].expected, &v("key 9E161E9B4EA4FEC2"));
    keys.pair(&page, 1, &page.commands[1].expected, &v("signer 9E161E9B4EA4FEC2"));
    let (line, problem) = keys.conflict.clone().expect("a conflict");
    assert_eq!(line, 3);
    assert!(problem.contains("are the same key"), "{problem}");
    assert_eq!(keys.as_run(1, &page.commands[1].expected), v("signer 9E161E9B4EA4FEC2"));
    // One id for one key throughout: no conflict.
    let mut keys = KeyIds::default();
    keys.pair(&page, 0, &page.commands[0].expected, &v("key 9E161E9B4EA4FEC2"));
    keys.pair(&page, 2, &page.commands[2].expected, &v("by 9E161E9B4EA4FEC2"));
    assert!(keys.conflict.is_none());
}
