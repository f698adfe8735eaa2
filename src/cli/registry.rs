//! The `oci://` inputs of `verify`, `inspect` and `unpack`, and the registry options they share
//! with `push` and `pull`.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_bundle::bundle::verify::{Discard, Rejection};
use agent_bundle::evidence::files::ARTIFACT_TYPES;
use agent_bundle::oci::artifact::BlobMismatch;
use agent_bundle::oci::{self, Reference};
use agent_bundle::ops::gate::{Gate, Verdict};
use agent_bundle::ops::pull::{rejection, rejection_for};

/// How to reach a registry.
#[derive(Debug, clap::Args)]
pub struct RegistryArgs {
    /// Talk to the registry over plain http, without TLS (a registry on a trusted network or
    /// loopback only). Never chosen automatically.
    #[arg(long)]
    pub plain_http: bool,
    /// Also trust the root certificates in this PEM file (a registry with a private CA);
    /// repeatable.
    #[arg(long = "ca-cert", value_name = "PEM")]
    pub ca_certs: Vec<PathBuf>,
}

impl RegistryArgs {
    /// The client options; the flags are usage errors without a registry reference.
    pub fn options(&self, reference: &Reference) -> anyhow::Result<oci::Options> {
        if self.plain_http && !self.ca_certs.is_empty() {
            anyhow::bail!(
                "--plain-http and --ca-cert exclude each other: a plain-http registry has no certificate ({reference})"
            );
        }
        Ok(oci::Options { plain_http: self.plain_http, ca_certs: self.ca_certs.clone(), chunk_size: None })
    }

    /// For a file input: the registry flags make no sense there.
    pub fn refuse_for_file(&self, input: &Path) -> anyhow::Result<()> {
        if self.plain_http || !self.ca_certs.is_empty() {
            anyhow::bail!(
                "--plain-http and --ca-cert apply to registry references (oci://…), not to the file {}",
                input.display()
            );
        }
        Ok(())
    }
}

/// The registry reference `input` names, if it starts with `oci://`.
pub fn reference(input: &Path) -> anyhow::Result<Option<Reference>> {
    let Some(text) = input.to_str().filter(|t| oci::reference::is_reference(t)) else { return Ok(None) };
    Reference::parse(text).map(Some).map_err(anyhow::Error::msg)
}

/// `bundle verify oci://…`: the deployment gate over the layer as it streams, nothing written.
pub fn verify(reference: &Reference, options: &oci::Options, mut gate: Gate) -> anyhow::Result<Verdict> {
    let label = PathBuf::from(reference.to_string());
    let before = |sha256: &str, fetched| gate.before_layer(sha256, fetched);
    let layer = match oci::open_layer_judged(reference, options, &ARTIFACT_TYPES, before) {
        Ok(Ok(l)) => l,
        Ok(Err(rejection)) => return Ok(Verdict::Refused { rejection, baseline: None }),
        Err(e) => return Ok(Verdict::Refused { rejection: rejection(&e), baseline: None }),
    };
    let fault = layer.reader.mismatch();
    let input = BufReader::with_capacity(1 << 20, layer.reader);
    let verdict = gate.run(input, &label, &mut Discard)?;
    Ok(with_fault(reference, verdict, &fault))
}

/// A verdict over a layer stream, with the stream's own fault (a blob that is not the
/// descriptor's, or a failed transfer) taking precedence over what the gate made of the bytes.
/// The gate passes only a stream it read to its end, where the digest is checked, so a fault
/// never comes with a `Passed`.
pub fn with_fault(reference: &Reference, verdict: Verdict, fault: &Arc<Mutex<Option<BlobMismatch>>>) -> Verdict {
    let Some(fault) = fault.lock().unwrap_or_else(|p| p.into_inner()).clone() else { return verdict };
    let earlier = match verdict {
        Verdict::Refused { rejection, .. } => Some(rejection),
        Verdict::Passed { .. } => None,
    };
    Verdict::Refused { rejection: blob_mismatch(reference, &fault, earlier), baseline: None }
}

/// The rejection for a fault of the layer stream (`blob_mismatch`, or `io_error` for a failed
/// transfer), keeping what the gate learned of the agent.
pub fn blob_mismatch(reference: &Reference, fault: &BlobMismatch, earlier: Option<Rejection>) -> Rejection {
    let mut r = rejection_for(reference, fault);
    if let Some(e) = earlier {
        r.agent = e.agent;
        r.key_id = e.key_id;
    }
    r
}
