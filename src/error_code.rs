//! The stable codes of runs that stop with exit 2, and the trait by which each error type of
//! the library says its own. A low module: every layer's error types implement [`Coded`]
//! beside their definition, and the command line walks an error's chain for the first code
//! (`cli::output::code_of`); nothing here names a type of a higher layer.

crate::codes::stable_codes! {
    /// The stable code of a run that stopped with exit 2.
    pub enum ErrorCode;
    Usage => "usage": "A bad argument, option or combination of them (clap's own usage errors included); the message says which.",
    IoError => "io_error": "A file could not be read or written, or a registry or server could not be reached or broke off the transfer.",
    KeyError => "key_error": "A key file is malformed, not a minisign key, or not the kind the option takes (a secret key for --key).",
    StateError => "state_error": "The --state file is not a bundle state file (restore it from a backup).",
    TlsError => "tls_error": "A registry's or server's TLS certificate is not trusted (add its CA with --ca-cert), the handshake failed (a plain-http registry needs --plain-http), or https redirected to plain http.",
    AuthFailed => "auth_failed": "The registry wants credentials that are missing or were refused, or the token service failed.",
    Timeout => "timeout": "A registry operation took longer than --timeout, or the registry sent nothing for the idle timeout.",
    KeyReference => "key_reference": "A malformed `ssh-agent:` or `pkcs11:` key reference.",
    SshAgentUnavailable => "ssh_agent_unavailable": "No ssh-agent answers at `SSH_AUTH_SOCK`.",
    SshAgentProtocol => "ssh_agent_protocol": "The ssh-agent sent something that is not the agent protocol.",
    KeyNotFound => "key_not_found": "The agent or token has no (Ed25519) key of that name, id or fingerprint.",
    AmbiguousKey => "ambiguous_key": "Several keys or tokens match; the message lists them and how to pick one.",
    UnsupportedKey => "unsupported_key": "The key is not Ed25519, so it cannot make minisign signatures.",
    SignRefused => "sign_refused": "The ssh-agent declined to sign (confirmation refused, hardware key not touched).",
    Pkcs11Module => "pkcs11_module": "No PKCS#11 module named, or it is missing or cannot be loaded.",
    TokenNotFound => "token_not_found": "No token matches the URI's token attributes.",
    PinRequired => "pin_required": "The token needs a PIN and none was given.",
    PinIncorrect => "pin_incorrect": "The token rejected the PIN.",
    PinLocked => "pin_locked": "The token's user PIN is locked after too many wrong PINs.",
    PinSource => "pin_source": "The `pin-source` file cannot be read.",
    Pkcs11Error => "pkcs11_error": "The token or module failed otherwise; the message names the PKCS#11 call.",
    SignerMismatch => "signer_mismatch": "The agent's or token's signature does not verify with its public key.",
    Signature => "signature": "The signature cannot be made (a comment minisign cannot store).",
    PolicyError => "policy_error": "A --trust-policy or policy update file is not a usable trust policy (the message says why), or `bundle trust` cannot do what was asked.",
    TrustedRootError => "trusted_root_error": "A Sigstore trusted_root.json is not usable (not JSON, not a trusted root, keys that do not decode), or is not the one the trust policy names (its sha256 differs).",
    McpServerFailed => "mcp_server_failed": "`bundle guard`: the MCP server could not be started, or exited or closed its output during the session; pending requests were answered with an error and the end of the server's stderr is shown.",
    McpNotPinned => "mcp_not_pinned": "`bundle guard`: the verified bundle has no usable pins for the server named by `--server` (no `pins/<server>.mcp.json`, or one that is not a pin file); pin it with `bundle import --from mcp --pin`.",
    Internal => "internal_error": "An error without a code of its own: a defect in `bundle`; please report it with the message.",
}

/// An error type that knows its exit-2 code.
pub trait Coded {
    fn code(&self) -> ErrorCode;
}

impl Coded for std::io::Error {
    fn code(&self) -> ErrorCode {
        ErrorCode::IoError
    }
}
