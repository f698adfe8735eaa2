//! Signing with an `ecdsa-sha2-nistp256` key held by an ssh-agent, for the signatures that need
//! an elliptic-curve key (OpenSSF model signing). The agent hashes the data with SHA-256 and
//! signs it (RFC 5656 §3.1.2), so its answer is an ECDSA-with-SHA-256 signature over exactly
//! the bytes sent; its `r` and `s` (SSH mpints) are encoded here as DER.

use std::ffi::OsString;
use std::path::PathBuf;

use p256::ecdsa::{Signature, VerifyingKey};
use ssh_encoding::Decode;

use super::SignerError;
use super::ssh_agent::{AUTH_SOCK_ENV, Stream, connect, describe, identities, sign_raw, wire};

const NISTP256: &str = "ecdsa-sha2-nistp256";

/// An ecdsa-sha2-nistp256 key in a running agent, with a connection to it.
#[derive(Debug)]
pub struct AgentP256 {
    stream: Stream,
    blob: Vec<u8>,
    public: VerifyingKey,
    fingerprint: String,
}

impl AgentP256 {
    /// Connects to the agent at `socket` and picks its only ecdsa-sha2-nistp256 key, or the
    /// one with `fingerprint`.
    pub fn open(socket: Option<OsString>, fingerprint: Option<&str>) -> Result<AgentP256, SignerError> {
        let Some(socket) = socket.filter(|s| !s.is_empty()).map(PathBuf::from) else {
            return Err(SignerError::AgentUnavailable { reason: format!("{AUTH_SOCK_ENV} is not set") });
        };
        let mut stream = connect(&socket).map_err(|e| SignerError::AgentUnavailable {
            reason: format!("cannot connect to {AUTH_SOCK_ENV}={}: {e}", socket.display()),
        })?;
        let all = identities(&mut stream)?;
        let listed: Vec<String> = all.iter().map(describe).collect();
        let mut chosen: Vec<_> = match fingerprint {
            Some(wanted) => {
                let found: Vec<_> = all.into_iter().filter(|k| k.fingerprint == wanted).collect();
                if let Some(k) = found.first().filter(|k| k.algorithm != NISTP256) {
                    return Err(SignerError::NotP256 {
                        what: format!("the agent's key {wanted}"),
                        found: k.algorithm.clone(),
                    });
                }
                if found.is_empty() {
                    return Err(SignerError::AgentKeyNotFound { fingerprint: wanted.to_owned(), available: listed });
                }
                found
            }
            None => all.into_iter().filter(|k| k.algorithm == NISTP256).collect(),
        };
        let key = match chosen.len() {
            1 => chosen.remove(0),
            0 => return Err(SignerError::AgentNoP256 { available: listed }),
            _ => return Err(SignerError::AgentAmbiguous { fingerprints: chosen.iter().map(describe).collect() }),
        };
        let public = point(&key.blob).ok_or_else(|| {
            SignerError::Protocol(format!("the agent's key {} is not a P-256 point", key.fingerprint))
        })?;
        Ok(AgentP256 { stream, blob: key.blob, public, fingerprint: key.fingerprint })
    }

    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.public
    }

    /// The key's SHA-256 fingerprint, as `ssh-add -l -E sha256` prints it.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// ECDSA P-256 with SHA-256 over `message`, by the agent.
    pub fn sign(&mut self, message: &[u8]) -> Result<Signature, SignerError> {
        let blob = sign_raw(&mut self.stream, &self.blob, message, NISTP256, &self.fingerprint)?;
        let mut rs = blob.as_slice();
        let (r, s) = (Vec::<u8>::decode(&mut rs).map_err(wire)?, Vec::<u8>::decode(&mut rs).map_err(wire)?);
        let (Some(r), Some(s)) = (scalar(&r), scalar(&s)) else {
            return Err(SignerError::Protocol("the agent's ECDSA signature is malformed".to_owned()));
        };
        Signature::from_scalars(r, s)
            .map_err(|_| SignerError::Protocol("the agent's ECDSA signature is out of range".to_owned()))
    }
}

/// The public point of an `ecdsa-sha2-nistp256` key blob (algorithm, curve name, point).
fn point(blob: &[u8]) -> Option<VerifyingKey> {
    let mut reader = blob;
    let algorithm = String::decode(&mut reader).ok()?;
    let curve = String::decode(&mut reader).ok()?;
    let q = Vec::<u8>::decode(&mut reader).ok()?;
    (algorithm == NISTP256 && curve == "nistp256" && reader.is_empty()).then_some(())?;
    VerifyingKey::from_sec1_bytes(&q).ok()
}

/// An SSH mpint (big-endian, a leading zero when the top bit is set) as 32 bytes.
fn scalar(mpint: &[u8]) -> Option<[u8; 32]> {
    let trimmed = match mpint {
        [0, rest @ ..] => rest,
        all => all,
    };
    if trimmed.len() > 32 {
        return None;
    }
    let mut out = [0u8; 32];
    out[32 - trimmed.len()..].copy_from_slice(trimmed);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpints_become_32_byte_scalars() {
        assert_eq!(scalar(&[0, 0x80, 1]).map(|s| s[30..].to_vec()), Some(vec![0x80, 1]));
        assert_eq!(scalar(&[0x7f]).map(|s| s[31]), Some(0x7f));
        assert_eq!(scalar(&[1; 33]), None);
    }
}
