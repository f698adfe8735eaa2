//! Rendering diagnostics: rustc-style for people (codespan-reporting), JSON for programs,
//! workflow commands for GitHub Actions. Text from the checked files is sanitised first.

use std::io::{self, IsTerminal, Write};

use std::collections::BTreeMap;
use std::ops::Range;

use codespan_reporting::diagnostic::{Diagnostic as Rendered, Label};
use codespan_reporting::files::{self, Files, SimpleFile};
use codespan_reporting::term::{self, termcolor::ColorChoice, termcolor::StandardStream};

use agent_bundle::diagnostic::{
    Code, Diagnostic, EXCERPT_WIDTH, Excerpt, Report, Severity, Source, sanitize, sanitize_source,
};

use super::{ColorWhen, Global};

pub fn color_choice(when: ColorWhen, stream_is_terminal: bool) -> ColorChoice {
    match when {
        ColorWhen::Always => ColorChoice::Always,
        ColorWhen::Never => ColorChoice::Never,
        ColorWhen::Auto => {
            if stream_is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) {
                ColorChoice::Auto
            } else {
                ColorChoice::Never
            }
        }
    }
}

pub fn stderr(global: Global) -> StandardStream {
    StandardStream::stderr(color_choice(global.color, io::stderr().is_terminal()))
}

/// The files diagnostics point into, as shown: a whole (sanitised) file, or, for a span on a
/// very long line (single-line JSON from a server), a window of that line.
#[derive(Default)]
struct Shown {
    files: Vec<ShownFile>,
}

enum ShownFile {
    Whole(SimpleFile<String, String>),
    Excerpt { name: String, excerpt: Excerpt },
}

impl<'a> Files<'a> for Shown {
    type FileId = usize;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: usize) -> Result<&'a str, files::Error> {
        Ok(match self.files.get(id).ok_or(files::Error::FileMissing)? {
            ShownFile::Whole(f) => f.name(),
            ShownFile::Excerpt { name, .. } => name,
        })
    }

    fn source(&'a self, id: usize) -> Result<&'a str, files::Error> {
        Ok(match self.files.get(id).ok_or(files::Error::FileMissing)? {
            ShownFile::Whole(f) => f.source(),
            ShownFile::Excerpt { excerpt, .. } => &excerpt.text,
        })
    }

    fn line_index(&'a self, id: usize, byte_index: usize) -> Result<usize, files::Error> {
        match self.files.get(id).ok_or(files::Error::FileMissing)? {
            ShownFile::Whole(f) => f.line_index((), byte_index),
            ShownFile::Excerpt { excerpt, .. } => Ok(excerpt.line_index),
        }
    }

    fn column_number(&'a self, id: usize, line_index: usize, byte_index: usize) -> Result<usize, files::Error> {
        match self.files.get(id).ok_or(files::Error::FileMissing)? {
            ShownFile::Whole(f) => f.column_number((), line_index, byte_index),
            ShownFile::Excerpt { excerpt, .. } => Ok(excerpt.column(byte_index)),
        }
    }

    fn line_range(&'a self, id: usize, line_index: usize) -> Result<std::ops::Range<usize>, files::Error> {
        match self.files.get(id).ok_or(files::Error::FileMissing)? {
            ShownFile::Whole(f) => f.line_range((), line_index),
            ShownFile::Excerpt { excerpt, .. } if line_index == excerpt.line_index => Ok(0..excerpt.text.len()),
            ShownFile::Excerpt { excerpt, .. } => {
                Err(files::Error::LineTooLarge { given: line_index, max: excerpt.line_index })
            }
        }
    }
}

impl Shown {
    /// The file and span a diagnostic's label points at: a window of the line when it is long,
    /// else the whole file (prepared once per file).
    fn place(
        &mut self,
        whole: &mut BTreeMap<String, usize>,
        source: &Source,
        span: Range<usize>,
    ) -> (usize, Range<usize>) {
        if let Some(mut excerpt) = source.excerpt(span.clone(), EXCERPT_WIDTH) {
            excerpt.text = sanitize_source(&excerpt.text);
            let span = excerpt.span.clone();
            self.files.push(ShownFile::Excerpt { name: sanitize(&source.name), excerpt });
            return (self.files.len() - 1, span);
        }
        let id = *whole.entry(source.name.clone()).or_insert_with(|| {
            self.files.push(ShownFile::Whole(SimpleFile::new(sanitize(&source.name), sanitize_source(&source.text))));
            self.files.len() - 1
        });
        (id, span)
    }
}

/// Prints diagnostics rustc-style on stderr (warnings too, unless quiet).
pub fn human(report: &Report, global: Global) -> io::Result<()> {
    let mut shown = Shown::default();
    let mut whole = BTreeMap::new();
    let mut rendered = Vec::new();
    for (d, repeats) in collapse_repeats(&report.diagnostics) {
        if global.quiet && d.severity == Severity::Warning {
            continue;
        }
        let grouped = repeats.iter().any(|r| r.message != d.message);
        let message = match repeats.len() {
            0 => sanitize(&d.message),
            n if grouped => group_message(d, n + 1),
            n => format!("{} ({} times)", sanitize(&d.message), n + 1),
        };
        let mut diagnostic = match d.severity {
            Severity::Error => Rendered::error(),
            Severity::Warning => Rendered::warning(),
        }
        .with_code(d.code.as_str())
        .with_message(message);
        let mut notes = Vec::new();
        if grouped {
            notes.push(format!("in {}:", sanitize(&d.file)));
            notes.extend(std::iter::once(d).chain(repeats.iter().copied()).map(|r| sanitize(&r.message)));
        } else if !repeats.is_empty() {
            let paths: Vec<String> = std::iter::once(d)
                .chain(repeats.iter().copied())
                .filter_map(|r| r.path.as_deref().map(sanitize))
                .collect();
            let at = if paths.is_empty() { String::new() } else { format!(" at {}", paths.join(", ")) };
            notes.push(format!("in {}{at}", sanitize(&d.file)));
        }
        match (d.span.clone(), report.sources.get(&d.file)) {
            _ if !repeats.is_empty() => {}
            (Some(span), Some(source)) => {
                let (id, span) = shown.place(&mut whole, source, span);
                let label = Label::primary(id, span);
                diagnostic = diagnostic.with_labels(vec![match &d.path {
                    Some(p) => label.with_message(sanitize(p)),
                    None => label,
                }]);
            }
            _ => {
                let at = d.path.as_deref().map(|p| format!(" at {}", sanitize(p))).unwrap_or_default();
                notes.push(format!("in {}{at}", sanitize(&d.file)));
            }
        }
        if let Some(help) = &d.help {
            notes.push(format!("help: {}", sanitize(help)));
        }
        rendered.push(diagnostic.with_notes(notes));
    }
    let config = term::Config::default();
    let stream = stderr(global);
    let mut out = stream.lock();
    for diagnostic in &rendered {
        term::emit_to_write_style(&mut out, &config, &shown, diagnostic).map_err(io::Error::other)?;
    }
    Ok(())
}

/// Warnings that say the same thing (code, file, message, help) about several places are shown
/// once, with a count and the places: each one first seen, with the later ones it stands for.
/// Errors of a kind that comes in numbers after one edit (`stale_digest`: every changed file)
/// are shown as one, each message a line under one help. Other errors, and warnings that point
/// into the source text, are each shown as they are.
fn collapse_repeats(diagnostics: &[Diagnostic]) -> Vec<(&Diagnostic, Vec<&Diagnostic>)> {
    let mut shown: Vec<(&Diagnostic, Vec<&Diagnostic>)> = Vec::new();
    for d in diagnostics {
        let grouped = d.code == Code::StaleDigest;
        let same = |first: &Diagnostic| {
            first.code == d.code
                && first.file == d.file
                && (grouped || first.message == d.message)
                && first.help == d.help
        };
        let collapsible = (d.severity == Severity::Warning || grouped) && d.span.is_none();
        match shown
            .iter_mut()
            .find(|(first, _)| collapsible && first.span.is_none() && first.severity == d.severity && same(first))
        {
            Some((_, repeats)) => repeats.push(d),
            None => shown.push((d, Vec::new())),
        }
    }
    shown
}

/// The headline of a group of errors of one kind (see [`collapse_repeats`]).
fn group_message(d: &Diagnostic, n: usize) -> String {
    match d.code {
        Code::StaleDigest => format!("{n} digests in {} do not match the agent folder", sanitize(&d.file)),
        _ => format!("{n} problems of one kind"),
    }
}

/// One diagnostic as a GitHub Actions workflow command.
pub fn github_line(d: &Diagnostic) -> String {
    let level = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let mut props = vec![format!("file={}", escape_property(&d.file))];
    if let Some(line) = d.line {
        props.push(format!("line={line}"));
    }
    if let Some(col) = d.column {
        props.push(format!("col={col}"));
    }
    props.push(format!("title={}", escape_property(d.code.as_str())));
    let mut message = sanitize(&d.message);
    if let Some(p) = &d.path {
        message = format!("{} (at {})", message, sanitize(p));
    }
    if let Some(h) = &d.help {
        message = format!("{message}\nhelp: {}", sanitize(h));
    }
    format!("::{level} {}::{}", props.join(","), escape_data(&message))
}

/// A workflow command of any level (`error`, `warning`, `notice`) with an optional file.
pub fn github_annotation(level: &str, file: Option<&str>, title: &str, message: &str) -> String {
    let mut props = Vec::new();
    if let Some(file) = file {
        props.push(format!("file={}", escape_property(&sanitize(file))));
    }
    props.push(format!("title={}", escape_property(title)));
    format!("::{level} {}::{}", props.join(","), escape_data(&sanitize(message)))
}

/// A success as a GitHub `::notice` line on stdout.
pub fn notice(file: Option<&str>, title: &str, message: &str) -> io::Result<()> {
    print_line(&github_annotation("notice", file, title, message))
}

/// A run-stopping error (exit 2) as an annotation too, so that a missing key or an unreadable
/// file shows up on the pull request like any finding.
pub fn github_error(e: &anyhow::Error) {
    let mut message = e.to_string();
    for cause in new_causes(e) {
        message.push_str(&format!("\ncaused by: {cause}"));
    }
    // An agent with problems: the annotation goes on the first one's file and line.
    let at = e.chain().find_map(|c| match c.downcast_ref::<agent_bundle::contract::release::LoadError>() {
        Some(agent_bundle::contract::release::LoadError::Invalid { at: Some(at), .. }) => Some(at.clone()),
        _ => None,
    });
    let mut line = github_annotation("error", at.as_ref().map(|(file, _)| file.as_str()), "bundle", &message);
    if let Some((_, Some(n))) = at {
        line = line.replacen(",title=", &format!(",line={n},title="), 1);
    }
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The stable code of a run-stopping error (exit 2), from the first cause that has one:
/// `io_error` for a file or stream that failed, `tls_error`, `key_error` for an unusable key,
/// `state_error` for a malformed state file, a signer's own code (`ssh_agent_unavailable`, `pin_incorrect`, ...) for an
/// ssh-agent or PKCS#11 key that could not sign, else `usage`.
pub fn error_code(e: &anyhow::Error) -> agent_bundle::ErrorCode {
    use agent_bundle::ErrorCode;
    for cause in e.chain() {
        if let Some(code) = code_of(cause) {
            return code;
        }
    }
    // The command line's own messages (`anyhow!`, `bail!`, clap) are usage errors; an error
    // of any other type has no code of its own, which is a defect, reported as one.
    let message = e.downcast_ref::<String>().is_some() || e.downcast_ref::<&'static str>().is_some();
    if message || e.downcast_ref::<clap::Error>().is_some() { ErrorCode::Usage } else { ErrorCode::Internal }
}

/// The code of `e` if it is one of the library's error types; `None` for anything else (a
/// message of the command line's own, which is a usage error).
///
/// Every error type a library function returns to the command line is in this list; a type
/// that wraps another transparently answers with the wrapped one's code. It lives here, in
/// the command line, because it names the error types of every layer, the highest included.
fn code_of(e: &(dyn std::error::Error + 'static)) -> Option<agent_bundle::ErrorCode> {
    use agent_bundle::error::Coded;
    macro_rules! first_of {
        ($($t:ty),* $(,)?) => {
            $(if let Some(e) = e.downcast_ref::<$t>() { return Some(Coded::code(e)); })*
        };
    }
    first_of!(
        agent_bundle::Error,
        agent_bundle::ops::gate::GateError,
        agent_bundle::ops::trust::TrustError,
        agent_bundle::keyless::RootError,
        agent_bundle::ops::input::InputError,
        agent_bundle::oci::OciError,
        agent_bundle::keys::SignerError,
        agent_bundle::minisign::KeyError,
        agent_bundle::fetch::FetchError,
        agent_bundle::state::StateError,
        agent_bundle::contract::baseline::BaselineError,
        agent_bundle::atomic::WriteError,
        agent_bundle::contract::release::LoadError,
        agent_bundle::archive::ArchiveError,
        agent_bundle::mcp_client::McpError,
        agent_bundle::ops::guard::GuardError,
        agent_bundle::regular_file::ReadError,
        agent_bundle::contract::ContractError,
        agent_bundle::minisign::SignatureError,
        std::io::Error,
    );
    None
}

/// The one JSON document of a run that stopped with an error (exit 2).
pub fn error_json(code: &str, message: &str, causes: &[String]) -> serde_json::Value {
    let causes = causes.iter().map(|c| sanitize(c)).collect();
    super::json::value(super::json::ErrorReport { ok: false, code, message, causes })
}

/// A run-stopping error as the one JSON document on stdout.
pub fn json_error(e: &anyhow::Error) {
    let doc = error_json(error_code(e).as_str(), &e.to_string(), &new_causes(e));
    let _ = match message_lines(e) {
        Some(lines) => {
            let mut doc = sanitize_json(doc);
            doc["message"] = lines.into();
            write_json(&doc)
        }
        None => print_json(&doc),
    };
}

pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

pub fn github(report: &Report) -> io::Result<()> {
    let mut out = io::stdout().lock();
    for d in &report.diagnostics {
        writeln!(out, "{}", github_line(d))?;
    }
    out.flush()
}

/// One line on stdout (a closed pipe surfaces as an error, not a panic).
pub fn print_line(line: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

/// One JSON document on stdout.
///
/// Every string (keys too) is sanitised like human output: names and messages come from checked
/// files, and a raw U+202E would reorder what a terminal or log viewer shows. The one exception
/// is a top-level `document` (what `export`/`import` produced): it is data, printed as is.
pub fn print_json<T: serde::Serialize + ?Sized>(value: &T) -> io::Result<()> {
    let value = match serde_json::to_value(value).map_err(io::Error::other)? {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = if k == "document" { v } else { sanitize_json(v) };
                    (sanitize(&k), v)
                })
                .collect(),
        ),
        other => sanitize_json(other),
    };
    write_json(&value)
}

/// A JSON value on stdout as it is (made safe by the caller).
fn write_json(value: &serde_json::Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()
}

/// The message of an error whose lines are a parser's own (a trust policy's TOML error, with
/// its excerpt and caret): each line made safe, the line breaks kept. Other messages are one
/// line, and a line break in them is untrusted text's, escaped.
fn message_lines(e: &anyhow::Error) -> Option<String> {
    (error_code(e) == agent_bundle::ErrorCode::PolicyError)
        .then(|| e.to_string().split('\n').map(sanitize).collect::<Vec<_>>().join("\n"))
}

/// Prints a command-stopping error (exit 2) with its causes.
pub fn print_error(global: Global, e: &anyhow::Error) {
    use codespan_reporting::term::termcolor::{Color, ColorSpec, WriteColor};
    let stream = stderr(global);
    let mut out = stream.lock();
    let _ = out.set_color(ColorSpec::new().set_fg(Some(Color::Red)).set_bold(true));
    let _ = write!(out, "error");
    let _ = out.reset();
    let _ = writeln!(out, ": {}", message_lines(e).unwrap_or_else(|| sanitize(&e.to_string())));
    for cause in new_causes(e) {
        let _ = writeln!(out, "  caused by: {}", sanitize(&cause));
    }
}

/// The causes of `e` that its message (or an earlier cause) does not already spell out:
/// `path: No such file or directory` needs no `caused by: No such file or directory`.
fn new_causes(e: &anyhow::Error) -> Vec<String> {
    let mut said = e.to_string();
    let mut causes = Vec::new();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !said.contains(&text) {
            said.push_str(&text);
            causes.push(text);
        }
    }
    causes
}

/// A line on stderr in the error color, even when quiet.
pub fn print_error_line(global: Global, message: &str) {
    use codespan_reporting::term::termcolor::{Color, ColorSpec, WriteColor};
    let stream = stderr(global);
    let mut out = stream.lock();
    let _ = out.set_color(ColorSpec::new().set_fg(Some(Color::Red)).set_bold(true));
    let _ = writeln!(out, "{message}");
    let _ = out.reset();
}

/// A short line on stderr, unless quiet.
pub fn status(global: Global, message: &str) {
    if !global.quiet {
        let _ = writeln!(io::stderr(), "{message}");
    }
}

/// A JSON value with every string in it sanitised (for JSON output of untrusted text).
pub fn sanitize_json(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(sanitize(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(sanitize_json).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (sanitize(&k), sanitize_json(v))).collect()),
        other => other,
    }
}

/// Writes classified changes, one per line: the impact in a fixed-width column (colored), then
/// the message.
pub fn write_changes(
    out: &mut dyn codespan_reporting::term::termcolor::WriteColor,
    changes: &[&agent_bundle::contract::Change],
    indent: &str,
) -> io::Result<()> {
    use agent_bundle::contract::Impact;
    use codespan_reporting::term::termcolor::{Color, ColorSpec};
    for c in changes {
        let mut spec = ColorSpec::new();
        match c.impact {
            Impact::Widening => spec.set_fg(Some(Color::Yellow)).set_bold(true),
            Impact::Breaking => spec.set_fg(Some(Color::Red)).set_bold(true),
            Impact::Narrowing | Impact::Compatible => spec.set_fg(Some(Color::Green)),
            Impact::Neutral => &mut spec,
        };
        write!(out, "{indent}")?;
        out.set_color(&spec)?;
        write!(out, "{:<10}", c.impact.as_str())?;
        out.reset()?;
        writeln!(out, "  {}", sanitize(&c.message))?;
    }
    Ok(())
}

/// stdout as a color-capable stream, following `--color`.
pub fn stdout(global: Global) -> StandardStream {
    StandardStream::stdout(color_choice(global.color, io::stdout().is_terminal()))
}
