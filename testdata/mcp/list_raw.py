#!/usr/bin/env python3
"""Lists an MCP server's tools exactly as served (every page of tools/list), speaking raw
JSON-RPC over stdio, and writes a pin file: {"version": 1, "server": NAME, "tools": [...]} (formats::mcp_pin).

usage: list_raw.py NAME OUT -- COMMAND [ARGS...]
Used by the guard tests to pin a real server the way `bundle import --pin` does, with a client
that is not ours.
"""
import json
import subprocess
import sys

name, out = sys.argv[1], sys.argv[2]
cmd = sys.argv[sys.argv.index("--") + 1:]
proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def request(mid, method, params):
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": mid, "method": method, "params": params}) + "\n")
    proc.stdin.flush()
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == mid and "method" not in msg:
            return msg["result"]


request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "list_raw", "version": "0"}})
proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
tools, cursor, n = [], None, 2
while True:
    result = request(n, "tools/list", {"cursor": cursor} if cursor else {})
    tools += result["tools"]
    cursor = result.get("nextCursor")
    n += 1
    if not cursor:
        break
proc.stdin.close()
proc.wait(timeout=10)
with open(out, "w") as f:
    json.dump({"version": 1, "server": name, "tools": tools}, f, indent=2)
    f.write("\n")
