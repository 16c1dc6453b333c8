// The package as a user gets it: `npm pack`'s tarball installed into a scratch project (from the
// npm cache when it can) without devDependencies or build tools; then `import` and `require` of
// it (one implementation behind both), a type check of both, and the README's examples run as
// written against a real server, the MCP example included.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { TestServer } from "./server";

const PACKAGE = join(__dirname, "..", "..");
const server = new TestServer();
const scratch = mkdtempSync(join(tmpdir(), "oncekey-pack-"));
const app = join(scratch, "app");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";
let tarball = "";

before(async () => {
  await server.start();
  // --ignore-scripts: pack what `npm test` just built (prepack would only build it again).
  const packed = execFileSync(npm, ["pack", "--ignore-scripts", "--json", "--pack-destination", scratch], { cwd: PACKAGE, encoding: "utf8" });
  const [{ filename }] = JSON.parse(packed) as [{ filename: string }];
  tarball = join(scratch, filename);
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "scratch-app", private: true, type: "module" }));
  // The README's install line, with the tarball just packed.
  const line = readmeBlock("sh", "## AI agents and MCP").split("\n").find((l) => l.startsWith("npm install "));
  assert.ok(line, "the README shows how to install the MCP example");
  const args = line.split(/\s+/).slice(2).map((a) => (a.endsWith(".tgz") ? tarball : a));
  execFileSync(npm, ["install", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...args], {
    cwd: app,
    stdio: ["ignore", "ignore", "inherit"],
  });
});
after(async () => {
  await server.dispose();
  rmSync(scratch, { recursive: true, force: true });
});

/** The first ```lang block of the README after `heading` (the first of the README without one). */
function readmeBlock(lang: string, heading = ""): string {
  const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
  const m = new RegExp("```" + lang + "\\n([\\s\\S]*?)```").exec(readme.slice(readme.indexOf(heading)));
  assert.ok(m, `the README has a ${lang} block after ${heading || "its start"}`);
  return m[1];
}

const node = (args: string[]) =>
  execFileSync(process.execPath, args, { cwd: app, encoding: "utf8", env: { ...process.env, ONCEKEY_ADDR: server.target } });

test("the tarball: compiled JS and types for import and require, the examples, no sources or tests", () => {
  const listed = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" }).split("\n").map((p) => p.replace(/^package\//, ""));
  for (const file of [
    "package.json",
    "README.md",
    "dist/src/index.js",
    "dist/src/index.d.ts",
    "dist/esm/index.js",
    "dist/esm/index.d.ts",
    "dist/esm/package.json",
    "dist/examples/mcp-server.js",
    "dist/examples/tool-results.js",
    "examples/mcp-server.ts",
    "examples/tool-results.ts",
  ]) {
    assert.ok(listed.includes(file), `${file} is in the package`);
  }
  assert.ok(!listed.some((p) => p.startsWith("src/") || p.startsWith("dist/test/") || p.startsWith("test/") || p.startsWith("types-test/")));

  const manifest = JSON.parse(readFileSync(join(app, "node_modules", "@oncekey", "client", "package.json"), "utf8"));
  assert.equal(manifest.private, undefined, "publishable");
  for (const script of ["prepare", "preinstall", "install", "postinstall"]) {
    assert.equal(manifest.scripts?.[script], undefined, `installing runs no ${script} script (it would need dev tools)`);
  }
  const installed = readdirSync(join(app, "node_modules"));
  for (const tool of ["typescript", "ts-proto"]) assert.ok(!installed.includes(tool), `${tool} is not installed`);
  assert.ok(!readdirSync(join(app, "node_modules", "@bufbuild")).includes("buf"), "buf is not installed");
});

test("import and require give the same implementation", () => {
  writeFileSync(
    join(app, "both.mjs"),
    `import { createRequire } from "node:module";
import * as esm from "@oncekey/client";
import { OncekeyClient, KeyReusedError, defaultKey } from "@oncekey/client";
const cjs = createRequire(import.meta.url)("@oncekey/client");
const same = Object.keys(cjs).filter((k) => k !== "__esModule").every((k) => esm[k] === cjs[k]);
console.log(typeof OncekeyClient, KeyReusedError === cjs.KeyReusedError, same, defaultKey(["a"]));
`,
  );
  assert.equal(node(["both.mjs"]).trim(), `function true true ${"sha256:0eb5b8d6f81bc677da8a08567cc4fa9a06a57e9ec8da85ed73a7f62727996002"}`);
  const cjs = node(["-e", "const c = require('@oncekey/client'); console.log(typeof c.OncekeyClient, typeof c.LeaseLostError, typeof c.v1.LedgerClient)"]);
  assert.equal(cjs.trim(), "function function function");
});

test("the types check, imported from an ES module and required from CommonJS", () => {
  const use = `const client = new OncekeyClient("127.0.0.1:50051", { tenant: "t" });
const send = client.idempotent(async (to: string, n: number) => ({ to, n }), { namespace: "email.send" });
export async function f(): Promise<number> {
  const done = await send.detailed("ada", 1);
  const replayed: boolean = done.replayed;
  void replayed;
  // @ts-expect-error the first parameter is a string
  await send(1, 1);
  return done.value.n;
}
`;
  writeFileSync(join(app, "esm.mts"), `import { OncekeyClient } from "@oncekey/client";\n${use}`);
  writeFileSync(join(app, "cjs.cts"), `import oncekey = require("@oncekey/client");\nconst { OncekeyClient } = oncekey;\n${use}`);
  const tsc = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");
  const types = join(PACKAGE, "node_modules", "@types");
  const flags = ["--noEmit", "--strict", "--skipLibCheck", "--module", "node16", "--moduleResolution", "node16", "--target", "es2022", "--typeRoots", types, "--types", "node"];
  execFileSync(process.execPath, [tsc, ...flags, "esm.mts", "cjs.cts"], { cwd: app, encoding: "utf8" });
});

test("the README's examples run as written", () => {
  writeFileSync(join(app, "example.mjs"), readmeBlock("js"));
  const [first, second, detailed] = node(["example.mjs"]).trim().split("\n");
  assert.match(first, /messageId/);
  assert.equal(second, first, "the second call replays the first's value");
  assert.equal(detailed, `${first} true COMPLETED`);
  assert.deepEqual(node(["example.mjs"]).trim().split("\n"), [first, first, detailed], "a new process replays it too");

  writeFileSync(join(app, "approval.mjs"), readmeBlock("js", "## Approval gate"));
  const lines = node(["approval.mjs"]).trim().split("\n");
  assert.equal(lines[0], "awaiting approval: AWAITING_APPROVAL");
  assert.match(lines[1], /^refunding 1500 on order-/);
  assert.equal(lines[2], '{"refunded":1500}');

  // One operation awaiting approval to list (the approval example's was approved and ran).
  node([
    "-e",
    `const { OncekeyClient } = require("@oncekey/client");
const client = new OncekeyClient(process.env.ONCEKEY_ADDR, { tenant: "demo" });
client.claim({ namespace: "payments.refund", key: "order-listed" }, { args: 1, requireApproval: true }).finally(() => client.close());`,
  ]);
  writeFileSync(join(app, "listing.mjs"), readmeBlock("js", "## Listing and reconciliation"));
  assert.match(node(["listing.mjs"]), /^AWAITING_APPROVAL payments\.refund order-listed \d{4}-\d\d-\d\dT[\d:.]+Z\n$/);
});

test("the README's MCP example runs as written from the installed package", async () => {
  const run = readmeBlock("sh", "## AI agents and MCP").split("\n").find((l) => l.includes(" node "));
  assert.ok(run, "the README shows how to run the MCP example");
  const [, script] = /node (\S+)$/.exec(run)!;
  const mcp = new Client({ name: "pack-test", version: "1.0.0" });
  await mcp.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [script],
      cwd: app,
      env: { ...(process.env as { [k: string]: string }), ONCEKEY_ADDR: server.target, OUTBOX: join(scratch, "outbox.jsonl") },
      stderr: "inherit",
    }),
  );
  try {
    const tools = await mcp.listTools();
    assert.deepEqual(tools.tools.map((t) => t.name).sort(), ["refund_order", "send_email"]);
    const args = { to: "ada@example.com", subject: "Packed", body: "Hi" };
    const first = await mcp.callTool({ name: "send_email", arguments: args });
    assert.deepEqual(await mcp.callTool({ name: "send_email", arguments: args }), first);
    assert.equal(readFileSync(join(scratch, "outbox.jsonl"), "utf8").trim().split("\n").length, 1);
  } finally {
    await mcp.close();
  }
});
