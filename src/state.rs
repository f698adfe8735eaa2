//! The rollback state file of `bundle verify --state FILE`: for every agent and signing key,
//! the highest version the gate has accepted, and the digest of that version's manifest.
//!
//! A signature proves who made a bundle, not that it is the newest: an attacker who kept an
//! old, validly signed bundle (with a known hole) can offer it again. With a state file the
//! gate refuses any bundle older than one it already let through (`rollback`), and a second,
//! different bundle claiming an accepted version (an equivocating signer or a re-pack without
//! a version bump).
//!
//! The file is JSON, written only by `bundle`, atomically (temp file, fsync, rename), while a
//! lock on a sidecar file `.<name>.lock` is held for the whole verification so that two gates
//! sharing a state file take turns. A malformed state file is an error, never silently reset:
//! resetting it would re-open every rollback it was preventing.
//!
//! ```json
//! {
//!   "format": 1,
//!   "accepted": {
//!     "mailer": {
//!       "8E081C7E25586CAE": { "version": "1.4.0", "manifest_blake3": "7b9a…" }
//!     }
//!   },
//!   "policies": { "acme-agents": 3 }
//! }
//! ```
//!
//! `policies` (present once a gate followed a trust policy, `--trust-policy`) holds the highest
//! version of each policy followed, so that an older, validly signed policy cannot be offered
//! again (`policy_rollback`).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::limits::MAX_STATE_BYTES;
use crate::regular_file::{self, Links, ReadError};
use crate::{atomic, manifest};

/// The only state-file format this build reads and writes.
pub const FORMAT: u32 = 1;

/// What the gate accepted for one agent and key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accepted {
    pub version: String,
    pub manifest_blake3: String,
}

/// The whole file: agent name -> key id (16 uppercase hex digits) -> what was accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    format: u32,
    accepted: BTreeMap<String, BTreeMap<String, Accepted>>,
    /// Trust policy id -> the highest policy version the gate followed (`--trust-policy`): an
    /// older policy offered again is a replay. Absent from files without policies.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    policies: BTreeMap<String, u64>,
}

/// Why a bundle is older than what was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    pub message: String,
}

impl State {
    pub fn new() -> Self {
        State { format: FORMAT, accepted: BTreeMap::new(), policies: BTreeMap::new() }
    }

    /// Parses and checks a state file's text.
    pub fn parse(text: &str) -> Result<State, String> {
        // Parsed strictly first: an agent or key id written twice would otherwise silently
        // drop one recorded floor (serde keeps the last).
        let source = crate::diagnostic::Source::new("state", text);
        let mut problems = Vec::new();
        let doc = crate::json::parse(&source, &mut problems).map_err(|d| d.message)?;
        if let Some(d) = problems.iter().find(|d| d.is_error()) {
            return Err(format!("{} (line {})", d.message, d.line.unwrap_or_default()));
        }
        let state: State = serde_json::from_value(doc.value).map_err(|e| e.to_string())?;
        if state.format != FORMAT {
            return Err(format!("format {} is not supported (this bundle reads format {FORMAT})", state.format));
        }
        for (agent, keys) in &state.accepted {
            manifest::check_agent_name(agent)?;
            for (key_id, a) in keys {
                if key_id.len() != 16 || !key_id.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)) {
                    return Err(format!("`{key_id}` (agent {agent}) is not a key id of 16 uppercase hex digits"));
                }
                semver::Version::parse(&a.version)
                    .map_err(|e| format!("version `{}` of {agent} is not semantic versioning: {e}", a.version))?;
                if manifest::parse_blake3(&a.manifest_blake3).is_none() {
                    return Err(format!("manifest_blake3 of {agent} is not 64 lowercase hex digits"));
                }
            }
        }
        Ok(state)
    }

    /// The text written to the file: stable key order, one trailing newline.
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a state serialises");
        text.push('\n');
        text
    }

    pub fn accepted(&self, agent: &str, key_id: &str) -> Option<&Accepted> {
        self.accepted.get(agent)?.get(key_id)
    }

    /// Whether a bundle of `agent` `version` with this manifest, signed by `key_id`, may pass:
    /// not older than the version accepted before, and if the same version, the same manifest.
    /// Versions compare by SemVer precedence (build metadata ignored).
    pub fn check(
        &self,
        agent: &str,
        key_id: &str,
        version: &semver::Version,
        manifest: &blake3::Hash,
    ) -> Result<(), Rollback> {
        let Some(before) = self.accepted(agent, key_id) else { return Ok(()) };
        let Ok(seen) = semver::Version::parse(&before.version) else { return Ok(()) };
        match version.cmp_precedence(&seen) {
            Ordering::Less => Err(Rollback {
                message: format!("{agent} {version} is older than {seen}, which was accepted before from key {key_id}"),
            }),
            Ordering::Equal if manifest.to_hex().as_str() != before.manifest_blake3 => Err(Rollback {
                message: format!(
                    "another bundle of {agent} {seen} (a different manifest) was accepted before from key {key_id}; \
                     a changed release needs a new version"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The highest version of trust policy `id` followed before.
    pub fn policy_version(&self, id: &str) -> Option<u64> {
        self.policies.get(id).copied()
    }

    /// Records that policy `id` `version` was followed; returns whether the state changed.
    pub fn record_policy(&mut self, id: &str, version: u64) -> bool {
        let seen = self.policies.entry(id.to_owned()).or_insert(0);
        let newer = version > *seen;
        *seen = (*seen).max(version);
        newer
    }

    /// Records an accepted bundle; returns whether the state changed (only a higher version
    /// replaces the record).
    pub fn record(&mut self, agent: &str, key_id: &str, version: &semver::Version, manifest: &blake3::Hash) -> bool {
        let entry = self.accepted.entry(agent.to_owned()).or_default();
        let newer = match entry.get(key_id).and_then(|a| semver::Version::parse(&a.version).ok()) {
            Some(seen) => version.cmp_precedence(&seen) == Ordering::Greater,
            None => true,
        };
        if newer {
            entry.insert(
                key_id.to_owned(),
                Accepted { version: version.to_string(), manifest_blake3: manifest.to_hex().to_string() },
            );
        }
        newer
    }
}

/// A state file opened for one verification: the lock is held until this is dropped.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    pub state: State,
    _lock: File,
}

/// Why a state file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{path}: not a bundle state file: {why}; it is written only by `bundle verify --state`, so restore it from a backup rather than deleting it"
    )]
    Malformed { path: PathBuf, why: String },
}

impl crate::error::Coded for StateError {
    fn code(&self) -> crate::error::ErrorCode {
        match self {
            StateError::Io { .. } => crate::error::ErrorCode::IoError,
            StateError::Malformed { .. } => crate::error::ErrorCode::StateError,
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StateError + '_ {
    move |source| StateError::Io { path: path.to_path_buf(), source }
}

impl StateFile {
    /// Locks (waiting for any other holder) and reads the state file; a missing file is an
    /// empty state (the first run), any other problem an error.
    ///
    /// A symlink is resolved first, so that the lock and the atomic replace act on the file
    /// itself (beside it, not beside the link): two gates that reach one state file through
    /// different paths share it, and the link is never replaced by a copy.
    pub fn open(path: &Path) -> Result<StateFile, StateError> {
        let path = &resolve(path)?;
        // The one rule for outputs: missing parent folders are created.
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let lock_path = path.with_file_name(format!(".{name}.lock"));
        let lock =
            OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(io_err(&lock_path))?;
        lock.lock().map_err(io_err(&lock_path))?;
        let state = match regular_file::read(path, MAX_STATE_BYTES, Links::Follow) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| StateError::Malformed { path: path.to_path_buf(), why: "not UTF-8".to_owned() })?;
                State::parse(&text).map_err(|why| StateError::Malformed { path: path.to_path_buf(), why })?
            }
            Err(ReadError::NotFound) => State::new(),
            Err(e) => return Err(io_err(path)(e.into_io())),
        };
        Ok(StateFile { path: path.to_path_buf(), state, _lock: lock })
    }

    /// Records the policy version followed and writes the file atomically when it changed.
    pub fn record_policy(&mut self, id: &str, version: u64) -> Result<bool, StateError> {
        if !self.state.record_policy(id, version) {
            return Ok(false);
        }
        atomic::write(&self.path, self.state.to_text().as_bytes(), true).map_err(io_err(&self.path))?;
        Ok(true)
    }

    /// Records an accepted bundle and writes the file atomically when it changed.
    pub fn record(
        &mut self,
        agent: &str,
        key_id: &str,
        version: &semver::Version,
        manifest: &blake3::Hash,
    ) -> Result<bool, StateError> {
        if !self.state.record(agent, key_id, version, manifest) {
            return Ok(false);
        }
        atomic::write(&self.path, self.state.to_text().as_bytes(), true).map_err(io_err(&self.path))?;
        Ok(true)
    }
}

/// The state file's real path: symlinks (of the file, then of its folders) resolved, also
/// when the file a link names does not exist yet (the first run creates it there).
fn resolve(path: &Path) -> Result<PathBuf, StateError> {
    atomic::resolve_links(path).map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> semver::Version {
        semver::Version::parse(s).unwrap()
    }

    #[test]
    fn older_versions_and_equivocation_are_rollbacks() {
        let (a, b) = (blake3::hash(b"a"), blake3::hash(b"b"));
        let mut s = State::new();
        assert!(s.check("mailer", "8E081C7E25586CAE", &v("1.4.0"), &a).is_ok());
        assert!(s.record("mailer", "8E081C7E25586CAE", &v("1.4.0"), &a));
        assert!(s.check("mailer", "8E081C7E25586CAE", &v("1.4.0"), &a).is_ok());
        assert!(s.check("mailer", "8E081C7E25586CAE", &v("1.4.0+rebuild"), &a).is_ok());
        assert!(s.check("mailer", "8E081C7E25586CAE", &v("1.4.0"), &b).is_err());
        assert!(s.check("mailer", "8E081C7E25586CAE", &v("1.4.0-rc.1"), &b).is_err());
        assert!(s.check("mailer", "8E081C7E25586CAE", &v("1.3.9"), &b).is_err());
        assert!(s.check("mailer", "0000000000000001", &v("1.0.0"), &b).is_ok(), "per key");
        assert!(s.check("other", "8E081C7E25586CAE", &v("0.1.0"), &b).is_ok(), "per agent");
        assert!(!s.record("mailer", "8E081C7E25586CAE", &v("1.3.0"), &b), "never lowered");
        assert!(s.record("mailer", "8E081C7E25586CAE", &v("1.10.0"), &b));
        let again = State::parse(&s.to_text()).unwrap();
        assert_eq!(again, s);
    }

    #[test]
    fn malformed_state_is_refused() {
        let hash = "0".repeat(64);
        for bad in [
            "",
            "{}",
            r#"{"format": 2, "accepted": {}}"#,
            r#"{"format": 1, "accepted": {}, "extra": 1}"#,
            &format!(
                r#"{{"format": 1, "accepted": {{"Mailer": {{"8E081C7E25586CAE": {{"version": "1.0.0", "manifest_blake3": "{hash}"}}}}}}}}"#
            ),
            &format!(
                r#"{{"format": 1, "accepted": {{"m": {{"8e081c7e25586cae": {{"version": "1.0.0", "manifest_blake3": "{hash}"}}}}}}}}"#
            ),
            &format!(
                r#"{{"format": 1, "accepted": {{"m": {{"8E081C7E25586CAE": {{"version": "1.0", "manifest_blake3": "{hash}"}}}}}}}}"#
            ),
            r#"{"format": 1, "accepted": {"m": {"8E081C7E25586CAE": {"version": "1.0.0", "manifest_blake3": "x"}}}}"#,
        ] {
            assert!(State::parse(bad).is_err(), "{bad}");
        }
        assert!(State::parse(r#"{"format": 1, "accepted": {}}"#).is_ok());
    }

    #[test]
    fn duplicate_keys_are_malformed() {
        let hash = blake3::hash(b"m").to_hex();
        let entry = format!(r#"{{"version":"2.0.0","manifest_blake3":"{hash}"}}"#);
        let agent = format!(r#"{{"8E081C7E25586CAE":{entry}}}"#);
        let once = format!(r#"{{"format":1,"accepted":{{"mailer":{agent}}}}}"#);
        assert!(State::parse(&once).is_ok());
        let agent_twice = format!(r#"{{"format":1,"accepted":{{"mailer":{agent},"mailer":{{}}}}}}"#);
        assert!(State::parse(&agent_twice).unwrap_err().contains("duplicate key `mailer`"));
        let key_twice = format!(
            r#"{{"format":1,"accepted":{{"mailer":{{"8E081C7E25586CAE":{entry},"8E081C7E25586CAE":{entry}}}}}}}"#
        );
        assert!(State::parse(&key_twice).unwrap_err().contains("duplicate key"));
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_state_file_is_resolved_for_the_file_and_its_lock() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        let mut file = StateFile::open(&link).unwrap();
        assert!(file.record("mailer", "8E081C7E25586CAE", &v("1.0.0"), &blake3::hash(b"m")).unwrap());
        drop(file);
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
        let state = State::parse(&std::fs::read_to_string(&real).unwrap()).unwrap();
        assert!(state.accepted("mailer", "8E081C7E25586CAE").is_some());
        assert!(dir.path().join(".real.json.lock").exists());
        assert!(!dir.path().join(".link.json.lock").exists());
        // Opened again through the real path, it holds the same records under the same lock.
        let again = StateFile::open(&real).unwrap();
        assert!(again.state.accepted("mailer", "8E081C7E25586CAE").is_some());
    }
}
