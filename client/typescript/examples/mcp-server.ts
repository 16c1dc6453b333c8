/**
 * An MCP server (stdio) for AI agents whose side-effecting tools are made idempotent with Oncekey:
 * an agent that retries a call (after a timeout, a crash, a re-planned step) gets the first call's
 * result instead of a second email or refund.
 *
 * - `send_email`: runs once per recipient and subject; MCP's cancellation (`extra.signal`) reaches
 *   the function, which stops if it has not sent yet (the key is then released for a retry).
 * - `refund_order`: waits for a person's approval (`oncekey approve refunds.issue ORDER`) before
 *   it runs.
 * - The Oncekey errors a model can act on come back as tool results saying what to do
 *   (`tool-results.ts`).
 *
 *   ONCEKEY_ADDR   the Oncekey server (default 127.0.0.1:50051)
 *   ONCEKEY_TENANT the tenant of a dev-mode server (default "demo"); ONCEKEY_TOKEN for a real one
 *   OUTBOX         the file this demo "sends" emails and refunds to, one JSON line each (default ./outbox.jsonl)
 *   COMPOSE_MS     how long composing an email takes before it is sent (default 0)
 *
 * Run: `node node_modules/@oncekey/client/dist/examples/mcp-server.js`, or point an MCP client at it.
 */
import { appendFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { currentLease, OncekeyClient } from "@oncekey/client";
import { withToolResults } from "./tool-results";

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

const oncekey = new OncekeyClient(process.env.ONCEKEY_ADDR ?? "127.0.0.1:50051", {
  tenant: process.env.ONCEKEY_TENANT ?? "demo",
  token: process.env.ONCEKEY_TOKEN,
});
const outbox = process.env.OUTBOX ?? "outbox.jsonl";
const composeMs = Number(process.env.COMPOSE_MS ?? 0);

/** The side effect: "sends" an email (appends it to the outbox) and returns its message id. */
async function sendEmail(email: { to: string; subject: string; body: string }, _extra: Extra) {
  // The lease's signal fires when the caller cancels (MCP's extra.signal) or the lease is lost.
  const { signal } = currentLease()!;
  try {
    await sleep(composeMs, undefined, { signal }); // composing: nothing has been sent yet
  } catch (e) {
    console.error(`send_email: cancelled before sending to ${email.to} (${String(signal.reason)})`);
    throw e; // nothing happened: the key is released, a retry sends it
  }
  // From here on the email is sent: finish and return, so the ledger records it.
  const messageId = randomUUID();
  appendFileSync(outbox, JSON.stringify({ messageId, ...email }) + "\n");
  return { content: [{ type: "text" as const, text: `sent ${messageId} to ${email.to}` }], structuredContent: { messageId } };
}

/** The side effect of a refund, which a person approves first. */
async function refundOrder(refund: { orderId: string; cents: number }, _extra: Extra) {
  const refundId = randomUUID();
  appendFileSync(outbox, JSON.stringify({ refundId, ...refund }) + "\n");
  return { content: [{ type: "text" as const, text: `refunded ${refund.cents} cents on ${refund.orderId} (${refundId})` }] };
}

const server = new McpServer({ name: "oncekey-mailer", version: "1.0.0" });
server.registerTool(
  "send_email",
  {
    description: "Sends an email. Calling it again with the same recipient and subject returns the first call's result.",
    inputSchema: { to: z.string().email(), subject: z.string(), body: z.string() },
    outputSchema: { messageId: z.string() },
  },
  // The key is the recipient and subject; the fingerprinted arguments the tool's input (never the
  // per-request `extra`); MCP's cancellation reaches the call.
  withToolResults(
    oncekey.idempotent(sendEmail, {
      namespace: "email.send",
      key: (email) => [email.to, email.subject],
      args: (email) => email,
      signal: (_email, extra) => extra.signal,
    }),
  ),
);
server.registerTool(
  "refund_order",
  {
    description: "Refunds an order once a person approved it. Until then it answers that it awaits approval; call it again later.",
    inputSchema: { orderId: z.string(), cents: z.number().int().positive() },
  },
  withToolResults(
    oncekey.idempotent(refundOrder, {
      namespace: "refunds.issue",
      key: (refund) => refund.orderId,
      args: (refund) => refund,
      signal: (_refund, extra) => extra.signal,
      requireApproval: true,
      wait: 0,
    }),
  ),
);

server.connect(new StdioServerTransport()).catch((e) => {
  console.error("mcp-server:", e);
  process.exit(1);
});
