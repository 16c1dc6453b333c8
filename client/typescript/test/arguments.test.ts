// The default fingerprinted arguments and key of a wrapped function (docs/api.md#default-arguments-
// and-key), against every case of the shared tests/vectors/arguments.json: the pure derivation,
// then the wrapper itself against a real server (the record it claims is under the vector's key,
// with the vector's fingerprint).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { canonicalize, defaultArguments, defaultKey, fingerprint, InexactNumberError, OncekeyClient } from "../src";
import { TestServer, uniqueKey } from "./server";

interface Case {
  name: string;
  call: unknown[];
  arguments?: unknown[];
  canonical?: string;
  sha256?: string;
  key?: string;
  refused_number?: { path: string };
}

const cases: Case[] = JSON.parse(
  readFileSync(join(__dirname, "..", "..", "..", "..", "tests", "vectors", "arguments.json"), "utf8"),
).cases;

/** A vector's call as JavaScript values: `{"$bytes": b64}` is a byte string (a Uint8Array, or a Buffer when `buffer`). */
function decode(value: unknown, buffer: boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => decode(v, buffer));
  if (value !== null && typeof value === "object") {
    const bytes = (value as { $bytes?: string }).$bytes;
    if (typeof bytes === "string") return buffer ? Buffer.from(bytes, "base64") : new Uint8Array(Buffer.from(bytes, "base64"));
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decode(v, buffer)]));
  }
  return value;
}

test("the cases are there, refused ones among them", () => {
  assert.ok(cases.length >= 10);
  assert.ok(cases.some((c) => c.refused_number));
});

for (const c of cases) {
  test(`arguments vector: ${c.name}`, () => {
    for (const buffer of [false, true]) {
      const call = decode(c.call, buffer) as unknown[];
      if (c.refused_number) {
        assert.throws(() => defaultKey(call), (e: unknown) => e instanceof InexactNumberError && e.path === c.refused_number!.path);
        continue;
      }
      const args = defaultArguments(call);
      assert.equal(canonicalize(args), c.canonical);
      assert.deepEqual(JSON.parse(canonicalize(args)), JSON.parse(JSON.stringify(c.arguments)));
      assert.equal(fingerprint(args).toString("hex"), c.sha256);
      assert.equal(defaultKey(call), c.key);
    }
  });
}

test("undefined is null: a trailing undefined is dropped, an inner one kept as null", () => {
  assert.deepEqual(defaultArguments(["a", undefined, "c", undefined, null]), ["a", null, "c"]);
  assert.equal(defaultKey(["a", undefined]), defaultKey(["a"]));
  assert.equal(defaultKey([]), defaultKey([undefined, null]));
});

const server = new TestServer();
let client: OncekeyClient;
const namespace = uniqueKey("args").toLowerCase().replace(/[^a-z0-9._-]/g, ".");

before(async () => {
  await server.start();
  client = new OncekeyClient(server.target, { tenant: "ts-arguments" });
});
after(async () => {
  await client.close();
  await server.dispose();
});

test("client.idempotent without args or key claims each vector's key with its fingerprint", async () => {
  let runs = 0;
  const wrapped = client.idempotent(async (...args: unknown[]) => ({ run: ++runs, n: args.length }), { namespace });
  for (const c of cases) {
    const call = decode(c.call, false) as unknown[];
    if (c.refused_number) {
      const before = runs;
      await assert.rejects(wrapped(...call), (e: unknown) => e instanceof InexactNumberError && e.path === c.refused_number!.path, c.name);
      assert.equal(runs, before, `${c.name}: nothing ran`);
      continue;
    }
    await wrapped(...call);
    const record = await client.lookup({ namespace, key: c.key! });
    assert.ok(record, `${c.name}: a record under ${c.key}`);
    assert.equal(record.fingerprint.toString("hex"), c.sha256, c.name);
  }
  // Equal arguments with and without their trailing nulls are one operation.
  const first = await wrapped("ada@example.com", "Your ticket #481");
  assert.deepEqual(await wrapped("ada@example.com", "Your ticket #481", null, undefined), first);
});
