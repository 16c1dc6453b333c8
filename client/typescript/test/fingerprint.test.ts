// The shared RFC 8785 vectors (tests/vectors/fingerprint.json) and native JavaScript values.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { canonicalize, canonicalizeJson, fingerprint, fingerprintJson, InvalidJsonError } from "../src/fingerprint";

interface Vector { name: string; input: string; canonical?: string; sha256?: string; error?: boolean }

const vectors: Vector[] = JSON.parse(
  readFileSync(join(__dirname, "..", "..", "..", "..", "tests", "vectors", "fingerprint.json"), "utf8"),
).vectors;

test("the vectors are there", () => assert.ok(vectors.length > 10));

for (const v of vectors) {
  test(`vector: ${v.name}`, () => {
    if (v.error) {
      assert.throws(() => canonicalizeJson(v.input), InvalidJsonError);
      return;
    }
    assert.equal(canonicalizeJson(v.input), v.canonical);
    assert.equal(fingerprintJson(v.input).toString("hex"), v.sha256);
  });
}

test("JavaScript values fingerprint like their JSON text", () => {
  const args = { currency: "EUR", amount: 1250, rate: 0.1, lines: ["a", null, true], big: 2n ** 64n, skipped: undefined };
  const text = '{"rate":1e-1,"amount":1250.0,"currency":"EUR","lines":["a",null,true],"big":18446744073709551616}';
  assert.deepEqual(fingerprint(args), fingerprintJson(text));
  assert.equal(fingerprint(args).length, 32);
});

test("values without a canonical form are refused", () => {
  for (const bad of [NaN, Infinity, "\ud800", () => 1, Symbol("s")]) {
    assert.throws(() => fingerprint(bad), InvalidJsonError);
  }
});

test("2^64-1 as a bigint and as a number is the same JSON number (the double it denotes)", () => {
  assert.equal(canonicalize([18446744073709551615n]), "[18446744073709552000]");
  assert.deepEqual(fingerprint([18446744073709551615n]), fingerprint([18446744073709551615]));
  assert.deepEqual(fingerprint({ n: [1n] }), fingerprintJson('{"n":[1]}'));
});

test("cycles are refused, not overflowed", () => {
  const a: { self?: unknown } = {};
  a.self = a;
  assert.throws(() => fingerprint(a), InvalidJsonError);
  const shared = { x: 1 };
  assert.equal(canonicalize([shared, shared]), '[{"x":1},{"x":1}]');
});
