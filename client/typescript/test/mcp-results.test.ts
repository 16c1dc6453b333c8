// The tool results of examples/tool-results.ts: every Oncekey error a model can act on becomes
// text saying what happened and what to do, with isError where the call failed; other errors are
// left to the MCP SDK.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  AwaitingApprovalError,
  BudgetExhaustedError,
  DuplicateIntentError,
  InProgressError,
  KeyReusedError,
  LeaseLostError,
  NeedsReconciliationError,
  OperationFailedError,
  UnavailableError,
} from "../src";
import { toolResultOf, withToolResults } from "../examples/tool-results";

const answer = (e: unknown) => {
  const r = toolResultOf(e);
  assert.ok(r, String(e));
  assert.equal(r.content.length, 1);
  return { text: (r.content[0] as { text: string }).text, isError: r.isError };
};

test("each Oncekey error a model can act on is a tool result saying what to do", () => {
  const cases: [unknown, RegExp, boolean][] = [
    [new KeyReusedError("the key was first claimed with different arguments"), /^Nothing was done: .* repeat the original arguments exactly/, true],
    [new InProgressError(1500), /^Still running: .* call again with the same arguments in about 2 s/, true],
    [new LeaseLostError("the lease token is not the current one (token 3)", 3n), /^Outcome not recorded: .* may or may not have taken effect\. .*call again with the same arguments/, true],
    [new NeedsReconciliationError("unknown"), /^Outcome unknown: .* Do not retry/, true],
    [new AwaitingApprovalError("awaits approval"), /^Waiting for approval: .*nothing has happened yet/, false],
    [new OperationFailedError({ code: 402, message: "card declined", details: Buffer.alloc(0) }), /^Failed earlier, for good: card declined \(code 402\)\./, true],
    [new UnavailableError("UNAVAILABLE: down"), /^Not started: .*nothing was done/, true],
    [new UnavailableError("x", { unsettled: true, result: 1 }), /^Done, but not recorded: .*Do not call it again/, true],
    [
      new DuplicateIntentError("dup", "email.send", "call_2", [{ key: "welcome-ann", status: "SUCCEEDED", refused: false }]),
      /^Nothing was done: the same request was already made \(as welcome-ann, succeeded\)\. Use that call's result/,
      true,
    ],
    [
      new BudgetExhaustedError("spent", { parentNamespace: "agent.run", parentKey: "r1", limit: "email.send", spent: 3, max: 3 }),
      /^Not started: this run has used its budget of 3 email\.send actions\. Do not try again in this run/,
      true,
    ],
  ];
  for (const [error, text, isError] of cases) {
    const got = answer(error);
    assert.match(got.text, text);
    assert.equal(got.isError, isError, got.text);
  }
});

test("other errors are not answered here: the SDK reports them with their message", async () => {
  assert.equal(toolResultOf(new Error("smtp refused")), undefined);
  const handler = withToolResults(async (fail: boolean) => {
    if (fail) throw new TypeError("smtp refused");
    throw new KeyReusedError("reused");
  });
  await assert.rejects(handler(true), TypeError);
  assert.equal((await handler(false)).isError, true);
});
