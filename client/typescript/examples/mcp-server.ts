/**
 * An MCP server (stdio) for AI agents whose side-effecting tool, `send_email`, is made idempotent
 * in one line with Oncekey: an agent that retries the call (after a timeout, a crash, a
 * re-planned step) gets the first call's result instead of sending the email twice.
 *
 *   ONCEKEY_ADDR   the Oncekey server (default 127.0.0.1:50051)
 *   ONCEKEY_TENANT the tenant of a dev-mode server (default "demo"); ONCEKEY_TOKEN for a real one
 *   OUTBOX         the file this demo "sends" emails to, one JSON line each (default ./outbox.jsonl)
 *
 * Run: `node dist/examples/mcp-server.js` (after `npm run build`), or point an MCP client at it.
 */
import { appendFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";
import { OncekeyClient } from "@oncekey/client";

const oncekey = new OncekeyClient(process.env.ONCEKEY_ADDR ?? "127.0.0.1:50051", {
  tenant: process.env.ONCEKEY_TENANT ?? "demo",
  token: process.env.ONCEKEY_TOKEN,
});
const outbox = process.env.OUTBOX ?? "outbox.jsonl";

/** The side effect: "sends" an email (appends it to the outbox) and returns its message id. */
async function sendEmail(email: { to: string; subject: string; body: string }) {
  const messageId = randomUUID();
  appendFileSync(outbox, JSON.stringify({ messageId, ...email }) + "\n");
  return { content: [{ type: "text" as const, text: `sent ${messageId} to ${email.to}` }], structuredContent: { messageId } };
}

const server = new McpServer({ name: "oncekey-mailer", version: "1.0.0" });
server.registerTool(
  "send_email",
  {
    description: "Sends an email. Calling it again with the same recipient and subject returns the first call's result.",
    inputSchema: { to: z.string().email(), subject: z.string(), body: z.string() },
    outputSchema: { messageId: z.string() },
  },
  // The one line: the key is the recipient and subject, the fingerprinted arguments the tool's
  // input (never the per-request `extra` the SDK passes as a second argument).
  oncekey.makeIdempotent(sendEmail, { namespace: "email.send", key: (email) => [email.to, email.subject], args: (email) => email }),
);

server.connect(new StdioServerTransport()).catch((e) => {
  console.error("mcp-server:", e);
  process.exit(1);
});
