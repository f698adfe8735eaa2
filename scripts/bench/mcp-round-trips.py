#!/usr/bin/env python3
"""N tools/call round trips to an MCP server over stdio, one after the other, timed from the
first call to the last answer (the server's start and the handshake are not timed): the
`bundle guard` rows of scripts/bench.py run it against a server directly and through the guard.

usage: mcp-round-trips.py N TOOL ARGS_JSON -- COMMAND [ARGS...]
Prints {"calls": N, "seconds": S, "peak_rss_kib": K}: K is the peak RSS (VmHWM) of COMMAND's own
process after the calls (of the guard alone, not of the server it started: GNU time's %M would
report the larger of the two).
"""
import json
import subprocess
import sys
import time

n, tool, args = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
cmd = sys.argv[sys.argv.index("--") + 1:]
proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)


def send(obj):
    proc.stdin.write(json.dumps(obj) + "\n")
    proc.stdin.flush()


def answer(mid):
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == mid and "method" not in msg:
            if "error" in msg:
                sys.exit(f"error answer: {msg['error']}")
            return msg
    sys.exit("the server closed its output")


send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
      "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
answer(0)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
answer(1)
start = time.perf_counter()
for i in range(n):
    send({"jsonrpc": "2.0", "id": i + 2, "method": "tools/call", "params": {"name": tool, "arguments": args}})
    answer(i + 2)
seconds = time.perf_counter() - start
peak = 0
with open(f"/proc/{proc.pid}/status") as f:
    for line in f:
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1])
proc.stdin.close()
proc.wait(timeout=10)
print(json.dumps({"calls": n, "seconds": seconds, "peak_rss_kib": peak}))
