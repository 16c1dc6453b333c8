// Faults against a real server that the tests kill and restart: a restart during the function, a
// restart between the effect and the Complete (and the Fail), a server down at the start, a
// takeover while running, a lease that ran out before its Claim's answer arrived, and the caller's
// own cancellation and timeout.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { LeaseLostError, NeedsReconciliationError, OncekeyClient, OperationKey, UnavailableError } from "../src";
import type { Lease } from "../src";
import { failReceipts, sleep, TestServer, uniqueKey } from "./server";

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()!();
});

async function setup(): Promise<{ server: TestServer; client: OncekeyClient; key: OperationKey }> {
  const server = new TestServer();
  cleanup.push(() => server.dispose());
  await server.start();
  const client = new OncekeyClient(server.target, { tenant: "ts-faults" });
  cleanup.push(() => client.close());
  return { server, client, key: OperationKey.of("email.send", uniqueKey("fault"), "v1") };
}

/** A function that signals when it started and waits for `go`, counting its effects. */
function steps() {
  let started!: (lease: Lease) => void;
  const running = new Promise<Lease>((r) => (started = r));
  let go!: () => void;
  const gate = new Promise<void>((r) => (go = r));
  const effects: string[] = [];
  const fn = async (lease: Lease) => {
    started(lease);
    await Promise.race([gate, new Promise((_, reject) => lease.signal.addEventListener("abort", () => reject(lease.signal.reason)))]);
    effects.push("sent");
    return { sent: true };
  };
  return { fn, running, go, effects };
}

test("restart during the function: the KeepAlive is reopened and the lease holds", async () => {
  const { server, client, key } = await setup();
  const { fn, running, go, effects } = steps();
  const call = client.runDetailed(key, null, fn, { leaseTtl: 3000 });
  const lease = await running;
  await server.kill();
  await sleep(300);
  await server.start();
  await sleep(7500); // 2.5 lease lengths: only a reopened KeepAlive keeps the lease
  const rival = new OncekeyClient(server.target, { tenant: "ts-faults" });
  cleanup.push(() => rival.close());
  assert.equal((await rival.claim(key, { args: null })).outcome, "IN_PROGRESS");
  assert.equal(lease.signal.aborted, false, "the function was not cancelled");
  assert.equal(lease.lost, false);
  go();
  const done = await call;
  assert.deepEqual([done.value, done.replayed, done.record.status], [{ sent: true }, false, "SUCCEEDED"]);
  assert.equal(effects.length, 1);
});

test("server killed after the effect, back 1.5 s later: the Complete is retried, later runs replay", async () => {
  const { server, client, key } = await setup();
  const effects: string[] = [];
  let killed!: () => void;
  const down = new Promise<void>((r) => (killed = r));
  const call = client.run(key, null, async () => {
    effects.push("sent");
    await server.kill();
    killed();
    return "sent";
  });
  await down;
  setTimeout(() => void server.start(), 1500);
  assert.equal(await call, "sent");
  assert.equal((await client.lookup(key))?.status, "SUCCEEDED");
  const again = await client.runDetailed(key, null, () => assert.fail("must not run"));
  assert.deepEqual([again.value, again.replayed], ["sent", true]);
  assert.equal(effects.length, 1);
});

test("server killed before a failure is recorded: the Fail is retried and the caller sees its own error", async () => {
  const { server, client, key } = await setup();
  const mine = new Error("mailbox full");
  const call = client.run(key, null, async () => {
    await server.kill();
    setTimeout(() => void server.start(), 1500);
    throw mine;
  });
  assert.equal(await call.catch((e) => e), mine);
  assert.equal((await client.lookup(key))?.status, "RETRY");
});

test("server down at the start: the call waits for it", async () => {
  const { server, client, key } = await setup();
  await server.kill();
  setTimeout(() => void server.start(), 1500);
  let calls = 0;
  assert.equal(await client.run(key, null, () => ++calls), 1);
  assert.equal((await client.lookup(key))?.status, "SUCCEEDED");
});

test("takeover while running: the function's signal fires with LeaseLostError, and so does the call", async () => {
  const { server, client, key } = await setup();
  const { fn, running, effects } = steps();
  const call = client.run(key, null, fn, { leaseTtl: 1000 }).catch((e) => e);
  const lease = await running;
  await server.kill();
  await sleep(1500); // the lease lapses
  // Another server over the same data: someone takes the operation over and completes it.
  const other = new TestServer();
  Object.assign(other, { dataDir: server.dataDir });
  await other.start(0);
  const rival = new OncekeyClient(other.target, { tenant: "ts-faults" });
  const taken = await rival.claim(key, { args: null, leaseTtl: 1000 });
  assert.equal(taken.outcome, "ACQUIRED");
  await rival.complete(key, taken.lease!.token, { body: Buffer.from('"theirs"'), contentType: "application/json" });
  await rival.close();
  await other.kill();
  await server.start();
  const err = await call;
  assert.ok(err instanceof LeaseLostError, String(err));
  assert.equal(err.token, lease.token);
  assert.ok(lease.signal.reason instanceof LeaseLostError);
  assert.equal(lease.lost, true);
  assert.equal(effects.length, 0);
  assert.equal((await client.lookup(key))?.fencingToken, lease.token + 1n);
});

test("a lease that ran out before the Claim's answer arrived: nothing runs, it is released, LeaseLostError", async () => {
  // A server whose clock runs 2 s behind grants 1 s leases that have ended on this machine's clock
  // when the answer arrives, as a Claim answered after its lease would: another holder may be
  // taking the operation over, so the function must not run. Each release says nothing ran, so an
  // operation capped at one attempt keeps it (a plain release would use it up: the next Claim
  // would fail it with 429).
  const server = new TestServer([], { ONCEKEY_TEST_CLOCK_SKEW_MS: "-2000" });
  cleanup.push(() => server.dispose());
  await server.start();
  const client = new OncekeyClient(server.target, { tenant: "ts-faults" });
  cleanup.push(() => client.close());
  const key = OperationKey.of("email.send", uniqueKey("late"), "v1");
  let runs = 0;
  const fn = () => {
    runs++;
    return "ran";
  };
  const err = await client.run(key, null, fn, { leaseTtl: 1000, wait: 500, maxAttempts: 1 }).catch((e) => e);
  assert.equal(runs, 0, "nothing may run under a lapsed lease");
  assert.ok(err instanceof LeaseLostError, String(err));
  assert.ok(err.token >= 1n, String(err.token));
  assert.equal(err.cause, undefined);
  const record = await client.lookup(key);
  assert.equal(record?.status, "RETRY", "released, not left held");
  assert.equal(record?.error?.message, "the lease ran out before the Claim's answer arrived: the operation did not run");
  const receipts = await failReceipts(client, key.namespace, key.key);
  assert.ok(receipts.length > 0);
  assert.deepEqual(receipts, receipts.map(() => "RETRYABLE NOTHING_RAN"));
  // A lease long enough to outlast the skew: acquired, the one attempt still there.
  const again = await client.claim(key, { args: null, maxAttempts: 1, leaseTtl: 10_000 });
  assert.equal(again.outcome, "ACQUIRED");
});

test("the caller's signal: the call rejects with its reason, the function is told, the key is released", async () => {
  const { server, client, key } = await setup();
  const { fn, running, effects } = steps();
  const controller = new AbortController();
  const call = client.run(key, null, fn, { signal: controller.signal }).catch((e) => e);
  const lease = await running;
  controller.abort();
  const err = await call;
  assert.equal(err.name, "AbortError");
  assert.equal(lease.signal.aborted, true);
  await client.close(); // waits for the background settle
  const other = new OncekeyClient(server.target, { tenant: "ts-faults" });
  cleanup.push(() => other.close());
  assert.equal((await other.lookup(key))?.status, "RETRY");
  assert.equal(effects.length, 0);
});

test("at-most-once: a run the caller cancels mid-effect is not released; it awaits reconciliation", async () => {
  const { server, client, key } = await setup();
  const { fn, running, effects } = steps();
  const controller = new AbortController();
  const options = { signal: controller.signal, semantics: "AT_MOST_ONCE" as const, leaseTtl: 1000 };
  const call = client.run(key, null, fn, options).catch((e) => e);
  await running;
  controller.abort(); // the function rejects with the abort: its request may have gone out
  assert.equal((await call).name, "AbortError");
  await client.close(); // waits for the background settle, which must not release the key
  const other = new OncekeyClient(server.target, { tenant: "ts-faults" });
  cleanup.push(() => other.close());
  assert.notEqual((await other.lookup(key))?.status, "RETRY", "an at-most-once run is never released by a cancel");
  await sleep(1200); // the lease lapses
  const retry = await other.run(key, null, () => "ran again", { semantics: "AT_MOST_ONCE" }).catch((e) => e);
  assert.ok(retry instanceof NeedsReconciliationError, String(retry));
  assert.equal(effects.length, 0);
});

test("timeout: the call rejects with a TimeoutError and the key is released", async () => {
  const { server, client, key } = await setup();
  const { fn, effects } = steps();
  const err = await client.run(key, null, fn, { timeout: 500 }).catch((e) => e);
  assert.equal(err.name, "TimeoutError");
  await client.close(); // waits for the background release
  const other = new OncekeyClient(server.target, { tenant: "ts-faults" });
  cleanup.push(() => other.close());
  // Released by the Fail (RETRY), or never acquired if the Claim itself timed out: never PROCESSING.
  assert.notEqual((await other.lookup(key))?.status, "PROCESSING");
  assert.equal(await other.run(key, null, () => "second run"), "second run");
  assert.equal(effects.length, 0);
});

test("cancelled while waiting for another holder: rejects at once, the holder's outcome stands", async () => {
  const { client, key } = await setup();
  // Another holder runs it; our Claim waits for the outcome, then the caller gives up.
  const holder = steps();
  const held = client.run(key, null, holder.fn);
  await holder.running;
  const controller = new AbortController();
  const waiting = client.run(key, null, () => "ours", { signal: controller.signal, wait: 30_000 }).catch((e) => e);
  setTimeout(() => controller.abort(), 300);
  assert.equal((await waiting).name, "AbortError");
  holder.go();
  assert.deepEqual(await held, { sent: true });
  assert.equal((await client.lookup(key))?.status, "SUCCEEDED");
});

test("a value whose outcome cannot be recorded: UnavailableError with unsettled and the value", async () => {
  const { server, key } = await setup();
  const impatient = new OncekeyClient(server.target, {
    tenant: "ts-faults",
    connectTimeout: 200,
    retry: { maxAttempts: 2, initialBackoff: 10, maxBackoff: 10 },
  });
  cleanup.push(() => impatient.close());
  const err = await impatient
    .run(key, null, async () => {
      await server.kill();
      return { sent: "once" };
    })
    .catch((e) => e);
  assert.ok(err instanceof UnavailableError, String(err));
  assert.equal(err.unsettled, true);
  assert.deepEqual(err.result, { sent: "once" });
});
