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
    /// The largest SKILL.md (`skills/<name>/SKILL.md`), read whole by `bundle check`.
    MAX_SKILL_BYTES: u64 = 1 << 20, Bytes, "a skill's SKILL.md", "`limit_exceeded`";
    /// The largest SKILL.md front matter (YAML, parsed whole).
    MAX_SKILL_FRONT_MATTER_BYTES: u64 = 64 << 10, Bytes, "a SKILL.md front matter", "`limit_exceeded`";
    /// The most skills of one agent, and files of one skill.
    MAX_SKILL_FILES: usize = 10_000, Count, "skills of an agent, files of one skill", "`limit_exceeded`";
    /// The most client tools manifest.toml `[skills] client_tools` declares.
    MAX_CLIENT_TOOLS: usize = 256, Count, "`[skills] client_tools` entries in manifest.toml", "`invalid_client_tool`";
    /// The longest client tool name (`Read`, `WebFetch`), in characters.
    MAX_CLIENT_TOOL_NAME_CHARS: usize = 64, Count, "characters of a client tool name (`[skills] client_tools`)", "`invalid_client_tool`";
    /// The longest pattern of a client tool entry (`Bash(<pattern>)`), in characters.
    MAX_CLIENT_TOOL_PATTERN_CHARS: usize = 512, Count, "characters of a client tool's `(pattern)`", "`invalid_client_tool`";
    /// The files of one skill together, for `bundle import --from skills`.
    MAX_SKILL_IMPORT_BYTES: u64 = 64 << 20, Bytes, "one skill folder's files together (`import --from skills`)", "`limit_exceeded`";
    /// The largest A2A agent card `bundle verify --agent-card` reads.
    MAX_AGENT_CARD_BYTES: u64 = 1 << 20, Bytes, "an A2A agent card (`verify --agent-card`)", "exit 2";
    /// The largest `.mcpb` file `import --from mcpb` and `inspect` read.
    MAX_MCPB_BYTES: u64 = 1 << 30, Bytes, "an `.mcpb` file (`import --from mcpb`, `inspect`)", "`limit_exceeded`";
    /// The most entries of an `.mcpb` ZIP.
    MAX_MCPB_ENTRIES: usize = 100_000, Count, "entries of an `.mcpb` ZIP", "`limit_exceeded`";
    /// The uncompressed sizes an `.mcpb`'s entries may claim together.
    MAX_MCPB_CONTENT_BYTES: u64 = 4 << 30, Bytes, "an `.mcpb`'s entries together (declared sizes)", "`limit_exceeded`";
    /// How many times its compressed size an `.mcpb` entry over 1 MiB may claim.
    MAX_MCPB_RATIO: u64 = 1000, Count, "an `.mcpb` entry's size over its compressed size (entries over 1 MiB)", "`limit_exceeded`";
    /// The largest signature block after an `.mcpb`'s ZIP.
    MAX_MCPB_SIGNATURE_BYTES: u64 = 256 << 10, Bytes, "an `.mcpb` signature block", "reported as not found";
    /// How deep below a PATH agent folders are looked for (grouping folders such as
    /// `agents/team-a/mailer` need a few levels; the bound keeps a walk of a large tree short).
    MAX_AGENT_SEARCH_DEPTH: usize = 8, Depth, "folders searched below a PATH for agents (`check`, `lock`)", "not searched";
    /// The most arguments recorded for one pinned MCP server command.
    MAX_PIN_COMMAND_ARGS: usize = 256, Count, "arguments of a pinned MCP server's `command`", "an error naming the key";
    /// What `bundle cat` holds to check an entry before writing it to standard output.
    MAX_CAT_MEMORY_BYTES: u64 = 64 << 20, Bytes, "an entry `cat` writes to standard output (checked before written)", "exit 2 (use `--output`)";
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
    /// The largest attestation read: a Sigstore bundle or DSSE envelope file, one line of a
    /// `.intoto.jsonl`, one referrer's layer.
    MAX_ATTESTATION_BYTES: u64 = 1 << 20, Bytes, "an attestation (`BUNDLE.*.sigstore.json`, `--attestation`, one referrer's layer)", "`attestation_malformed`";
    /// The deepest nesting of arrays and objects in an attestation or its payload, checked on
    /// the bytes before anything is parsed.
    MAX_ATTESTATION_DEPTH: usize = 32, Depth, "attestation and statement nesting, counted before parsing", "`attestation_malformed`";
    /// The most signatures one DSSE envelope may carry.
    MAX_ATTESTATION_SIGNATURES: usize = 64, Count, "signatures of one attestation envelope", "`attestation_malformed` (`attest`: exit 2)";
    /// The most entries a registry's referrers index may list; a longer one is refused, not cut.
    MAX_REFERRERS: usize = 256, Count, "entries of a registry's referrers index (`oci://` evidence)", "`unsupported_artifact`";
    /// A file of minisign signatures is read whole: `BUNDLE.cosig`, `POLICY.minisigs`.
    MAX_SIGNATURES_FILE_BYTES: u64 = 1 << 20, Bytes, "a co-signature or policy signature file (`BUNDLE.cosig`, `POLICY.minisigs`), one co-signature referrer", "`limit_exceeded` / exit 2 (`.minisigs`)";
    /// Signatures in one such file.
    MAX_SIGNATURES_PER_FILE: usize = 1000, Count, "signatures in one `.cosig` or `.minisigs` file", "`bad_signature` / exit 2 (`.minisigs`)";
    /// A trust policy is read whole; 100 keys take about 20 KiB.
    MAX_TRUST_POLICY_BYTES: u64 = 4 << 20, Bytes, "a trust policy (`--trust-policy`, `trust` commands)", "exit 2";
    /// Signers of one trust policy (the gate indexes them).
    MAX_TRUST_POLICY_SIGNERS: usize = 10_000, Count, "signers of one trust policy", "exit 2 (`policy_error`)";
    /// Rules of one trust policy.
    MAX_TRUST_POLICY_RULES: usize = 10_000, Count, "rules of one trust policy", "exit 2 (`policy_error`)";
    /// The largest Sigstore bundle read as a keyless signature (a real one is 2-12 KiB; a DSSE
    /// one carries its statement).
    MAX_SIGSTORE_BUNDLE_BYTES: u64 = 4 << 20, Bytes, "a keyless signature, a Sigstore bundle (`--sigstore`, `BUNDLE.sigstore.json`)", "exit 2";
    /// The largest Sigstore trusted root read (the production one is 7 KiB).
    MAX_TRUSTED_ROOT_BYTES: u64 = 4 << 20, Bytes, "a Sigstore trusted root (`--trusted-root`, a policy's `[sigstore] trusted_root`)", "exit 2";
    /// Key files are a few hundred bytes; anything much larger is not a key file.
    MAX_KEY_FILE_BYTES: u64 = 64 << 10, Bytes, "a key file (`--key`, `BUNDLE_SIGNING_KEY`)", "exit 2 (`key_error`)";
    /// A trusted-keys file lists about 60 bytes per key.
    MAX_TRUSTED_KEYS_BYTES: u64 = 4 << 20, Bytes, "a trusted-keys file", "exit 2";
    /// A P-256 key file (PKCS#8 PEM, OpenSSF model signing).
    MAX_P256_KEY_FILE_BYTES: u64 = 16 << 10, Bytes, "a P-256 key file (`sign-model`, `verify-model`)", "exit 2";
    /// The memory scrypt may need for an encrypted secret key (minisign's default needs 1 GiB).
    MAX_KDF_MEMORY_BYTES: u128 = 2 << 30, Bytes, "scrypt memory an encrypted secret key asks for", "exit 2 (`key_error`)";
    /// scrypt's work (N × r × p) an encrypted secret key may ask for: 16 times minisign's default.
    MAX_KDF_WORK: u128 = 1 << 24, Count, "scrypt work (N × r × p) an encrypted secret key asks for", "exit 2 (`key_error`)";
    /// A PKCS#11 `pin-source` holds only the PIN.
    MAX_PIN_FILE_BYTES: u64 = 1024, Bytes, "a PKCS#11 `pin-source` (a file or a FIFO such as `<(…)`)", "exit 2 (`pin_source`)";
    /// The largest message read from an ssh-agent.
    MAX_SSH_AGENT_MESSAGE_BYTES: u64 = 256 << 10, Bytes, "one ssh-agent message", "exit 2 (`ssh_agent_protocol`)";
    /// The largest stat cache file read (about 300 000 entries); a larger one is ignored.
    MAX_STAT_CACHE_BYTES: u64 = 64 << 20, Bytes, "a stat cache file (`$BUNDLE_CACHE_DIR/stat-v1/`, `check`, `lock`)", "ignored (the files are hashed)";
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
    /// The largest HTTP request head `bundle guard --listen` reads.
    MAX_GUARD_HTTP_HEAD_BYTES: usize = 64 << 10, Bytes, "an HTTP request head through `bundle guard --listen`", "HTTP 400";
    /// The body of an upstream's answer to a DELETE or an error, passed on by `bundle guard`.
    MAX_GUARD_UPSTREAM_SMALL_BODY_BYTES: usize = 64 << 10, Bytes, "an upstream's answer to DELETE or its error body (`bundle guard --upstream`)", "cut";
    /// The longest JSON-RPC `id` `bundle guard` keeps to answer a request itself.
    MAX_GUARD_ID_BYTES: usize = 256, Bytes, "a JSON-RPC `id` kept by `bundle guard`", "a refusal is answered without the `id`";
    /// Warnings and blocks `bundle guard` prints on stderr in one second (the audit log keeps
    /// every decision): a server that sends junk cannot flood the host's log.
    MAX_GUARD_STDERR_LINES_PER_SEC: u32 = 10, Count, "stderr lines `bundle guard` prints per second (warnings, blocks; the audit log keeps all)", "counted, and the count said in the next line";
    /// The default deadline of one request through `bundle guard` (`guard --request-timeout`).
    MCP_GUARD_TIMEOUT_SECS: u64 = 300, Seconds, "one request through `bundle guard` (default `guard --request-timeout`)", "error answer (`mcp_server_timeout`)";
    /// `[[models]]` entries of a manifest (vendor-signed models).
    MAX_MODELS: usize = 64, Count, "`[[models]]` entries in manifest.toml", "`limit_exceeded`";
    /// A vendor's model signature (`model.sig`; a resource is about 150 bytes: 100,000 fit).
    MAX_MODEL_SIGNATURE_BYTES: u64 = 16 << 20, Bytes, "a vendor's model signature (`model.sig`)", "`model_signature_malformed`";
    /// The files a vendor's model signature may list.
    MAX_MODEL_RESOURCES: usize = 100_000, Count, "files (or file shards) listed by a vendor's model signature", "`model_signature_malformed`";
    /// The smallest shard a `[[models]]` entry may declare (`shard_size`): the shard digests a
    /// verifier keeps while a bundle streams by are at most 32 bytes per this many bytes of model.
    MIN_MODEL_SHARD_BYTES: u64 = 64 << 10, Bytes, "a model's shard size (`[[models]] shard_size`, at least)", "`limit_exceeded`";
    /// A vendor's public key file named by `[[models]]`.
    MAX_MODEL_KEY_BYTES: u64 = 16 << 10, Bytes, "a vendor's public key file (`[[models]] key`)", "`model_key_invalid`";
    /// What the library's `Bundle::load` (Python `agent_bundle.Bundle.load`) holds in memory at
    /// most unless told otherwise.
    DEFAULT_MAX_LOADED_BYTES: u64 = 1 << 30, Bytes, "a bundle loaded into memory by the library or Python, or one file read by a lazy open (default `max_loaded_bytes`)", "`limit_exceeded`";
}
