// The one-call APIs against a real server: makeIdempotent runs once and replays, typed errors,
// the caller's own error, dispositions, waiting for another holder, reconciliation.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  AbandonError,
  currentLease,
  FinalError,
  InProgressError,
  KeyReusedError,
  NeedsReconciliationError,
  OncekeyClient,
  OncekeyError,
  OperationFailedError,
  OperationKey,
} from "../src";
import { sleep, TestServer, uniqueKey } from "./server";

const server = new TestServer();
let client: OncekeyClient;

before(async () => {
  await server.start();
  client = new OncekeyClient(server.target, { tenant: "ts-run" });
});
after(async () => {
  await client.close();
  await server.dispose();
});

test("makeIdempotent: the function runs once, the second call replays its value", async () => {
  const sent: string[] = [];
  const sendEmail = client.makeIdempotent(
    async (to: string, subject: string) => {
      sent.push(`${to}:${subject}`);
      return { id: `msg-${sent.length}`, to };
    },
    { namespace: "email.send", key: (to, subject) => [uniqueKeyOf(to), subject] },
  );
  const first = await sendEmail("ada@example.com", "welcome");
  const second = await sendEmail("ada@example.com", "welcome");
  assert.deepEqual(first, { id: "msg-1", to: "ada@example.com" });
  assert.deepEqual(second, first);
  assert.equal(sent.length, 1);
});

test("idempotent(...).detailed: the value, whether it was replayed, the outcome and the record", async () => {
  let runs = 0;
  const tag = uniqueKey("detailed");
  const charge = client.idempotent(async (order: string, cents: number) => ({ order, cents, run: ++runs }), { namespace: "payments.charge" });
  const first = await charge.detailed(tag, 1250);
  assert.deepEqual(first.value, { order: tag, cents: 1250, run: 1 });
  assert.deepEqual([first.replayed, first.outcome, first.record.status], [false, "ACQUIRED", "SUCCEEDED"]);
  const again = await charge.with({ timeout: 30_000 }).detailed(tag, 1250);
  assert.deepEqual(again.value, first.value);
  assert.deepEqual([again.replayed, again.outcome, again.record.status], [true, "COMPLETED", "SUCCEEDED"]);
  assert.equal(again.record.key, first.record.key);
  assert.deepEqual(await charge(tag, 1250), first.value, "calling it plainly replays the value");
  assert.equal(runs, 1);
});

const keys = new Map<string, string>();
function uniqueKeyOf(name: string): string {
  if (!keys.has(name)) keys.set(name, uniqueKey(name));
  return keys.get(name)!;
}

test("makeIdempotent without a key: equal arguments are one operation", async () => {
  let calls = 0;
  const tag = uniqueKey("tag");
  const f = client.makeIdempotent(async (n: number, t: string) => ({ n: n * 2, t, calls: ++calls }), { namespace: "math.double" });
  assert.deepEqual(await f(21, tag), { n: 42, t: tag, calls: 1 });
  assert.deepEqual(await f(21, tag), { n: 42, t: tag, calls: 1 });
  assert.deepEqual(await f(22, tag), { n: 44, t: tag, calls: 2 });
});

test("runDetailed tells a replay, the record holds the JSON result, the function sees its lease", async () => {
  const key = OperationKey.of("orders.place", uniqueKey("order"), "v1");
  let token: bigint | undefined;
  const first = await client.runDetailed(key, { amount: 1250 }, async (lease) => {
    token = lease.token;
    assert.equal(currentLease()?.token, lease.token);
    assert.equal(lease.signal.aborted, false);
    return { ok: true };
  });
  assert.equal(first.replayed, false);
  assert.equal(first.record.status, "SUCCEEDED");
  assert.equal(first.record.fencingToken, token);
  assert.equal(first.record.result?.contentType, "application/json");
  assert.equal(first.record.result?.body.toString(), '{"ok":true}');
  const again = await client.runDetailed(key, { amount: 1250 }, () => assert.fail("must not run"));
  assert.deepEqual(again, { ...again, value: { ok: true }, replayed: true });
});

test("KeyReusedError: the same key with other arguments; nothing runs", async () => {
  const key = OperationKey.of("payments.charge", uniqueKey("charge"), "v1");
  await client.run(key, { amount: 1 }, () => "charged");
  const err = await client.run(key, { amount: 2 }, () => assert.fail("must not run")).catch((e) => e);
  assert.ok(err instanceof KeyReusedError, String(err));
  assert.ok(err instanceof OncekeyError);
  assert.equal(err.reason, "KEY_REUSED");
});

test("a failing function: the caller sees its own error, the key is released for a retry", async () => {
  const key = OperationKey.of("email.send", uniqueKey("retry"), "v1");
  class SmtpDown extends Error {}
  const mine = new SmtpDown("smtp down");
  const err = await client.run(key, null, () => Promise.reject(mine)).catch((e) => e);
  assert.equal(err, mine);
  const record = await client.lookup(key);
  assert.equal(record?.status, "RETRY");
  assert.equal(record?.error?.message, "smtp down");
  assert.equal(await client.run(key, null, () => "sent"), "sent");
});

test("FinalError: the caller sees it, later runs get OperationFailedError with the stored error", async () => {
  const key = OperationKey.of("payments.charge", uniqueKey("declined"), "v1");
  const declined = new FinalError("card declined", { code: 402 });
  assert.equal(await client.run(key, null, () => Promise.reject(declined)).catch((e) => e), declined);
  const err = await client.run(key, null, () => assert.fail("must not run")).catch((e) => e);
  assert.ok(err instanceof OperationFailedError, String(err));
  assert.deepEqual([err.error.code, err.error.message], [402, "card declined"]);
});

test("AbandonError forgets the key: it may be claimed again, even with other arguments", async () => {
  const key = OperationKey.of("tasks.create", uniqueKey("abandon"), "v1");
  await assert.rejects(client.run(key, { title: "bad" }, () => Promise.reject(new AbandonError("invalid title"))), AbandonError);
  assert.equal(await client.lookup(key), undefined);
  assert.equal(await client.run(key, { title: "good" }, () => "created"), "created");
});

test("InProgressError with retryAfter while another holder runs; with wait, its result", async () => {
  const key = OperationKey.of("reports.build", uniqueKey("busy"), "v1");
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  const holder = client.run(key, null, async () => {
    started();
    await gate;
    return "built";
  });
  await running;
  const busy = await client.run(key, null, () => assert.fail("must not run"), { wait: 0 }).catch((e) => e);
  assert.ok(busy instanceof InProgressError, String(busy));
  assert.ok(busy.retryAfter > 0);
  const waiter = client.runDetailed(key, null, () => assert.fail("must not run"), { wait: 30_000 });
  await sleep(300);
  release();
  assert.equal(await holder, "built");
  const waited = await waiter;
  assert.deepEqual([waited.value, waited.replayed], ["built", true]);
});

test("at-most-once: a vanished holder needs reconciliation; reconcile settles it", async () => {
  const key = OperationKey.of("payments.charge", uniqueKey("amo"), "v1");
  // A holder that claims and vanishes (no keep-alive, no settle).
  const claimed = await client.claim(key, { args: { amount: 5 }, semantics: "AT_MOST_ONCE", leaseTtl: 1000 });
  assert.equal(claimed.outcome, "ACQUIRED");
  await sleep(1500);
  const err = await client.run(key, { amount: 5 }, () => assert.fail("must not run"), { semantics: "AT_MOST_ONCE" }).catch((e) => e);
  assert.ok(err instanceof NeedsReconciliationError, String(err));
  assert.equal(err.record?.status, "UNKNOWN");
  const done = await client.reconcile(key, { amount: 5 }, async () => ({ found: "charge-1" }));
  assert.deepEqual([done.value, done.record.status], [{ found: "charge-1" }, "SUCCEEDED"]);
});

test("child keys record their parent", async () => {
  const order = OperationKey.of("orders.place", uniqueKey("parent"), "v2");
  const charge = order.childIn("payments.charge", "charge");
  await client.run(charge, null, () => "ok");
  const record = await client.lookup(charge);
  assert.deepEqual(record?.parent, { namespace: "orders.place", key: order.key });
});

test("a value that cannot be stored is recorded as a final failure, so the effect is not repeated", async () => {
  const big = OperationKey.of("reports.build", uniqueKey("big"), "v1");
  const err = await client.run(big, null, () => "x".repeat(1024 * 1024 + 1024)).catch((e) => e);
  assert.ok(err instanceof OncekeyError, String(err));
  assert.equal(err.reason, "TOO_LARGE");
  const replay = await client.run(big, null, () => assert.fail("must not run")).catch((e) => e);
  assert.ok(replay instanceof OperationFailedError, String(replay));
  assert.match(replay.error.message, /cannot be stored/);

  const notJson = OperationKey.of("reports.build", uniqueKey("bigint"), "v1");
  await assert.rejects(client.run(notJson, null, () => ({ n: 1n })), TypeError);
  const again = await client.run(notJson, null, () => assert.fail("must not run")).catch((e) => e);
  assert.ok(again instanceof OperationFailedError, String(again));
  assert.match(again.error.message, /cannot be serialized/);
});
