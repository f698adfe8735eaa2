#!/usr/bin/env python3
"""Benchmark bundle pack/verify against the hand-written pipeline and zstd itself.

usage: scripts/bench.py [--runs N] [--mib N] [--work DIR] [--big-mib N] [--only pack|verify|cat|many]
                       [--baseline BIN] [--many 1000,5000,20000]

Needs only this repository plus: cargo, python3, zstd, GNU tar, b3sum, minisign, taskset
(util-linux) and GNU time (/usr/bin/time). Builds the release binary (in cargo's target
directory, CARGO_TARGET_DIR respected), makes the synthetic agent with
scripts/bench/make-agent.py (cached in --work), then runs, alternating within each round so
that machine noise hits all of them alike:
  hand-pack.sh, bundle pack --locked, zstd -3 -T0 of the same tar, and the same tar through
  the zstd library bundle links (examples/zstd-floor.rs)                     (pack side)
  hand-verify.sh, bundle verify, bundle verify pinned to one CPU (taskset), zstd -dc of the
  bundle, the same bundle through the linked zstd library, and the least verify must do on
  one CPU (each frame read whole, decoded, its content hashed: zstd-floor
  --read-decode-hash, pinned) and the same on every CPU with each thread reading its own
  frames (zstd-floor --parallel)                                             (verify side)
and prints medians of wall, user and system time, context switches and peak memory, then the
ratios the targets are stated in, with the CPU model and the load average seen before each
round (other work on the machine skews wall times; CPU times and context switches less so).
Peers, each skipped with a visible note when not installed: b3sum over the agent's files, and
OpenSSF model_signing (PyPI model-signing + pyopenssl, ECDSA P-256 key made with openssl) sign
and verify of the same folder; found on PATH or in the tools venv of scripts/test
($BUNDLE_TOOLS_DIR/venv/bin, by default $HOME/.cache/agent-bundle/venv/bin).
Small-agent figures: bundle check over 100 copies of the rich example, and bundle verify of
its bundle. Incremental check (the stat cache, issue 29): bundle check of the agent cold
(BUNDLE_STAT_CACHE=off) and warm after touching one file. Many agents: bundle check of 1,000,
5,000 and 20,000 copies of the rich example (--many 1000,5000,20000; --many 0 skips), with
CPU, context switches and peak memory, beside reading their files with cat on every CPU
(--only many: these rows alone), and the instructions check executes per agent over 200 copies
(valgrind's cachegrind, user space; the count does not move with the host as times do; with
--baseline, that build's count beside it). With --big-mib, also verifies and packs a bundle of
that size to show memory stays flat, and times the incremental check on it.
With --baseline BIN (another build of bundle, e.g. of the commit before a change), its pack and
verify run in the same rounds, so that a before/after comparison sees the same machine noise.

scripts/bench.py --python [--runs N] [--mib N]: only verification of the bench bundle by the Python
package (agent_bundle.verify, the wheel built with maturin into a venv in the target directory)
beside `bundle verify`, alternating, with user CPU and peak RSS (issue 28: <= 1.05x the CLI,
peak memory within 5 MiB).

scripts/bench.py --guard [--runs N]: only the `bundle guard` rows (issue 34): judging a tools/list
answer of 100 tools (examples/guard-judge.rs, p99 over 2,000 answers; target <= 1 ms), and 1,000
tools/call round trips (scripts/bench/mcp-round-trips.py) to a local server directly and through
the guard, alternating, for the reference server mcp-server-time (target: guard <= 1.10x direct)
and, without a target, the test server testdata/mcp/hostile_server.py, which answers in about
0.1 ms doing nothing (its row shows the guard's fixed cost per call), with the guard's peak RSS
(target <= 20 MiB).

The full run ends with the registry rows (below) when docker-registry and the ORAS Python
client are installed, and says so in a NOTE when not.

scripts/bench.py --registry [--runs N] [--mib N]: only bundle push and pull+verify against
ORAS (Python) push and pull on a loopback docker-registry, with peak RSS (needs
docker-registry and `import oras.client`); also push and pull+verify of the same agent packed
with --attest, its provenance and contract attestations attached as referrers and judged at the
pull (--require-provenance).
"""
import argparse, json, os, re, shutil, statistics, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "scripts", "bench")
KEYS = os.path.join(REPO, "testdata", "keys")


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, **kw)


def refresh(path):
    """Drops `path`'s pages from the page cache (it is clean: every command is preceded by a
    sync) and reads it back, so that the next command finds it cached in pages just read, as a
    bundle just downloaded is."""
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        while f.read(1 << 20):
            pass


def timed(cmd):
    """Wall, user and system seconds, voluntary and involuntary context switches and max RSS
    (KiB) of a shell command, via GNU time. Dirty pages left by the previous command
    (hand-pack.sh and zstd do not fsync their output; bundle pack does) are flushed first,
    untimed, so that no command pays for another's writeback."""
    subprocess.run("sync", check=True)
    with tempfile.NamedTemporaryFile(mode="r") as t:
        start = time.perf_counter()
        subprocess.run(f"/usr/bin/time -f '%U %S %w %c %M' -o {t.name} sh -c '{cmd}'", shell=True, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        user, system, vol, invol, rss = t.read().strip().splitlines()[-1].split()
    return {"wall": wall, "user": float(user), "sys": float(system), "vcs": int(vol), "ics": int(invol),
            "rss": int(rss)}


def make_agent(path, mib, files):
    if not os.path.exists(os.path.join(path, "tools.json")):
        print(f"making a {mib} MiB agent in {path} ...", file=sys.stderr)
        sh(f"python3 {BENCH}/make-agent.py {path} --mib {mib} --files {files}")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def target_directory():
    """cargo's target directory for this repository (CARGO_TARGET_DIR and config respected)."""
    meta = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
                          cwd=REPO, check=True, capture_output=True).stdout
    return json.loads(meta)["target_directory"]


def load():
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--big-mib", type=int, default=0)
    ap.add_argument("--only", choices=["pack", "verify", "cat", "many"],
                    help="run only one side of the 1 GiB rows, or the cat rows, or the many-agents rows")
    ap.add_argument("--cat-mib", type=int, default=4096, help="agent size for the cat rows (1 MiB files; 0: none)")
    ap.add_argument("--work")
    ap.add_argument("--baseline", help="another bundle binary to time beside this one")
    ap.add_argument("--many", default="1000,5000,20000", help="agent counts for the many-agents rows (0: none)")
    a = ap.parse_args()

    sh(f"cd {REPO} && cargo build --release --locked -q && cargo build --release --locked -q --example zstd-floor")
    release = os.path.join(target_directory(), "release")
    floor = os.path.join(release, "examples", "zstd-floor")
    bundle = os.path.join(release, "bundle")
    w = a.work or os.path.join(target_directory(), "bench")
    os.makedirs(os.path.join(w, "at"), exist_ok=True)
    if a.only == "many":
        many_agents(bundle, w, [int(n) for n in a.many.split(",") if int(n) > 0], a.runs)
        instructions_per_agent(bundle, a.baseline, w)
        return
    agent = os.path.join(w, f"agent-{a.mib}")
    make_agent(agent, a.mib, 256)
    sh(f"{bundle} lock -q {agent}")
    tar = f"{w}/agent.tar"
    # hand-pack reads everything except manifest.txt; give it the same folder.
    sh(f"tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C {agent} -cf {tar} .")
    # The verify side reads the bundle pack writes; make one if only verify is timed.
    if a.only == "verify":
        sh(f"{bundle} pack -q {agent} --locked --key {KEYS}/test.key -o {w}/a.agent.bundle")
        sh(f"{BENCH}/hand-pack.sh {agent} {w}/hand {KEYS}/minisign-nopw.key")
    cpus = sorted(os.sched_getaffinity(0))
    pin = f"taskset -c {cpus[0]}"
    pinned = f"bundle verify ({pin})"
    floor_pinned = f"read + decode + BLAKE3 floor ({pin})"
    floor_all = "read + decode + BLAKE3 floor (every CPU)"
    pack_ops = {
        "hand-pack.sh": f"{BENCH}/hand-pack.sh {agent} {w}/hand {KEYS}/minisign-nopw.key",
        "bundle pack --locked": f"{bundle} pack -q {agent} --locked --key {KEYS}/test.key -o {w}/a.agent.bundle",
        # Issue 39: the same to a path where no bundle is (removed untimed before): the row
        # above packs over its previous output and so also compares it with the new bytes.
        "bundle pack --locked (new path)": (
            f"{bundle} pack -q {agent} --locked --key {KEYS}/test.key -o {w}/fresh.agent.bundle"),
        # The same, also writing the signed attestations (SHA-256 of the bundle taken while writing).
        "bundle pack --locked --attest": (
            f"{bundle} pack -q {agent} --locked --attest --key {KEYS}/test.key -o {w}/at/a.agent.bundle"),
        "zstd -3 -T0 (tar)": f"zstd -q -3 -T0 -f {tar} -o {w}/tar.zst",
        # The same, then its output made durable as pack makes the bundle (fsync before rename):
        # on a slow disk the difference is the disk, not the compressor.
        "zstd -3 -T0 (tar), then fsync": f"zstd -q -3 -T0 -f {tar} -o {w}/tar.zst && sync {w}/tar.zst",
        "same zstd library (tar)": f"{floor} < {tar} > {w}/floor.zst",
    }
    peers = peer_commands(agent, w)
    pack_ops.update(peers["pack"])
    if a.baseline:
        pack_ops["baseline: bundle pack --locked"] = (
            f"{a.baseline} pack -q {agent} --locked --key {KEYS}/test.key -o {w}/b.agent.bundle")
    verify_ops = {
        "hand-verify.sh": f"{BENCH}/hand-verify.sh {w}/hand {KEYS}/minisign-nopw.pub",
        "bundle verify": f"{bundle} verify -q {w}/a.agent.bundle --key {KEYS}/test.pub",
        pinned: f"{pin} {bundle} verify -q {w}/a.agent.bundle --key {KEYS}/test.pub",
        "zstd -dc (bundle)": f"zstd -q -dc {w}/a.agent.bundle > /dev/null",
        # The same pinned, for the ratio with both commands on one CPU (zstd's reading and
        # writing threads then share it too).
        f"zstd -dc ({pin})": f"{pin} zstd -q -dc {w}/a.agent.bundle > /dev/null",
        "same zstd library -d (bundle)": f"{floor} -d < {w}/a.agent.bundle",
        # The least verify must do, on one CPU: each frame read whole, decoded in one call (its
        # checksum checked) and its content hashed with BLAKE3; nothing else.
        floor_pinned: f"{pin} {floor} --read-decode-hash {w}/a.agent.bundle > /dev/null",
        # The same on every CPU, each thread reading (pread) and decoding its own frames after
        # one found where they are from the headers alone: the floor of a verifier built so.
        floor_all: f"{floor} --parallel {w}/a.agent.bundle > /dev/null",
    }
    # Issue 39: unpack beside GNU tar extracting the same bundle (each into a fresh folder,
    # removed untimed before the command).
    verify_ops["bundle unpack"] = f"{bundle} unpack -q {w}/a.agent.bundle {w}/unpacked --key {KEYS}/test.pub"
    verify_ops["tar --zstd -xf (bundle)"] = f"mkdir {w}/untarred && tar --zstd -xf {w}/a.agent.bundle -C {w}/untarred"
    cleanup = {"bundle unpack": f"rm -rf {w}/unpacked", "tar --zstd -xf (bundle)": f"rm -rf {w}/untarred",
               "bundle pack --locked (new path)": f"rm -f {w}/fresh.agent.bundle"}
    verify_ops.update(peers["verify"])
    if a.baseline:
        verify_ops["baseline: bundle verify"] = f"{a.baseline} verify -q {w}/a.agent.bundle --key {KEYS}/test.pub"
    if a.only == "cat":
        cat_rows(bundle, w, a.runs, a.cat_mib)
        return
    ops = {**({} if a.only == "verify" else pack_ops), **({} if a.only == "pack" else verify_ops)}
    # Every verify-side command finds its input freshly read into the page cache (refresh(),
    # untimed, just before). Without it the first reader after a command that wrote a lot
    # (hand-verify.sh extracts 1 GiB) paid for reading back what that write evicted: on the
    # 2-vCPU Xeon with its page cache full, bundle verify measured 0.68-0.80 s (system time
    # 0.34-0.56 s) in the benchmark against 0.52 s (0.17 s) alone, while zstd -dc, run after it,
    # found the bundle cached again. And on that VM, page-cache pages that stayed resident for
    # long became slow to copy: zstd -dc took 1.2-2.0 s (system time 0.75-1.8 s) without reading
    # the disk, and 0.87-0.98 s (0.28-0.30 s) right after the cache was dropped.
    warm = {name: f"{w}/a.agent.bundle" for name, cmd in verify_ops.items() if f"{w}/a.agent.bundle" in cmd}
    warm["hand-verify.sh"] = f"{w}/hand/agent.tar.zst"
    results = {k: [] for k in ops}
    loads = []
    for r in range(a.runs):
        loads.append(load())
        for name, cmd in ops.items():
            if name in cleanup:
                sh(cleanup[name])
            if name in warm:
                refresh(warm[name])
            results[name].append(timed(cmd))
        print(f"round {r + 1}/{a.runs} done (load average before it {loads[-1]})", file=sys.stderr)

    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in results.items()}
    for k, v in results.items():
        med[k]["rss"] = max(x["rss"] for x in v)
    print(f"\n{a.mib} MiB agent; {cpu_model()}, {os.cpu_count()} CPUs ({len(cpus)} usable); medians of {a.runs} runs")
    print(f"load average (1/5/15 min) before each round: {', '.join(loads)}\n")
    for note in peers["notes"]:
        print(f"NOTE: {note}\n")
    print("| command | wall s | user s | sys s | voluntary / involuntary ctx switches | peak RSS MiB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for k, m in med.items():
        print(f"| {k} | {m['wall']:.2f} | {m['user']:.2f} | {m['sys']:.2f} | {m['vcs']:.0f} / {m['ics']:.0f} "
              f"| {m['rss'] / 1024:.0f} |")

    def ratio(name, x, y, target):
        if x not in med or y not in med:
            return
        value = med[x]["wall"] / med[y]["wall"]
        verdict = "(floor)" if target is None else ("met" if value <= target else "NOT met")
        print(f"| {name} | {value:.2f} | {'' if target is None else f'<= {target:.2f}'} | {verdict} |")

    print("\n| ratio (wall) | value | target | |")
    print("| --- | ---: | ---: | --- |")
    ratio("pack / zstd -3 -T0 then fsync (issue 39)", "bundle pack --locked", "zstd -3 -T0 (tar), then fsync", 1.05)
    ratio("pack / zstd -3 -T0", "bundle pack --locked", "zstd -3 -T0 (tar)", None)
    ratio("pack over its previous output / pack to a new path (issue 39)", "bundle pack --locked",
          "bundle pack --locked (new path)", 1.10)
    ratio("pack / hand-pack", "bundle pack --locked", "hand-pack.sh", 0.80)
    ratio("pack --attest / pack", "bundle pack --locked --attest", "bundle pack --locked", 1.05)
    ratio("pack / same zstd library", "bundle pack --locked", "same zstd library (tar)", None)
    ratio("pack / baseline pack", "bundle pack --locked", "baseline: bundle pack --locked", None)
    ratio("baseline pack / zstd -3 -T0", "baseline: bundle pack --locked", "zstd -3 -T0 (tar)", None)
    ratio("verify / zstd -dc (issue 39: both CPUs)", "bundle verify", "zstd -dc (bundle)", 0.60)
    ratio(f"verify pinned ({pin}) / zstd -dc (issue 39)", pinned, "zstd -dc (bundle)", 1.00)
    ratio(f"verify pinned / zstd -dc pinned (both on one CPU)", pinned, f"zstd -dc ({pin})", None)
    ratio("verify pinned / read + decode + BLAKE3 floor pinned", pinned, floor_pinned, None)
    ratio("read + decode + BLAKE3 floor pinned / zstd -dc", floor_pinned, "zstd -dc (bundle)", None)
    ratio("verify / read + decode + BLAKE3 floor on every CPU", "bundle verify", floor_all, None)
    ratio("read + decode + BLAKE3 floor on every CPU / zstd -dc", floor_all, "zstd -dc (bundle)", None)
    ratio(f"verify / verify pinned ({pin})", "bundle verify", pinned, 1.00)
    ratio("unpack / tar --zstd -xf (issue 39)", "bundle unpack", "tar --zstd -xf (bundle)", 0.70)
    ratio("verify / hand-verify", "bundle verify", "hand-verify.sh", 0.50)
    ratio("verify / same zstd library -d", "bundle verify", "same zstd library -d (bundle)", None)
    ratio("verify / baseline verify", "bundle verify", "baseline: bundle verify", None)
    ratio("pack / model_signing sign", "bundle pack --locked", "model_signing sign (ECDSA)", None)
    ratio("verify / model_signing verify", "bundle verify", "model_signing verify (ECDSA)", None)
    ratio("verify / b3sum of the files", "bundle verify", "b3sum (agent files)", None)
    if os.path.exists(f"{w}/a.agent.bundle"):
        # Issue 39: the seekable bundle's size against the same tar stream in one frame, as
        # earlier releases wrote it (the same zstd library and settings, examples/zstd-floor.rs).
        sh(f"zstd -q -dc {w}/a.agent.bundle | {floor} > {w}/one-frame.zst")
        new, old = os.path.getsize(f"{w}/a.agent.bundle"), os.path.getsize(f"{w}/one-frame.zst")
        change = (new - old) / old * 100
        print(f"| bundle size against one frame (issue 39) | {change:+.2f}% ({new} / {old} bytes) | <= +0.50% "
              f"| {'met' if change <= 0.5 else 'NOT met'} |")
    if a.only:
        return

    # Small agents: the pre-commit hook and the deployment gate on a tool-only agent.
    small = os.path.join(w, "hundred")
    if not os.path.exists(small):
        for i in range(100):
            shutil.copytree(os.path.join(REPO, "testdata", "agents", "mailer"), f"{small}/agents/mailer{i}")
    sh(f"{bundle} pack -q {REPO}/testdata/agents/mailer --locked --key {KEYS}/test.key -o {w}/small.agent.bundle")

    def many(argv, cwd=None, n=50):
        """Median wall ms of running argv directly (no shell, whose own start would count)."""
        walls = []
        for _ in range(n):
            s = time.perf_counter()
            subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
            walls.append(time.perf_counter() - s)
        return statistics.median(walls) * 1000
    check_ms = many([bundle, "check", "-q"], cwd=small)
    verify_ms = many([bundle, "verify", "-q", f"{w}/small.agent.bundle", "--key", f"{KEYS}/test.pub"])
    print("\n| small agents | median ms | target |")
    print("| --- | ---: | ---: |")
    print(f"| bundle check, 100 copies of the rich example | {check_ms:.1f} | <= 50 |")
    print(f"| bundle verify, rich example bundle | {verify_ms:.1f} | <= 5 |")
    policy_ms = policy_bench(bundle, w, many)
    print(f"| bundle verify, the same with 3 co-signatures under a 100-key trust policy | {policy_ms:.1f} "
          f"| <= {verify_ms + 5:.1f} (+5) |")
    keyless_row(bundle, w, many)

    incremental_check(bundle, agent, w, a.runs, a.mib)
    cat_rows(bundle, w, a.runs, a.cat_mib)
    many_agents(bundle, w, [int(n) for n in a.many.split(",") if int(n) > 0], a.runs)
    instructions_per_agent(bundle, a.baseline, w)
    registry_rows(bundle, w, a.runs)

    if a.big_mib:
        big = os.path.join(w, f"agent-{a.big_mib}")
        make_agent(big, a.big_mib, 1024)
        sh(f"{bundle} lock -q {big}")
        sh(f"{bundle} pack -q {big} --locked --key {KEYS}/test.key -o {w}/big.agent.bundle")
        v = timed(f"{bundle} verify -q {w}/big.agent.bundle --key {KEYS}/test.pub")
        p = timed(f"{bundle} pack -q {big} --locked --key {KEYS}/test.key -o {w}/big2.agent.bundle")
        print(f"\n{a.big_mib} MiB agent: verify {v['wall']:.2f} s, peak RSS {v['rss'] / 1024:.0f} MiB; "
              f"pack {p['wall']:.2f} s, peak RSS {p['rss'] / 1024:.0f} MiB")
        incremental_check(bundle, big, w, a.runs, a.big_mib)


def cat_rows(bundle, w, runs, mib):
    """Issue 39: `bundle cat` of one 1 MiB file from the middle of a bundle of `mib` MiB (1 MiB
    files), wall time and peak RSS, medians of `runs`; targets <= 50 ms and <= 32 MiB."""
    if mib <= 0:
        return
    agent = os.path.join(w, f"cat-agent-{mib}")
    make_agent(agent, mib, mib)
    out = f"{w}/cat-{mib}.agent.bundle"
    if not os.path.exists(out):
        sh(f"{bundle} lock -q {agent} && {bundle} pack -q {agent} --locked --key {KEYS}/test.key -o {out}")
    name = f"knowledge/part{mib // 2 + 1:04}.bin"
    rows = [timed(f"{bundle} cat {out} {name} --key {KEYS}/test.pub > /dev/null") for _ in range(runs)]
    wall = statistics.median(x["wall"] for x in rows) * 1000
    rss = max(x["rss"] for x in rows) / 1024
    print(f"\ncat of one 1 MiB file ({name}) from a {mib} MiB bundle ({os.path.getsize(out)} bytes); "
          f"{cpu_model()}; medians of {runs}, load {load()}\n")
    print("| command | wall ms | peak RSS MiB | target | |")
    print("| --- | ---: | ---: | --- | --- |")
    met = "met" if wall <= 50 and rss <= 32 else "NOT met"
    print(f"| bundle cat | {wall:.0f} | {rss:.0f} | <= 50 ms, <= 32 MiB | {met} |")
    # Issue 39: pack's peak memory at this size too (<= 64 MiB at 1 and 4 GiB), once, to a new path.
    sh(f"rm -f {w}/cat-repack.agent.bundle")
    p = timed(f"{bundle} pack -q {agent} --locked --key {KEYS}/test.key -o {w}/cat-repack.agent.bundle")
    sh(f"rm -f {w}/cat-repack.agent.bundle")
    met = "met" if p["rss"] / 1024 <= 64 else "NOT met"
    print(f"| bundle pack of the same agent (to a new path) | {p['wall'] * 1000:.0f} | {p['rss'] / 1024:.0f} "
          f"| <= 64 MiB | {met} |")


VENV_BIN = os.path.join(os.environ.get("BUNDLE_TOOLS_DIR", os.path.expanduser("~/.cache/agent-bundle")), "venv", "bin")


def python_with(module):
    """A python3 that imports `module`: the one on PATH, else the tools venv's (where
    scripts/test installs ORAS); None when neither does."""
    for python in ["python3", os.path.join(VENV_BIN, "python3")]:
        try:
            if subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0:
                return python
        except OSError:
            continue
    return None


def which(tool):
    """`tool` on PATH, else in the CI venv, else None."""
    found = shutil.which(tool)
    if found:
        return found
    candidate = os.path.join(VENV_BIN, tool)
    return candidate if os.access(candidate, os.X_OK) else None


def peer_commands(agent, w):
    """The optional peer rows: what users would pick instead of bundle, when installed."""
    out = {"pack": {}, "verify": {}, "notes": []}
    b3sum = which("b3sum")
    if b3sum:
        out["verify"]["b3sum (agent files)"] = (
            f"cd {agent} && find . -type f ! -name manifest.toml -print0 | sort -z | xargs -0 {b3sum} > /dev/null")
    else:
        out["notes"].append("b3sum is not installed: its row is skipped")
    ms, openssl = which("model_signing"), which("openssl")
    if ms and openssl:
        keydir = os.path.join(w, "model-signing")
        os.makedirs(keydir, exist_ok=True)
        key, pub, sig = (os.path.join(keydir, n) for n in ("ec.key", "ec.pub", "model.sig"))
        if not os.path.exists(pub):
            sh(f"{openssl} ecparam -name prime256v1 -genkey -noout -out {key} && {openssl} ec -in {key} -pubout -out {pub}",
               stderr=subprocess.DEVNULL)
        common = f"--signature {sig} --ignore-paths {agent}/manifest.toml"
        out["pack"]["model_signing sign (ECDSA)"] = f"{ms} --log-level ERROR sign key {agent} {common} --private_key {key}"
        out["verify"]["model_signing verify (ECDSA)"] = (
            f"{ms} --log-level ERROR verify key {agent} {common} --public_key {pub}")
        # verify needs a signature to exist before the first round.
        sh(out["pack"]["model_signing sign (ECDSA)"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        out["notes"].append("model_signing (PyPI model-signing + pyopenssl) or openssl is not installed: "
                            "its sign and verify rows are skipped")
    return out


def incremental_check(bundle, agent, w, runs, mib):
    """bundle check of `agent` cold (stat cache off) and warm after touching one file (its stat
    changes, so it is hashed again; the others come from the cache)."""
    cache = os.path.join(w, "stat-cache")
    env = f"BUNDLE_CACHE_DIR={cache}"
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(agent) for f in fs if f != "manifest.toml")
    touched = max(files, key=os.path.getsize)
    # Prime the cache with files settled for more than the 2 s racily-clean margin.
    time.sleep(2.1)
    sh(f"{env} {bundle} check -q {agent}")
    cold, warm = [], []
    for _ in range(runs):
        cold.append(timed(f"BUNDLE_STAT_CACHE=off {bundle} check -q {agent}"))
        sh(f"touch {touched}")
        warm.append(timed(f"{env} {bundle} check -q {agent}"))
    print(f"\nincremental check, {mib} MiB agent ({len(files)} files; the largest, "
          f"{os.path.getsize(touched) >> 20} MiB, touched before each warm run); medians of {runs}, load {load()}\n")
    print("| command | wall ms | user ms | sys ms | peak RSS MiB | target |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, rows, target in (("check, cold (BUNDLE_STAT_CACHE=off)", cold, "as today"),
                               ("check after touching one file", warm, "< 100 ms")):
        m = {f: statistics.median(x[f] for x in rows) for f in ("wall", "user", "sys")}
        print(f"| {name} | {m['wall'] * 1000:.0f} | {m['user'] * 1000:.0f} | {m['sys'] * 1000:.0f} "
              f"| {max(x['rss'] for x in rows) / 1024:.0f} | {target} |")


def many_agents(bundle, w, counts, runs):
    """bundle check of N copies of the rich example, for each N: wall, CPU and peak memory
    (target for 20,000 on 2 CPUs: <= 1.5 s and <= 64 MiB), beside the least any check must do:
    read every file of those agents, with `cat` on every usable CPU (`find | xargs -P`), in the
    same rounds. On the 2-vCPU Xeon the same check of 20,000 took 1.53 s in one run and 2.12 s in
    another two hours later with no change to it; the floor shows what the machine did."""
    if not counts:
        return
    cpus = len(os.sched_getaffinity(0))
    print(f"\nmany agents: bundle check of N copies of the rich example (target for 20,000 on 2 CPUs: "
          f"<= 1.5 s, <= 64 MiB), and reading their files with {cpus} cat processes (the floor); "
          f"medians of {runs}, alternating within each round, load {load()}\n")
    print("| agents | wall s | user s | sys s | voluntary / involuntary ctx switches | peak RSS MiB | × floor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in counts:
        root = os.path.join(w, f"many-{n}")
        if not os.path.exists(root):
            print(f"making {n} agents in {root} ...", file=sys.stderr)
            for i in range(n):
                shutil.copytree(os.path.join(REPO, "testdata", "agents", "mailer"), f"{root}.tmp/agents/a{i:05}")
            os.rename(f"{root}.tmp", root)
        cache = os.path.join(w, "stat-cache")
        sh(f"cd {root} && BUNDLE_CACHE_DIR={cache} {bundle} check -q")  # primes the stat cache
        reading = f"reading the files (find | xargs -P{cpus} cat)"
        cmds = {
            "cache off": f"cd {root} && BUNDLE_STAT_CACHE=off {bundle} check -q",
            "stat cache warm": f"cd {root} && BUNDLE_CACHE_DIR={cache} {bundle} check -q",
            reading: f"cd {root} && find agents -type f -print0 | xargs -0 -P{cpus} -n 2000 cat > /dev/null",
        }
        rows = {label: [] for label in cmds}
        for _ in range(runs):
            for label, cmd in cmds.items():
                rows[label].append(timed(cmd))
        floor = statistics.median(x["wall"] for x in rows[reading])
        for label, got in rows.items():
            m = {f: statistics.median(x[f] for x in got) for f in ("wall", "user", "sys", "vcs", "ics")}
            print(f"| {n}, {label} | {m['wall']:.2f} | {m['user']:.2f} | {m['sys']:.2f} | {m['vcs']:.0f} / "
                  f"{m['ics']:.0f} | {max(x['rss'] for x in got) / 1024:.0f} | {m['wall'] / floor:.2f} |")


def instructions_per_agent(bundle, baseline, w, n=200):
    """Instructions `bundle check` executes per agent over N copies of the rich example, cache
    off, counted by valgrind's cachegrind: unlike times on a shared VM (the same check of 20,000
    took 1.53 s and 2.12 s two hours apart), the count does not move with the host, so it shows
    what a change to the parsers or the walk saved. User space only: the kernel's share (about a
    fifth of check's CPU) is not counted. With --baseline, that build is counted beside it."""
    if not shutil.which("valgrind"):
        print("\nNOTE: valgrind not installed; instructions per agent not counted")
        return
    root = os.path.join(w, f"many-{n}")
    if not os.path.exists(root):
        for i in range(n):
            shutil.copytree(os.path.join(REPO, "testdata", "agents", "mailer"), f"{root}.tmp/agents/a{i:05}")
        os.rename(f"{root}.tmp", root)
    print(f"\ninstructions per agent, bundle check -q of {n} copies of the rich example, cache off "
          f"(valgrind --tool=cachegrind, user space only)\n")
    for label, binary in [("bundle", bundle)] + ([("baseline", baseline)] if baseline else []):
        out = subprocess.run(f"cd {root} && BUNDLE_STAT_CACHE=off valgrind --tool=cachegrind --cache-sim=no "
                             f"--cachegrind-out-file=/dev/null {binary} check -q",
                             shell=True, check=True, capture_output=True, text=True).stderr
        refs = int(re.search(r"I\s+refs:\s+([\d,]+)", out).group(1).replace(",", ""))
        print(f"| {label} | {refs / n:,.0f} instructions per agent |")


def policy_bench(bundle, w, many):
    """Median ms of verifying the rich example's bundle, packed by the test key and co-signed by
    3 more keys, under a signed trust policy of 100 keys whose rule needs 4 distinct keys."""
    d = os.path.join(w, "policy")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for i in range(99):
        sh(f"{bundle} -q keygen {d}/k{i}")
    # Signer s0 is the test key that packed; s1..s99 are the files k0..k98.
    keys = [open(f"{KEYS}/test.pub").read().split("\n")[1]]
    keys += [open(f"{d}/k{i}.pub").read().split("\n")[1] for i in range(99)]
    signers = "".join(f'[[signer]]\nname = "s{i}"\npublic_key = "{k}"\nroles = ["release"]\n\n'
                      for i, k in enumerate(keys))
    with open(f"{d}/policy.toml", "w") as f:
        f.write('format = 1\nid = "bench"\nversion = 1\nexpires = 2099-01-01T00:00:00Z\n\n'
                '[root]\nthreshold = 2\nsigners = ["s1", "s2", "s3"]\n\n' + signers +
                '[[rule]]\nagents = ["*"]\nthreshold = 4\n')
    for i in (0, 1):
        sh(f"{bundle} -q trust sign {d}/policy.toml --key {d}/k{i}.key")
    shutil.copy(f"{w}/small.agent.bundle", f"{d}/cosigned.agent.bundle")
    for i in range(3):
        sh(f"{bundle} -q cosign {d}/cosigned.agent.bundle --key {d}/k{i}.key --trust-policy {d}/policy.toml")
    return many([bundle, "verify", "-q", f"{d}/cosigned.agent.bundle", "--trust-policy", f"{d}/policy.toml"])
def keyless_row(bundle, w, many):
    """bundle verify of the rich example with and without --sigstore (issue 27): a keyless
    signature from the tests' own Sigstore instance, judged offline. The two are timed in
    alternating rounds so that both see the same machine noise."""
    try:
        sh(f"{sys.executable} {REPO}/testdata/sigstore/test_instance.py {w}/small.agent.bundle {w} "
           f"https://github.com/acme/agents/.github/workflows/release.yml@refs/tags/v1 "
           f"https://token.actions.githubusercontent.com")
    except subprocess.CalledProcessError:
        print("| bundle verify --sigstore | skipped: python `cryptography` is missing | |")
        return
    plain = [bundle, "verify", "-q", f"{w}/small.agent.bundle", "--key", f"{KEYS}/test.pub"]
    keyless = plain + ["--sigstore", f"{w}/artifact.sigstore.json", "--trusted-root", f"{w}/trusted_root.json",
                       "--certificate-identity",
                       "https://github.com/acme/agents/.github/workflows/release.yml@refs/tags/v1",
                       "--certificate-oidc-issuer", "https://token.actions.githubusercontent.com"]
    rounds = [(many(plain, n=10), many(keyless, n=10)) for _ in range(5)]
    without = statistics.median(r[0] for r in rounds)
    with_ = statistics.median(r[1] for r in rounds)
    print(f"| bundle verify --sigstore, rich example bundle (without: {without:.1f}) | {with_:.1f} "
          f"(+{with_ - without:.1f}) | <= +10 |")


# --- Registry: push and pull+verify against ORAS (issue 18) ------------------------------------

ORAS_SCRIPT = """
import sys, oras.client
op, host, target, path = sys.argv[1:5]
c = oras.client.OrasClient(hostname=host, insecure=True)
if op == "push":
    c.push(target=target, files=[path + ":application/vnd.agent-bundle.v1.tar+zstd"],
           manifest_config="/dev/null:application/vnd.agent-bundle.config.v1+json",
           disable_path_validation=True)
else:
    c.pull(target=target, outdir=path)
"""


def registry_bench(bundle, bundle_file, work, runs, attested=None):
    """bundle push and bundle pull (full verify, -o FILE) of `bundle_file` against ORAS (Python)
    push and plain pull, on a docker-registry on loopback (filesystem storage in `work`).
    Each push goes to a fresh repository, so that every run uploads the whole layer. With
    `attested` (the same agent packed with --attest, its two attestations beside it), also
    bundle push with the attestations attached as referrers, and bundle pull judging them
    (--require-provenance), in the same rounds (issue 29, target 5)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = f"127.0.0.1:{port}"
    store = os.path.join(work, "registry")
    shutil.rmtree(store, ignore_errors=True)
    os.makedirs(store)
    with open(os.path.join(store, "config.yml"), "w") as f:
        f.write(f"version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n"
                f"  filesystem:\n    rootdirectory: {store}/data\nhttp:\n  addr: {host}\n")
    with open(os.path.join(store, "oras-op.py"), "w") as f:
        f.write(ORAS_SCRIPT)
    reg = subprocess.Popen(["docker-registry", "serve", os.path.join(store, "config.yml")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        oras = f"{python_with('oras.client')} {store}/oras-op.py"
        name = os.path.basename(bundle_file)
        out = os.path.join(store, "out")
        names = ["bundle push", "ORAS push", "bundle pull (+verify)", "ORAS pull"]
        if attested:
            names += ["bundle push (+attestations)", "bundle pull (+verify +attestations)"]
        results = {k: [] for k in names}
        for r in range(runs):
            results["bundle push"].append(timed(
                f"{bundle} push -q {bundle_file} oci://{host}/bench/b{r}:1 --plain-http --key {KEYS}/test.pub"))
            results["ORAS push"].append(timed(
                f"cd {os.path.dirname(bundle_file)} && {oras} push {host} {host}/bench/o{r}:1 {name}"))
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            results["bundle pull (+verify)"].append(timed(
                f"{bundle} pull -q oci://{host}/bench/b{r}:1 --plain-http --key {KEYS}/test.pub -o {out}/pulled.agent.bundle"))
            results["ORAS pull"].append(timed(f"{oras} pull {host} {host}/bench/b{r}:1 {out}/oras"))
            if attested:
                results["bundle push (+attestations)"].append(timed(
                    f"{bundle} push -q {attested} oci://{host}/bench/a{r}:1 --plain-http --key {KEYS}/test.pub"))
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                results["bundle pull (+verify +attestations)"].append(timed(
                    f"{bundle} pull -q oci://{host}/bench/a{r}:1 --plain-http --key {KEYS}/test.pub "
                    f"--require-provenance -o {out}/pulled.agent.bundle"))
            print(f"registry round {r + 1}/{runs} done", file=sys.stderr)
    finally:
        reg.kill()
        reg.wait()
    size = os.path.getsize(bundle_file) / (1 << 20)
    med = {k: (statistics.median(x["wall"] for x in v), max(x["rss"] for x in v)) for k, v in results.items()}
    print(f"\nregistry on loopback, {size:.0f} MiB bundle, medians of {runs} runs (every run in order: the "
          f"registry's own speed varies)\n")
    print("| command | wall s | runs s | peak RSS MiB |")
    print("| --- | ---: | --- | ---: |")
    for k, (wall, rss) in med.items():
        each = " ".join(f"{x['wall']:.2f}" for x in results[k])
        print(f"| {k} | {wall:.2f} | {each} | {rss / 1024:.0f} |")
    print("\n| ratio | value | target |")
    print("| --- | ---: | ---: |")
    print(f"| bundle push / ORAS push | {med['bundle push'][0] / med['ORAS push'][0]:.2f} | <= 1.0 |")
    print(f"| bundle pull+verify / ORAS pull | {med['bundle pull (+verify)'][0] / med['ORAS pull'][0]:.2f} | <= 1.0 |")
    print(f"| peak RSS push, pull | {med['bundle push'][1] / 1024:.0f}, {med['bundle pull (+verify)'][1] / 1024:.0f} MiB | <= 64 |")
    if attested:
        push_a, pull_a = med["bundle push (+attestations)"][0], med["bundle pull (+verify +attestations)"][0]
        print(f"| bundle push with attestations / ORAS push | {push_a / med['ORAS push'][0]:.2f} | <= 1.0 |")
        print(f"| bundle pull+verify of attestations / ORAS pull | {pull_a / med['ORAS pull'][0]:.2f} | <= 1.0 |")


def registry_rows(bundle, w, runs):
    """The registry rows inside the full run, when docker-registry and the ORAS Python client
    are installed (a visible note otherwise): the bundle and its attested twin that the pack
    rows wrote."""
    if not which("docker-registry") or not python_with("oras.client"):
        print("\nNOTE: docker-registry or the ORAS Python client (`import oras.client`) is not installed: "
              "the registry rows are skipped")
        return
    registry_bench(bundle, os.path.join(w, "a.agent.bundle"), w, runs, os.path.join(w, "at", "a.agent.bundle"))


def registry_main():
    """`--registry`: only the registry section (packs the bench agent if needed)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--registry", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--work")
    a = ap.parse_args()
    sh(f"cd {REPO} && cargo build --release --locked -q")
    target = target_directory()
    bundle = os.path.join(target, "release", "bundle")
    a.work = a.work or os.path.join(target, "bench")
    os.makedirs(a.work, exist_ok=True)
    agent = os.path.join(a.work, f"agent-{a.mib}")
    make_agent(agent, a.mib, 256)
    bundle_file = os.path.join(a.work, "a.agent.bundle")
    if not os.path.exists(bundle_file):
        sh(f"{bundle} lock -q {agent} && {bundle} pack -q {agent} --locked --key {KEYS}/test.key -o {bundle_file}")
    attested = os.path.join(a.work, "at", "a.agent.bundle")
    if not os.path.exists(attested):
        os.makedirs(os.path.dirname(attested), exist_ok=True)
        sh(f"{bundle} pack -q {agent} --locked --attest --key {KEYS}/test.key -o {attested}")
    registry_bench(bundle, bundle_file, a.work, a.runs, attested)


# --- Python: agent_bundle.verify beside bundle verify (issue 28) ---------------------------------
PY_VERIFY = """
import sys, agent_bundle
verdict = agent_bundle.verify(sys.argv[1], trusted_keys=sys.argv[2])
sys.exit(0 if verdict.ok else 1)
"""


def python_wheel(target):
    """A venv in the target directory with the wheel built from python/ (maturin, release)."""
    venv = os.path.join(target, "bench", "py-venv")
    wheels = os.path.join(target, "bench", "wheels")
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        sh(f"python3 -m venv {venv}")
    maturin = shutil.which("maturin")
    if not maturin:
        sh(f"{venv}/bin/pip install -q maturin")
        maturin = f"{venv}/bin/maturin"
    shutil.rmtree(wheels, ignore_errors=True)
    sh(f"cd {REPO} && {maturin} build --release --locked -m python/Cargo.toml -o {wheels}")
    wheel = [f for f in os.listdir(wheels) if f.endswith(".whl")][0]
    sh(f"{venv}/bin/pip install -q --force-reinstall --no-deps {wheels}/{wheel}")
    return os.path.join(venv, "bin", "python")


def python_main():
    """`--python`: agent_bundle.verify of the bench bundle beside bundle verify."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", action="store_true")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--work")
    a = ap.parse_args()
    sh(f"cd {REPO} && cargo build --release --locked -q")
    target = target_directory()
    bundle = os.path.join(target, "release", "bundle")
    python = python_wheel(target)
    w = a.work or os.path.join(target, "bench")
    os.makedirs(w, exist_ok=True)
    agent = os.path.join(w, f"agent-{a.mib}")
    make_agent(agent, a.mib, 256)
    bundle_file = os.path.join(w, "a.agent.bundle")
    if not os.path.exists(bundle_file):
        sh(f"{bundle} lock -q {agent} && {bundle} pack -q {agent} --locked --key {KEYS}/test.key -o {bundle_file}")
    script = os.path.join(w, "py-verify.py")
    with open(script, "w") as f:
        f.write(PY_VERIFY)
    ops = {
        "bundle verify": f"{bundle} verify -q {bundle_file} --key {KEYS}/test.pub",
        "python agent_bundle.verify": f"{python} {script} {bundle_file} {KEYS}/test.pub",
        "python -c pass (interpreter alone)": f"{python} -c pass",
        "python import agent_bundle": f"{python} -c \"import agent_bundle\"",
    }
    results = {k: [] for k in ops}
    loads = []
    for r in range(a.runs):
        loads.append(load())
        for name, cmd in ops.items():
            if name in cleanup:
                sh(cleanup[name])
            results[name].append(timed(cmd))
        print(f"round {r + 1}/{a.runs} done (load average before it {loads[-1]})", file=sys.stderr)
    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in results.items()}
    for k, v in results.items():
        med[k]["rss"] = max(x["rss"] for x in v)
    print(f"\n{a.mib} MiB agent; {cpu_model()}, {os.cpu_count()} CPUs; medians of {a.runs} runs")
    print(f"load average (1/5/15 min) before each round: {', '.join(loads)}\n")
    print("| command | wall s | user s | sys s | peak RSS MiB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for k, m in med.items():
        print(f"| {k} | {m['wall']:.2f} | {m['user']:.2f} | {m['sys']:.2f} | {m['rss'] / 1024:.1f} |")
    cli, py = med["bundle verify"], med["python agent_bundle.verify"]
    print("\n| Python / CLI | value | target | |")
    print("| --- | ---: | ---: | --- |")
    for field, label in (("wall", "wall"), ("user", "user CPU")):
        value = py[field] / cli[field]
        print(f"| {label} | {value:.3f} | <= 1.05 | {'met' if value <= 1.05 else 'NOT met'} |")
    delta = (py["rss"] - cli["rss"]) / 1024
    print(f"| peak RSS, Python - CLI | {delta:+.1f} MiB | within 5 MiB | {'met' if abs(delta) <= 5 else 'NOT met'} |")
    extra = (med["python import agent_bundle"]["rss"] - cli["rss"]) / 1024
    print(f"| (of which the interpreter + import alone: {med['python import agent_bundle']['rss'] / 1024:.1f} MiB "
          f"peak, {extra:+.1f} MiB against the CLI's whole run) | | | |")


# --- bundle guard (issue 34) ---------------------------------------------------------------------
def guard_main():
    """`--guard`: the judge's cost per tools/list and tools/call round trips through the guard."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--guard", action="store_true")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--work")
    a = ap.parse_args()
    sh(f"cd {REPO} && cargo build --release --locked -q --bin bundle --example guard-judge")
    target = target_directory()
    release = os.path.join(target, "release")
    bundle = os.path.join(release, "bundle")
    w = a.work or os.path.join(target, "bench", "guard")
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    # The tools venv of scripts/test (mcp-server-time), as the other rows find their peers.
    os.environ["PATH"] = f"{VENV_BIN}:{os.environ['PATH']}"
    mcp = os.path.join(REPO, "testdata", "mcp")
    hostile = f"python3 {mcp}/hostile_server.py honest"
    # Two signed bundles: the example agent (the test server's pins) and one pinning mcp-server-time.
    shutil.copytree(os.path.join(REPO, "testdata", "agents", "guarded"), f"{w}/guarded")
    sh(f"{bundle} pack -q {w}/guarded --key {KEYS}/test.key -o {w}/guarded.bundle")
    servers = [("test server (hostile_server.py honest)", "hostile", f"{w}/guarded.bundle", hostile,
                "echo", '{"text": "hi"}')]
    if shutil.which("mcp-server-time"):
        shutil.copytree(os.path.join(REPO, "testdata", "agents", "minimal"), f"{w}/time")
        os.makedirs(f"{w}/time/pins")
        sh(f"python3 {mcp}/list_raw.py time {w}/time/pins/time.mcp.json -- mcp-server-time")
        sh(f"{bundle} lock -q {w}/time && {bundle} pack -q {w}/time --key {KEYS}/test.key -o {w}/time.bundle")
        servers.append(("mcp-server-time", "time", f"{w}/time.bundle", "mcp-server-time", "get_current_time",
                        '{"timezone": "Etc/UTC"}'))
    else:
        print("NOTE: mcp-server-time is not installed; its rows are skipped", file=sys.stderr)

    judge = []
    for r in range(a.runs):
        out = subprocess.run([os.path.join(release, "examples", "guard-judge"), "2000"], check=True,
                             capture_output=True, text=True).stdout
        judge.append(json.loads(out))
    trips = {}
    loads = []
    for r in range(a.runs):
        loads.append(load())
        for label, name, bundle_file, command, tool, args in servers:
            direct = json.loads(subprocess.run(
                f"python3 {BENCH}/mcp-round-trips.py {a.calls} {tool} '{args}' -- {command}",
                shell=True, check=True, capture_output=True, text=True).stdout)
            # The guard's own peak RSS (the round-trip script reads it from /proc): GNU time's
            # %M is the larger of the guard's and its server's (mcp-server-time is a Python
            # process of some 60 MiB).
            guarded = json.loads(subprocess.run(
                f"python3 {BENCH}/mcp-round-trips.py {a.calls} {tool} '{args}' -- "
                f"{bundle} guard -q {bundle_file} --key {KEYS}/test.pub --server {name} -- {command}",
                shell=True, check=True, capture_output=True, text=True).stdout)
            trips.setdefault(label, []).append((direct["seconds"], guarded["seconds"], guarded["peak_rss_kib"]))
        print(f"round {r + 1}/{a.runs} done (load average before it {loads[-1]})", file=sys.stderr)

    print(f"\n{cpu_model()}, {os.cpu_count()} CPUs; medians of {a.runs} runs")
    print(f"load average (1/5/15 min) before each round: {', '.join(loads)}\n")
    p50 = statistics.median(j["p50_us"] for j in judge)
    p99 = statistics.median(j["p99_us"] for j in judge)
    worst = max(j["p99_us"] for j in judge)
    print("| row | value | target | |")
    print("| --- | ---: | ---: | --- |")
    print(f"| judging a tools/list of 100 tools, p50 | {p50 / 1000:.3f} ms | | |")
    print(f"| judging a tools/list of 100 tools, p99 (median of runs; worst {worst / 1000:.3f} ms) | "
          f"{p99 / 1000:.3f} ms | <= 1 ms | {'met' if p99 <= 1000 else 'NOT met'} |")
    for label, rows in trips.items():
        d = statistics.median(x[0] for x in rows)
        g = statistics.median(x[1] for x in rows)
        rss = max(x[2] for x in rows) / 1024
        ratio = g / d
        print(f"| {a.calls} tools/call round trips, {label}: direct | {d:.3f} s | | |")
        print(f"| {a.calls} tools/call round trips, {label}: through the guard | {g:.3f} s "
              f"(+{(g - d) / a.calls * 1e6:.0f} us per call) | | |")
        if label == "mcp-server-time":
            print(f"| guard / direct, {label} | {ratio:.2f}x | <= 1.10x | {'met' if ratio <= 1.10 else 'NOT met'} |")
        else:
            # A server that answers in ~0.1 ms with no work: what is left is the guard's fixed
            # cost per call (two more pipe wake-ups), shown beside the real server's row.
            print(f"| guard / direct, {label} (no target: a server doing no work) | {ratio:.2f}x | | |")
        print(f"| guard peak RSS, {label} | {rss:.1f} MiB | <= 20 MiB | {'met' if rss <= 20 else 'NOT met'} |")


if __name__ == "__main__":
    if "--guard" in sys.argv:
        guard_main()
    elif "--registry" in sys.argv:
        registry_main()
    elif "--python" in sys.argv:
        python_main()
    else:
        main()
