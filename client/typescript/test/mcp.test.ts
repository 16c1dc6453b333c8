// The example MCP server (examples/mcp-server.ts) through a real MCP client session over stdio:
// the same tool call twice gives one effect and one replay of the first result.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { TestServer } from "./server";

const server = new TestServer();
let mcp: Client;
const outbox = join(server.dataDir, "outbox.jsonl");

before(async () => {
  await server.start();
  mcp = new Client({ name: "oncekey-test", version: "1.0.0" });
  await mcp.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [join(__dirname, "..", "examples", "mcp-server.js")],
      env: { ...(process.env as { [k: string]: string }), ONCEKEY_ADDR: server.target, ONCEKEY_TENANT: "mcp", OUTBOX: outbox },
      stderr: "inherit",
    }),
  );
});
after(async () => {
  await mcp.close();
  await server.dispose();
});

const sent = () => (existsSync(outbox) ? readFileSync(outbox, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);

test("send_email called twice: one email, the second call replays the first result", async () => {
  const args = { to: "ada@example.com", subject: "Your invoice", body: "Attached." };
  const first = await mcp.callTool({ name: "send_email", arguments: args });
  const second = await mcp.callTool({ name: "send_email", arguments: args });
  assert.equal(first.isError, undefined, JSON.stringify(first));
  assert.equal(sent().length, 1, "one effect");
  assert.deepEqual(second, first, "the replay is the first result");
  assert.equal((first.structuredContent as { messageId: string }).messageId, sent()[0].messageId);

  const other = await mcp.callTool({ name: "send_email", arguments: { ...args, subject: "Receipt" } });
  assert.notDeepEqual(other.structuredContent, first.structuredContent);
  assert.equal(sent().length, 2, "another intent is another effect");
});
