"""The MCP example (examples/mcp_email_server.py) through a real MCP client session over stdio:
the same tool call twice sends one email, and the second call is answered from the ledger; a call
the ledger refuses comes back as a tool error that says what happened and what to do."""

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
            calls = [await mcp.call_tool("send_email", arguments) for _ in range(2)]
            # The same recipient and subject (the key) with another body: refused, not sent.
            calls.append(await mcp.call_tool("send_email", {**arguments, "body": "Hello again"}))
            return calls

    first, second, reused = asyncio.run(asyncio.wait_for(session(), 60))
    assert not first.is_error and not second.is_error, (first, second)
    answers = [json.loads(r.content[0].text) for r in (first, second)]
    assert answers[0] == {"status": "sent", "to": "ada@example.com", "token": 1, "replayed": False}
    assert answers[1] == {"status": "sent", "to": "ada@example.com", "token": 1, "replayed": True}

    assert reused.is_error, reused
    text = reused.content[0].text
    assert oncekey.explain(oncekey.KeyReused("")) in text, text
    assert "Nothing was done" in text and "KEY_REUSED" in text

    # One effect; the ledger answered the second call (one dedup hit) instead of running it.
    assert outbox.read_text().splitlines() == ["ada@example.com\tWelcome\tHello Ada"]
    with oncekey.Client(server.target, tenant=tenant) as client:
        record = client.lookup(oncekey.OperationKey.of("email.send", "ada@example.com", "Welcome", "v1"))
    assert record.status is oncekey.RecordStatus.SUCCEEDED
    assert (record.attempt, record.dedup_hits) == (1, 1)


def test_every_ledger_answer_an_agent_can_get_is_explained():
    """``oncekey.explain``: each error an idempotent tool can raise becomes a text that says whether
    anything was done and what to do next."""
    record = None
    cases = {
        oncekey.KeyReused("reused"): ("Nothing was done", "Do not retry it with changed arguments", "ask the user"),
        oncekey.InProgress(2.4, record): ("Nothing was done", "Call again with the same arguments in about 2 s"),
        oncekey.LeaseLost(3): ("LEASE_LOST", "Call again with the same arguments"),
        oncekey.NeedsReconciliation("unknown", record): ("Nothing was done", "Do not retry"),
        oncekey.AwaitingApproval(record): ("Nothing was done yet", "once it has been approved"),
        oncekey.OperationFailed(oncekey.StoredError(403, "rejected: not in production")): ("403 rejected: not in production", "do not retry"),
        oncekey.Unavailable("down"): ("Nothing was done", "Retry later with the same arguments"),
    }
    for error, phrases in cases.items():
        text = oncekey.explain(error)
        for phrase in phrases:
            assert phrase in text, (type(error).__name__, text)
