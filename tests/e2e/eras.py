"""Drives one door of docent-terminal-mcp in one protocol era with the
official Python SDK, and prints what the test checks."""
import asyncio, json, os, sys
import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

def door(kind, server, arg, name):
    env = dict(os.environ)
    if kind == "stdio":
        return StdioServerParameters(command=server, args=[], env=env)
    if kind == "bridge":
        return StdioServerParameters(command=server, args=["connect"], env=env)
    if kind == "unix":
        client = httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=arg), timeout=60)
        return streamable_http_client("http://localhost/mcp", http_client=client)
    if kind == "tcp":
        port, token = arg.split(":", 1)
        client = httpx2.AsyncClient(headers={"Authorization": "Bearer " + token}, timeout=60)
        return streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client)
    raise SystemExit("unknown door " + kind)

async def main(kind, mode, server, arg, session, keep="close"):
    name = "matrix-client"
    client_info = Implementation(name=name, version="1.0")
    async with Client(door(kind, server, arg, session), mode=mode, client_info=client_info) as c:
        print("version", c._session.protocol_version)
        tools = await c.list_tools()
        print("tools", len(tools.tools), all(t.output_schema for t in tools.tools))
        r = await c.call_tool("session_create", {"name": session})
        print("create", r.is_error, r.structured_content["tool"])
        ticks = []
        async def progress(p, total, message):
            ticks.append(message)
        r = await c.call_tool("run", {"session": session, "command": "sleep 2.5; echo matrix-$((6*7))"},
                              progress_callback=progress)
        s = r.structured_content
        print("run", r.is_error, s["state"], s["exit_code"], "matrix-42" in r.content[0].text)
        print("alike", "knows you only by your client's name" in r.content[0].text)
        print("progress", len(ticks))
        # A run its caller gives up on ends its wait then, not at its
        # timeout: the server's calls.log says how long the call took.
        with anyio.move_on_after(1.0):
            await c.call_tool("run", {"session": session, "command": "sleep 30", "timeout": 25})
        await anyio.sleep(4)
        r = await c.call_tool("wait", {"session": session, "timeout": 0.2})
        print("after-cancel", r.is_error, r.structured_content.get("state"))
        await c.call_tool("send", {"session": session, "keys": ["ctrl+c"]})
        r = await c.call_tool("session_list", {})
        print("list", [row["name"] for row in r.structured_content["sessions"]])
        if keep == "keep":
            return
        r = await c.call_tool("session_close", {"session": session})
        print("close", r.is_error)

async def two(server, session):
    """Two copies of one client, each through a bridge of its own, in the
    2026-07-28 era: the first leaves text at the prompt, the second is
    refused, named as the other agent, not as itself."""
    info = Implementation(name="claude-code", version="1.0")
    a_door, b_door = door("bridge", server, "", session), door("bridge", server, "", session)
    async with Client(a_door, mode="2026-07-28", client_info=info) as a, \
            Client(b_door, mode="2026-07-28", client_info=info) as b:
        await a.call_tool("session_create", {"name": session})
        await a.call_tool("send", {"session": session, "text": "echo A-HALF"})
        for _ in range(100):
            r = await a.call_tool("read", {"session": session, "view": "screen"})
            if "echo A-HALF" in r.content[0].text:
                break
            await asyncio.sleep(0.05)
        r = await b.call_tool("run", {"session": session, "command": "echo B-RUN"})
        print("b-run", r.is_error, json.dumps(r.structured_content.get("refusal")))
        r = await a.call_tool("send", {"session": session, "keys": ["enter"]})
        print("a-send", r.is_error)

async def restart(server, session, marker):
    """A 2026-07-28 client through the bridge whose server is killed and
    started again while its run waits: the run is answered once, and its
    line was typed once."""
    info = Implementation(name="restart-client", version="1.0")
    async with Client(door("bridge", server, "", session), mode="2026-07-28", client_info=info) as c:
        await c.call_tool("session_create", {"name": session})
        command = f"echo typed >> {marker}; sleep 3; echo once-$((40+2))"
        r = await c.call_tool("run", {"session": session, "command": command, "timeout": 20})
        print("run", r.is_error, "once-42" in r.content[0].text)

if sys.argv[1] == "restart":
    asyncio.run(restart(*sys.argv[2:]))
    raise SystemExit(0)

if sys.argv[1] == "two":
    asyncio.run(two(*sys.argv[2:]))
    raise SystemExit(0)

asyncio.run(main(*sys.argv[1:]))
