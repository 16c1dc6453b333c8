// The retry policy and circuit breaker without a server: which failures are retried, how often,
// after how long (backoff ceilings, full jitter, the server's pushback).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Metadata, status } from "@grpc/grpc-js";
import { backoff, ceiling, DEFAULT_RETRY, retryDelay, retrying } from "../src/retry";
import { CircuitBreaker, CircuitOpenError } from "../src/breaker";
import { isTransient, pushback } from "../src/status";

function grpcError(code: number, pushbackMs?: string) {
  const metadata = new Metadata();
  if (pushbackMs !== undefined) metadata.set("grpc-retry-pushback-ms", pushbackMs);
  return Object.assign(new Error(`${code}`), { code, details: "x", metadata });
}

const fast = { maxAttempts: 5, initialBackoff: 1, maxBackoff: 4 };

async function flaky(failures: number, error: () => Error, policy = fast) {
  let calls = 0;
  const result = await retrying(policy, undefined, async () => {
    if (calls++ < failures) throw error();
    return "same request";
  }).catch((e) => e);
  return { result, calls };
}

test("transient failures are retried with the identical request", async () => {
  for (const code of [status.UNAVAILABLE, status.RESOURCE_EXHAUSTED, status.DEADLINE_EXCEEDED]) {
    assert.deepEqual(await flaky(3, () => grpcError(code)), { result: "same request", calls: 4 });
  }
});

test("gives up after maxAttempts with the last error", async () => {
  const { result, calls } = await flaky(100, () => grpcError(status.UNAVAILABLE));
  assert.equal(result.code, status.UNAVAILABLE);
  assert.equal(calls, 5);
});

test("never retries INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, FAILED_PRECONDITION, an open circuit", async () => {
  for (const code of [status.INVALID_ARGUMENT, status.UNAUTHENTICATED, status.PERMISSION_DENIED, status.FAILED_PRECONDITION, status.NOT_FOUND]) {
    assert.equal((await flaky(100, () => grpcError(code))).calls, 1, `code ${code}`);
  }
  assert.equal((await flaky(100, () => new CircuitOpenError(10))).calls, 1);
});

test("honours grpc-retry-pushback-ms: waits that long, or not at all when negative", async () => {
  assert.equal(pushback(grpcError(status.RESOURCE_EXHAUSTED, "250")), 250);
  assert.equal(retryDelay(DEFAULT_RETRY, 1, grpcError(status.RESOURCE_EXHAUSTED, "250")), 250);
  assert.equal(pushback(grpcError(status.UNAVAILABLE, "-1")), null);
  assert.equal((await flaky(100, () => grpcError(status.UNAVAILABLE, "-1"))).calls, 1);
  const started = Date.now();
  assert.deepEqual(await flaky(1, () => grpcError(status.UNAVAILABLE, "300")), { result: "same request", calls: 2 });
  assert.ok(Date.now() - started >= 290, "waited the pushback, far beyond the 4 ms backoff ceiling");
});

test("backoff is exponential, capped, with full jitter", () => {
  const p = DEFAULT_RETRY;
  assert.deepEqual([1, 2, 3, 6, 60].map((r) => ceiling(p, r)), [500, 1000, 2000, 15_000, 15_000]);
  for (let r = 1; r < 10; r++) assert.ok(backoff(p, r) <= ceiling(p, r));
  assert.ok(new Set(Array.from({ length: 20 }, () => backoff(p, 3))).size > 1, "jittered");
});

test("an aborted signal stops the retries with its reason", async () => {
  const controller = new AbortController();
  const reason = new Error("caller gave up");
  let calls = 0;
  const call = retrying({ ...DEFAULT_RETRY, initialBackoff: 60_000, maxBackoff: 60_000 }, controller.signal, async () => {
    calls++;
    throw grpcError(status.UNAVAILABLE, "60000");
  });
  setTimeout(() => controller.abort(reason), 20);
  assert.equal(await call.catch((e) => e), reason);
  assert.equal(calls, 1);
});

test("connection drops reported as INTERNAL are transient; reasoned errors are not", () => {
  assert.ok(isTransient(grpcError(status.UNAVAILABLE)));
  assert.ok(isTransient(Object.assign(new Error("13 INTERNAL: Received RST_STREAM with code 2"), { code: status.INTERNAL })));
  assert.ok(!isTransient(grpcError(status.INTERNAL)));
});

test("the breaker opens after consecutive failures, half-opens for one probe, closes on success", () => {
  const breaker = new CircuitBreaker({ failureThreshold: 3, coolDown: 50 });
  for (let i = 0; i < 3; i++) {
    assert.equal(breaker.admit(), false);
    breaker.record(true);
  }
  assert.equal(breaker.state, "open");
  assert.throws(() => breaker.admit(), CircuitOpenError);
  const until = Date.now() + 60;
  while (Date.now() < until); // the cool-down passes
  assert.equal(breaker.admit(), true, "the probe");
  assert.throws(() => breaker.admit(), CircuitOpenError, "one probe at a time");
  breaker.record(false, true);
  assert.equal(breaker.state, "closed");
  // A permanent error proves the server is up: the count starts again.
  breaker.record(true);
  breaker.record(true);
  breaker.record(false);
  breaker.record(true);
  assert.equal(breaker.state, "closed");
});
