"""An MCP server (stdio) whose side-effecting tool sends each email once, however often an agent
retries the call: the tool is made idempotent with one line, ``@ledger.idempotent(...)``.

    ONCEKEY_TARGET=127.0.0.1:50051 ONCEKEY_TENANT=demo OUTBOX=/tmp/outbox python mcp_email_server.py

The key comes from the tool's arguments (recipient and subject), never from the model's own choice
of an id, so a retried call with the same arguments is the same intent. "Sending" appends a line to
the OUTBOX file, so the effect can be counted.
"""

import os

from mcp.server.mcpserver import MCPServer

import oncekey

ledger = oncekey.AsyncClient(os.environ.get("ONCEKEY_TARGET", "127.0.0.1:50051"), tenant=os.environ.get("ONCEKEY_TENANT"))
server = MCPServer("email")


@server.tool()
@ledger.idempotent("email.send", key=lambda to, subject: (to, subject, "v1"))
async def send_email(to: str, subject: str, body: str) -> dict:
    """Sends an email (once per recipient and subject)."""
    with open(os.environ.get("OUTBOX", "outbox.txt"), "a") as outbox:
        outbox.write(f"{to}\t{subject}\t{body}\n")
    return {"status": "sent", "to": to, "token": oncekey.current_lease().token}


if __name__ == "__main__":
    server.run("stdio")
