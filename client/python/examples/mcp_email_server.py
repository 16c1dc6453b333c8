"""An MCP server (stdio) whose side-effecting tool sends each email once, however often an agent
retries the call: the effect is made idempotent with one line, ``@ledger.idempotent(...)``, and the
ledger's answers that are not a result (a key reused with other arguments, a call in progress, an
outcome to reconcile, an approval to wait for) reach the model as tool errors that say what
happened and what to do (``oncekey.explain``), not as a crash.

    pip install ./client/python mcp
    ONCEKEY_TARGET=127.0.0.1:50051 ONCEKEY_TENANT=demo OUTBOX=/tmp/outbox.txt \
        python client/python/examples/mcp_email_server.py

The key comes from the tool's arguments (recipient and subject), never from the model's own choice
of an id, so a retried call with the same arguments is the same intent. "Sending" appends a line to
the OUTBOX file, so the effect can be counted.
"""

import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

import oncekey

ledger = oncekey.AsyncClient(os.environ.get("ONCEKEY_TARGET", "127.0.0.1:50051"), tenant=os.environ.get("ONCEKEY_TENANT"))
server = MCPServer("email")


@ledger.idempotent("email.send", key=lambda to, subject: (to, subject, "v1"))
async def deliver(to: str, subject: str, body: str) -> dict:
    with open(os.environ.get("OUTBOX", "outbox.txt"), "a") as outbox:
        outbox.write(f"{to}\t{subject}\t{body}\n")
    return {"status": "sent", "to": to, "token": oncekey.current_lease().token}


@server.tool()
async def send_email(to: str, subject: str, body: str) -> dict:
    """Sends an email, once per recipient and subject: calling again with the same arguments returns
    the first call's result (replayed: true) instead of sending again."""
    try:
        done = await deliver.detailed(to, subject, body)
    except oncekey.Error as e:
        raise ToolError(oncekey.explain(e)) from e
    return {**done.value, "replayed": done.replayed}


if __name__ == "__main__":
    server.run("stdio")
