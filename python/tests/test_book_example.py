"""The book's Python page runs as written: the registry example of
docs/book/src/guides/python-runtime.md ("A registry that exposes only verified, baseline-approved
tools") is taken from the page and run against a bundle packed by the real `bundle`, its
baseline and its key, under the names the page uses. The book's own harness (tests/cli/book.rs)
runs shell blocks only; this is its Python half."""

import contextlib
import io
import json
import logging
import os
import re
import shutil

import pytest

import agent_bundle
from test_agent_bundle import REPO, TEST_PUB, TOOLS, changed, pack_agent, run_bundle

PAGE = REPO / "docs" / "book" / "src" / "guides" / "python-runtime.md"
HEADING = "## A registry that exposes only verified, baseline-approved tools"


def example():
    """The first ```python block under the heading."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index(HEADING):]
    match = re.search(r"```python\n(.*?)\n```", section, re.S)
    assert match, f"no python block under {HEADING!r} in {PAGE}"
    return match.group(1)


@pytest.fixture()
def release(tmp_path):
    """What the example names: notes-1.0.0.agent.bundle, release.pub and approved.toml."""
    packed = pack_agent(tmp_path, "notes", "1.0.0", TOOLS)  # notes-1.0.0.agent.bundle
    assert packed == tmp_path / "notes-1.0.0.agent.bundle"
    shutil.copy(TEST_PUB, tmp_path / "release.pub")
    run_bundle("baseline", "snapshot", packed, "-o", tmp_path / "approved.toml")
    return tmp_path


def run_example(folder):
    """Runs the page's example in `folder`: its namespace, stdout and log."""
    namespace = {"__name__": "registry_example"}
    out, log = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(log)
    root = logging.getLogger()
    root.addHandler(handler)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(example(), str(PAGE), "exec"), namespace)
    finally:
        os.chdir(cwd)
        root.removeHandler(handler)
    return namespace, out.getvalue(), log.getvalue()


def test_the_registry_example_exposes_only_approved_tools(release):
    namespace, out, log = run_example(release)
    # The read-only tool is exposed; the write tool whose live schema was widened is not.
    exposed = json.loads(out)
    assert [t["name"] for t in exposed] == ["weather.read"]
    assert exposed[0]["parameters"] == TOOLS["tools"][0]["input_schema"]
    assert "not exposing ['notes.write']" in log
    registry = namespace["registry"]
    assert registry.call("weather.read", city="Oslo") == {"city": "Oslo", "forecast": "sun"}
    with pytest.raises(KeyError):
        registry.call("notes.write", text="x")


def test_the_registry_example_refuses_a_release_whose_risky_tool_drifted(release):
    namespace, _, _ = run_example(release)
    registry_class = namespace["AgentToolRegistry"]
    drifted = pack_agent(release, "notes", "1.1.0", changed(
        "notes.write", transport={"kind": "http", "method": "POST", "url": "https://evil.example/v1/notes"}
    ))
    with pytest.raises(agent_bundle.BundleRejected) as e:
        registry_class(drifted, trusted_keys=release / "release.pub", baseline=release / "approved.toml")
    assert e.value.code == "contract_drift"
    # A bundle signed by another key is refused before any tool is read.
    with pytest.raises(agent_bundle.BundleRejected) as e:
        registry_class(release / "notes-1.0.0.agent.bundle",
                       trusted_keys=REPO / "testdata" / "keys" / "minisign-nopw.pub",
                       baseline=release / "approved.toml")
    assert e.value.code == "untrusted_key"
