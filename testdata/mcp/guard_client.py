#!/usr/bin/env python3
"""An MCP client built on the official MCP Python SDK (`mcp` from PyPI), for the guard tests:
it starts `bundle guard ... -- SERVER` as its stdio server, runs the steps it is given, and
prints one JSON line per step.

usage: guard_client.py STEPS_JSON -- COMMAND [ARGS...]
       guard_client.py STEPS_JSON --url URL        (streamable HTTP)
  STEPS_JSON: a list of steps:
    {"op": "list"}                          every page; prints the tool names (and fields)
    {"op": "call", "name": N, "args": {...}}  prints {"result": ...} or {"error": {code, message, data}}
    {"op": "wait_list_changed"}             waits (5 s at most) for notifications/tools/list_changed
    {"op": "ping"}
    {"op": "resources"} / {"op": "prompts"}   prints how many the server lists
    {"op": "concurrent", "n": N, "name": N, "args": {...}}
                                            N calls at once; prints how many got each error
                                            code ("ok" for results)
    {"op": "child_peak_rss"}                the peak RSS (VmHWM, KiB) of this client's child
                                            processes (the guard, over stdio)
  A call with "progress": true counts the progress notifications it gets.
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp import types
from mcp.shared.exceptions import MCPError

steps = json.loads(sys.argv[1])
url = sys.argv[sys.argv.index("--url") + 1] if "--url" in sys.argv else None
cmd = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []


def out(obj):
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def error_of(e):
    err = getattr(e, "error", None)
    if err is None:
        return {"code": None, "message": str(e), "data": None}
    return {"code": err.code, "message": err.message, "data": err.data}


def child_peak_rss():
    import os
    peak = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != os.getpid():
                continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            continue
    return peak


async def main():
    changed = asyncio.Event()

    async def on_message(message):
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed":
            changed.set()

    if url:
        from mcp.client.streamable_http import streamable_http_client
        transport = streamable_http_client(url)
    else:
        transport = stdio_client(StdioServerParameters(command=cmd[0], args=cmd[1:]))
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, message_handler=on_message, read_timeout_seconds=30) as session:
            init = await session.initialize()
            out({"op": "initialize", "server": init.server_info.name})
            for step in steps:
                op = step["op"]
                try:
                    if op == "list":
                        tools, cursor, pages = [], None, 0
                        while True:
                            result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                            pages += 1
                            tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in result.tools]
                            cursor = result.next_cursor
                            if not cursor:
                                break
                        out({"op": "list", "names": [t["name"] for t in tools], "tools": tools, "pages": pages})
                    elif op == "call":
                        progress = []

                        async def on_progress(value, total, message):
                            progress.append(value)

                        callback = on_progress if step.get("progress") else None
                        result = await session.call_tool(step["name"], step.get("args"), progress_callback=callback)
                        dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
                        out({"op": "call", "name": step["name"], "result": dumped, "progress": len(progress)})
                    elif op == "resources":
                        out({"op": op, "count": len((await session.list_resources()).resources)})
                    elif op == "prompts":
                        out({"op": op, "count": len((await session.list_prompts()).prompts)})
                    elif op == "wait_list_changed":
                        await asyncio.wait_for(changed.wait(), 5)
                        changed.clear()
                        out({"op": "wait_list_changed", "ok": True})
                    elif op == "concurrent":
                        calls = [session.call_tool(step["name"], step.get("args")) for _ in range(step["n"])]
                        codes = {}
                        for r in await asyncio.gather(*calls, return_exceptions=True):
                            key = "ok" if not isinstance(r, BaseException) else str(error_of(r)["code"])
                            codes[key] = codes.get(key, 0) + 1
                        out({"op": op, "codes": codes})
                    elif op == "child_peak_rss":
                        out({"op": op, "kib": child_peak_rss()})
                    elif op == "ping":
                        await session.send_ping()
                        out({"op": "ping", "ok": True})
                except MCPError as e:
                    out({"op": op, "name": step.get("name"), "error": error_of(e)})
                except Exception as e:  # noqa: BLE001 - every failure is a result for the test
                    out({"op": op, "name": step.get("name"), "error": {"code": None, "message": f"{type(e).__name__}: {e}", "data": None}})


asyncio.run(main())
