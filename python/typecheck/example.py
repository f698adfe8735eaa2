"""A program that uses every public name of agent_bundle as the book's Python guide does,
type-checked (never run) by ``mypy --strict`` in scripts/test-python.sh: the stubs must let a
strictly typed runtime use the package without a cast or an ignore, and ``assert_type`` pins
what each call returns. ``stubtest`` checks the same stubs against the built module."""

from typing import Any, Dict, List, Optional, Tuple, Union

from typing_extensions import assert_type

import agent_bundle
from agent_bundle import (
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
    TrustedKeys,
    TrustPolicy,
    Verdict,
    VerificationError,
    VerifiedBundle,
)


def gate(path: str) -> Optional[str]:
    keys = TrustedKeys.read("release.pub")
    verdict = agent_bundle.verify(path, trusted_keys=[keys, "more.pub"], name="mailer", now=1_700_000_000)
    assert_type(verdict, Verdict)
    assert_type(agent_bundle.verify(path, trusted_keys=keys, models_trusted_root="trusted_root.json"), Verdict)
    assert_type(verdict.ok, bool)
    assert_type(verdict.code, Optional[str])
    reasons: List[Reason] = verdict.reasons + verdict.warnings
    for r in reasons:
        assert_type(r.message, str)
        assert_type(r.path, Optional[str])
    for tool in verdict.tools:
        assert_type(tool, Tool)
        assert_type(tool.risk, List[str])
    assert_type(verdict.to_dict(), Dict[str, Any])
    assert_type(verdict.attestations, List[Dict[str, Any]])
    return verdict.code if not verdict else None


def under_a_policy(path: str) -> Verdict:
    policy = TrustPolicy.read("trust-policy.toml")
    assert_type(policy.version, int)
    newer = TrustPolicy.parse("format = 1", "")
    keyless = Keyless(
        path + ".sigstore.json",
        "trusted_root.json",
        identity="https://github.com/acme/agents/.github/workflows/release.yml@refs/tags/v1",
        issuer="https://token.actions.githubusercontent.com",
    )
    return agent_bundle.verify(
        path,
        trust_policy=policy,
        policy_updates=[newer, "trust-policy-v2.toml"],
        cosignatures=[path + ".cosig"],
        require_provenance=True,
        keyless=keyless,
        state="state.json",
    )


def load(path: str) -> Tuple[str, int]:
    try:
        with agent_bundle.open_verified(path, trusted_keys="release.pub", max_loaded_bytes=1 << 20) as agent:
            assert_type(agent, VerifiedBundle)
            prompt = agent.read_text("prompts/system.md")
            size = sum(len(data) for _, data in agent)
            assert_type("tools.json" in agent, bool)
            gate: ContractGate = agent.contract_gate(contract_enforcement="warn")
            report = gate.check([{"id": "mail.send"}, '{"id": "x"}'])
            assert_type(report, DriftReport)
            drift: List[ToolDrift] = report.drift
            guard: McpGuard = agent.mcp_guard("time", on_drift="warn")
            guard.check_call("get_time", {"tz": "UTC"})
            return prompt, size + len(drift)
    except BundleRejected as e:
        assert_type(e.verdict, Verdict)
        raise
    except (ContractDrift, McpBlocked, InvalidTool, VerificationError) as e:
        assert_type(e.code, str)
        raise
    except AgentBundleError:
        raise


def read_one(path: str) -> bytes:
    with agent_bundle.open_verified(path, trusted_keys="release.pub", discover_attestations=False, lazy=True) as lazy:
        assert_type(lazy, LazyVerifiedBundle)
        assert_type(lazy.seekable, bool)
        assert_type(lazy.blake3("tools.json"), str)
        listed: List[str] = lazy.paths()
        assert_type(lazy.read_text("tools.json"), str)
        return lazy.read(listed[0])


def either(path: str, lazy: bool) -> int:
    opened = agent_bundle.open_verified(path, trusted_keys="release.pub", lazy=lazy)
    assert_type(opened, Union[VerifiedBundle, LazyVerifiedBundle])
    return len(opened)


def contracts() -> Dict[str, str]:
    tool = agent_bundle.contract_fingerprint({"id": "mail.send"})
    assert_type(tool.fingerprint, str)
    standalone = ContractGate("mailer.agent.bundle", contract_enforcement="enforce")
    assert_type(standalone.expected("mail.send"), Optional[str])
    assert_type(agent_bundle.__version__, str)
    return agent_bundle.reason_codes()
