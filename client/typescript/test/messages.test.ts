// The texts of the typed errors, from a real server: each says its thing once (the server's
// sentence, or the client's own, never both), with what the caller needs (a token, a code, a wait).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  AwaitingApprovalError,
  InProgressError,
  KeyReusedError,
  LeaseLostError,
  NeedsReconciliationError,
  NotAwaitingApprovalError,
  OncekeyClient,
  OncekeyError,
  OperationFailedError,
  OperationKey,
  UnavailableError,
  UnsettledAtMostOnceError,
  FinalError,
} from "../src";
import { sleep, TestServer, uniqueKey } from "./server";

const server = new TestServer();
let client: OncekeyClient;

before(async () => {
  await server.start();
  client = new OncekeyClient(server.target, { tenant: "ts-messages" });
});
after(async () => {
  await client.close();
  await server.dispose();
});

async function caught<E>(p: Promise<unknown>, kind: abstract new (...args: never[]) => E): Promise<E> {
  const e = await p.then(
    () => assert.fail(`expected a ${kind.name}`),
    (e: unknown) => e,
  );
  assert.ok(e instanceof kind, `expected a ${kind.name}, got ${String(e)}`);
  return e;
}

const key = (ns: string) => OperationKey.of(ns, uniqueKey("msg"));

test("KeyReusedError: the server's sentence, once", async () => {
  const k = key("email.send");
  await client.claim(k, { args: { to: "ada" } });
  const e = await caught(client.claim(k, { args: { to: "bob" } }), KeyReusedError);
  assert.equal(e.message, "the key was first claimed with different arguments");
  assert.equal(String(e), "KeyReusedError: the key was first claimed with different arguments");
});

test("LeaseLostError: what the server said, and the token", async () => {
  const k = key("email.send");
  const claimed = await client.claim(k, { args: 1 });
  await client.purge(k);
  const lost = await caught(client.complete(k, claimed.lease!.token, { code: 0 }), LeaseLostError);
  assert.equal(lost.message, "the lease token is not the current one (token 1)");

  const k2 = key("email.send");
  const again = await client.claim(k2, { args: 1 });
  await client.complete(k2, again.lease!.token, { code: 0 });
  const settled = await caught(client.fail(k2, again.lease!.token, { message: "x" }, "final"), LeaseLostError);
  assert.equal(settled.message, "the operation was already settled with a different outcome (token 1)");
});

test("the client's own errors: in progress, failed earlier, awaiting approval, needs reconciliation", async () => {
  const k = key("email.send");
  await client.claim(k, { args: null });
  const busy = await caught(client.run(k, null, () => 1, { wait: 0 }), InProgressError);
  assert.match(busy.message, /^the operation is in progress elsewhere; retry after \d+ ms$/);

  const failing = key("payments.charge");
  await client.run(failing, null, () => {
    throw new FinalError("card declined", { code: 402 });
  }).catch(() => undefined);
  const failed = await caught(client.run(failing, null, () => 1), OperationFailedError);
  assert.equal(failed.message, "the operation failed earlier: card declined (code 402)");

  const gated = key("payments.refund");
  const awaiting = await caught(client.run(gated, null, () => 1, { requireApproval: true, wait: 0 }), AwaitingApprovalError);
  assert.equal(awaiting.message, "this payments.refund operation awaits approval: run it again once approved");

  const once = key("email.send");
  await client.claim(once, { args: null, semantics: "AT_MOST_ONCE", leaseTtl: 1000 });
  await sleep(1100); // the holder "vanished": its lease ran out
  const unknown = await caught(client.run(once, null, () => 1, { semantics: "AT_MOST_ONCE" }), NeedsReconciliationError);
  assert.equal(unknown.message, "the outcome of this email.send operation is unknown and needs reconciliation");
});

test("operator errors: the server's sentence, once", async () => {
  const k = key("email.send");
  await client.claim(k, { args: null });
  const notAwaiting = await caught(client.approve(k), NotAwaitingApprovalError);
  assert.equal(notAwaiting.message, "the operation does not await approval");

  const once = key("email.send");
  await client.claim(once, { args: null, semantics: "AT_MOST_ONCE" });
  const unsettled = await caught(client.purge(once), UnsettledAtMostOnceError);
  assert.equal(unsettled.message, "the operation is an unsettled at-most-once operation: purging it lets the effect run again; pass force to purge it anyway");
});

test("errors without a class of their own name their code and reason, then the server's sentence", async () => {
  const e = await caught(client.claim(key("email.send"), { payloadJson: '{"id":1234567890123456789}' }), OncekeyError);
  assert.equal(e.constructor, OncekeyError);
  assert.match(e.message, /^INVALID_ARGUMENT INVALID_FIELD: invalid payload_json\.\$\.id: .*send it as a string$/);
});

test("UnavailableError: the transport's code and sentence, once", async () => {
  const down = new OncekeyClient("127.0.0.1:1", { retry: { maxAttempts: 1 }, connectTimeout: 200 });
  try {
    const e = await caught(down.claim(key("email.send"), { args: null }), UnavailableError);
    assert.equal(e.message, "UNAVAILABLE: no connection within 200 ms");
  } finally {
    await down.close();
  }
});
