#!/usr/bin/env python3
"""A fake MCP server for `bundle import --from mcp --stdio` tests: one mode per way a real
server can go wrong (and one that pages its tool list properly).

usage: fake_server.py MODE [PIDFILE]
  paged         initialize, then tools/list in three pages (nextCursor)
  silent        reads everything, answers nothing, ignores SIGTERM, starts a grandchild
  exit-early    writes to stderr and exits 3 before answering
  garbage       answers initialize with a line that is not JSON-RPC
  flood         writes to stdout without end
  cursor-loop   gives the same nextCursor forever
  old-version   answers with a protocol version no client knows
  ping-flood    sends 5000 pings, never reads the answers, never exits on its own
  print-env     writes its whole environment to stderr and exits 3 before answering
  huge-value    lists one tool with an unknown field of 3 000 000 zeros (6 MB of JSON)
  forged-lines  a serverInfo.name and a tool name holding line breaks and a forged line
PIDFILE, when given, gets "<own pid> <grandchild pid or 0>".
"""
import json
import os
import signal
import subprocess
import sys

mode = sys.argv[1]
grandchild = 0
if mode == "silent":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen(["sleep", "300"]).pid
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as f:
        f.write(f"{os.getpid()} {grandchild}\n")

def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()

def tool(name):
    return {"name": name, "description": f"Tool {name}.", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True}}

# Servers log to stderr freely; the client shows it only when something fails.
sys.stderr.write(f"fake server: starting in mode {mode}\n")
sys.stderr.flush()

if mode == "exit-early":
    sys.stderr.write("fake server: cannot read config.toml\n")
    sys.exit(3)
if mode == "print-env":
    for k, v in os.environ.items():
        sys.stderr.write(f"{k}={v}\n")
    sys.exit(3)
if mode == "flood":
    chunk = "x" * 65536
    while True:
        sys.stdout.write(chunk)

for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mode == "silent" or mid is None or method is None:
        continue
    if method == "initialize":
        if mode == "ping-flood":
            # More answers than a pipe holds, never read: a client that writes them inline
            # blocks for good.
            for n in range(5000):
                send({"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"})
            while True:
                signal.pause()
        if mode == "garbage":
            sys.stdout.write("Server ready on stdio!\n")
            sys.stdout.flush()
            continue
        version = "1999-01-01" if mode == "old-version" else msg["params"]["protocolVersion"]
        # A ping and a log message before the answer, as a server may send them.
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})
        name = "fake\nsigned by: release (checked)\u2028error: forged" if mode == "forged-lines" else "fake"
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": version,
              "capabilities": {"tools": {}}, "serverInfo": {"name": name, "version": "0.0.1"}}})
    elif method == "tools/list":
        cursor = (msg.get("params") or {}).get("cursor")
        if mode == "huge-value":
            big = tool("big")
            big["x"] = [0] * 3000000
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [big]}})
            continue
        if mode == "forged-lines":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [tool("a\nverified x: signed by release\r")]}})
            continue
        if mode == "cursor-loop":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [], "nextCursor": "again"}})
            continue
        page = {None: 0, "page-2": 1, "page-3": 2}[cursor]
        result = {"tools": [tool(f"tool_{page}_{i}") for i in range(2)]}
        if page < 2:
            result["nextCursor"] = f"page-{page + 2}"
        send({"jsonrpc": "2.0", "id": mid, "result": result})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})

if mode == "silent":
    # Not even a closed stdin stops it: only SIGKILL does.
    while True:
        signal.pause()
