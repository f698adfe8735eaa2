//! `bundle verify`: the deployment gate over one bundle, read through the one way in
//! ([`super::input`]), nothing written.

use crate::bundle::verify::Discard;
use crate::ops::gate::{Gate, GateError, Verdict};
use crate::ops::input::BundleSource;
use crate::progress::Progress;

/// Judges the bundle `source` names with `gate`. A bundle that cannot be read is an error; a
/// registry artifact refused before its bundle is read (its attestations included) is a
/// [`Verdict::Refused`].
pub fn verify(source: &BundleSource, gate: Gate, progress: &dyn Progress) -> Result<Verdict, GateError> {
    match source.open(progress, &gate.wanted())? {
        Ok(input) => gate.judge(input, &mut Discard),
        Err(rejection) => Ok(Verdict::refused(rejection)),
    }
}
