#!/usr/bin/env bash
# The Python package's tests (issue 28): build the abi3 wheel of python/ with maturin, install it
# into a clean venv, and run python/tests with pytest against the real `bundle` binary.
#
# usage: scripts/test-python.sh [PYTEST ARGS...]
# Needs python3 (>= 3.9) with venv; maturin and pytest are installed into venvs under cargo's
# target directory when the PATH has none.
set -euo pipefail
cd "$(dirname "$0")/.."

target=$(cargo metadata --format-version 1 --no-deps --locked | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
work="$target/python-test"
mkdir -p "$work"

# The binary the tests compare with.
cargo build --locked -q --bin bundle

maturin=$(command -v maturin || true)
if [ -z "$maturin" ]; then
  [ -x "$work/tools/bin/python3" ] || python3 -m venv "$work/tools"
  "$work/tools/bin/python3" -m pip install -q --disable-pip-version-check 'maturin>=1.5,<2'
  maturin="$work/tools/bin/maturin"
fi
rm -rf "$work/wheels"
# The dev profile (optimised crypto and compression, Cargo.toml), in the target folder the Rust
# tests already built: only the binding is compiled anew. The bench builds its own release wheel.
"$maturin" build --profile dev --locked -m python/Cargo.toml -o "$work/wheels"

# A clean venv each time: the wheel alone, plus pytest and mypy (pinned as in scripts/tools.txt).
mypy=$(awk '$1 == "pip" && $2 ~ /^mypy==/ { print $2 }' scripts/tools.txt)
rm -rf "$work/venv"
python3 -m venv "$work/venv"
"$work/venv/bin/python3" -m pip install -q --disable-pip-version-check "$work"/wheels/agent_bundle-*.whl pytest "$mypy"
# Run from outside the source tree, so that `import agent_bundle` is the installed wheel.
cd "$work"
# The type stubs: stubtest compares them with the built module (every name, signature and
# class), and a strictly typed program using the whole API must type-check with them.
# PEP 800's @disjoint_base is not marked (it needs typing_extensions at run time for 3.9).
"$work/venv/bin/python3" -m mypy.stubtest agent_bundle --ignore-disjoint-bases \
  --allowlist "$OLDPWD/python/stubtest-allowlist.txt"
"$work/venv/bin/python3" -m mypy --strict --no-incremental "$OLDPWD/python/typecheck/example.py"
BUNDLE_BIN="$target/debug/bundle" "$work/venv/bin/python3" -m pytest -q -rs "$OLDPWD/python/tests" "$@"
