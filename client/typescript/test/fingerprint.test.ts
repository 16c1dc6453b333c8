// The shared RFC 8785 vectors (tests/vectors/fingerprint.json), their refused numbers (the JSON
// path checked), and native JavaScript values under the same rule: lossless or refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { canonicalize, canonicalizeJson, fingerprint, fingerprintJson, InexactNumberError, InvalidJsonError } from "../src/fingerprint";

interface Vector {
  name: string;
  input: string;
  canonical?: string;
  sha256?: string;
  error?: boolean;
  refused_number?: { path: string; why: "magnitude" | "precision" };
}

const vectors: Vector[] = JSON.parse(
  readFileSync(join(__dirname, "..", "..", "..", "..", "tests", "vectors", "fingerprint.json"), "utf8"),
).vectors;

test("the vectors are there, refused numbers among them", () => {
  assert.ok(vectors.length > 10);
  assert.ok(vectors.some((v) => v.refused_number));
});

/** The error `f` throws (failing when it returns). */
function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  return assert.fail("expected an error");
}

for (const v of vectors) {
  test(`vector: ${v.name}`, () => {
    if (v.error) {
      const e = thrown(() => canonicalizeJson(v.input));
      assert.ok(e instanceof InvalidJsonError, String(e));
      assert.throws(() => fingerprintJson(v.input), InvalidJsonError);
      if (v.refused_number) {
        assert.ok(e instanceof InexactNumberError, `${v.name}: expected a refused number, got ${String(e)}`);
        assert.equal(e.path, v.refused_number.path);
        assert.equal(e.why, v.refused_number.why);
        assert.equal(e.message.startsWith(`${v.refused_number.path}: `), true, e.message);
        assert.match(e.message, /send it as a string/);
      } else {
        assert.ok(!(e instanceof InexactNumberError), `${v.name}: not a refused number but ${String(e)}`);
      }
      return;
    }
    assert.equal(canonicalizeJson(v.input), v.canonical);
    assert.equal(fingerprintJson(v.input).toString("hex"), v.sha256);
  });
}

test("JavaScript values fingerprint like their JSON text", () => {
  const args = { currency: "EUR", amount: 1250, rate: 0.1, lines: ["a", null, true], big: 2n ** 53n - 1n, skipped: undefined };
  const text = '{"rate":1e-1,"amount":1250.0,"currency":"EUR","lines":["a",null,true],"big":9007199254740991}';
  assert.deepEqual(fingerprint(args), fingerprintJson(text));
  assert.equal(fingerprint(args).length, 32);
});

test("values without a canonical form are refused", () => {
  for (const bad of [NaN, Infinity, "\ud800", () => 1, Symbol("s"), undefined, new Map([["a", 1]]), new Set([1])]) {
    assert.throws(() => fingerprint(bad), InvalidJsonError, String(bad));
  }
});

test("numbers and bigints beyond ±(2^53−1) are refused, naming their path; within it a bigint is the number", () => {
  const path = (value: unknown) => {
    const e = thrown(() => canonicalize(value));
    assert.ok(e instanceof InexactNumberError, String(e));
    assert.equal(e.why, "magnitude");
    assert.match(e.message, /send it as a string/);
    assert.doesNotMatch(e.message, /9007199254740992|18446744073709551615/, "the message names the path, not the number");
    return e.path;
  };
  assert.equal(path([18446744073709551615n]), "$[0]");
  assert.equal(path(18446744073709551615), "$");
  assert.equal(path({ id: 2n ** 53n }), "$.id");
  assert.equal(path({ a: [1, { "b c": -(2 ** 53) }] }), '$.a[1]["b c"]');
  assert.equal(path({ x: { y: [0, 1.5e300] } }), "$.x.y[1]");
  assert.equal(path({ ok: 1, "é\"x": 1e21 }), '$["é\\"x"]');
  assert.equal(path({ toJSON: () => ({ n: 2n ** 60n }) }), "$.n");
  assert.equal(canonicalize([2n ** 53n - 1n, -(2n ** 53n - 1n), 1n]), "[9007199254740991,-9007199254740991,1]");
  assert.deepEqual(fingerprint({ n: [1n] }), fingerprintJson('{"n":[1]}'));
  assert.equal(canonicalize([Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 5e-324, -0]), "[9007199254740991,-9007199254740991,5e-324,0]");
});

test("a JSON text's literals must keep their value; the first refused one in text order is named", () => {
  for (const ok of ["0.1", "4.50", "1.0", "10e-1", "1e-7", "5e-324", "333333333.3333333", "-0.0", "9007199254740991"]) {
    assert.doesNotThrow(() => canonicalizeJson(ok), ok);
  }
  const refused = (text: string) => {
    const e = thrown(() => canonicalizeJson(text));
    assert.ok(e instanceof InexactNumberError, `${text}: ${String(e)}`);
    return [e.path, e.why];
  };
  assert.deepEqual(refused("0.10000000000000001"), ["$", "precision"]);
  assert.deepEqual(refused("9.007199254740993e15"), ["$", "magnitude"]); // the double it rounds to is 2^53
  assert.deepEqual(refused("9007199254740992.0"), ["$", "magnitude"]);
  assert.deepEqual(refused('{"_x9":{"y":[0, 0.1000000000000000055511151231257827, 1e300]}}'), ["$._x9.y[1]", "precision"]);
  assert.deepEqual(refused('[{}, {"x":{}}, [], [[]], 12345678901234567890]'), ["$[4]", "magnitude"]);
  // Invalid JSON wins over a refused number anywhere in the text.
  const e = thrown(() => canonicalizeJson('{"a":9007199254740993,"a":1}'));
  assert.ok(e instanceof InvalidJsonError && !(e instanceof InexactNumberError), String(e));
});

test("byte strings are standard base64 with padding, wherever they are", () => {
  const bytes = new Uint8Array([0, 1, 2, 255]);
  assert.equal(canonicalize([bytes, Buffer.from([0, 1, 2, 255]), { b: new Uint8Array() }]), '["AAEC/w==","AAEC/w==",{"b":""}]');
  // A view into a larger buffer is just its own bytes.
  assert.equal(canonicalize(new Uint8Array([9, 9, 0, 1, 2, 255, 9]).subarray(2, 6)), '"AAEC/w=="');
});

test("nesting deeper than 128 levels is refused, as the server refuses it", () => {
  assert.doesNotThrow(() => canonicalizeJson("[".repeat(128) + "]".repeat(128)));
  assert.throws(() => canonicalizeJson("[".repeat(129) + "]".repeat(129)), InvalidJsonError);
  assert.throws(() => canonicalizeJson("[".repeat(100_000)), InvalidJsonError);
});

test("cycles are refused, not overflowed", () => {
  const a: { self?: unknown } = {};
  a.self = a;
  assert.throws(() => fingerprint(a), InvalidJsonError);
  const shared = { x: 1 };
  assert.equal(canonicalize([shared, shared]), '[{"x":1},{"x":1}]');
});
