// Operation keys: deterministic, injective, validated, with parents (the Rust client's scheme).
import { test } from "node:test";
import assert from "node:assert/strict";
import { InvalidKeyError, OperationKey } from "../src";

test("keys are deterministic and injective", () => {
  const a = OperationKey.of("tasks.create", "ticket-481", "create-task", "v1");
  assert.equal(a.key, "ticket-481:create-task:v1");
  assert.equal(a.toString(), "tasks.create/ticket-481:create-task:v1");
  assert.notEqual(OperationKey.of("n", "a:b", "c").key, OperationKey.of("n", "a", "b:c").key);
  assert.equal(OperationKey.of("n", "a:b", "c").key, "a%3Ab:c");
  assert.equal(OperationKey.of("n", 42, 7n).key, "42:7");
});

test("children record their parent", () => {
  const order = OperationKey.of("orders.place", "order-9", "v2");
  const charge = order.childIn("payments.charge", "charge");
  assert.equal(charge.namespace, "payments.charge");
  assert.equal(charge.key, "order-9:v2/charge");
  assert.deepEqual([charge.parent?.namespace, charge.parent?.key], ["orders.place", "order-9:v2"]);
  const refund = charge.child("refund/partial");
  assert.equal(refund.key, "order-9:v2/charge/refund%2Fpartial");
  assert.equal(refund.parent?.key, charge.key);
  assert.equal(refund.parent?.parent, undefined);
  assert.equal(OperationKey.raw("n", "k").withParent(order).parent?.key, order.key);
});

test("invalid keys are refused", () => {
  assert.throws(() => OperationKey.of("Bad", "x"), InvalidKeyError);
  assert.throws(() => OperationKey.of("n"), InvalidKeyError);
  assert.throws(() => OperationKey.of("n", "a", ""), InvalidKeyError);
  assert.throws(() => OperationKey.of("n", "a\nb"), InvalidKeyError);
  assert.throws(() => OperationKey.of("n", "x".repeat(257)), /257 bytes/);
  assert.throws(() => OperationKey.raw("n", "é".repeat(129)), /258 bytes/);
});

test("random keys are explicit and distinct", () => {
  const a = OperationKey.random("n");
  assert.notEqual(a.key, OperationKey.random("n").key);
  assert.match(a.key, /^random-[0-9a-f]{32}$/);
});
