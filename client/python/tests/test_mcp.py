"""The MCP example (examples/mcp_email_server.py) through a real MCP client session over stdio:
the same tool call twice sends one email, and the second call is answered from the ledger."""

import asyncio
import json
import os
import pathlib
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import oncekey

EXAMPLE = pathlib.Path(__file__).parents[1] / "examples" / "mcp_email_server.py"
SRC = pathlib.Path(__file__).parents[1] / "src"


def test_a_tool_called_twice_sends_once_and_replays(server, tenant, tmp_path):
    outbox = tmp_path / "outbox"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(EXAMPLE)],
        env={
            "ONCEKEY_TARGET": server.target,
            "ONCEKEY_TENANT": tenant,
            "OUTBOX": str(outbox),
            "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        },
    )
    arguments = {"to": "ada@example.com", "subject": "Welcome", "body": "Hello Ada"}

    async def session():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
            await mcp.initialize()
            tools = await mcp.list_tools()
            assert [t.name for t in tools.tools] == ["send_email"]
            assert set(tools.tools[0].input_schema["properties"]) == {"to", "subject", "body"}
            return [await mcp.call_tool("send_email", arguments) for _ in range(2)]

    first, second = asyncio.run(asyncio.wait_for(session(), 60))
    assert not first.is_error and not second.is_error, (first, second)
    answers = [json.loads(r.content[0].text) for r in (first, second)]
    assert answers[0] == answers[1] == {"status": "sent", "to": "ada@example.com", "token": 1}

    # One effect; the ledger answered the second call (one dedup hit) instead of running it.
    assert outbox.read_text().splitlines() == ["ada@example.com\tWelcome\tHello Ada"]
    with oncekey.Client(server.target, tenant=tenant) as client:
        record = client.lookup(oncekey.OperationKey.of("email.send", "ada@example.com", "Welcome", "v1"))
    assert record.status is oncekey.RecordStatus.SUCCEEDED
    assert (record.attempt, record.dedup_hits) == (1, 1)
