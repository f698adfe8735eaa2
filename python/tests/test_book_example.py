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


# ---- every other Python block of the guides that uses the package ----

GUIDES = REPO / "docs" / "book" / "src" / "guides"
NOT_RUN = "<!-- Not run by the book's tests"


def package_blocks():
    """(page, line, code) of each ```python block of the guides that uses `agent_bundle`, is not
    marked not run (the HTML comment the book's harness reads, tests/cli/book.rs) and is not the
    registry example above; blocks without the package are run by the book's harness itself."""
    blocks = []
    for page in sorted(GUIDES.glob("*.md")):
        lines = page.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines):
            if line.strip() != "```python":
                continue
            end = lines.index("```", i + 1)
            code = "\n".join(lines[i + 1:end])
            # The paragraph just before the block starts with the marker.
            last = max(j for j in range(i) if lines[j].strip())
            first = max((j + 1 for j in range(last) if not lines[j].strip()), default=0)
            marked = lines[first].startswith(NOT_RUN)
            heading = next((l for l in reversed(lines[:i]) if l.startswith("## ")), "")
            if "agent_bundle" in code and not marked and heading != HEADING:
                blocks.append((page.name, i + 1, code))
    return blocks


def test_the_package_blocks_are_found():
    # python-runtime.md: "Verify", "Load only verified bytes" and "Open one file without reading
    # the rest" (the options block is marked).
    assert [(p, c.split("\n")[0]) for p, _, c in package_blocks()] == [
        ("python-runtime.md", "import agent_bundle"),
        ("python-runtime.md", 'with agent_bundle.open_verified("mailer-1.4.0.agent.bundle", trusted_keys="release.pub") as agent:'),
        ("python-runtime.md", 'with agent_bundle.open_verified("mailer-1.4.0.agent.bundle", trusted_keys="release.pub", lazy=True) as agent:'),
    ]


def mailer_in(folder):
    """What the blocks name, in `folder`: the example agent as mailer-1.4.0.agent.bundle,
    release.pub and the baseline approved.toml."""
    folder.mkdir(exist_ok=True)
    shutil.copytree(REPO / "testdata" / "agents" / "mailer", folder / "mailer")
    manifest = folder / "mailer" / "manifest.toml"
    manifest.write_text(re.sub(r'(?m)^version = ".*"$', 'version = "1.4.0"', manifest.read_text(), count=1))
    run_bundle("pack", folder / "mailer", "--key", REPO / "testdata" / "keys" / "test.key", "-o", folder)
    shutil.copy(TEST_PUB, folder / "release.pub")
    run_bundle("baseline", "snapshot", folder / "mailer-1.4.0.agent.bundle", "-o", folder / "approved.toml")
    return folder


@pytest.fixture()
def mailer_release(tmp_path):
    return mailer_in(tmp_path)


@pytest.mark.parametrize("page,line,code", package_blocks(), ids=lambda v: str(v)[:40])
def test_a_package_block_of_the_guides_runs_as_written(mailer_release, page, line, code):
    cwd = os.getcwd()
    os.chdir(mailer_release)
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            # As after the page's first block, `import agent_bundle`.
            exec(compile(code, f"{GUIDES / page}:{line}", "exec"), {"__name__": "book_block", "agent_bundle": agent_bundle})
    finally:
        os.chdir(cwd)
    if "print(verdict.agent, verdict.version" in code:
        assert out.getvalue().split("\n")[0].startswith("mailer 1.4.0 "), out.getvalue()


def test_the_registry_example_serves_the_example_agent_whose_tools_use_schema_references(release):
    """testdata/agents/mailer names its schemas as `schema:` references, which resolve in the
    verified bundle's files (a baseline holds none)."""
    namespace, _, _ = run_example(release)
    mailer = mailer_in(release / "mailer-release")
    registry = namespace["AgentToolRegistry"](
        mailer / "mailer-1.4.0.agent.bundle", trusted_keys=mailer / "release.pub", baseline=mailer / "approved.toml"
    )
    for tool_id in registry.definitions:
        registry.register(tool_id, lambda **kw: kw)
    assert sorted(t["name"] for t in registry.exposed()) == sorted(registry.definitions)
    assert any("schema:" in json.dumps(t["parameters"]) for t in registry.exposed())
    registry.close()
