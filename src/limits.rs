//! Every cap on what `bundle` reads, in one place: the files of an agent and a bundle, keys
//! and PIN sources, registries and MCP servers (docs/book format §2.9, the security page's
//! generated table).
//!
//! Each input is hostile until checked, so each has a size cap that is enforced while reading
//! (never after reading the whole file) and, where a small file can describe a large structure,
//! a cap on that structure, enforced while parsing; what comes over a wire also has a deadline.
//! Any input within these caps is handled in bounded memory and time by every command; `pack`
//! refuses what `verify` would refuse. This module is the lowest of all: the modules that
//! enforce a cap take it from here, never the other way round.

/// What a cap counts, for the book's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Count,
    Depth,
    Seconds,
}

/// One cap, as the book lists it.
#[derive(Debug, Clone, Copy)]
pub struct Cap {
    /// The constant's name.
    pub name: &'static str,
    pub value: u64,
    pub unit: Unit,
    /// What is capped.
    pub input: &'static str,
    /// What happens over it.
    pub over: &'static str,
}

impl Cap {
    /// The value as the book shows it: `4 MiB`, `200 000 values`, `64 levels`, `30 s`.
    pub fn shown(&self) -> String {
        let v = self.value;
        match self.unit {
            Unit::Bytes if v >= 1 << 30 && v.is_multiple_of(1 << 30) => format!("{} GiB", v >> 30),
            Unit::Bytes if v >= 1 << 20 && v.is_multiple_of(1 << 20) => format!("{} MiB", v >> 20),
            Unit::Bytes if v >= 1 << 10 && v.is_multiple_of(1 << 10) => format!("{} KiB", v >> 10),
            Unit::Bytes => format!("{v} bytes"),
            Unit::Count => grouped(v),
            Unit::Depth => format!("{v} levels"),
            Unit::Seconds => format!("{v} s"),
        }
    }
}

fn grouped(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Defines the caps: `NAME: type = value, unit, "input", "over it";`, and [`ALL`] of them in
/// documentation order.
macro_rules! caps {
    ($($(#[$meta:meta])* $name:ident: $ty:ty = $value:expr, $unit:ident, $input:literal, $over:literal;)*) => {
        $($(#[$meta])* pub const $name: $ty = $value;)*
        /// Every cap, in documentation order.
        pub const ALL: &[Cap] = &[$(Cap {
            name: stringify!($name),
            value: $name as u64,
            unit: Unit::$unit,
            input: $input,
            over: $over,
        },)*];
    };
}

caps! {
    /// The largest manifest.toml (of a bundle or an agent).
    MAX_MANIFEST_BYTES: u64 = 1 << 20, Bytes, "manifest.toml", "`limit_exceeded`";
    /// The most keys, values and table headers in one manifest.toml or baseline, counted before
    /// parsing (as the `=`, `,`, `[` and `{` outside strings and comments); a lock of 10 000
    /// files needs about 60 000.
    MAX_TOML_ITEMS: usize = 200_000, Count, "items of manifest.toml or a baseline, counted before parsing", "`limit_exceeded`";
    /// The largest signature entry.
    MAX_SIGNATURE_BYTES: u64 = 4096, Bytes, "manifest.toml.minisig", "`limit_exceeded`";
    /// The largest tools.json or schema file.
    MAX_JSON_BYTES: u64 = 4 << 20, Bytes, "tools.json, each schema file", "`limit_exceeded`";
    /// All JSON files verify holds in memory together.
    MAX_JSON_TOTAL: u64 = 16 << 20, Bytes, "JSON files a bundle's verify holds, together", "`limit_exceeded`";
    /// The largest policy.caps (held in memory by `bundle verify` like the JSON files).
    MAX_POLICY_BYTES: u64 = 4 << 20, Bytes, "policy.caps", "`limit_exceeded`";
    /// The most JSON values of one check (tools.json and its schemas), one imported document, or
    /// everything one MCP server sends.
    MAX_JSON_VALUES: u64 = 200_000, Count, "JSON values of one check, one imported document, one MCP server's messages", "`limit_exceeded` / exit 2";
    /// The deepest nesting of arrays and objects in one JSON document.
    MAX_JSON_DEPTH: usize = 64, Depth, "JSON nesting (every JSON input)", "`limit_exceeded` / exit 2";
    /// Values of an agent's schemas once `schema:` references are inlined (tool contracts).
    MAX_SCHEMA_VALUES: usize = 1 << 18, Count, "schema values once `schema:` references are inlined (contracts)", "an error naming the tool";
    /// Nesting of the inlined schemas.
    MAX_SCHEMA_DEPTH: usize = 100, Depth, "inlined schema nesting (contracts)", "an error naming the tool";
    /// The largest `.bundleignore`.
    MAX_BUNDLEIGNORE_BYTES: u64 = 1 << 20, Bytes, ".bundleignore", "`limit_exceeded`";
    /// The largest body fetched over http(s) (a RAP toolset), and the largest file `bundle import`
    /// reads (a RAP document, an agentcli manifest, an OpenAI or MCP tool list, a pinned file).
    MAX_IMPORT_BYTES: u64 = 4 << 20, Bytes, "`import` input files and fetched RAP bodies, pinned files", "exit 2";
    /// The largest Rune tool descriptor (one tool's YAML): YAML parsing holds every event of the
    /// document at once, so this cap is smaller than the JSON one.
    MAX_RUNE_DESCRIPTOR_BYTES: u64 = 256 << 10, Bytes, "a Rune descriptor (`tools/*.yaml`)", "exit 2";
    /// The deepest nesting in a Rune descriptor (YAML), checked before parsing.
    MAX_YAML_DEPTH: usize = 64, Depth, "Rune descriptor nesting, counted before parsing", "`limit_exceeded`";
    /// The largest `--state` file.
    MAX_STATE_BYTES: u64 = 16 << 20, Bytes, "`--state` file", "exit 2";
    /// The largest baseline file (`bundle baseline`, `verify --baseline`).
    MAX_BASELINE_BYTES: u64 = 16 << 20, Bytes, "baseline file", "exit 2";
    /// The zstd window a bundle may ask for (2^24).
    MAX_ZSTD_WINDOW_BYTES: u64 = 1 << 24, Bytes, "a bundle's zstd window", "`limit_exceeded`";
    /// The largest entry of a bundle.
    MAX_ENTRY_BYTES: u64 = 1 << 30, Bytes, "one bundle entry", "`limit_exceeded`";
    /// All entries of a bundle together.
    MAX_BUNDLE_CONTENT_BYTES: u64 = 4 << 30, Bytes, "a bundle's entries together", "`limit_exceeded`";
    /// The most entries of a bundle.
    MAX_ENTRIES: u64 = 100_000, Count, "bundle entries", "`limit_exceeded`";
    /// Zero bytes that may follow the tar end marker.
    MAX_TRAILING_ZEROS: u64 = 10240, Bytes, "zeros after a bundle's tar end marker", "`trailing_data`";
    /// Key files are a few hundred bytes; anything much larger is not a key file.
    MAX_KEY_FILE_BYTES: u64 = 64 << 10, Bytes, "a key file (`--key`, `BUNDLE_SIGNING_KEY`)", "exit 2 (`key_error`)";
    /// A trusted-keys file lists about 60 bytes per key.
    MAX_TRUSTED_KEYS_BYTES: u64 = 4 << 20, Bytes, "a trusted-keys file", "exit 2";
    /// A PKCS#11 `pin-source` holds only the PIN.
    MAX_PIN_FILE_BYTES: u64 = 1024, Bytes, "a PKCS#11 `pin-source` (a file or a FIFO such as `<(…)`)", "exit 2 (`pin_source`)";
    /// The largest message read from an ssh-agent.
    MAX_SSH_AGENT_MESSAGE_BYTES: u64 = 256 << 10, Bytes, "one ssh-agent message", "exit 2 (`ssh_agent_protocol`)";
    /// A `--ca-cert` PEM file.
    MAX_CA_CERT_BYTES: u64 = 1 << 20, Bytes, "a `--ca-cert` PEM file (a regular file)", "exit 2";
    /// `$DOCKER_CONFIG/config.json` (registry credentials).
    MAX_DOCKER_CONFIG_BYTES: u64 = 1 << 20, Bytes, "`$DOCKER_CONFIG/config.json` (a regular file)", "exit 2";
    /// A registry manifest, and an artifact's config blob.
    MAX_OCI_MANIFEST_BYTES: u64 = 4 << 20, Bytes, "a registry manifest or config blob", "`unsupported_artifact`";
    /// The JSON values of an artifact's config (`inspect oci://`).
    MAX_OCI_CONFIG_VALUES: u64 = 200_000, Count, "JSON values of an artifact's config (`inspect oci://`)", "`unsupported_artifact`";
    /// A registry's error body or token answer.
    MAX_REGISTRY_SMALL_BODY_BYTES: u64 = 64 << 10, Bytes, "a registry error body or token answer", "cut / exit 2";
    /// The default overall deadline of one registry operation (`--timeout`).
    REGISTRY_TIMEOUT_SECS: u64 = 300, Seconds, "one registry operation, default `--timeout` (a layer download included)", "exit 2 (`timeout`)";
    /// How long a registry may send nothing before the operation is given up.
    REGISTRY_IDLE_SECS: u64 = 60, Seconds, "registry silence (no byte received or sent)", "exit 2 (`timeout`)";
    /// Everything an MCP server writes to stdout.
    MAX_MCP_STDOUT_BYTES: usize = 16 << 20, Bytes, "an MCP server's stdout (all messages)", "exit 2 (`mcp_server_failed`)";
    /// `tools/list` pages of an MCP server.
    MAX_MCP_PAGES: usize = 1000, Count, "an MCP server's `tools/list` pages", "exit 2 (`mcp_server_failed`)";
    /// The default deadline of an MCP listing (`import --timeout`).
    MCP_TIMEOUT_SECS: u64 = 30, Seconds, "an MCP server, from start to its last page (default `import --timeout`)", "exit 2 (`mcp_server_failed`)";
    /// The end of an MCP server's stderr that is kept for messages.
    MAX_MCP_STDERR_BYTES: usize = 16 << 10, Bytes, "an MCP server's stderr kept for messages (the end of it)", "cut";
    /// One message between an MCP client and server through `bundle guard` (JSON values and
    /// depth are held to MAX_JSON_VALUES and MAX_JSON_DEPTH per message).
    MAX_MCP_MESSAGE_BYTES: usize = 4 << 20, Bytes, "one MCP message through `bundle guard` (either direction)", "dropped (`mcp_message_too_large`)";
    /// Messages `bundle guard` queues for a server that does not read them.
    MAX_MCP_QUEUED_MESSAGES: usize = 4, Count, "messages `bundle guard` queues for a server that is not reading", "error answer (`mcp_server_not_reading`)";
    /// The default deadline of one request through `bundle guard` (`guard --request-timeout`).
    MCP_GUARD_TIMEOUT_SECS: u64 = 300, Seconds, "one request through `bundle guard` (default `guard --request-timeout`)", "error answer (`mcp_server_timeout`)";
}
