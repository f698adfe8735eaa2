"""Type stubs of the native module (agent_bundle._native); agent_bundle re-exports all of it."""

import datetime
import os
from typing import Any, Dict, Iterable, Iterator, List, Literal, Mapping, Optional, Sequence, Tuple, Union, final, overload

_Path = Union[str, "os.PathLike[str]"]
_Keys = Union["TrustedKeys", _Path, Sequence[Union["TrustedKeys", _Path]]]
_Time = Union[datetime.datetime, float, int]
_ToolDef = Union[str, Mapping[str, Any]]

__version__: str

class AgentBundleError(Exception):
    """Base class: every error of this package carries a stable ``code``."""

    code: str

class BundleRejected(AgentBundleError):
    """The bundle was judged and refused; ``code`` is its reason code."""

    verdict: "Verdict"

class ContractDrift(AgentBundleError):
    """A risky tool's live contract is not the signed or approved one (code ``contract_drift``)."""

    report: "DriftReport"

class VerificationError(AgentBundleError):
    """No judgement could be made: ``io_error``, ``usage``, ``key_error``, ``state_error`` or
    ``policy_error``."""

class InvalidTool(AgentBundleError):
    """A tool definition that is not a tools.json tool (code ``invalid_tool``)."""

@final
class TrustedKeys:
    """The keys a bundle must be signed by (a minisign public key or a trusted-keys file)."""

    @staticmethod
    def parse(text: str) -> "TrustedKeys": ...
    @staticmethod
    def read(path: _Path) -> "TrustedKeys": ...

@final
class TrustPolicy:
    """A signed trust policy (``bundle verify --trust-policy``): read, not yet trusted; the gate
    checks its root signatures."""

    @staticmethod
    def read(path: _Path) -> "TrustPolicy":
        """The policy file and its signatures beside it (``FILE.minisigs``)."""
    @staticmethod
    def parse(policy: str, signatures: str = "") -> "TrustPolicy":
        """The policy's TOML text and the text of its signatures file ("" for none)."""
    @property
    def id(self) -> str: ...
    @property
    def version(self) -> int: ...

@final
class Keyless:
    """A keyless (Sigstore) signature the bundle file must carry (``--sigstore``), judged offline
    against ``trusted_root``. An identity and an issuer are required, each exactly or as a
    pattern that must match the whole value, not both; the GitHub workflow claims are optional.
    Rules that break this raise ``VerificationError`` with code ``usage`` (as the command line
    exits 2 with ``usage``)."""

    def __new__(
        cls,
        sigstore_bundle: _Path,
        trusted_root: _Path,
        *,
        identity: Optional[str] = None,
        identity_regexp: Optional[str] = None,
        issuer: Optional[str] = None,
        issuer_regexp: Optional[str] = None,
        github_workflow_repository: Optional[str] = None,
        github_workflow_ref: Optional[str] = None,
        github_workflow_sha: Optional[str] = None,
        github_workflow_trigger: Optional[str] = None,
        github_workflow_name: Optional[str] = None,
        runner_environment: Optional[str] = None,
    ) -> "Keyless": ...

_Policy = Union[TrustPolicy, _Path]

@final
class Reason:
    """One finding: why a bundle is refused, or a warning."""

    @property
    def code(self) -> str: ...
    @property
    def path(self) -> Optional[str]: ...
    @property
    def tool(self) -> Optional[str]: ...
    @property
    def message(self) -> str: ...

@final
class Tool:
    """A tool's contract: risk class (``["read-only"]`` or some of ``write-capable``,
    ``network``, ``secret-using``, ``destructive``) and BLAKE3 fingerprint."""

    @property
    def id(self) -> str: ...
    @property
    def risk(self) -> List[str]: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def contract(self) -> str:
        """The contract document in RFC 8785 canonical JSON (the fingerprinted bytes)."""

@final
class Verdict:
    """The gate's judgement of one bundle."""

    @property
    def ok(self) -> bool: ...
    @property
    def code(self) -> Optional[str]:
        """The reason code of a refusal (as ``bundle verify --format json``); None when ok."""
    @property
    def reasons(self) -> List[Reason]: ...
    @property
    def warnings(self) -> List[Reason]: ...
    @property
    def agent(self) -> Optional[str]: ...
    @property
    def version(self) -> Optional[str]: ...
    @property
    def signer(self) -> Optional[str]:
        """The signing key id (16 hex digits)."""
    @property
    def tools(self) -> List[Tool]: ...
    @property
    def files(self) -> List[str]: ...
    @property
    def signers(self) -> Optional[Dict[str, Any]]:
        """Under a trust policy: ``policy``, ``policy_version``, ``signatures`` (each with
        ``source``, ``key_id``, ``signer``, ``roles``, ``status``, ``counted``, ``why``),
        ``rules`` (each with ``rule``, ``needed``, ``counted``, ``roles``, ``met``) and
        ``accepted``; None without a policy."""
    @property
    def attestations(self) -> List[Dict[str, Any]]:
        """Every attestation judged: ``source``, ``predicate_type``, ``signers``,
        ``untrusted_signers``, ``subject_matches``, ``builder``, ``source_uri``, ``verdict``
        (``ok`` or a reason code), ``message``."""
    @property
    def keyless(self) -> Optional[Dict[str, Any]]:
        """The keyless signer that verified: ``file``, ``identity``, ``issuer``, ``signed_at``,
        ``kind``; None without one."""
    def to_dict(self) -> Dict[str, Any]:
        """The document ``bundle verify --format json`` prints."""
    def __bool__(self) -> bool: ...

@final
class VerifiedBundle:
    """A bundle that passed the gate; every read is served from the verified bytes."""

    @property
    def verdict(self) -> Verdict: ...
    @property
    def closed(self) -> bool: ...
    def paths(self) -> List[str]: ...
    def read(self, path: str) -> bytes: ...
    def read_text(self, path: str) -> str: ...
    def is_executable(self, path: str) -> bool: ...
    def files(self) -> List[Tuple[str, bytes]]: ...
    def contract_gate(self, *, contract_enforcement: str = "enforce") -> "ContractGate": ...
    def mcp_guard(self, server: str, *, on_drift: str = "block", check_results: bool = False) -> "McpGuard":
        """The judge of ``bundle guard`` for MCP server ``server`` (pins/<server>.mcp.json).
        Raises VerificationError (code ``mcp_not_pinned``) when the bundle has no pins for it."""
    def close(self) -> None: ...
    def __iter__(self) -> Iterator[Tuple[str, bytes]]: ...
    def __contains__(self, path: str, /) -> bool: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "VerifiedBundle": ...
    def __exit__(self, *args: object) -> Literal[False]:
        """Closes the bundle; never suppresses an exception."""

@final
class LazyVerifiedBundle:
    """A bundle whose signature and manifest passed the gate's checks at open
    (``open_verified(..., lazy=True)``); each read decodes only the frames of one file and
    returns it once its BLAKE3 is the signed one (``BundleRejected`` otherwise, with code
    ``digest_mismatch`` when the file changed since it was opened)."""

    @property
    def agent(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def signer(self) -> str: ...
    @property
    def seekable(self) -> bool:
        """Whether the bundle has a seek table (else each read decodes from its start)."""
    @property
    def closed(self) -> bool: ...
    def paths(self) -> List[str]:
        """The paths the signed manifest lists, in bundle order."""
    def read(self, path: str) -> bytes: ...
    def read_text(self, path: str) -> str: ...
    def size(self, path: str) -> int: ...
    def blake3(self, path: str) -> str: ...
    def is_executable(self, path: str) -> bool: ...
    def close(self) -> None: ...
    def __contains__(self, path: str, /) -> bool: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "LazyVerifiedBundle": ...
    def __exit__(self, *args: object) -> Literal[False]:
        """Closes the bundle file; never suppresses an exception."""

@final
class ToolDrift:
    """One tool whose live contract is not the reference one."""

    @property
    def tool(self) -> str: ...
    @property
    def new(self) -> bool: ...
    @property
    def risk(self) -> List[str]: ...
    @property
    def expected(self) -> Optional[str]: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def changes(self) -> List[str]: ...

@final
class DriftReport:
    @property
    def ok(self) -> bool: ...
    @property
    def drift(self) -> List[ToolDrift]: ...
    @property
    def warnings(self) -> List[ToolDrift]: ...
    @property
    def missing(self) -> List[str]: ...

class McpBlocked(AgentBundleError):
    """The MCP guard refused a list, a call or a result."""

    code: str
    rpc_code: Optional[int]
    tool: Optional[str]

@final
class McpGuard:
    """The judge of ``bundle guard`` in-process: the same decisions and codes as the proxy."""

    @property
    def pinned(self) -> List[str]: ...
    def filter_tools(self, result: Union[Dict[str, Any], List[Dict[str, Any]], str]) -> Dict[str, Any]:
        """``{"tools": [...], "decisions": [...]}``: the Tool objects to show, unchanged, and one
        decision per served tool. Raises McpBlocked for a list naming a tool twice."""
    def check_call(self, name: str, arguments: Optional[Dict[str, Any]] = None) -> None:
        """Raises McpBlocked (``mcp_tool_not_exposed``, ``mcp_arguments_invalid``, ...)."""
    def check_result(self, name: str, result: Dict[str, Any]) -> None:
        """Raises McpBlocked (``mcp_result_invalid``) with ``check_results=True``."""

@final
class ContractGate:
    """Live tool definitions against the signed (or approved) contracts."""

    def __new__(
        cls,
        reference: Union[VerifiedBundle, Verdict, _Path],
        *,
        contract_enforcement: str = "enforce",
        schemas_from: Optional[VerifiedBundle] = None,
    ) -> "ContractGate": ...
    def expected(self, tool: str) -> Optional[str]: ...
    def check(self, tools: Iterable[_ToolDef]) -> DriftReport:
        """Raises ContractDrift (with ``contract_enforcement="enforce"``) for drift of a risky
        tool; read-only drift is only reported in ``DriftReport.warnings``."""

def verify(
    bundle: Union[_Path, bytes],
    *,
    trusted_keys: Optional[_Keys] = None,
    trust_policy: Optional[_Policy] = None,
    policy_updates: Optional[Iterable[_Policy]] = None,
    cosignatures: Optional[Sequence[_Path]] = None,
    name: Optional[str] = None,
    min_version: Optional[str] = None,
    baseline: Optional[_Path] = None,
    state: Optional[_Path] = None,
    now: Optional[_Time] = None,
    attestations: Optional[Sequence[_Path]] = None,
    discover_attestations: bool = True,
    require_provenance: bool = False,
    source_repo: Optional[str] = None,
    source_ref: Optional[str] = None,
    builder_id: Optional[str] = None,
    keyless: Optional[Keyless] = None,
    models_trusted_root: Optional[_Path] = None,
) -> Verdict: ...
@overload
def open_verified(
    bundle: Union[_Path, bytes],
    *,
    trusted_keys: Optional[_Keys] = None,
    trust_policy: Optional[_Policy] = None,
    policy_updates: Optional[Iterable[_Policy]] = None,
    cosignatures: Optional[Sequence[_Path]] = None,
    name: Optional[str] = None,
    min_version: Optional[str] = None,
    baseline: Optional[_Path] = None,
    state: Optional[_Path] = None,
    now: Optional[_Time] = None,
    attestations: Optional[Sequence[_Path]] = None,
    discover_attestations: bool = True,
    require_provenance: bool = False,
    source_repo: Optional[str] = None,
    source_ref: Optional[str] = None,
    builder_id: Optional[str] = None,
    keyless: Optional[Keyless] = None,
    models_trusted_root: Optional[_Path] = None,
    max_loaded_bytes: Optional[int] = None,
    lazy: Literal[False] = False,
) -> VerifiedBundle: ...
@overload
def open_verified(
    bundle: Union[_Path, bytes],
    *,
    trusted_keys: Optional[_Keys] = None,
    trust_policy: Optional[_Policy] = None,
    policy_updates: Optional[Iterable[_Policy]] = None,
    cosignatures: Optional[Sequence[_Path]] = None,
    name: Optional[str] = None,
    min_version: Optional[str] = None,
    baseline: Optional[_Path] = None,
    state: Optional[_Path] = None,
    now: Optional[_Time] = None,
    attestations: Optional[Sequence[_Path]] = None,
    discover_attestations: bool = True,
    require_provenance: bool = False,
    source_repo: Optional[str] = None,
    source_ref: Optional[str] = None,
    builder_id: Optional[str] = None,
    keyless: Optional[Keyless] = None,
    models_trusted_root: Optional[_Path] = None,
    max_loaded_bytes: Optional[int] = None,
    lazy: Literal[True],
) -> LazyVerifiedBundle: ...
@overload
def open_verified(
    bundle: Union[_Path, bytes],
    *,
    trusted_keys: Optional[_Keys] = None,
    trust_policy: Optional[_Policy] = None,
    policy_updates: Optional[Iterable[_Policy]] = None,
    cosignatures: Optional[Sequence[_Path]] = None,
    name: Optional[str] = None,
    min_version: Optional[str] = None,
    baseline: Optional[_Path] = None,
    state: Optional[_Path] = None,
    now: Optional[_Time] = None,
    attestations: Optional[Sequence[_Path]] = None,
    discover_attestations: bool = True,
    require_provenance: bool = False,
    source_repo: Optional[str] = None,
    source_ref: Optional[str] = None,
    builder_id: Optional[str] = None,
    keyless: Optional[Keyless] = None,
    models_trusted_root: Optional[_Path] = None,
    max_loaded_bytes: Optional[int] = None,
    lazy: bool = False,
) -> Union[VerifiedBundle, LazyVerifiedBundle]: ...
def contract_fingerprint(tool: _ToolDef) -> Tool: ...
def reason_codes() -> Dict[str, str]: ...
