// The operator features against a real server: the approval gate (a gated run never calls its
// function before an approval; a rejection replays as a 403 failure), dry runs that write nothing,
// the attempt cap that fails a key for good with 429, purge and its refusal of unsettled
// at-most-once records, and the typed errors of these calls (scopes on a server with tokens).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AwaitingApprovalError,
  LeaseLostError,
  MissingScopeError,
  NotAwaitingApprovalError,
  OncekeyClient,
  OncekeyError,
  OperationFailedError,
  OperationKey,
  UnsettledAtMostOnceError,
  fingerprint,
} from "../src";
import { failReceipts, sleep, TestServer, uniqueKey } from "./server";

const server = new TestServer();
let client: OncekeyClient;

before(async () => {
  await server.start();
  client = new OncekeyClient(server.target, { tenant: "ts-operations" });
});
after(async () => {
  await client.close();
  await server.dispose();
});

test("a gated call awaits approval without running, and runs once approved", async () => {
  const sent: string[] = [];
  const refund = client.makeIdempotent(
    async (order: string, cents: number) => {
      sent.push(order);
      return { refunded: cents };
    },
    { namespace: "payments.refund", key: (order) => order, requireApproval: true, wait: 0 },
  );
  const order = uniqueKey("order");
  const awaiting = await refund(order, 500).then(
    () => assert.fail("a gated call must not run before an approval"),
    (e: unknown) => e,
  );
  assert.ok(awaiting instanceof AwaitingApprovalError && awaiting instanceof OncekeyError, String(awaiting));
  assert.equal(awaiting.record?.status, "AWAITING_APPROVAL");
  assert.equal(awaiting.record?.requireApproval, true);
  await assert.rejects(refund(order, 500), AwaitingApprovalError); // still gated
  assert.deepEqual(sent, []);

  const approved = await client.approve("payments.refund", order, "ok: refund approved");
  assert.equal(approved.status, "APPROVED");
  assert.deepEqual([approved.approval?.decision, approved.approval?.decidedBy, approved.approval?.note], ["APPROVED", "dev", "ok: refund approved"]);
  // The same decision again is OK (a lost answer is safe to resend).
  assert.equal((await client.approve({ namespace: "payments.refund", key: order }, { note: "ok: refund approved" })).status, "APPROVED");

  assert.deepEqual(await refund(order, 500), { refunded: 500 });
  assert.deepEqual(await refund(order, 500), { refunded: 500 }); // replayed
  assert.deepEqual(sent, [order]);
  const record = await client.lookup({ namespace: "payments.refund", key: order });
  assert.deepEqual([record?.status, record?.fencingToken, record?.attempt], ["SUCCEEDED", 1n, 1]);

  // The operation has moved on: another decision is refused, typed, and not retried.
  const refused = await client.approve("payments.refund", order).catch((e: unknown) => e);
  assert.ok(refused instanceof NotAwaitingApprovalError, String(refused));
  assert.equal(refused.reason, "NOT_AWAITING_APPROVAL");
  await assert.rejects(client.reject("payments.refund", order, "too late"), NotAwaitingApprovalError);
});

test("a run that waits is held until the approval comes, then runs once", async () => {
  const key = OperationKey.of("email.send", uniqueKey("held"));
  await client.claim(key, { args: { to: "ada" }, requireApproval: true });
  let runs = 0;
  const waiting = client.runDetailed(key, { to: "ada" }, () => ++runs, { requireApproval: true, wait: 30_000 });
  for (let i = 0; i < 200 && ((await client.lookup(key))?.dedupHits ?? 0) < 1; i++) await sleep(50);
  assert.equal(runs, 0);
  await client.approve(key, { note: "go", args: { to: "ada" } });
  const done = await waiting;
  assert.deepEqual([done.value, done.replayed, runs], [1, false, 1]);
});

test("a rejected operation fails for good with 403 and the note", async () => {
  const key = OperationKey.of("tasks.delete", uniqueKey("repo"));
  const claimed = await client.claim(key, { args: { repo: "prod" }, requireApproval: true });
  assert.equal(claimed.outcome, "AWAITING_APPROVAL");
  assert.equal(claimed.lease, undefined);
  const rejected = await client.reject(key, { note: "not in production", fingerprint: fingerprint({ repo: "prod" }) });
  assert.equal(rejected.status, "FAILED");
  assert.equal(rejected.approval?.decision, "REJECTED");
  assert.deepEqual([rejected.error?.code, rejected.error?.message], [403, "not in production"]);
  let runs = 0;
  const failed = await client.run(key, { repo: "prod" }, () => ++runs).catch((e: unknown) => e);
  assert.ok(failed instanceof OperationFailedError, String(failed));
  assert.deepEqual([failed.error.code, failed.error.message, runs], [403, "not in production", 0]);
  await assert.rejects(client.approve(key), NotAwaitingApprovalError);
});

test("approving a key that never awaited approval is NOT_AWAITING_APPROVAL; an absent one NOT_FOUND", async () => {
  const key = OperationKey.of("email.send", uniqueKey("plain"));
  await client.run(key, { to: "ada" }, () => "sent");
  await assert.rejects(client.approve(key, { note: "why not" }), NotAwaitingApprovalError);
  const absent = await client.approve("email.send", uniqueKey("absent")).catch((e: unknown) => e);
  assert.ok(absent instanceof OncekeyError && !(absent instanceof NotAwaitingApprovalError));
  assert.equal(absent.grpcCode, 5 /* NOT_FOUND */);
});

test("a dry run answers without writing anything", async () => {
  const key = OperationKey.of("email.send", uniqueKey("dry"));
  const dry = await client.claim(key, { args: { to: "ada" }, dryRun: true });
  assert.deepEqual([dry.dryRun, dry.outcome, dry.record, dry.lease], [true, "ACQUIRED", undefined, undefined]);
  assert.equal(await client.lookup(key), undefined); // nothing was created

  await client.run(key, { to: "ada" }, () => "sent");
  const before = await client.lookup(key);
  const replay = await client.claim(key, { args: { to: "ada" }, dryRun: true });
  assert.deepEqual([replay.outcome, replay.record?.status, replay.lease], ["COMPLETED", "SUCCEEDED", undefined]);
  assert.equal((await client.lookup(key))?.dedupHits, before?.dedupHits); // no dedup hit either

  const gated = OperationKey.of("email.send", uniqueKey("dry-gated"));
  await client.claim(gated, { args: {}, requireApproval: true });
  const dryGated = await client.claim(gated, { args: {}, dryRun: true });
  assert.deepEqual([dryGated.dryRun, dryGated.outcome, dryGated.record?.status], [true, "AWAITING_APPROVAL", "AWAITING_APPROVAL"]);
});

test("the attempt cap fails the key for good with 429 after that many runs", async () => {
  let runs = 0;
  const deliver = client.makeIdempotent(
    async (_hook: string) => {
      runs++;
      throw new Error("upstream down");
    },
    { namespace: "webhook.deliver", key: (hook) => hook, maxAttempts: 2 },
  );
  const hook = uniqueKey("hook");
  for (let i = 0; i < 2; i++) await assert.rejects(deliver(hook), /upstream down/); // the caller's own error
  const exhausted = await deliver(hook).catch((e: unknown) => e);
  assert.ok(exhausted instanceof OperationFailedError, String(exhausted));
  assert.deepEqual([exhausted.error.code, exhausted.error.message], [429, "attempts exhausted"]);
  assert.equal(runs, 2);
  const record = await client.lookup({ namespace: "webhook.deliver", key: hook });
  assert.deepEqual([record?.status, record?.attempt, record?.maxAttempts], ["FAILED", 2, 2]);
});

test("with maxAttempts 1, a release saying nothing ran leaves the attempt; a plain one spends it", async () => {
  const ways = {
    releaseUnused: (key: OperationKey, token: bigint) => client.releaseUnused(key, token, { message: "not started" }),
    nothingRan: (key: OperationKey, token: bigint) =>
      client.fail(key, token, { message: "not started" }, "retryable", { nothingRan: true }),
    plain: (key: OperationKey, token: bigint) => client.fail(key, token, { message: "not started" }, "retryable"),
  };
  for (const [name, release] of Object.entries(ways)) {
    const key = OperationKey.of("jobs.run", uniqueKey(name));
    const first = await client.claim(key, { args: {}, maxAttempts: 1 });
    assert.equal(first.outcome, "ACQUIRED", name);
    assert.equal((await release(key, first.lease!.token))?.status, "RETRY", name);
    const again = await client.claim(key, { args: {}, maxAttempts: 1 });
    const receipts = await failReceipts(client, key.namespace, key.key);
    if (name === "plain") {
      assert.deepEqual([again.outcome, again.record?.error?.code], ["FAILED", 429], name);
      assert.equal(receipts[0], "RETRYABLE ", name);
    } else {
      assert.deepEqual([again.outcome, again.lease?.token, again.record?.attempt], ["ACQUIRED", 2n, 2], name);
      assert.deepEqual(receipts, ["RETRYABLE NOTHING_RAN"], name);
    }
  }
});

test("bad caps, notes and pins are refused before anything is sent", async () => {
  const key = OperationKey.of("x.y", uniqueKey("bad"));
  for (const bad of [-1, 1.5, 2 ** 32, Number.NaN, "3" as unknown as number]) {
    await assert.rejects(client.claim(key, { args: {}, maxAttempts: bad }), /maxAttempts/);
    await assert.rejects(client.run(key, {}, () => 1, { maxAttempts: bad }), /maxAttempts/);
  }
  await assert.rejects(client.approve(key, { note: "n".repeat(1025) }), /note/);
  await assert.rejects(client.reject(key, { note: "bell\u0007" }), /note/);
  await assert.rejects(client.approve(key, { fingerprint: new Uint8Array(5) }), /fingerprint/);
  assert.equal(await client.lookup(key), undefined);
  const capped = await client.claim(key, { args: {}, maxAttempts: 2 ** 32 - 1 });
  assert.equal(capped.record?.maxAttempts, 2 ** 32 - 1);
});

test("purge removes a record, and refuses an unsettled at-most-once one without force", async () => {
  const done = OperationKey.of("email.send", uniqueKey("purge"));
  await client.run(done, { to: "ada" }, () => "sent");
  assert.equal(await client.purge(done), true);
  assert.equal(await client.lookup(done), undefined);
  assert.equal(await client.purge("email.send", done.key), false); // gone: nothing to purge

  const held = OperationKey.of("payments.charge", uniqueKey("amo"));
  const claimed = await client.claim(held, { args: { cents: 1 }, semantics: "AT_MOST_ONCE" });
  assert.equal(claimed.outcome, "ACQUIRED");
  const refused = await client.purge(held).catch((e: unknown) => e);
  assert.ok(refused instanceof UnsettledAtMostOnceError, String(refused));
  assert.equal(refused.reason, "UNSETTLED_AT_MOST_ONCE");
  assert.equal((await client.lookup(held))?.status, "PROCESSING"); // nothing changed
  assert.equal(await client.purge(held, { force: true }), true);
  // The fencing sequence goes on: the old holder's outcome is refused.
  await assert.rejects(client.complete(held, claimed.lease!.token, { body: Buffer.from("{}") }), LeaseLostError);
  const again = await client.claim(held, { args: { cents: 1 }, semantics: "AT_MOST_ONCE" });
  assert.ok(again.lease!.token > claimed.lease!.token);
});

test("a token without the approve or admin scope gets MissingScopeError", async () => {
  const dir = mkdtempSync(join(tmpdir(), "oncekey-ts-scopes-"));
  const worker = "ledger-only-token-0123456789";
  const approver = "approver-token-0123456789";
  const sha = (t: string) => createHash("sha256").update(t).digest("hex");
  writeFileSync(join(dir, "tokens"), `acme:worker:${sha(worker)}\nacme:alice:${sha(approver)}:approve\n`);
  const scoped = new TestServer(["--tokens-file", join(dir, "tokens")]);
  await scoped.start();
  const w = new OncekeyClient(scoped.target, { token: worker });
  const a = new OncekeyClient(scoped.target, { token: approver });
  try {
    const key = OperationKey.of("payments.refund", uniqueKey("scoped"));
    assert.equal((await w.claim(key, { args: { cents: 5 }, requireApproval: true })).outcome, "AWAITING_APPROVAL");
    const missing = await w.approve(key, { note: "self-approved" }).catch((e: unknown) => e);
    assert.ok(missing instanceof MissingScopeError, String(missing));
    assert.match(missing.message, /approve/);
    await assert.rejects(a.purge(key), MissingScopeError);
    assert.equal((await a.approve(key, { note: "checked" })).approval?.decidedBy, "alice");
    assert.equal(await w.run(key, { cents: 5 }, (lease) => Number(lease.token)), 1);
  } finally {
    await w.close();
    await a.close();
    await scoped.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});
