// The example MCP server (examples/mcp-server.ts) through a real MCP client session over stdio:
// the same tool call twice gives one effect and one replay; the errors a model can act on come
// back as tool results saying what to do; MCP's cancellation reaches the function, and the
// effect still happens once.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { OncekeyClient, OperationKey } from "../src";
import { sleep, TestServer, uniqueKey } from "./server";

const server = new TestServer();
const outbox = join(server.dataDir, "outbox.jsonl");
const sessions: Client[] = [];
let mcp: Client;
let oncekey: OncekeyClient;

/** An MCP session with the example server; `stderr` gets each line it logs. */
async function connect(env: { [k: string]: string } = {}, stderr?: (line: string) => void): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(__dirname, "..", "examples", "mcp-server.js")],
    env: { ...(process.env as { [k: string]: string }), ONCEKEY_ADDR: server.target, ONCEKEY_TENANT: "mcp", OUTBOX: outbox, ...env },
    stderr: "pipe",
  });
  const client = new Client({ name: "oncekey-test", version: "1.0.0" });
  await client.connect(transport);
  createInterface({ input: transport.stderr as Readable }).on("line", (line) => (stderr ? stderr(line) : process.stderr.write(`${line}\n`)));
  sessions.push(client);
  return client;
}

before(async () => {
  await server.start();
  oncekey = new OncekeyClient(server.target, { tenant: "mcp" });
  mcp = await connect();
});
after(async () => {
  for (const s of sessions) await s.close();
  await oncekey.close();
  await server.dispose();
});

const sent = (): { messageId?: string; refundId?: string; subject?: string; orderId?: string }[] =>
  existsSync(outbox) ? readFileSync(outbox, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : [];
const text = (r: Awaited<ReturnType<Client["callTool"]>>) => (r.content as { type: string; text: string }[]).map((c) => c.text).join("\n");

test("send_email called twice: one email, the second call replays the first result", async () => {
  const args = { to: "ada@example.com", subject: uniqueKey("invoice"), body: "Attached." };
  const first = await mcp.callTool({ name: "send_email", arguments: args });
  const second = await mcp.callTool({ name: "send_email", arguments: args });
  assert.equal(first.isError, undefined, JSON.stringify(first));
  assert.deepEqual(second, first, "the replay is the first result");
  const emails = sent().filter((e) => e.subject === args.subject);
  assert.equal(emails.length, 1, "one effect");
  assert.equal((first.structuredContent as { messageId: string }).messageId, emails[0].messageId);

  const other = await mcp.callTool({ name: "send_email", arguments: { ...args, subject: `${args.subject} (receipt)` } });
  assert.notDeepEqual(other.structuredContent, first.structuredContent, "another intent is another effect");
});

test("the same key with other arguments: a tool result that says nothing was done and what to do", async () => {
  const args = { to: "ada@example.com", subject: uniqueKey("welcome"), body: "Hello" };
  await mcp.callTool({ name: "send_email", arguments: args });
  const reused = await mcp.callTool({ name: "send_email", arguments: { ...args, body: "Hello again" } });
  assert.equal(reused.isError, true);
  assert.match(text(reused), /^Nothing was done: this request's key was already used with different arguments\./);
  assert.match(text(reused), /repeat the original arguments exactly/);
  assert.equal(sent().filter((e) => e.subject === args.subject).length, 1);
});

test("refund_order awaits approval: a plain tool result saying so, then it runs once approved", async () => {
  const orderId = uniqueKey("order");
  const waiting = await mcp.callTool({ name: "refund_order", arguments: { orderId, cents: 1500 } });
  assert.equal(waiting.isError, false);
  assert.match(text(waiting), /^Waiting for approval: a person must approve this request before it runs; nothing has happened yet\./);
  assert.equal(sent().filter((e) => e.orderId === orderId).length, 0, "nothing ran");

  await oncekey.approve("refunds.issue", orderId, "checked");
  const refunded = await mcp.callTool({ name: "refund_order", arguments: { orderId, cents: 1500 } });
  assert.match(text(refunded), new RegExp(`^refunded 1500 cents on ${orderId}`));
  assert.deepEqual(await mcp.callTool({ name: "refund_order", arguments: { orderId, cents: 1500 } }), refunded);
  assert.equal(sent().filter((e) => e.orderId === orderId).length, 1);
});

// The timeout only turns a hang (a function that never sees the abort) into a failure.
test("a cancelled call: the abort reaches the function before it sends, the key is released, and the retry sends once", { timeout: 60_000 }, async () => {
  const logged: string[] = [];
  const slow = await connect({ COMPOSE_MS: "600000" }, (line) => logged.push(line));
  const args = { to: "bob@example.com", subject: uniqueKey("report"), body: "Q3" };
  const key = OperationKey.of("email.send", args.to, args.subject);

  const cancel = new AbortController();
  const call = slow.callTool({ name: "send_email", arguments: args }, undefined, { signal: cancel.signal });
  while ((await oncekey.lookup(key))?.status !== "PROCESSING") await sleep(20); // the function is composing
  cancel.abort(new Error("the user stopped the agent"));
  await assert.rejects(call);

  while (!logged.some((l) => l.startsWith(`send_email: cancelled before sending to ${args.to}`))) await sleep(20);
  while ((await oncekey.lookup(key))?.status !== "RETRY") await sleep(20); // released, not held until its lease runs out
  assert.equal(sent().filter((e) => e.subject === args.subject).length, 0, "nothing was sent");

  const retried = await mcp.callTool({ name: "send_email", arguments: args });
  assert.equal(retried.isError, undefined, JSON.stringify(retried));
  assert.deepEqual(await mcp.callTool({ name: "send_email", arguments: args }), retried, "then replayed");
  assert.equal(sent().filter((e) => e.subject === args.subject).length, 1, "one email in all");
});
