//! `[pins."<file>"]`: what `bundle import --pin` recorded. A RAP pin has `url`; an MCP pin has
//! `server` and how the server is started, `command = [...]` (stdio) or `url` (streamable
//! HTTP). Every pin has `format` and `blake3`. A key that does not belong to the pin's format
//! is an error, so that a pin never means something other than it says.

use std::collections::BTreeMap;

use toml_edit::{Item, TableLike};

use super::super::{McpStart, Pin, PinFormat, PinSource, parse_blake3};
use super::{Parser, join};
use crate::diagnostic::Code;
use crate::paths;

const RAP_KEYS: &[&str] = &["url", "format", "blake3"];
const MCP_KEYS: &[&str] = &["format", "server", "command", "url", "blake3"];
use crate::limits::MAX_PIN_COMMAND_ARGS as MAX_COMMAND_ARGS;

impl Parser<'_> {
    pub(super) fn pins(&mut self, root: &dyn TableLike) -> BTreeMap<String, Pin> {
        let mut pins = BTreeMap::new();
        let Some(table) = self.table(root, "", "pins", false) else { return pins };
        for (path, item) in table.iter() {
            let key = join("pins", path);
            if let Err(why) = paths::check(path) {
                let span = table.get_key_value(path).and_then(|(k, _)| k.span());
                self.error(
                    Code::UnsafePath,
                    &key,
                    span,
                    format!("pinned file path `{path}` is not a safe relative path: {why}"),
                    "pins name a file inside the agent folder, e.g. `pins/example.com.rap.json`",
                );
                continue;
            }
            let Some(entry) = item.as_table_like() else {
                self.error(
                    Code::WrongType,
                    &key,
                    item.span(),
                    format!("`{key}` must be a table with format, blake3 and where the definition is served from"),
                    "let `bundle import --pin` write it",
                );
                continue;
            };
            if let Some(pin) = self.pin(entry, &key) {
                pins.insert(path.to_owned(), pin);
            }
        }
        pins
    }

    fn pin(&mut self, entry: &dyn TableLike, key: &str) -> Option<Pin> {
        let format = self.pin_format(entry, key);
        match format {
            Some(PinFormat::Rap) => self.known_keys(entry, key, RAP_KEYS, "a RAP [pins] entry"),
            Some(PinFormat::Mcp) => self.known_keys(entry, key, MCP_KEYS, "an MCP [pins] entry"),
            None => {}
        }
        let hash_key = join(key, "blake3");
        let blake3 = self.required(entry, key, "blake3").and_then(|i| {
            let s = self.string(i, &hash_key)?;
            let h = parse_blake3(s);
            if h.is_none() {
                self.error(
                    Code::InvalidDigest,
                    &hash_key,
                    i.span(),
                    format!("`{hash_key}` must be 64 lowercase hex digits"),
                    "pin again with `bundle import --pin`",
                );
            }
            h
        });
        let source = match format? {
            PinFormat::Rap => {
                self.required(entry, key, "url").and_then(|i| self.pin_url(i, key)).map(|url| PinSource::Rap { url })
            }
            PinFormat::Mcp => self.mcp_source(entry, key),
        };
        Some(Pin { source: source?, blake3: blake3? })
    }

    fn pin_format(&mut self, entry: &dyn TableLike, key: &str) -> Option<PinFormat> {
        let format_key = join(key, "format");
        let i = self.required(entry, key, "format")?;
        let s = self.string(i, &format_key)?;
        match s {
            "rap" => Some(PinFormat::Rap),
            "mcp" => Some(PinFormat::Mcp),
            _ => {
                self.error(
                    Code::UnsupportedVersion,
                    &format_key,
                    i.span(),
                    format!("pinned format `{s}` is not supported"),
                    &format!("supported: {}", PinFormat::ALL.join(", ")),
                );
                None
            }
        }
    }

    fn pin_url(&mut self, item: &Item, key: &str) -> Option<String> {
        let url_key = join(key, "url");
        let u = self.string(item, &url_key)?;
        if crate::tools::validate::check_url(u).is_ok_and(|t| t.is_empty()) {
            return Some(u.to_owned());
        }
        self.error(
            Code::InvalidUrl,
            &url_key,
            item.span(),
            format!("`{url_key}` = \"{u}\" is not an absolute http or https URL"),
            "pin the URL the definition is served from",
        );
        None
    }

    /// `server`, and at most one of `command` and `url` (neither: pinned from a file).
    fn mcp_source(&mut self, entry: &dyn TableLike, key: &str) -> Option<PinSource> {
        let server_key = join(key, "server");
        let server = self.required(entry, key, "server").and_then(|i| {
            let s = self.string(i, &server_key)?;
            match super::super::check_server_name(s) {
                Ok(()) => Some(s.to_owned()),
                Err(why) => {
                    self.error(Code::InvalidName, &server_key, i.span(), why, "pin again with `--server NAME`");
                    None
                }
            }
        });
        let start = match (entry.get("command"), entry.get("url")) {
            (Some(c), None) => self.command(c, &join(key, "command")).map(|command| Some(McpStart::Stdio { command })),
            (None, Some(u)) => self.pin_url(u, key).map(|url| Some(McpStart::Http { url })),
            (Some(_), Some(u)) => {
                self.error(
                    Code::WrongType,
                    &join(key, "url"),
                    u.span(),
                    format!("`{key}` has both `command` and `url`; a server is started by one of them"),
                    "keep `command` for a stdio server, `url` for a streamable HTTP one",
                );
                None
            }
            (None, None) => Some(None),
        };
        Some(PinSource::Mcp { server: server?, start: start? })
    }

    /// `command = ["program", "arg", …]`: a non-empty array of strings, the program not empty.
    fn command(&mut self, item: &Item, key: &str) -> Option<Vec<String>> {
        let list =
            item.as_array().and_then(|a| a.iter().map(|v| v.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>());
        match list {
            Some(c)
                if !c.is_empty()
                    && !c[0].is_empty()
                    && c.len() <= MAX_COMMAND_ARGS
                    && !c.iter().any(|a| a.contains('\0')) =>
            {
                Some(c)
            }
            _ => {
                self.error(
                    Code::WrongType,
                    key,
                    item.span(),
                    format!("`{key}` must be an array of strings, the program first (at most {MAX_COMMAND_ARGS})"),
                    "write e.g. `command = [\"uvx\", \"mcp-server-time\"]`",
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::diagnostic::{Code, Source};
    use crate::manifest::{McpStart, Pin, PinFormat, PinSource, edit, parse};

    const HEAD: &str = "[bundle]\nformat = 1\n\n[agent]\nname = \"m\"\nversion = \"1.0.0\"\n";

    type Parsed = (Vec<(String, Pin)>, Vec<(Code, String)>);

    fn pins(text: &str) -> Parsed {
        let mut d = Vec::new();
        let m = parse(&Source::new("manifest.toml", format!("{HEAD}{text}")), &mut d);
        let pins = m.map(|m| m.pins.into_iter().collect()).unwrap_or_default();
        (pins, d.into_iter().map(|d| (d.code, d.path.unwrap_or_default())).collect())
    }

    fn hash() -> String {
        blake3::hash(b"x").to_hex().to_string()
    }

    #[test]
    fn mcp_pins_name_a_server_and_how_it_starts() {
        let text = format!(
            "\n[pins.\"pins/time.mcp.json\"]\nformat = \"mcp\"\nserver = \"time\"\ncommand = [\"uvx\", \"mcp-server-time\"]\nblake3 = \"{}\"\n",
            hash()
        );
        let (p, d) = pins(&text);
        assert_eq!(d, []);
        let want = PinSource::Mcp {
            server: "time".into(),
            start: Some(McpStart::Stdio { command: vec!["uvx".into(), "mcp-server-time".into()] }),
        };
        assert_eq!(p, [("pins/time.mcp.json".to_owned(), Pin { source: want, blake3: blake3::hash(b"x") })]);
        assert_eq!(p[0].1.format(), PinFormat::Mcp);
        let http = text.replace("command = [\"uvx\", \"mcp-server-time\"]", "url = \"http://127.0.0.1:9/mcp\"");
        assert!(matches!(&pins(&http).0[0].1.source, PinSource::Mcp { start: Some(McpStart::Http { .. }), .. }));
    }

    #[test]
    fn keys_of_another_format_or_two_ways_to_start_are_errors() {
        let h = hash();
        let both = format!(
            "[pins.\"pins/t.mcp.json\"]\nformat = \"mcp\"\nserver = \"t\"\ncommand = [\"x\"]\nurl = \"http://a/\"\nblake3 = \"{h}\"\n"
        );
        assert_eq!(pins(&both).1, [(Code::WrongType, "pins.\"pins/t.mcp.json\".url".to_owned())]);
        let neither = format!("[pins.\"pins/t.mcp.json\"]\nformat = \"mcp\"\nserver = \"t\"\nblake3 = \"{h}\"\n");
        let (p, d) = pins(&neither);
        assert_eq!(d, [], "pinned from a file");
        assert!(matches!(&p[0].1.source, PinSource::Mcp { start: None, .. }));
        let rap_with_server = format!(
            "[pins.\"pins/a.rap.json\"]\nformat = \"rap\"\nurl = \"https://a/\"\nserver = \"t\"\nblake3 = \"{h}\"\n"
        );
        assert_eq!(pins(&rap_with_server).1, [(Code::UnknownField, "pins.\"pins/a.rap.json\".server".to_owned())]);
        let bad =
            format!("[pins.\"pins/t.mcp.json\"]\nformat = \"mcp\"\nserver = \"a b\"\ncommand = []\nblake3 = \"{h}\"\n");
        let codes: Vec<Code> = pins(&bad).1.into_iter().map(|(c, _)| c).collect();
        assert_eq!(codes, [Code::InvalidName, Code::WrongType]);
    }

    #[test]
    fn set_pins_writes_what_parses_back_and_drops_keys_of_the_old_pin() {
        let rap = Pin { source: PinSource::Rap { url: "https://a.example/".into() }, blake3: blake3::hash(b"1") };
        let text = edit::set_pins(HEAD, &[("pins/s.mcp.json".into(), rap)]).unwrap();
        let mcp = Pin {
            source: PinSource::Mcp {
                server: "s".into(),
                start: Some(McpStart::Stdio { command: vec!["python3".into(), "server.py".into()] }),
            },
            blake3: blake3::hash(b"2"),
        };
        let text = edit::set_pins(&text, &[("pins/s.mcp.json".into(), mcp.clone())]).unwrap();
        assert!(!text.contains("url"), "{text}");
        assert_eq!(edit::set_pins(&text, &[("pins/s.mcp.json".into(), mcp.clone())]).unwrap(), text, "idempotent");
        let mut d = Vec::new();
        let m = parse(&Source::new("manifest.toml", text.as_str()), &mut d).unwrap();
        assert_eq!(d.len(), 0, "{d:?}");
        assert_eq!(m.pins["pins/s.mcp.json"], mcp);
        assert_eq!(m.mcp_pins("s").count(), 1);
        assert_eq!(m.mcp_pins("other").count(), 0);
    }
}
