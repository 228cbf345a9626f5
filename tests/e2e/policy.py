"""The client's own user answers the policy's ask: an official Python SDK
client whose elicitation callback allows once (after a while), then
declines. In the handshake era ("legacy") the server asks the client while
the call waits; in 2026-07-28 the call's result carries the question and
the client calls again with the answer. Prints what the test checks."""
import asyncio, sys
from mcp import types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import Implementation
import os

async def main(server, target, mode, session):
    asked = []
    answers = ["allow", None]

    async def elicit(context, params):
        asked.append(params.message)
        answer = answers.pop(0)
        # The first answer takes a while: the call says it waits meanwhile.
        if answer == "allow":
            await asyncio.sleep(2.5)
        if answer is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": answer})

    params = StdioServerParameters(command=server, args=[], env=dict(os.environ))
    info = Implementation(name="elicit-client", version="1.0")
    async with Client(params, mode=mode, client_info=info, elicitation_callback=elicit) as c:
        r = await c.call_tool("session_create", {"name": session})
        ticks = []
        async def progress(p, total, message):
            ticks.append(message or "")
        r = await c.call_tool("run", {"session": session, "command": f"touch {target}"}, progress_callback=progress)
        print("asked:", len(asked) == 1 and "touch" in asked[0])
        print("progress:", len(ticks) >= 1 and all("waiting for a person" in t for t in ticks))
        print("allowed:", r.is_error, "allowed by" in r.content[0].text)
        r = await c.call_tool("run", {"session": session, "command": f"touch {target}-2"})
        print("denied:", r.is_error and "denied by" in r.content[0].text)
        print(r.content[0].text)

asyncio.run(main(*sys.argv[1:5]))
