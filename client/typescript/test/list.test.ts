// Listing against a real server: every record once over several pages (the async iterator and a
// page at a time), the filters (namespace, statuses, parent), typed records with string statuses,
// refusals before sending (a page size over 1000, a status that is not one) and by the server (a
// page token of another filter), and the reconciliation loop the README shows.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { OncekeyClient, OncekeyError, OperationKey } from "../src";
import type { OperationRecord, RecordPage } from "../src";
import { sleep, TestServer, uniqueKey } from "./server";

const server = new TestServer();
let client: OncekeyClient;
// A namespace of its own: the listing sees nothing of the other tests.
const namespace = `jobs.${uniqueKey("list").toLowerCase().replace(/[^a-z0-9-]/g, "-")}`;
const parent = OperationKey.of("flows.nightly", uniqueKey("parent"));

before(async () => {
  await server.start();
  client = new OncekeyClient(server.target, { tenant: "ts-list" });
  // 10 records: 0, 3, 6, 9 succeeded; 1, 4, 7 processing; 2, 5, 8 released (RETRY). The first
  // five name `parent`.
  for (let i = 0; i < 10; i++) {
    const key = i < 5 ? OperationKey.of(namespace, `job-${i}`).withParent(parent) : OperationKey.of(namespace, `job-${i}`);
    const claimed = await client.claim(key, { args: { i } });
    if (i % 3 === 0) await client.complete(key, claimed.lease!.token, { code: 201, body: Buffer.from("a body") });
    else if (i % 3 === 2) await client.fail(key, claimed.lease!.token, { message: "try again" }, "retryable");
  }
});
after(async () => {
  await client.close();
  await server.dispose();
});

const keys = (records: OperationRecord[]) => records.map((r) => r.key).sort();

test("for await over listRecords: every record once, over several pages, typed", async () => {
  const seen: OperationRecord[] = [];
  for await (const record of client.listRecords({ namespace, pageSize: 3 })) seen.push(record);
  assert.deepEqual(keys(seen), [...Array(10).keys()].map((i) => `job-${i}`).sort());
  const job0 = seen.find((r) => r.key === "job-0")!;
  assert.equal(job0.status, "SUCCEEDED");
  assert.equal(job0.namespace, namespace);
  assert.deepEqual([job0.result?.code, job0.result?.body.length], [201, 0], "listed without the result body");
  assert.equal(typeof job0.fencingToken, "bigint");
  assert.ok(job0.createdAt instanceof Date);
  const statuses = new Set(seen.map((r) => r.status));
  assert.deepEqual([...statuses].sort(), ["PROCESSING", "RETRY", "SUCCEEDED"]);
});

test("a page at a time: at most pageSize records and a token for the next, until there is none", async () => {
  const pages: RecordPage[] = [];
  let pageToken: string | undefined;
  do {
    const page = await client.listRecordsPage({ namespace, pageSize: 4, pageToken });
    assert.ok(page.records.length <= 4);
    pages.push(page);
    pageToken = page.nextPageToken;
  } while (pageToken !== undefined);
  assert.ok(pages.length >= 3, `${pages.length} pages`);
  assert.equal(pages.flatMap((p) => p.records).length, 10);
  assert.equal(pages.at(-1)!.nextPageToken, undefined);
});

test("filters: statuses, parent, namespace", async () => {
  const open: OperationRecord[] = [];
  for await (const r of client.listRecords({ namespace, statuses: ["PROCESSING", "RETRY"], pageSize: 2 })) open.push(r);
  assert.deepEqual(keys(open), ["job-1", "job-2", "job-4", "job-5", "job-7", "job-8"]);
  assert.ok(open.every((r) => r.status === "PROCESSING" || r.status === "RETRY"));

  const children: OperationRecord[] = [];
  for await (const r of client.listRecords({ parent, pageSize: 2 })) children.push(r);
  assert.deepEqual(keys(children), ["job-0", "job-1", "job-2", "job-3", "job-4"]);
  assert.deepEqual(children[0].parent, { namespace: parent.namespace, key: parent.key });

  const none: OperationRecord[] = [];
  for await (const r of client.listRecords({ namespace: "jobs.nothing-here" })) none.push(r);
  assert.deepEqual(none, []);
});

test("refused before sending: a page size over 1000, a status that is not one", async () => {
  await assert.rejects(client.listRecordsPage({ pageSize: 1001 }), RangeError);
  // @ts-expect-error not a status
  await assert.rejects(client.listRecordsPage({ statuses: ["DONE"] }), TypeError);
  await assert.rejects(async () => {
    // @ts-expect-error UNSPECIFIED is no status to list
    for await (const _ of client.listRecords({ statuses: ["UNSPECIFIED"] })) void _;
  }, TypeError);
});

test("a page token of another filter is refused by the server, naming the field", async () => {
  const first = await client.listRecordsPage({ namespace, pageSize: 2 });
  assert.ok(first.nextPageToken);
  const e = await client.listRecordsPage({ namespace, statuses: ["SUCCEEDED"], pageToken: first.nextPageToken }).catch((e: unknown) => e);
  assert.ok(e instanceof OncekeyError, String(e));
  assert.deepEqual([e.reason, e.field], ["INVALID_FIELD", "page_token"]);
});

test("the README's reconciliation loop: operations whose outcome is unknown, listed and settled", async () => {
  const charges = `payments.${uniqueKey("charge").toLowerCase().replace(/[^a-z0-9-]/g, "-")}`;
  const bank = new Map([["order-1", { chargeId: "ch_1" }]]); // the outside world: order-1 was charged, order-2 not
  for (const order of ["order-1", "order-2"]) {
    await client.claim({ namespace: charges, key: order }, { args: { order, cents: 500 }, semantics: "AT_MOST_ONCE", leaseTtl: 1000 });
  }
  await sleep(1100); // both holders "vanished" mid-effect: their leases ran out

  // As in the README (console.log → lines):
  const lines: string[] = [];
  for await (const record of client.listRecords({ namespace: charges, statuses: ["UNKNOWN"] })) {
    try {
      const { value } = await client.reconcile(
        record,
        null,
        async () => {
          const charge = bank.get(record.key); // look the effect up in the outside world, by the key
          if (!charge) throw new Error("never charged"); // released: the next call runs it
          return charge; // recorded as the outcome: later calls replay it
        },
        { fingerprint: record.fingerprint },
      );
      lines.push(`${record.key}: ${JSON.stringify(value)}`);
    } catch (e) {
      lines.push(`${record.key}: ${(e as Error).message}`);
    }
  }
  assert.deepEqual(lines.sort(), ['order-1: {"chargeId":"ch_1"}', "order-2: never charged"]);

  const after = await Promise.all(["order-1", "order-2"].map((key) => client.lookup({ namespace: charges, key })));
  assert.deepEqual(after.map((r) => r?.status), ["SUCCEEDED", "RETRY"]);
  const replay = await client.run({ namespace: charges, key: "order-1" }, { order: "order-1", cents: 500 }, () => assert.fail("replayed"), {
    semantics: "AT_MOST_ONCE",
  });
  assert.deepEqual(replay, { chargeId: "ch_1" });
  const unknown: OperationRecord[] = [];
  for await (const r of client.listRecords({ namespace: charges, statuses: ["UNKNOWN"] })) unknown.push(r);
  assert.deepEqual(unknown, []);
});
