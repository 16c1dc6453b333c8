// The intent guard and run budgets (API v1.3) against a real server: a duplicate intent refused
// without running or writing, warn mode's matches, a deliberate repeat, and a run budget refusing
// a new child (never a replayed one), with the parent's record showing its use.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { BudgetExhaustedError, DuplicateIntentError, OncekeyClient, OperationKey } from "../src";
import { TestServer, uniqueKey } from "./server";

const server = new TestServer();
let client: OncekeyClient;

before(async () => {
  await server.start();
  client = new OncekeyClient(server.target, { tenant: uniqueKey("ts-safety") });
});
after(async () => {
  await client.close();
  await server.dispose();
});

test("refuse: a new key with another key's arguments rejects with DuplicateIntentError; warn and repeatIntent run", async () => {
  const args = { to: "grace@example.com", subject: "Your ticket #482" };
  let ran = 0;
  const send = () => {
    ran++;
    return "sent";
  };
  await client.run(OperationKey.raw("email.send", "call-1"), args, send, { intentGuard: "refuse" });
  await assert.rejects(client.run(OperationKey.raw("email.send", "call-2"), args, send, { intentGuard: "refuse" }), (e: unknown) => {
    assert.ok(e instanceof DuplicateIntentError, String(e));
    assert.equal(e.key, "call-2");
    assert.deepEqual([e.matches[0]?.key, e.matches[0]?.status], ["call-1", "SUCCEEDED"]);
    return true;
  });
  assert.equal(ran, 1);
  assert.equal(await client.lookup(OperationKey.raw("email.send", "call-2")), undefined, "nothing written for the refused key");
  const warned = await client.runDetailed(OperationKey.raw("email.send", "call-3"), args, send, { intentGuard: "warn" });
  assert.equal(ran, 2);
  assert.ok(warned.intentMatches?.some((m) => m.key === "call-1"), JSON.stringify(warned.intentMatches));
  await client.run(OperationKey.raw("email.send", "call-4"), args, send, { intentGuard: "refuse", repeatIntent: true });
  assert.equal(ran, 3);
});

test("a run budget refuses a new child beyond it with BudgetExhaustedError; a replayed child does not count", async () => {
  const parent = OperationKey.of("agent.run", uniqueKey("run"));
  const outcomes: string[] = [];
  await client.run(
    parent,
    "task",
    async () => {
      for (const step of ["step-0", "step-1", "step-2", "step-0"]) {
        try {
          await client.run(parent.child(step), step, () => step);
          outcomes.push("ok");
        } catch (e) {
          assert.ok(e instanceof BudgetExhaustedError, String(e));
          assert.deepEqual([e.parentNamespace, e.parentKey, e.limit, e.spent, e.max], ["agent.run", parent.key, "max_children", 2, 2]);
          outcomes.push("refused");
        }
      }
      return 1;
    },
    { budget: { maxChildren: 2 } },
  );
  assert.deepEqual(outcomes, ["ok", "ok", "refused", "ok"]);
  const record = await client.lookup(parent);
  assert.deepEqual([record?.budget?.budget.maxChildren, record?.budget?.children, record?.budget?.refused], [2, 2, 1]);
});
