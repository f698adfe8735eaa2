//! Signing with an Ed25519 key held by an ssh-agent (draft-miller-ssh-agent), which may itself
//! keep the key on a hardware token.
//!
//! The agent signs exactly the bytes it is sent with plain Ed25519 (`SSH_AGENTC_SIGN_REQUEST`,
//! flags 0, answered with an `ssh-ed25519` signature), so sending minisign's BLAKE2b-512
//! prehash and then `signature || trusted comment` yields a minisign signature byte for byte.
//!
//! Why a client of our own: the protocol needs two requests (list identities, sign), and the
//! Rust clients do not fit. `ssh-agent-lib` is async (tokio) while this tool is synchronous;
//! `ssh-agent-client-rs` is synchronous but brings `ssh-key` 0.6 with every algorithm (RSA,
//! NIST curves: about 50 crates, a second generation of RustCrypto) for one key type. So this
//! is a small client on `std::os::unix::net::UnixStream`, with `ssh-encoding` for the RFC 4251
//! wire types, bounded message sizes and a timeout on every read and write.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use sha2::{Digest as _, Sha256};
use ssh_encoding::{Decode, Encode};

use super::{SignerError, derived_key_id};
use crate::minisign::PublicKey;

const SSH_AGENT_FAILURE: u8 = 5;
const SSH_AGENTC_REQUEST_IDENTITIES: u8 = 11;
const SSH_AGENT_IDENTITIES_ANSWER: u8 = 12;
const SSH_AGENTC_SIGN_REQUEST: u8 = 13;
const SSH_AGENT_SIGN_RESPONSE: u8 = 14;
const ED25519: &str = "ssh-ed25519";

/// Larger answers are refused (a hostile socket cannot make us allocate much).
const MAX_MESSAGE: usize = crate::limits::MAX_SSH_AGENT_MESSAGE_BYTES as usize;
/// A hardware key behind the agent may wait for a touch; give it time, but not forever.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The agent's socket. (OpenSSH's agent on Windows listens on a named pipe, which this client
/// does not speak: there every connection fails with "unsupported".)
#[cfg(unix)]
pub(super) type Stream = std::os::unix::net::UnixStream;
#[cfg(not(unix))]
pub(super) type Stream = std::fs::File;

#[cfg(unix)]
pub(super) fn connect(socket: &Path) -> std::io::Result<Stream> {
    let stream = Stream::connect(socket)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    Ok(stream)
}

#[cfg(not(unix))]
pub(super) fn connect(_socket: &Path) -> std::io::Result<Stream> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "ssh-agent signing needs a Unix socket"))
}

/// The environment variable that names the agent's socket.
pub const AUTH_SOCK_ENV: &str = "SSH_AUTH_SOCK";

/// An ssh-ed25519 key in a running agent, with a connection to it.
#[derive(Debug)]
pub struct AgentKey {
    stream: Stream,
    blob: Vec<u8>,
    public: PublicKey,
    fingerprint: String,
}

/// A key the agent lists: its wire blob, algorithm name and SHA-256 fingerprint.
pub(super) struct Identity {
    pub(super) blob: Vec<u8>,
    pub(super) algorithm: String,
    pub(super) fingerprint: String,
    /// The key's comment (often `user@host` or the key file's name), shortened.
    comment: String,
    ed25519: Option<[u8; 32]>,
}

impl AgentKey {
    /// Connects to the agent at `socket` (the value of `SSH_AUTH_SOCK`) and picks its only
    /// ssh-ed25519 key, or the one with `fingerprint`.
    pub fn open(socket: Option<OsString>, fingerprint: Option<&str>) -> Result<AgentKey, SignerError> {
        let Some(socket) = socket.filter(|s| !s.is_empty()).map(PathBuf::from) else {
            return Err(SignerError::AgentUnavailable { reason: format!("{AUTH_SOCK_ENV} is not set") });
        };
        let mut stream = connect(&socket).map_err(|e| SignerError::AgentUnavailable {
            reason: format!("cannot connect to {AUTH_SOCK_ENV}={}: {e}", socket.display()),
        })?;
        let chosen = choose(identities(&mut stream)?, fingerprint)?;
        let raw = chosen.ed25519.expect("choose returns Ed25519 keys only");
        let public = PublicKey::from_ed25519(derived_key_id(&raw), raw)
            .map_err(|e| SignerError::Protocol(format!("the agent's key {}: {e}", chosen.fingerprint)))?;
        Ok(AgentKey { stream, blob: chosen.blob, public, fingerprint: chosen.fingerprint })
    }

    /// The minisign public key, with the key id derived from the Ed25519 key.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// The key's SHA-256 fingerprint, as `ssh-add -l -E sha256` prints it.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// A plain Ed25519 signature of `message` by the agent.
    pub fn sign(&mut self, message: &[u8]) -> Result<[u8; 64], SignerError> {
        let bytes = sign_raw(&mut self.stream, &self.blob, message, ED25519, &self.fingerprint)?;
        bytes.try_into().map_err(|_| SignerError::Protocol("the agent's Ed25519 signature is not 64 bytes".to_owned()))
    }
}

/// One sign exchange (`SSH_AGENTC_SIGN_REQUEST` without flags) with the key `blob`: the
/// signature blob of the answer, which must be of `algorithm`.
pub(super) fn sign_raw(
    stream: &mut Stream,
    blob: &[u8],
    message: &[u8],
    algorithm: &str,
    fingerprint: &str,
) -> Result<Vec<u8>, SignerError> {
    let mut sign_request = vec![SSH_AGENTC_SIGN_REQUEST];
    blob.encode(&mut sign_request).map_err(wire)?;
    message.encode(&mut sign_request).map_err(wire)?;
    0u32.encode(&mut sign_request).map_err(wire)?;
    let answer = request(stream, &sign_request)?;
    match answer.split_first() {
        Some((&SSH_AGENT_SIGN_RESPONSE, mut body)) => {
            let signature = Vec::<u8>::decode(&mut body).map_err(wire)?;
            let mut sig = signature.as_slice();
            let answered = String::decode(&mut sig).map_err(wire)?;
            let bytes = Vec::<u8>::decode(&mut sig).map_err(wire)?;
            if answered != algorithm || !sig.is_empty() {
                return Err(SignerError::Protocol(format!("the agent answered with a `{answered}` signature")));
            }
            Ok(bytes)
        }
        Some((&SSH_AGENT_FAILURE, _)) => Err(SignerError::AgentRefused { fingerprint: fingerprint.to_owned() }),
        _ => Err(SignerError::Protocol("unexpected answer to a sign request".to_owned())),
    }
}

pub(super) fn identities(stream: &mut Stream) -> Result<Vec<Identity>, SignerError> {
    let answer = request(stream, &[SSH_AGENTC_REQUEST_IDENTITIES])?;
    let Some((&SSH_AGENT_IDENTITIES_ANSWER, mut body)) = answer.split_first() else {
        return Err(SignerError::Protocol("unexpected answer to a list-keys request".to_owned()));
    };
    let count = u32::decode(&mut body).map_err(wire)?;
    let mut keys = Vec::new();
    for _ in 0..count {
        // Each entry is at least 8 bytes, so a huge count runs out of body first.
        let blob = Vec::<u8>::decode(&mut body).map_err(wire)?;
        let comment = Vec::<u8>::decode(&mut body).map_err(wire)?;
        let mut key = identity(blob)?;
        key.comment = String::from_utf8_lossy(&comment).chars().take(64).collect();
        keys.push(key);
    }
    Ok(keys)
}

/// Sends one message and reads one answer (u32 length, then the body).
pub(super) fn request(stream: &mut Stream, body: &[u8]) -> Result<Vec<u8>, SignerError> {
    let io = |e: std::io::Error| SignerError::Protocol(format!("talking to the agent: {e}"));
    let len = u32::try_from(body.len()).map_err(|_| SignerError::Protocol("request too large".to_owned()))?;
    let mut message = len.to_be_bytes().to_vec();
    message.extend_from_slice(body);
    stream.write_all(&message).map_err(io)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(io)?;
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_MESSAGE {
        return Err(SignerError::Protocol(format!("the agent sent a message of {len} bytes")));
    }
    let mut answer = vec![0u8; len];
    stream.read_exact(&mut answer).map_err(io)?;
    Ok(answer)
}

pub(super) fn wire(e: ssh_encoding::Error) -> SignerError {
    SignerError::Protocol(format!("malformed agent message: {e}"))
}

fn identity(blob: Vec<u8>) -> Result<Identity, SignerError> {
    let fingerprint = format!("SHA256:{}", STANDARD_NO_PAD.encode(Sha256::digest(&blob)));
    let mut reader = blob.as_slice();
    let algorithm = String::decode(&mut reader).map_err(wire)?;
    let ed25519 = if algorithm == ED25519 {
        let key = Vec::<u8>::decode(&mut reader).map_err(wire)?;
        Some(
            key.try_into()
                .map_err(|_| SignerError::Protocol(format!("the agent's key {fingerprint} is not 32 bytes")))?,
        )
    } else {
        None
    };
    Ok(Identity { blob, algorithm, fingerprint, comment: String::new(), ed25519 })
}

/// `SHA256:... (ssh-ed25519, comment)`, for messages.
pub(super) fn describe(key: &Identity) -> String {
    if key.comment.is_empty() {
        format!("{} ({})", key.fingerprint, key.algorithm)
    } else {
        format!("{} ({}, {})", key.fingerprint, key.algorithm, key.comment)
    }
}

fn choose(identities: Vec<Identity>, fingerprint: Option<&str>) -> Result<Identity, SignerError> {
    let listed = |keys: &[Identity]| keys.iter().map(describe).collect();
    if let Some(wanted) = fingerprint {
        let all = listed(&identities);
        let found = identities.into_iter().find(|k| k.fingerprint == wanted);
        return match found {
            Some(k) if k.ed25519.is_some() => Ok(k),
            Some(k) => Err(SignerError::NotEd25519 { what: format!("the agent's key {wanted}"), found: k.algorithm }),
            None => Err(SignerError::AgentKeyNotFound { fingerprint: wanted.to_owned(), available: all }),
        };
    }
    let all = listed(&identities);
    let mut ed: Vec<Identity> = identities.into_iter().filter(|k| k.ed25519.is_some()).collect();
    match ed.len() {
        1 => Ok(ed.remove(0)),
        0 => Err(SignerError::AgentNoEd25519 { available: all }),
        _ => Err(SignerError::AgentAmbiguous { fingerprints: ed.iter().map(describe).collect() }),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;

    /// An agent that answers every request with `answer` (raw bytes, length prefix included).
    fn fake_agent(answer: Vec<u8>) -> (tempfile::TempDir, OsString) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s");
        let listener = UnixListener::bind(&socket).unwrap();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut len = [0u8; 4];
                if stream.read_exact(&mut len).is_ok() {
                    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
                    let _ = stream.read_exact(&mut body);
                    let _ = stream.write_all(&answer);
                }
            }
        });
        (dir, socket.into_os_string())
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn hostile_agents_are_refused_without_allocating_their_claims() {
        // A 4 GiB message announced.
        let (_dir, socket) = fake_agent(u32::MAX.to_be_bytes().to_vec());
        let err = AgentKey::open(Some(socket), None).unwrap_err();
        assert!(err.to_string().contains("4294967295 bytes"), "{err}");
        // Four billion keys announced in a short answer.
        let mut body = vec![SSH_AGENT_IDENTITIES_ANSWER];
        body.extend(u32::MAX.to_be_bytes());
        let (_dir, socket) = fake_agent(framed(&body));
        assert!(matches!(AgentKey::open(Some(socket), None), Err(SignerError::Protocol(_))));
        // A failure answer to the list request.
        let (_dir, socket) = fake_agent(framed(&[SSH_AGENT_FAILURE]));
        assert!(matches!(AgentKey::open(Some(socket), None), Err(SignerError::Protocol(_))));
    }

    #[test]
    fn fingerprints_are_what_ssh_keygen_prints() {
        // `ssh-keygen -l -E sha256` of this public key (made by ssh-keygen -t ed25519).
        let blob = base64::engine::general_purpose::STANDARD
            .decode("AAAAC3NzaC1lZDI1NTE5AAAAIEDmYG4sww4obzqpC21IfTVncCBgQjBb8LAu9fQBo7ZN")
            .unwrap();
        let id = identity(blob).unwrap();
        assert_eq!(id.algorithm, ED25519);
        assert_eq!(id.fingerprint, "SHA256:YngtVGwBkA7btVORim2q5MUCrIpd9eRkU95V66lxxjg");
        assert_eq!(id.ed25519.map(|k| k[0]), Some(0x40));
    }
}
