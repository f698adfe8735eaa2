"""The options of `bundle verify` beyond trusted keys, through the wheel: a trust policy (file or
text, updates, co-signatures), attestation requirements (provenance, its source and builder),
and a keyless (Sigstore) signer. Each case is judged by the wheel and by the real `bundle verify
--format json` on the same inputs, and must get the same code and the same details."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import agent_bundle
from agent_bundle import BundleRejected, Keyless, TrustPolicy, VerificationError

from test_agent_bundle import TESTDATA, TEST_KEY, TEST_PUB, run_bundle

TEAM = ["alice", "bob", "carol"]
TWO_KEYS = '[[rule]]\nagents = ["mail*"]\nthreshold = 2\n'


def cli(path, *args):
    """`bundle verify PATH ARGS --format json`: (code, exit status, document)."""
    result = run_bundle("verify", path, "--format", "json", *args, check=False)
    assert result.returncode in (0, 1, 2), result.stderr
    doc = json.loads(result.stdout)
    return doc["code"], result.returncode, doc


def public_line(pub):
    return pub.read_text(encoding="utf-8").splitlines()[1]


def policy_text(folder, version=1, rules=TWO_KEYS):
    signers = "".join(
        f'[[signer]]\nname = "{n}"\npublic_key = "{public_line(folder / (n + ".pub"))}"\n'
        f'roles = ["{"security" if n == "bob" else "release"}"]\n\n'
        for n in TEAM
    )
    return (
        f'format = 1\nid = "acme"\nversion = {version}\nexpires = 2099-01-01T00:00:00Z\n\n'
        f'[root]\nthreshold = 2\nsigners = ["alice", "bob", "carol"]\n\n{signers}{rules}'
    )


@pytest.fixture()
def team(tmp_path):
    """Keys alice, bob, carol; the mailer packed by alice; a policy needing 2 of them, signed by
    alice and bob (its root threshold)."""
    for name in TEAM:
        run_bundle("keygen", tmp_path / name)
    shutil.copytree(TESTDATA / "agents" / "mailer", tmp_path / "mailer")
    bundle = tmp_path / "mailer.agent.bundle"
    run_bundle("pack", tmp_path / "mailer", "--key", tmp_path / "alice.key", "-o", bundle)
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(tmp_path), encoding="utf-8")
    for signer in ("alice", "bob"):
        run_bundle("trust", "sign", policy, "--key", tmp_path / f"{signer}.key")
    return tmp_path, bundle, policy


def test_a_trust_policy_threshold_not_met_then_met_after_a_cosign(team):
    folder, bundle, policy = team
    verdict = agent_bundle.verify(bundle, trust_policy=policy)
    code, status, doc = cli(bundle, "--trust-policy", policy)
    assert (verdict.code, code, status) == ("threshold_not_met", "threshold_not_met", 1)
    assert verdict.signers == doc["signers"]
    rule = verdict.signers["rules"][0]
    assert (rule["needed"], rule["counted"], rule["met"]) == (2, 1, False)
    assert [s["status"] for s in verdict.signers["signatures"]] == ["counted"]
    with pytest.raises(BundleRejected) as e:
        agent_bundle.open_verified(bundle, trust_policy=policy)
    assert e.value.code == "threshold_not_met"

    # A second key co-signs: BUNDLE.cosig beside the file is read, as by the command line.
    run_bundle("cosign", bundle, "--key", folder / "carol.key", "--trust-policy", policy)
    verdict = agent_bundle.verify(bundle, trust_policy=TrustPolicy.read(policy))
    code, status, doc = cli(bundle, "--trust-policy", policy)
    assert (verdict.ok, code, status) == (True, None, 0)
    assert verdict.signers == doc["signers"]
    assert [(s["signer"], s["status"]) for s in verdict.signers["signatures"]] == [
        ("alice", "counted"),
        ("carol", "counted"),
    ]
    assert verdict.signers["rules"][0]["met"] is True
    with agent_bundle.open_verified(bundle, trust_policy=policy) as agent:
        assert agent.verdict.signers["accepted"] is True

    # Bytes have nothing beside them: the co-signatures are named, or the threshold is not met.
    data = bundle.read_bytes()
    assert agent_bundle.verify(data, trust_policy=policy).code == "threshold_not_met"
    cosig = Path(str(bundle) + ".cosig")
    assert agent_bundle.verify(data, trust_policy=policy, cosignatures=[cosig]).ok


def test_a_trust_policy_given_as_text_is_judged_like_the_file(team):
    folder, bundle, policy = team
    signatures = Path(str(policy) + ".minisigs").read_text(encoding="utf-8")
    parsed = TrustPolicy.parse(policy.read_text(encoding="utf-8"), signatures)
    assert (parsed.id, parsed.version) == ("acme", 1)
    assert agent_bundle.verify(bundle, trust_policy=parsed).code == "threshold_not_met"
    # Without its root signatures the policy is not trusted, so no bundle is.
    unsigned = TrustPolicy.parse(policy.read_text(encoding="utf-8"))
    verdict = agent_bundle.verify(bundle, trust_policy=unsigned)
    bare = folder / "unsigned.toml"
    shutil.copy(policy, bare)
    code, status, _ = cli(bundle, "--trust-policy", bare)
    assert (verdict.code, code, status) == ("policy_untrusted", "policy_untrusted", 1)


def test_a_policy_update_is_followed_from_the_pinned_version(team):
    folder, bundle, policy = team
    one_key = '[[rule]]\nagents = ["mail*"]\nthreshold = 1\n'
    update = folder / "policy-v2.toml"
    update.write_text(policy_text(folder, version=2, rules=one_key), encoding="utf-8")
    for signer in ("alice", "bob"):
        run_bundle("trust", "sign", update, "--key", folder / f"{signer}.key")
    verdict = agent_bundle.verify(bundle, trust_policy=policy, policy_updates=[update])
    code, status, doc = cli(bundle, "--trust-policy", policy, "--policy-update", update)
    assert (verdict.ok, code, status) == (True, None, 0)
    assert verdict.signers["policy_version"] == doc["signers"]["policy_version"] == 2


def test_a_malformed_trust_policy_stops_the_gate_with_the_clis_code(team):
    folder, bundle, _ = team
    bad = folder / "bad.toml"
    bad.write_text("format = 1\nid = 3\n", encoding="utf-8")
    with pytest.raises(VerificationError) as e:
        agent_bundle.verify(bundle, trust_policy=bad)
    code, status, _ = cli(bundle, "--trust-policy", bad)
    assert (e.value.code, code, status) == ("policy_error", "policy_error", 2)
    with pytest.raises(VerificationError) as e:
        TrustPolicy.parse("format = 1\n")
    assert e.value.code == "policy_error"


def test_keys_and_a_policy_are_exclusive_and_one_is_required(team):
    _, bundle, policy = team
    with pytest.raises(ValueError):
        agent_bundle.verify(bundle, trusted_keys=TEST_PUB, trust_policy=policy)
    with pytest.raises(TypeError):
        agent_bundle.verify(bundle)
    with pytest.raises(ValueError):
        agent_bundle.verify(bundle, trusted_keys=TEST_PUB, cosignatures=[policy])
    # A policy names the root its models' identities are judged by; a second one is refused,
    # as `--trust-policy` with `--trusted-root` is.
    root = TESTDATA / "sigstore" / "trusted_root.production.json"
    with pytest.raises(VerificationError) as e:
        agent_bundle.verify(bundle, trust_policy=policy, models_trusted_root=root)
    code, status, _ = cli(bundle, "--trust-policy", policy, "--trusted-root", root)
    assert (e.value.code, code, status) == ("usage", "usage", 2)


@pytest.fixture()
def attested(tmp_path):
    """The mailer packed with --attest: provenance and contract attestations beside it."""
    shutil.copytree(TESTDATA / "agents" / "mailer", tmp_path / "mailer")
    bundle = tmp_path / "m.agent.bundle"
    run_bundle("pack", tmp_path / "mailer", "--attest", "--key", TEST_KEY, "-o", bundle)
    return bundle


PROVENANCE = ".provenance.sigstore.json"
BUILDER = "https://agent-bundle.dev/builders/local/v1"


def test_required_provenance_passes_when_present_and_is_attestation_missing_when_not(attested):
    verdict = agent_bundle.verify(attested, trusted_keys=TEST_PUB, require_provenance=True, builder_id=BUILDER)
    code, status, doc = cli(attested, "--key", TEST_PUB, "--require-provenance", "--builder-id", BUILDER)
    assert (verdict.ok, code, status) == (True, None, 0)
    assert verdict.attestations == doc["attestations"]
    assert [a["verdict"] for a in verdict.attestations] == ["ok", "ok"]

    verdict = agent_bundle.verify(attested, trusted_keys=TEST_PUB, builder_id="https://ci.example/other")
    code, status, doc = cli(attested, "--key", TEST_PUB, "--builder-id", "https://ci.example/other")
    assert (verdict.code, code, status) == ("provenance_mismatch", "provenance_mismatch", 1)
    assert verdict.attestations == doc["attestations"]
    # The message names what is required, not a flag of the command line.
    assert "builder id" in verdict.reasons[0].message and "--builder-id" not in verdict.reasons[0].message

    # Not discovered: required, so refused, exactly as --no-discover-attestations.
    verdict = agent_bundle.verify(attested, trusted_keys=TEST_PUB, require_provenance=True, discover_attestations=False)
    code, status, _ = cli(attested, "--key", TEST_PUB, "--require-provenance", "--no-discover-attestations")
    assert (verdict.code, code, status) == ("attestation_missing", "attestation_missing", 1)

    # Moved away: missing; named, found again (also for bytes, which have nothing beside them).
    elsewhere = attested.parent / "elsewhere.json"
    os.rename(str(attested) + PROVENANCE, elsewhere)
    verdict = agent_bundle.verify(attested, trusted_keys=TEST_PUB, require_provenance=True)
    code, status, _ = cli(attested, "--key", TEST_PUB, "--require-provenance")
    assert (verdict.code, code, status) == ("attestation_missing", "attestation_missing", 1)
    with pytest.raises(BundleRejected) as e:
        agent_bundle.open_verified(attested, trusted_keys=TEST_PUB, require_provenance=True)
    assert e.value.code == "attestation_missing"
    assert agent_bundle.verify(attested, trusted_keys=TEST_PUB, require_provenance=True, attestations=[elsewhere]).ok
    data = attested.read_bytes()
    assert agent_bundle.verify(data, trusted_keys=TEST_PUB, require_provenance=True).code == "attestation_missing"
    assert agent_bundle.verify(data, trusted_keys=TEST_PUB, require_provenance=True, attestations=[elsewhere]).ok


def test_an_attestation_by_an_untrusted_key_gets_the_clis_code(tmp_path):
    shutil.copytree(TESTDATA / "agents" / "mailer", tmp_path / "mailer")
    bundle = tmp_path / "m.agent.bundle"
    run_bundle("pack", tmp_path / "mailer", "--key", TEST_KEY, "-o", bundle)
    run_bundle("keygen", tmp_path / "stranger")
    run_bundle("attest", bundle, "--key", tmp_path / "stranger.key", "--from", tmp_path / "mailer")
    verdict = agent_bundle.verify(bundle, trusted_keys=TEST_PUB, require_provenance=True)
    code, status, doc = cli(bundle, "--key", TEST_PUB, "--require-provenance")
    assert (verdict.code, status) == (code, 1)
    assert code is not None
    assert verdict.attestations == doc["attestations"]
    # Trusting the stranger too, the attestations count.
    both = [TEST_PUB, tmp_path / "stranger.pub"]
    verdict = agent_bundle.verify(bundle, trusted_keys=both, require_provenance=True)
    assert verdict.ok
    assert cli(bundle, "--key", TEST_PUB, "--key", tmp_path / "stranger.pub", "--require-provenance")[0] is None


WORKFLOW = "https://github.com/acme/agents/.github/workflows/release.yml@refs/tags/v1.0.0"
ACTIONS = "https://token.actions.githubusercontent.com"


def signing_python():
    """A Python with `cryptography` for the test Sigstore instance (testdata/sigstore)."""
    for candidate in (sys.executable, shutil.which("python3")):
        if candidate and subprocess.run([candidate, "-c", "import cryptography"], capture_output=True).returncode == 0:
            return candidate
    if os.environ.get("BUNDLE_REQUIRE_TOOLS"):
        pytest.fail("python `cryptography` is required (BUNDLE_REQUIRE_TOOLS is set)")
    # Counted in scripts/test's summary, like the Rust tests' skips (tests/cli/support.rs).
    log = os.environ.get("BUNDLE_SKIP_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write("python module cryptography\tpip install cryptography\tpython: keyless cases\n")
    pytest.skip("python module cryptography missing (pip install cryptography)")


@pytest.fixture()
def keyless_signed(tmp_path):
    """The mailer, signed keylessly by our own test Sigstore instance with GitHub claims."""
    shutil.copytree(TESTDATA / "agents" / "mailer", tmp_path / "mailer")
    bundle = tmp_path / "m.agent.bundle"
    run_bundle("pack", tmp_path / "mailer", "--key", TEST_KEY, "-o", bundle)
    claims = ["12=https://github.com/acme/agents", "14=refs/tags/v1.0.0", "20=push", "11=github-hosted"]
    subprocess.run(
        [signing_python(), TESTDATA / "sigstore" / "test_instance.py", bundle, tmp_path, WORKFLOW, ACTIONS, *claims],
        check=True,
        capture_output=True,
    )
    return bundle, tmp_path / "artifact.sigstore.json", tmp_path / "trusted_root.json"


def test_a_keyless_signer_is_judged_like_bundle_verify_sigstore(keyless_signed):
    bundle, sig, root = keyless_signed
    flags = ["--key", TEST_PUB, "--sigstore", sig, "--trusted-root", root]
    keyless = Keyless(sig, root, identity=WORKFLOW, issuer=ACTIONS, github_workflow_repository="acme/agents",
                      github_workflow_ref="refs/tags/v1.0.0", runner_environment="github-hosted")
    verdict = agent_bundle.verify(bundle, trusted_keys=TEST_PUB, keyless=keyless)
    code, status, doc = cli(bundle, *flags, "--certificate-identity", WORKFLOW, "--certificate-oidc-issuer", ACTIONS,
                            "--certificate-github-workflow-repository", "acme/agents",
                            "--certificate-github-workflow-ref", "refs/tags/v1.0.0",
                            "--certificate-runner-environment", "github-hosted")
    assert (verdict.ok, code, status) == (True, None, 0)
    assert (verdict.keyless["identity"], verdict.keyless["issuer"]) == (WORKFLOW, ACTIONS)
    assert {k: v for k, v in verdict.keyless.items() if k != "signed_at"} == {
        k: v for k, v in doc["keyless"].items() if k != "signed_at"
    }
    pattern = r"https://github\.com/acme/agents/\.github/workflows/release\.yml@refs/tags/v.*"
    assert agent_bundle.verify(bundle, trusted_keys=TEST_PUB,
                               keyless=Keyless(sig, root, identity_regexp=pattern, issuer=ACTIONS)).ok

    other = WORKFLOW.replace("release.yml", "other.yml")
    for keyless, args in [
        (Keyless(sig, root, identity=other, issuer=ACTIONS),
         ["--certificate-identity", other, "--certificate-oidc-issuer", ACTIONS]),
        (Keyless(sig, root, identity_regexp="https://github\\.com/acme/", issuer=ACTIONS),
         ["--certificate-identity-regexp", "https://github\\.com/acme/", "--certificate-oidc-issuer", ACTIONS]),
        (Keyless(sig, root, identity=WORKFLOW, issuer=ACTIONS, github_workflow_trigger="pull_request"),
         ["--certificate-identity", WORKFLOW, "--certificate-oidc-issuer", ACTIONS,
          "--certificate-github-workflow-trigger", "pull_request"]),
    ]:
        verdict = agent_bundle.verify(bundle, trusted_keys=TEST_PUB, keyless=keyless)
        code, status, _ = cli(bundle, *flags, *args)
        assert (verdict.code, code, status) == ("keyless_identity_mismatch", "keyless_identity_mismatch", 1), args
        with pytest.raises(BundleRejected):
            agent_bundle.open_verified(bundle, trusted_keys=TEST_PUB, keyless=keyless)


def test_a_keyless_requirement_that_cannot_be_judged_stops_the_gate_with_the_clis_code(keyless_signed):
    bundle, sig, root = keyless_signed
    flags = ["--key", TEST_PUB, "--sigstore", sig]
    issuer = ["--certificate-oidc-issuer", ACTIONS]
    # No identity is a usage error, never "any identity".
    with pytest.raises(VerificationError) as e:
        agent_bundle.verify(bundle, trusted_keys=TEST_PUB, keyless=Keyless(sig, root, issuer=ACTIONS))
    code, status, _ = cli(bundle, *flags, "--trusted-root", root, *issuer)
    assert (e.value.code, code, status) == ("usage", "usage", 2)
    # A trusted root that is not one, or is missing.
    bad = root.parent / "bad_root.json"
    bad.write_text("{}", encoding="utf-8")
    for path in (bad, root.parent / "missing.json"):
        with pytest.raises(VerificationError) as e:
            agent_bundle.verify(bundle, trusted_keys=TEST_PUB, keyless=Keyless(sig, path, identity=WORKFLOW, issuer=ACTIONS))
        code, status, _ = cli(bundle, *flags, "--trusted-root", path, "--certificate-identity", WORKFLOW, *issuer)
        assert (e.value.code, status) == (code, 2), path
    # A Sigstore bundle that is not one is judged and refused.
    sig.write_text("not json", encoding="utf-8")
    verdict = agent_bundle.verify(bundle, trusted_keys=TEST_PUB, keyless=Keyless(sig, root, identity=WORKFLOW, issuer=ACTIONS))
    code, status, _ = cli(bundle, *flags, "--trusted-root", root, "--certificate-identity", WORKFLOW, *issuer)
    assert (verdict.code, code, status) == ("keyless_malformed", "keyless_malformed", 1)
    # Both an exact identity and a pattern: the library's one constructor refuses, as the
    # command line refuses both flags (usage, exit 2).
    with pytest.raises(VerificationError) as e:
        Keyless(sig, root, identity=WORKFLOW, identity_regexp=".*", issuer=ACTIONS)
    assert e.value.code == "usage"


@pytest.fixture()
def identity_model(tmp_path):
    """The mailer with a vendor's model signed through Sigstore's public-good instance (the
    real signature of testdata/models/), its `[[models]]` entry naming the signer's identity,
    packed under the production trusted root."""
    agent = tmp_path / "mailer"
    shutil.copytree(TESTDATA / "agents" / "mailer", agent)
    shutil.copytree(TESTDATA / "models" / "v1.1.0-sigstore", agent / "models" / "vendor")
    with open(agent / "manifest.toml", "a", encoding="utf-8") as f:
        f.write('\n[[models]]\npath = "models/vendor"\nidentity = "stefanb@us.ibm.com"\n'
                'issuer = "https://sigstore.verify.ibm.com/oauth2"\n')
    run_bundle("lock", agent)
    root = TESTDATA / "sigstore" / "trusted_root.production.json"
    out = tmp_path / "m.agent.bundle"
    run_bundle("pack", agent, "--key", TEST_KEY, "--trusted-root", root, "-o", out)
    return out, root


def test_a_model_signed_with_a_sigstore_identity_is_judged_under_models_trusted_root(identity_model):
    bundle, root = identity_model
    # With the root: judged and accepted, by the wheel and by `bundle verify --trusted-root`.
    for given in (root, str(root)):
        verdict = agent_bundle.verify(bundle, trusted_keys=TEST_PUB, models_trusted_root=given)
        assert (verdict.ok, verdict.code) == (True, None)
    code, status, _ = cli(bundle, "--key", TEST_PUB, "--trusted-root", root)
    assert (code, status) == (None, 0)
    with agent_bundle.open_verified(bundle, trusted_keys=TEST_PUB, models_trusted_root=root) as agent:
        assert agent.verdict.ok
    # A lazy open cannot check a model's files (they are hashed whole): refused as a usage error.
    with pytest.raises(VerificationError) as e:
        agent_bundle.open_verified(bundle, trusted_keys=TEST_PUB, models_trusted_root=root, lazy=True)
    assert e.value.code == "usage"
    # Without it: refused, never skipped, with the CLI's code.
    verdict = agent_bundle.verify(bundle, trusted_keys=TEST_PUB)
    code, status, _ = cli(bundle, "--key", TEST_PUB)
    assert (verdict.ok, verdict.code, code, status) == (False, "model_trusted_root_missing", "model_trusted_root_missing", 1)
    with pytest.raises(BundleRejected) as e:
        agent_bundle.open_verified(bundle, trusted_keys=TEST_PUB)
    assert e.value.verdict.code == "model_trusted_root_missing"
    # A root that cannot be read stops the gate, as the command line does (exit 2).
    missing = root.parent / "missing_root.json"
    with pytest.raises(VerificationError) as e:
        agent_bundle.verify(bundle, trusted_keys=TEST_PUB, models_trusted_root=missing)
    code, status, _ = cli(bundle, "--key", TEST_PUB, "--trusted-root", missing)
    assert (e.value.code, status) == (code, 2)
