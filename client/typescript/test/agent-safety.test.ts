// The intent guard and run budgets (API v1.3) against an in-process Ledger that scripts its
// answers, so that they are tested whatever the server binary supports: the options on the wire,
// the DUPLICATE_INTENT outcome (the function never runs), warn mode's matches, BUDGET_EXHAUSTED as
// a typed error that is never retried, a record's budget, and the duplicate-intent listing.
import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { Metadata, Server, ServerCredentials, status } from "@grpc/grpc-js";
import type { sendUnaryData, ServerDuplexStream, ServerUnaryCall } from "@grpc/grpc-js";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import {
  BudgetExhaustedError,
  DuplicateIntentError,
  KeyReusedError,
  MAX_PAGE_SIZE,
  OncekeyClient,
  OncekeyError,
  OperationKey,
  reason,
  UnavailableError,
  v1,
} from "../src";
import type { DuplicateIntent, IntentMatch } from "../src";
import { claimedFromWire, recordFromWire } from "../src/types";
import { isTransient } from "../src/status";

const claimedAt = new Date("2026-12-04T10:00:00Z");

/** Two other keys as the server names them. */
const wireMatches = (): v1.IntentMatch[] => [
  { key: "tool-call-2", status: v1.RecordStatus.RECORD_STATUS_SUCCEEDED, claimedAt, refused: false },
  { key: "tool-call-1", status: v1.RecordStatus.RECORD_STATUS_PROCESSING, claimedAt: undefined, refused: true },
];
const expectedMatches: IntentMatch[] = [
  { key: "tool-call-2", status: "SUCCEEDED", claimedAt, refused: false },
  { key: "tool-call-1", status: "PROCESSING", refused: true },
];

type Answer = v1.ClaimResponse | { code: number; message: string; metadata: Metadata };

const claimResponse = (outcome: v1.ClaimOutcome, more: Partial<v1.ClaimResponse> = {}): v1.ClaimResponse => ({
  outcome,
  record: undefined,
  lease: undefined,
  retryAfter: undefined,
  intentMatches: [],
  ...more,
});
const duplicate = () => claimResponse(v1.ClaimOutcome.CLAIM_OUTCOME_DUPLICATE_INTENT, { intentMatches: wireMatches() });
const acquired = (intentMatches: v1.IntentMatch[] = []) =>
  claimResponse(v1.ClaimOutcome.CLAIM_OUTCOME_ACQUIRED, {
    intentMatches,
    lease: { token: 1n, attempt: 1, expiresAt: new Date(Date.now() + 60_000) },
  });

/** A server error with a google.rpc.ErrorInfo (reason, domain "oncekey", metadata) in grpc-status-details-bin. */
function reasonError(code: number, why: string, message: string, metadata: { [k: string]: string } = {}) {
  const info = new BinaryWriter().uint32(10).string(why).uint32(18).string("oncekey");
  for (const [k, v] of Object.entries(metadata)) info.uint32(26).bytes(new BinaryWriter().uint32(10).string(k).uint32(18).string(v).finish());
  const any = new BinaryWriter().uint32(10).string("type.googleapis.com/google.rpc.ErrorInfo").uint32(18).bytes(info.finish()).finish();
  const st = new BinaryWriter().uint32(8).int32(code).uint32(18).string(message).uint32(26).bytes(any).finish();
  const trailers = new Metadata();
  trailers.set("grpc-status-details-bin", Buffer.from(st));
  return { code, message, metadata: trailers };
}

const budgetMetadata = { parent_namespace: "agent.run", parent_key: "r-1", limit: "email.send", spent: "3", max: "3" };
const budgetMessage = "the run budget of agent.run/r-1 is spent: email.send 3 of 3";

/** The scripted Ledger: `answer` decides each Claim; requests are recorded. */
const ledger = {
  answer: (_req: v1.ClaimRequest): Answer => acquired(),
  claims: [] as v1.ClaimRequest[],
  lists: [] as v1.ListDuplicateIntentsRequest[],
  completes: 0,
  pages: {} as { [token: string]: v1.ListDuplicateIntentsResponse },
};

const server = new Server();
let client: OncekeyClient;

before(async () => {
  server.addService(v1.LedgerService, {
    claim(call: ServerUnaryCall<v1.ClaimRequest, v1.ClaimResponse>, callback: sendUnaryData<v1.ClaimResponse>) {
      ledger.claims.push(call.request);
      const answer = ledger.answer(call.request);
      if ("code" in answer) callback({ code: answer.code, details: answer.message, metadata: answer.metadata });
      else callback(null, answer);
    },
    complete(call: ServerUnaryCall<v1.CompleteRequest, v1.CompleteResponse>, callback: sendUnaryData<v1.CompleteResponse>) {
      ledger.completes++;
      const record = v1.Record.fromPartial({ namespace: call.request.namespace, key: call.request.key, status: v1.RecordStatus.RECORD_STATUS_SUCCEEDED });
      callback(null, { record });
    },
    keepAlive(call: ServerDuplexStream<v1.KeepAliveRequest, v1.Lease>) {
      call.on("data", () => undefined);
      call.on("end", () => call.end());
      call.on("error", () => undefined);
    },
    listDuplicateIntents(
      call: ServerUnaryCall<v1.ListDuplicateIntentsRequest, v1.ListDuplicateIntentsResponse>,
      callback: sendUnaryData<v1.ListDuplicateIntentsResponse>,
    ) {
      ledger.lists.push(call.request);
      const page = ledger.pages[call.request.pageToken];
      if (page) callback(null, page);
      else {
        const e = reasonError(status.INVALID_ARGUMENT, "INVALID_FIELD", "page_token: not a token of this listing");
        callback({ code: e.code, details: e.message, metadata: e.metadata });
      }
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  client = new OncekeyClient(`127.0.0.1:${port}`, { tenant: "ts-guard", retry: { maxAttempts: 5, initialBackoff: 1, maxBackoff: 4 } });
});

after(async () => {
  await client.close();
  await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
});

beforeEach(() => {
  ledger.answer = () => acquired();
  ledger.claims = [];
  ledger.lists = [];
  ledger.completes = 0;
});

test("the intent guard's and the budget's options reach the wire; a run without them sends none", async () => {
  const perNamespace = { "email.send": 3 };
  await client.run(OperationKey.of("agent.run", "r-1"), "task", () => 1, {
    intentGuard: "refuse",
    intentWindow: 3_600_000,
    repeatIntent: true,
    budget: { maxChildren: 10, maxPerNamespace: perNamespace },
  });
  await client.run(OperationKey.of("agent.run", "r-2"), "task", () => 1);
  const [withThem, without] = ledger.claims;
  assert.equal(withThem.intentGuard, v1.IntentGuard.INTENT_GUARD_REFUSE);
  assert.deepEqual(withThem.intentWindow, { seconds: 3600n, nanos: 0 });
  assert.equal(withThem.repeatIntent, true);
  assert.deepEqual(withThem.budget, { maxChildren: 10, maxPerNamespace: { "email.send": 3 } });
  assert.equal(without.intentGuard, v1.IntentGuard.INTENT_GUARD_UNSPECIFIED);
  assert.equal(without.intentWindow, undefined);
  assert.equal(without.repeatIntent, false);
  assert.equal(without.budget, undefined);

  // The wrapper takes them among its options; claim takes them too.
  const tool = client.idempotent(async (n: number) => n, { namespace: "agent.tool", intentGuard: "warn", intentWindow: 90_000 });
  await tool(7);
  assert.equal(ledger.claims[2].intentGuard, v1.IntentGuard.INTENT_GUARD_WARN);
  assert.deepEqual(ledger.claims[2].intentWindow, { seconds: 90n, nanos: 0 });
  await client.claim({ namespace: "agent.run", key: "r-3" }, { args: 1, intentGuard: "off", budget: { maxPerNamespace: { "search.web": 5 } } });
  assert.equal(ledger.claims[3].intentGuard, v1.IntentGuard.INTENT_GUARD_OFF);
  assert.deepEqual(ledger.claims[3].budget, { maxChildren: 0, maxPerNamespace: { "search.web": 5 } });
});

test("a mode, window or budget the wire cannot carry is refused before anything is sent", async () => {
  const key = OperationKey.of("n", "k");
  const bad: object[] = [
    { intentGuard: "block" },
    { intentGuard: "REFUSE" },
    { intentWindow: 999 },
    { intentWindow: 86_400_001 },
    { intentWindow: Number.NaN },
    { budget: { maxChildren: -1 } },
    { budget: { maxChildren: 1.5 } },
    { budget: { maxPerNamespace: { "email.send": 2 ** 32 } } },
  ];
  for (const options of bad) {
    await assert.rejects(client.run(key, 1, () => 1, options), (e: Error) => e instanceof RangeError || e instanceof TypeError, JSON.stringify(options));
    await assert.rejects(client.claim(key, { args: 1, ...options }), (e: Error) => e instanceof RangeError || e instanceof TypeError);
  }
  assert.equal(ledger.claims.length, 0);
});

test("DUPLICATE_INTENT rejects run, runDetailed, reconcile and a wrapped call with DuplicateIntentError; the function never runs", async () => {
  ledger.answer = duplicate;
  let ran = 0;
  const fn = () => {
    ran++;
    return "sent";
  };
  const key = OperationKey.raw("email.send", "tool-call-3");
  const check = (what: string) => (e: unknown) => {
    assert.ok(e instanceof DuplicateIntentError && e instanceof OncekeyError, `${what}: ${String(e)}`);
    assert.ok(!(e instanceof KeyReusedError));
    assert.deepEqual(e.matches, expectedMatches, what);
    assert.equal(e.namespace, "email.send");
    assert.equal(e.key, "tool-call-3");
    assert.equal(
      e.message,
      "the same arguments were claimed under 2 other keys of email.send within the intent window: use that key, or run again with repeatIntent if the repeat is deliberate",
    );
    return true;
  };
  await assert.rejects(client.run(key, "hi", fn, { intentGuard: "refuse" }), check("run"));
  await assert.rejects(client.runDetailed(key, "hi", fn), check("runDetailed"));
  await assert.rejects(client.reconcile(key, "hi", fn), check("reconcile"));
  const send = client.idempotent(async (_to: string) => fn(), { namespace: "email.send", key: () => "tool-call-3", intentGuard: "refuse" });
  await assert.rejects(send("ada@example.com"), check("idempotent"));
  await assert.rejects(send.detailed("ada@example.com"), check("idempotent.detailed"));
  assert.equal(ran, 0);
  assert.equal(ledger.claims.length, 5, "one Claim per call: never retried, never waited on");

  // The raw Claim (and a dry run) answers the outcome with the matches.
  const claimed = await client.claim(key, { args: "hi", intentGuard: "refuse", dryRun: true });
  assert.equal(claimed.outcome, "DUPLICATE_INTENT");
  assert.deepEqual(claimed.intentMatches, expectedMatches);
  assert.equal(claimed.record, undefined);
  assert.equal(claimed.lease, undefined);
});

test("in warn mode the function runs as usual and Done.intentMatches names the other keys", async () => {
  ledger.answer = () => acquired(wireMatches());
  let ran = 0;
  const done = await client.runDetailed(OperationKey.of("email.send", "tool-call-3"), "hi", () => {
    ran++;
    return "sent";
  }, { intentGuard: "warn" });
  assert.equal(ran, 1);
  assert.equal(done.value, "sent");
  assert.equal(done.outcome, "ACQUIRED");
  assert.deepEqual(done.intentMatches, expectedMatches);
  assert.equal(ledger.completes, 1);
  const send = client.idempotent(async (to: string) => to, { namespace: "email.send" });
  assert.deepEqual((await send.detailed("ada@example.com")).intentMatches, expectedMatches);
  // Without matches there are none; a Claim names none.
  ledger.answer = () => acquired();
  assert.equal((await client.runDetailed(OperationKey.of("email.send", "k"), "hi", () => 1)).intentMatches, undefined);
  assert.deepEqual((await client.claim(OperationKey.of("email.send", "k2"), { args: 1 })).intentMatches, []);
});

test("BUDGET_EXHAUSTED is a BudgetExhaustedError with the parent and the cap, sent once, never retried", async () => {
  for (const code of [status.FAILED_PRECONDITION, status.RESOURCE_EXHAUSTED, status.UNAVAILABLE]) {
    ledger.claims = [];
    ledger.answer = () => reasonError(code, "BUDGET_EXHAUSTED", budgetMessage, budgetMetadata);
    let ran = 0;
    const child = OperationKey.of("agent.run", "r-1").child("notify-4");
    const check = (e: unknown) => {
      assert.ok(e instanceof BudgetExhaustedError && e instanceof OncekeyError, String(e));
      assert.ok(!(e instanceof UnavailableError), "not transient, whatever its code");
      assert.deepEqual(
        [e.parentNamespace, e.parentKey, e.limit, e.spent, e.max, e.reason, e.grpcCode, e.message],
        ["agent.run", "r-1", "email.send", 3, 3, "BUDGET_EXHAUSTED", code, budgetMessage],
      );
      assert.equal(reason(e), "BUDGET_EXHAUSTED");
      assert.equal(isTransient(e), false);
      return true;
    };
    await assert.rejects(client.run(child, "hi", () => ++ran), check);
    await assert.rejects(client.claim(child, { args: "hi" }), check);
    assert.equal(ran, 0);
    assert.equal(ledger.claims.length, 2, `code ${code}: one Claim per call`);
  }
  // The breaker is not opened by refusals: 15 in a row all reach the server.
  ledger.claims = [];
  ledger.answer = () => reasonError(status.FAILED_PRECONDITION, "BUDGET_EXHAUSTED", "spent", { limit: "max_children", spent: "10", max: "10" });
  for (let i = 0; i < 15; i++) {
    await assert.rejects(client.claim(OperationKey.of("n", `k${i}`), { args: 1 }), (e: unknown) => e instanceof BudgetExhaustedError && e.limit === "max_children" && e.max === 10);
  }
  assert.equal(ledger.claims.length, 15);
});

test("a record's budget and its use, and a Claim's matches, are read from the wire", () => {
  const record = recordFromWire(
    v1.Record.fromPartial({
      namespace: "agent.run",
      key: "r-1",
      budget: { budget: { maxChildren: 10, maxPerNamespace: { "email.send": 3 } }, children: 4, childrenPerNamespace: { "email.send": 3, "search.web": 1 }, refused: 2n },
    }),
  );
  assert.deepEqual(record.budget, {
    budget: { maxChildren: 10, maxPerNamespace: { "email.send": 3 } },
    children: 4,
    childrenPerNamespace: { "email.send": 3, "search.web": 1 },
    refused: 2,
  });
  assert.equal(recordFromWire(v1.Record.fromPartial({})).budget, undefined);
  const claimed = claimedFromWire(duplicate());
  assert.equal(claimed.outcome, "DUPLICATE_INTENT");
  assert.deepEqual(claimed.intentMatches, expectedMatches);
});

test("listDuplicateIntents pages through every duplicate intent; listDuplicateIntentsPage reads one page", async () => {
  const fingerprint = Buffer.alloc(32, 7);
  const intent = (): v1.DuplicateIntent => ({ namespace: "email.send", fingerprint, claims: wireMatches() });
  ledger.pages = {
    "": { intents: [intent(), intent()], nextPageToken: "p2" },
    p2: { intents: [intent()], nextPageToken: "p3" },
    p3: { intents: [], nextPageToken: "" },
  };
  const seen: DuplicateIntent[] = [];
  for await (const dup of client.listDuplicateIntents({ namespace: "email.send", pageSize: 2 })) seen.push(dup);
  assert.equal(seen.length, 3);
  assert.deepEqual(seen[2], { namespace: "email.send", fingerprint, claims: expectedMatches });
  assert.deepEqual(
    ledger.lists.map((r) => [r.namespace, r.pageSize, r.pageToken]),
    [
      ["email.send", 2, ""],
      ["email.send", 2, "p2"],
      ["email.send", 2, "p3"],
    ],
  );
  const page = await client.listDuplicateIntentsPage({ pageToken: "p2" });
  assert.equal(page.intents.length, 1);
  assert.equal(page.nextPageToken, "p3");
  const last = await client.listDuplicateIntentsPage({ pageToken: "p3" });
  assert.deepEqual(last, { intents: [] });

  // Refused before sending: a page size over 1000, a namespace that is not one.
  ledger.lists = [];
  await assert.rejects(client.listDuplicateIntents({ pageSize: MAX_PAGE_SIZE + 1 }).next(), RangeError);
  await assert.rejects(client.listDuplicateIntentsPage({ namespace: "Not A Namespace" }));
  assert.equal(ledger.lists.length, 0);
  // Refused by the server: an OncekeyError naming the reason.
  await assert.rejects(client.listDuplicateIntentsPage({ pageToken: "stale" }), (e: unknown) => e instanceof OncekeyError && e.reason === "INVALID_FIELD");
});
