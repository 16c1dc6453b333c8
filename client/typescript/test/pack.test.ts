// The package as a user gets it: `npm pack`'s tarball installed into a scratch project without
// devDependencies or build tools, then the README's ten-line example run as written against a
// real server (twice in one process: the second call must replay the first's value).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TestServer } from "./server";

const PACKAGE = join(__dirname, "..", "..");
const server = new TestServer();
const scratch = mkdtempSync(join(tmpdir(), "oncekey-pack-"));
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

before(() => server.start());
after(async () => {
  await server.dispose();
  rmSync(scratch, { recursive: true, force: true });
});

/** The first ```js block of the README (after `heading`, when given). */
function readmeExample(heading = ""): string {
  const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
  const m = /```js\n([\s\S]*?)```/.exec(readme.slice(readme.indexOf(heading)));
  assert.ok(m, "the README has a js example");
  return m[1];
}

test("the npm pack tarball installs without dev tools and runs the README example", () => {
  // --ignore-scripts: pack what `npm test` just built (prepack would only build it again).
  const packed = execFileSync(npm, ["pack", "--ignore-scripts", "--json", "--pack-destination", scratch], { cwd: PACKAGE, encoding: "utf8" });
  const [{ filename, files }] = JSON.parse(packed) as [{ filename: string; files: { path: string }[] }];
  const paths = files.map((f) => f.path);
  assert.ok(paths.includes("dist/src/index.js") && paths.includes("dist/src/index.d.ts"), "compiled JS and types are shipped");
  assert.ok(!paths.some((p) => p.startsWith("src/") || p.startsWith("dist/test/")), "no sources or tests in the package");

  const app = join(scratch, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "scratch-app", private: true, type: "module" }));
  execFileSync(npm, ["install", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", join(scratch, filename)], {
    cwd: app,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const installed = readdirSync(join(app, "node_modules"));
  for (const tool of ["typescript", "ts-proto", "@modelcontextprotocol"]) assert.ok(!installed.includes(tool), `${tool} is not installed`);
  assert.ok(!readdirSync(join(app, "node_modules", "@bufbuild")).includes("buf"), "buf is not installed");

  const manifest = JSON.parse(readFileSync(join(app, "node_modules", "@oncekey", "client", "package.json"), "utf8"));
  for (const script of ["prepare", "preinstall", "install", "postinstall"]) {
    assert.equal(manifest.scripts?.[script], undefined, `installing runs no ${script} script (it would need dev tools)`);
  }

  writeFileSync(join(app, "example.mjs"), readmeExample());
  const run = () => execFileSync(process.execPath, ["example.mjs"], { cwd: app, encoding: "utf8", env: { ...process.env, ONCEKEY_ADDR: server.target } });
  const [first, second] = run().trim().split("\n");
  assert.match(first, /messageId/);
  assert.equal(second, first, "the second call replays the first's value");
  const again = run().trim().split("\n");
  assert.deepEqual(again, [first, first], "a new process replays it too");

  // The approval-gate example, as written.
  writeFileSync(join(app, "approval.mjs"), readmeExample("## Approval gate"));
  const gated = execFileSync(process.execPath, ["approval.mjs"], { cwd: app, encoding: "utf8", env: { ...process.env, ONCEKEY_ADDR: server.target } });
  const lines = gated.trim().split("\n");
  assert.equal(lines[0], "awaiting approval: AWAITING_APPROVAL");
  assert.match(lines[1], /^refunding 1500 on order-/);
  assert.equal(lines[2], '{"refunded":1500}');

  // CommonJS users get the same exports.
  const cjs = execFileSync(process.execPath, ["-e", "const c = require('@oncekey/client'); console.log(typeof c.OncekeyClient, typeof c.LeaseLostError)"], {
    cwd: app,
    encoding: "utf8",
  });
  assert.equal(cjs.trim(), "function function");
});
