//! Newline-delimited JSON-RPC messages (the MCP stdio transport) read from a hostile peer in
//! bounded memory: every line is scanned as it arrives for its size, nesting depth and number
//! of values, and one over the caps is never held whole; what is kept of it is only its
//! top-level `id`, so that the request it answers can get an error instead of waiting.

use std::io::BufRead;

use crate::limits;

/// The caps one message is held to.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub bytes: usize,
    pub depth: usize,
    pub values: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Caps { bytes: limits::MAX_MCP_MESSAGE_BYTES, depth: limits::MAX_JSON_DEPTH, values: limits::MAX_JSON_VALUES }
    }
}

/// One line read.
#[derive(Debug)]
pub enum Frame {
    /// A line within the caps (without its line break); not yet parsed.
    Line(String),
    /// A line over a cap (or not UTF-8), dropped; `id` is its top-level `id` (as JSON text),
    /// when it had one the scanner could see.
    Refused { id: Option<String>, why: String },
    /// The end of the stream (or a read error).
    Eof,
}

/// Reads the next message of `input`, skipping empty lines.
pub fn read(input: &mut impl BufRead, caps: Caps) -> Frame {
    let mut framer = Framer::new(caps);
    loop {
        let buf = match input.fill_buf() {
            Ok([]) | Err(_) => return framer.end().unwrap_or(Frame::Eof),
            Ok(buf) => buf,
        };
        let (n, frame) = framer.feed_line(buf);
        input.consume(n);
        if let Some(frame) = frame {
            return frame;
        }
    }
}

/// Cuts messages out of bytes as they arrive, in any pieces (the guard's event loop reads
/// whatever a pipe holds): at most one message in progress is kept, and only while it is
/// within the caps.
#[derive(Debug)]
pub struct Framer {
    caps: Caps,
    line: Vec<u8>,
    scan: Scan,
    over: Option<String>,
    /// Bytes of the current line were seen.
    any: bool,
}

impl Framer {
    pub fn new(caps: Caps) -> Self {
        Framer { caps, line: Vec::new(), scan: Scan::default(), over: None, any: false }
    }

    /// Feeds `bytes`, handing every complete message to `each`, in order.
    pub fn feed(&mut self, mut bytes: &[u8], mut each: impl FnMut(Frame)) {
        while !bytes.is_empty() {
            let (n, frame) = self.feed_line(bytes);
            bytes = &bytes[n..];
            if let Some(frame) = frame {
                each(frame);
            }
        }
    }

    /// The end of the stream: a last line without a line break is a message too.
    pub fn end(&mut self) -> Option<Frame> {
        if self.any { self.finish() } else { None }
    }

    /// Takes bytes of `buf` up to and including the first line break: how many, and the
    /// message that line break ended (none for an empty line).
    fn feed_line(&mut self, buf: &[u8]) -> (usize, Option<Frame>) {
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        self.any = true;
        self.scan.feed(chunk);
        self.scan.bytes += chunk.len();
        if self.over.is_none() {
            self.over = self.scan.over(self.caps);
        }
        if self.over.is_none() {
            self.line.extend_from_slice(chunk);
        } else {
            self.line = Vec::new();
        }
        let n = chunk.len() + usize::from(done);
        (n, if done { self.finish() } else { None })
    }

    /// The message now complete (none for an empty line); the framer starts a new one.
    fn finish(&mut self) -> Option<Frame> {
        let line = std::mem::take(&mut self.line);
        let scan = std::mem::take(&mut self.scan);
        let over = self.over.take();
        self.any = false;
        if let Some(why) = over {
            return Some(Frame::Refused { id: scan.id(), why });
        }
        if scan.bytes == 0 || line.iter().all(u8::is_ascii_whitespace) {
            // An empty line: not a message.
            return None;
        }
        let mut line = line;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Some(match String::from_utf8(line) {
            Ok(text) => Frame::Line(text),
            Err(_) => Frame::Refused { id: scan.id(), why: "it is not UTF-8".to_owned() },
        })
    }
}

/// A JSON scanner that only counts: depth, values, and the raw text of the top-level `id`.
#[derive(Debug, Default)]
struct Scan {
    bytes: usize,
    depth: usize,
    max_depth: usize,
    values: u64,
    in_string: bool,
    /// Inside a number, `true`, `false` or `null` (each counts as one value).
    in_scalar: bool,
    escape: bool,
    /// The next string at depth 1 is a key.
    expect_key: bool,
    key: Option<Vec<u8>>,
    /// The last key at depth 1 was `id` and its value is being read.
    capturing: bool,
    id_text: Vec<u8>,
    id: Option<Vec<u8>>,
}

use crate::limits::MAX_GUARD_ID_BYTES as MAX_ID;

impl Scan {
    fn feed(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if self.in_string {
                let closing = !self.escape && b == b'"';
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                }
                if let Some(key) = self.key.as_mut()
                    && !closing
                    && key.len() < 4
                {
                    key.push(b);
                }
                if self.capturing {
                    self.push_id(b);
                }
                if closing {
                    self.in_string = false;
                }
                continue;
            }
            let scalar_byte =
                !matches!(b, b'"' | b'{' | b'[' | b'}' | b']' | b':' | b',' | b' ' | b'\t' | b'\r' | b'\n');
            if scalar_byte && !self.in_scalar {
                self.values += 1;
            }
            self.in_scalar = scalar_byte;
            match b {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 && self.expect_key {
                        self.key = Some(Vec::new());
                    } else {
                        self.values += 1;
                    }
                    if self.capturing {
                        self.push_id(b);
                    }
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    self.values += 1;
                    self.max_depth = self.max_depth.max(self.depth);
                    if self.depth == 1 {
                        self.expect_key = b == b'{';
                    }
                    // An object or array is not an id the guard answers to.
                    self.capturing = false;
                }
                b'}' | b']' => {
                    if self.depth == 1 {
                        self.finish_id();
                    }
                    self.depth = self.depth.saturating_sub(1);
                }
                b':' if self.depth == 1 => {
                    self.expect_key = false;
                    if self.key.take().as_deref() == Some(b"id") {
                        self.capturing = true;
                        self.id_text.clear();
                    }
                }
                b',' => {
                    if self.depth == 1 {
                        self.finish_id();
                        self.expect_key = true;
                    }
                }
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ => {
                    if self.capturing {
                        self.push_id(b);
                    }
                }
            }
        }
    }

    fn push_id(&mut self, b: u8) {
        if self.id_text.len() < MAX_ID {
            self.id_text.push(b);
        } else {
            self.capturing = false;
            self.id_text.clear();
        }
    }

    fn finish_id(&mut self) {
        if self.capturing && !self.id_text.is_empty() {
            self.id = Some(std::mem::take(&mut self.id_text));
        }
        self.capturing = false;
    }

    fn over(&self, caps: Caps) -> Option<String> {
        if self.bytes > caps.bytes {
            Some(format!("it is larger than {} bytes", caps.bytes))
        } else if self.max_depth > caps.depth {
            Some(format!("it nests deeper than {} levels", caps.depth))
        } else if self.values > caps.values {
            Some(format!("it holds more than {} JSON values", caps.values))
        } else {
            None
        }
    }

    /// The id as canonical JSON text (`5`, `"abc"`), when it is a number or a string.
    fn id(&self) -> Option<String> {
        let raw = self.id.as_ref()?;
        match serde_json::from_slice::<serde_json::Value>(raw).ok()? {
            v @ (serde_json::Value::Number(_) | serde_json::Value::String(_)) => Some(v.to_string()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(text: &str, caps: Caps) -> Vec<Frame> {
        let mut input = std::io::Cursor::new(text.as_bytes().to_vec());
        let mut out = Vec::new();
        loop {
            match read(&mut input, caps) {
                Frame::Eof => return out,
                f => out.push(f),
            }
        }
    }

    #[test]
    fn lines_within_the_caps_come_whole_and_empty_lines_are_skipped() {
        let f = frames("{\"a\":1}\n\n  \n{\"b\":2}\r\n{\"c\":3}", Caps::default());
        let lines: Vec<&str> = f
            .iter()
            .map(|f| match f {
                Frame::Line(l) => l.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    #[test]
    fn messages_cut_into_any_pieces_come_out_the_same() {
        let text = "{\"a\":1}\n\n{\"id\":2,\"b\":[1,2]}\r\n{\"c\":\"\u{e9}\"}\n";
        let whole = frames(text, Caps::default());
        for size in 1..text.len() {
            let mut framer = Framer::new(Caps::default());
            let mut got = Vec::new();
            for piece in text.as_bytes().chunks(size) {
                framer.feed(piece, |f| got.push(f));
            }
            got.extend(framer.end());
            assert_eq!(format!("{got:?}"), format!("{whole:?}"), "pieces of {size}");
        }
        assert_eq!(whole.len(), 3);
    }

    #[test]
    fn an_oversized_line_is_refused_with_its_id_wherever_the_id_is() {
        let caps = Caps { bytes: 64, ..Caps::default() };
        let big = "x".repeat(200);
        let text = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"t\":\"{big}\"}}}}\n{{\"result\":{{\"id\":1,\"t\":\"{big}\"}},\"id\" : \"a,b\"}}\n{{\"ok\":1}}\n"
        );
        let f = frames(&text, caps);
        assert!(matches!(&f[0], Frame::Refused { id: Some(id), .. } if id == "7"), "{f:?}");
        assert!(matches!(&f[1], Frame::Refused { id: Some(id), .. } if id == "\"a,b\""), "{f:?}");
        assert!(matches!(&f[2], Frame::Line(l) if l == "{\"ok\":1}"), "{f:?}");
    }

    #[test]
    fn deep_nesting_and_many_values_are_refused() {
        let deep = format!("{{\"id\":3,\"x\":{}{}}}\n", "[".repeat(100), "]".repeat(100));
        let f = frames(&deep, Caps::default());
        assert!(matches!(&f[0], Frame::Refused { id: Some(id), why } if id == "3" && why.contains("deeper")), "{f:?}");
        let many = format!("{{\"id\":\"m\",\"x\":[{}0]}}\n", "0,".repeat(300));
        let f = frames(&many, Caps { values: 100, ..Caps::default() });
        assert!(
            matches!(&f[0], Frame::Refused { id: Some(id), why } if id == "\"m\"" && why.contains("values")),
            "{f:?}"
        );
    }
}
