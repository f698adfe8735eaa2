//! `bundle cat`: one file of a bundle, held to its signed digest, without reading the rest
//! (with a seek table, only the frames that hold the file are decoded; see
//! [`crate::bundle::open`]).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::atomic::Output;
use crate::bundle::open::OpenBundle;
use crate::bundle::verify::{Expect, IoDirection, Refused, Trust, VerifyError};
use crate::timestamp::Timestamp;
use crate::trust::TrustedKeys;

/// The largest file `cat` holds in memory to write to standard output (its digest is checked
/// before the first byte goes out); larger files need an output file.
pub use crate::limits::MAX_CAT_MEMORY_BYTES as MAX_CAT_MEMORY;

/// Where the file goes.
pub enum Destination<'a> {
    /// Written once checked (held in memory up to [`MAX_CAT_MEMORY`]).
    Writer(&'a mut dyn Write),
    /// Written to a temp file beside this path and renamed over it once checked.
    File(&'a Path),
}

/// What `cat` found.
pub struct Catted {
    pub size: u64,
    /// Whether only the file's frames were decoded (the bundle has a seek table).
    pub seekable: bool,
    pub key_id: String,
    pub agent: (String, String),
}

/// Checks the signature of `bundle` with `keys` and its manifest (the agent name when `name`,
/// the expiry at `now`), then writes the file `path` to `to` once its bytes are the signed ones.
/// A refused bundle (or file) is `Ok(Err(..))`; an unlisted path, an unreadable bundle or an
/// output that cannot be written is an error.
pub fn cat(
    bundle: &Path,
    path: &str,
    keys: &TrustedKeys,
    name: Option<&str>,
    now: Timestamp,
    to: Destination<'_>,
) -> crate::Result<Result<Catted, Refused>> {
    let file = File::open(bundle).map_err(|e| crate::Error::io(bundle, e))?;
    let expect = Expect { name, now: Some(now), ..Expect::default() };
    let mut open = match OpenBundle::open(file, Trust::Keys(keys), &expect) {
        Ok(open) => open,
        Err(e) => return Ok(Err(e.refusal(bundle)?)),
    };
    let agent = (open.manifest.name.clone(), open.manifest.version.to_string());
    // A refusal names the agent and signer; a file that cannot be written names the output.
    let refused = |e: VerifyError, open: &OpenBundle, output: &Path| match e {
        VerifyError::Io(failed) if failed.direction == IoDirection::Write => {
            Err(crate::Error::io(output, failed.source))
        }
        e => {
            let mut r = e.refusal(bundle)?;
            r.key_id = Some(open.key_id.clone());
            r.agent = Some((open.manifest.name.clone(), open.manifest.version.to_string()));
            Ok(Err(r))
        }
    };
    let Some(size) = open.size(path) else {
        return Err(crate::Error::Usage(format!(
            "`{path}` is not a file of {} {} (the signed manifest does not list it)",
            agent.0, agent.1
        )));
    };
    match to {
        Destination::Writer(out) => {
            if size > MAX_CAT_MEMORY {
                return Err(crate::Error::Usage(format!(
                    "`{path}` is {size} bytes, more than the {MAX_CAT_MEMORY} cat holds to check before writing to standard output; use --output FILE"
                )));
            }
            let bytes = match open.read(path) {
                Ok(bytes) => bytes.unwrap_or_default(),
                Err(e) => return refused(e, &open, Path::new("standard output")),
            };
            out.write_all(&bytes).and_then(|()| out.flush()).map_err(|e| crate::Error::io("standard output", e))?;
        }
        Destination::File(target) => {
            let output = Output::new(target, "--output")?;
            let mut temp = output.temp()?;
            if let Err(e) = open.read_to(path, temp.as_file_mut()) {
                return refused(e, &open, target);
            }
            temp.as_file().sync_all().map_err(|e| crate::Error::io(target, e))?;
            output.commit(temp)?;
        }
    }
    Ok(Ok(Catted { size, seekable: open.seekable(), key_id: open.key_id.clone(), agent }))
}
