//! The deployment gate as the commands that run it (verify, unpack, pull, guard) take it from
//! their flags: the trusted keys or trust policy (`TrustArgs`), what the gate requires beyond a
//! signature (`GateArgs`), and the keyless requirement (`KeylessArgs`), mapped to one
//! `GateOptions` in one place, so that the four commands cannot come to judge differently.

use agent_bundle::ops::gate::{Gate, GateOptions};
use agent_bundle::trust::TrustedKeys;

use super::Global;
use super::args::{GateArgs, TrustArgs};
use super::keyless::KeylessArgs;
use super::keys::{load_policy, load_trust};

/// The gate's options from the flags, with `keys` already loaded from `trust` (verify needs
/// them before, for `--agent-card`).
pub fn options(
    keys: TrustedKeys,
    trust: &TrustArgs,
    gate: GateArgs,
    keyless: &KeylessArgs,
    global: Global,
) -> anyhow::Result<GateOptions> {
    let mut opts = gate.options(keys, load_policy(trust)?, global);
    keyless.apply(&mut opts)?;
    Ok(opts)
}

/// The gate, opened: a baseline or state file that cannot be read stops the command here,
/// before any bundle is read.
pub fn open(trust: &TrustArgs, gate: GateArgs, keyless: &KeylessArgs, global: Global) -> anyhow::Result<Gate> {
    Ok(Gate::open(options(load_trust(trust)?, trust, gate, keyless, global)?)?)
}
