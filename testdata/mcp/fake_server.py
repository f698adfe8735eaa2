#!/usr/bin/env python3
"""A changeable MCP server (stdio transport, specification 2025-11-25) for tests: it serves
whatever tools a JSON file says, and the file is read again on every request, so a test can
change what the server offers between runs or in the middle of a session.

usage: fake_server.py CONFIG.json        (or FAKE_MCP_CONFIG=CONFIG.json fake_server.py)

CONFIG is a list of Tool objects, or an object with (all optional but "tools"):
  "tools":       [Tool, ...]     what tools/list serves (every field exactly as written)
  "then":        [[Tool, ...], ...]
                 what the 2nd, 3rd, ... tools/list of this session serves (the last repeats):
                 a description changed after the first list, a tool added later, ...
  "page_size":   N               tools per page; the rest follow by nextCursor
  "name":        "fake"          serverInfo.name
  "list_changed": true           declare tools.listChanged
  "notify_after_call": true      send notifications/tools/list_changed after each tools/call
  "results":     {"tool": CallToolResult}
                 the answer to tools/call of that tool; default: the arguments echoed as
                 text content and as structuredContent
  "never_answer": ["method", ...] read these requests and never answer them
Environment:
  FAKE_MCP_LOG=FILE      append every message received, one JSON line each (what reached the
                         server: a test can prove a call never did)
  FAKE_MCP_PIDFILE=FILE  write the server's pid there when it starts
Only the standard library; exits when stdin closes.
"""
import json
import os
import sys

CONFIG = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FAKE_MCP_CONFIG")
if not CONFIG:
    sys.exit("usage: fake_server.py CONFIG.json")
LOG = os.environ.get("FAKE_MCP_LOG")
if os.environ.get("FAKE_MCP_PIDFILE"):
    with open(os.environ["FAKE_MCP_PIDFILE"], "w") as f:
        f.write(f"{os.getpid()}\n")


def config():
    with open(CONFIG) as f:
        c = json.load(f)
    return {"tools": c} if isinstance(c, list) else c


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


lists_served = 0  # tools/list requests that started a listing (no cursor)
listing = []      # the list being paged


def tools_list(c, params):
    global lists_served, listing
    cursor = (params or {}).get("cursor")
    if cursor is None:
        lists = [c.get("tools", [])] + c.get("then", [])
        listing = lists[min(lists_served, len(lists) - 1)]
        lists_served += 1
        start = 0
    else:
        start = int(cursor)
    size = c.get("page_size") or len(listing) or 1
    result = {"tools": listing[start:start + size]}
    if start + size < len(listing):
        result["nextCursor"] = str(start + size)
    return result


def tools_call(c, params):
    name = params.get("name")
    results = c.get("results", {})
    if name in results:
        return results[name]
    args = params.get("arguments", {})
    return {"content": [{"type": "text", "text": json.dumps(args)}], "structuredContent": args}


for line in sys.stdin:
    if LOG:
        with open(LOG, "a") as f:
            f.write(line if line.endswith("\n") else line + "\n")
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None or method is None:
        continue  # a notification, or an answer to something we never ask
    c = config()
    if method in c.get("never_answer", []):
        continue
    if method == "initialize":
        caps = {"tools": {"listChanged": True} if c.get("list_changed") else {}}
        result = {
            "protocolVersion": msg["params"].get("protocolVersion", "2025-11-25"),
            "capabilities": caps,
            "serverInfo": {"name": c.get("name", "fake"), "version": "1.0.0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = tools_list(c, msg.get("params"))
    elif method == "tools/call":
        result = tools_call(c, msg.get("params", {}))
        send({"jsonrpc": "2.0", "id": mid, "result": result})
        if c.get("notify_after_call"):
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        continue
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"Method not found: {method}"}})
        continue
    send({"jsonrpc": "2.0", "id": mid, "result": result})
