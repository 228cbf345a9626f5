"""The client's own user answers the policy's ask: an official Python SDK
client (handshake era, where a server may ask its client) whose elicitation
callback allows once, then declines. Prints what the test checks."""
import asyncio, sys
from mcp import types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import Implementation
import os

async def main(server, target):
    asked = []
    answers = ["allow", None]

    async def elicit(context, params):
        asked.append(params.message)
        answer = answers.pop(0)
        if answer is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": answer})

    params = StdioServerParameters(command=server, args=[], env=dict(os.environ))
    info = Implementation(name="elicit-client", version="1.0")
    async with Client(params, mode="legacy", client_info=info, elicitation_callback=elicit) as c:
        r = await c.call_tool("session_create", {"name": "e1"})
        r = await c.call_tool("run", {"session": "e1", "command": f"touch {target}"})
        print("asked:", len(asked) == 1 and "touch" in asked[0])
        print("allowed:", r.is_error, "allowed by" in r.content[0].text)
        r = await c.call_tool("run", {"session": "e1", "command": f"touch {target}-2"})
        print("denied:", r.is_error and "denied by" in r.content[0].text)
        print(r.content[0].text)

asyncio.run(main(sys.argv[1], sys.argv[2]))
