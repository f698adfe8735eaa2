"""Load only verified agent bundles.

``agent_bundle`` runs the deployment gate of ``bundle verify`` inside a Python runtime: one
streaming pass over a bundle (trusted signature, versions, expiry, rollback, every digest,
nothing missing, extra or unsafe, and with a baseline the release gate), with the same stable
reason codes, and the same options (trusted keys or a trust policy, attestation requirements, a
keyless signer, name, versions, clock, state, baseline). ``open_verified`` keeps every entry as it was verified, so the runtime never reads
the bundle's path again (with ``lazy=True`` it judges the signature and manifest only, and each
read decodes one file's frames and is held to its signed digest); ``ContractGate`` holds the tools a runtime is about to expose to the
contracts the bundle signed (or a baseline approved); ``VerifiedBundle.mcp_guard`` is the judge of
``bundle guard`` for a runtime that talks to MCP servers in-process.

The work is done by the Rust library (``agent_bundle::api``) with the GIL released.
"""

from ._native import (
    AgentBundleError,
    BundleRejected,
    ContractDrift,
    ContractGate,
    DriftReport,
    InvalidTool,
    Keyless,
    LazyVerifiedBundle,
    McpBlocked,
    McpGuard,
    Reason,
    Tool,
    ToolDrift,
    TrustPolicy,
    TrustedKeys,
    Verdict,
    VerificationError,
    VerifiedBundle,
    __version__,
    contract_fingerprint,
    open_verified,
    reason_codes,
    verify,
)

__all__ = [
    "__version__",
    "AgentBundleError",
    "BundleRejected",
    "ContractDrift",
    "ContractGate",
    "DriftReport",
    "InvalidTool",
    "Keyless",
    "LazyVerifiedBundle",
    "McpBlocked",
    "McpGuard",
    "Reason",
    "Tool",
    "ToolDrift",
    "TrustPolicy",
    "TrustedKeys",
    "Verdict",
    "VerificationError",
    "VerifiedBundle",
    "contract_fingerprint",
    "open_verified",
    "reason_codes",
    "verify",
]
