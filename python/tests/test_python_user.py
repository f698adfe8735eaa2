"""What a Python user expects of the package (issue 36): Python reprs, the package as the
exceptions' module, keyword defaults inspect can show, a version, and the CLI's messages."""

import inspect

import pytest

import agent_bundle
from test_agent_bundle import HOSTILE, TEST_KEY, TEST_PUB, TESTDATA


def test_reprs_are_python_not_rust():
    ok = agent_bundle.verify(HOSTILE / "ok.agent.bundle", trusted_keys=TEST_PUB)
    assert repr(ok).startswith("Verdict(ok=True, agent='"), repr(ok)
    refused = agent_bundle.verify(HOSTILE / "ok.agent.bundle", trusted_keys=TESTDATA / "keys" / "minisign-nopw.pub")
    assert repr(refused) == "Verdict(ok=False, code='untrusted_key')"
    assert "Some(" not in repr(refused.reasons) and "tool=None" in repr(refused.reasons[0]), repr(refused.reasons)
    with agent_bundle.open_verified(HOSTILE / "ok.agent.bundle", trusted_keys=TEST_PUB) as agent:
        assert repr(agent).startswith("VerifiedBundle(agent='"), repr(agent)
        gate = agent.contract_gate(contract_enforcement="warn")
        assert repr(gate) == "ContractGate(contract_enforcement='warn')"
        assert repr(gate.check([])).startswith("DriftReport(ok=True, drift=[]"), repr(gate.check([]))
    assert repr(agent) == "VerifiedBundle(closed)"


def test_exceptions_live_in_the_package_and_keywords_have_real_defaults():
    for error in (agent_bundle.AgentBundleError, agent_bundle.BundleRejected, agent_bundle.VerificationError):
        assert error.__module__ == "agent_bundle", error.__module__
    for function in (agent_bundle.verify, agent_bundle.open_verified):
        parameters = inspect.signature(function).parameters
        assert parameters["cosignatures"].default is None
        assert parameters["attestations"].default is None
    assert agent_bundle.__version__ == "0.1.0"


def test_a_secret_key_given_as_trusted_keys_gets_the_message_the_cli_gives():
    with pytest.raises(agent_bundle.VerificationError) as e:
        agent_bundle.verify(HOSTILE / "ok.agent.bundle", trusted_keys=TEST_KEY)
    assert e.value.code == "key_error"
    assert "is a secret key, but verifying needs the public key: use" in str(e.value), str(e.value)
    assert "test.pub" in str(e.value)
