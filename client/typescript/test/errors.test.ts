// Reading the google.rpc.ErrorInfo reason of a server error from grpc-status-details-bin.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Metadata, status } from "@grpc/grpc-js";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { errorInfo, errorReasonOf, isTransient, reason, reasonName, reasonOf, toOncekeyError } from "../src/status";
import {
  BudgetExhaustedError,
  KeyReusedError,
  LeaseLostError,
  MissingScopeError,
  NotAwaitingApprovalError,
  OncekeyError,
  UnavailableError,
  UnreadableRecordError,
  UnsettledAtMostOnceError,
} from "../src/errors";
import { ErrorReason, errorReasonToJSON } from "../src/gen/oncekey/v1/ledger";

function serviceError(details: Uint8Array[]) {
  const st = new BinaryWriter().uint32(8).int32(status.FAILED_PRECONDITION).uint32(18).string("key reused");
  for (const d of details) st.uint32(26).bytes(d);
  const metadata = new Metadata();
  metadata.set("grpc-status-details-bin", Buffer.from(st.finish()));
  return Object.assign(new Error("9 FAILED_PRECONDITION: key reused"), { code: status.FAILED_PRECONDITION, details: "key reused", metadata });
}

function any(typeUrl: string, value: Uint8Array): Uint8Array {
  return new BinaryWriter().uint32(10).string(typeUrl).uint32(18).bytes(value).finish();
}

test("reason of KEY_REUSED", () => {
  const entry = new BinaryWriter().uint32(10).string("namespace").uint32(18).string("payments.charge").finish();
  const info = new BinaryWriter().uint32(10).string("KEY_REUSED").uint32(18).string("oncekey").uint32(26).bytes(entry).finish();
  const err = serviceError([any("type.googleapis.com/google.rpc.BadRequest", new Uint8Array()), any("type.googleapis.com/google.rpc.ErrorInfo", info)]);
  assert.equal(reason(err), "KEY_REUSED");
  assert.deepEqual(errorInfo(err), { reason: "KEY_REUSED", domain: "oncekey", metadata: { namespace: "payments.charge" } });
});

test("no reason without details", () => {
  assert.equal(reason(serviceError([])), undefined);
  assert.equal(reason(new Error("plain")), undefined);
  assert.equal(reason(undefined), undefined);
});

test("server errors become typed errors with one base class", () => {
  const info = (r: string) => any("type.googleapis.com/google.rpc.ErrorInfo", new BinaryWriter().uint32(10).string(r).uint32(18).string("oncekey").finish());
  const reused = toOncekeyError(serviceError([info("KEY_REUSED")]));
  assert.ok(reused instanceof KeyReusedError && reused instanceof OncekeyError && reused instanceof Error);
  assert.equal((reused as OncekeyError).reason, "KEY_REUSED");
  const lost = toOncekeyError(serviceError([info("LEASE_LOST")]), 7n);
  assert.ok(lost instanceof LeaseLostError && lost.token === 7n);
  const down = toOncekeyError(Object.assign(new Error("14 UNAVAILABLE"), { code: status.UNAVAILABLE, details: "down", metadata: new Metadata() }));
  assert.ok(down instanceof UnavailableError && down.grpcCode === status.UNAVAILABLE);
  const violation = new BinaryWriter().uint32(10).string("namespace").uint32(18).string("bad").finish();
  const badRequest = any("type.googleapis.com/google.rpc.BadRequest", new BinaryWriter().uint32(10).bytes(violation).finish());
  const invalid = toOncekeyError(
    Object.assign(serviceError([info("INVALID_FIELD"), badRequest]), { code: status.INVALID_ARGUMENT }),
  ) as OncekeyError;
  assert.equal(invalid.constructor, OncekeyError);
  assert.deepEqual([invalid.reason, invalid.field, invalid.grpcCode], ["INVALID_FIELD", "namespace", status.INVALID_ARGUMENT]);
  const plain = new Error("not grpc");
  assert.equal(toOncekeyError(plain), plain);
});

/** The error class and gRPC code of every reason of the proto's ErrorReason (docs/api.md#errors). */
const EXPECTED: {
  [name: string]: [number, typeof OncekeyError | typeof LeaseLostError | typeof UnavailableError | typeof BudgetExhaustedError | typeof UnreadableRecordError];
} = {
  INVALID_FIELD: [status.INVALID_ARGUMENT, OncekeyError],
  TOO_LARGE: [status.INVALID_ARGUMENT, OncekeyError],
  KEY_REUSED: [status.FAILED_PRECONDITION, KeyReusedError],
  LEASE_LOST: [status.FAILED_PRECONDITION, LeaseLostError],
  ALREADY_SETTLED: [status.FAILED_PRECONDITION, LeaseLostError],
  NOT_FOUND: [status.NOT_FOUND, OncekeyError],
  UNAUTHENTICATED: [status.UNAUTHENTICATED, OncekeyError],
  PERMISSION_DENIED: [status.PERMISSION_DENIED, OncekeyError],
  STORE_UNAVAILABLE: [status.UNAVAILABLE, UnavailableError],
  RATE_LIMITED: [status.RESOURCE_EXHAUSTED, UnavailableError],
  KEEPALIVE_REPLACED: [status.ABORTED, OncekeyError],
  NOT_AWAITING_APPROVAL: [status.FAILED_PRECONDITION, NotAwaitingApprovalError],
  UNSETTLED_AT_MOST_ONCE: [status.FAILED_PRECONDITION, UnsettledAtMostOnceError],
  MISSING_SCOPE: [status.PERMISSION_DENIED, MissingScopeError],
  INTERNAL: [status.INTERNAL, OncekeyError],
  BUDGET_EXHAUSTED: [status.FAILED_PRECONDITION, BudgetExhaustedError],
  UNREADABLE_RECORD: [status.DATA_LOSS, UnreadableRecordError],
};

test("every reason of the generated ErrorReason enum is mapped, by the enum", () => {
  const reasons = Object.values(ErrorReason).filter(
    (r): r is ErrorReason => typeof r === "number" && r !== ErrorReason.ERROR_REASON_UNSPECIFIED && r !== ErrorReason.UNRECOGNIZED,
  );
  assert.ok(reasons.length >= 16);
  for (const r of reasons) {
    const name = errorReasonToJSON(r).replace(/^ERROR_REASON_/, "");
    assert.equal(errorReasonOf(name), r, name);
    assert.equal(reasonName(r), name);
    const expected = EXPECTED[name];
    assert.ok(expected, `${name}: a reason of the proto this test does not know`);
    const [code, kind] = expected;
    const info = new BinaryWriter().uint32(10).string(name).uint32(18).string("oncekey").finish();
    const err = Object.assign(serviceError([any("type.googleapis.com/google.rpc.ErrorInfo", info)]), { code, details: "what the server said" });
    assert.equal(reasonOf(err), r, name);
    const typed = toOncekeyError(err, 7n) as OncekeyError;
    assert.equal(typed.constructor, kind, `${name} → ${typed.constructor.name}`);
    assert.equal(typed.reason, name);
    assert.equal(typed.grpcCode, code);
    assert.match(typed.message, /what the server said/);
  }
  assert.equal(Object.keys(EXPECTED).length, reasons.length, "no reason is expected that the proto lacks");
});

test("a reason this version does not know is kept as sent, and is no enum value", () => {
  assert.equal(errorReasonOf("SOMETHING_NEW"), ErrorReason.UNRECOGNIZED);
  assert.equal(errorReasonOf("UNSPECIFIED"), ErrorReason.UNRECOGNIZED);
  const info = new BinaryWriter().uint32(10).string("SOMETHING_NEW").uint32(18).string("oncekey").finish();
  const typed = toOncekeyError(serviceError([any("type.googleapis.com/google.rpc.ErrorInfo", info)])) as OncekeyError;
  assert.equal(typed.constructor, OncekeyError);
  assert.equal(typed.reason, "SOMETHING_NEW");
  assert.equal(typed.message, "FAILED_PRECONDITION SOMETHING_NEW: key reused");
});

test("UNREADABLE_RECORD is an UnreadableRecordError naming the key, never transient", () => {
  const entry = (k: string, v: string) => new BinaryWriter().uint32(10).string(k).uint32(18).string(v).finish();
  const info = new BinaryWriter()
    .uint32(10)
    .string("UNREADABLE_RECORD")
    .uint32(18)
    .string("oncekey")
    .uint32(26)
    .bytes(entry("key_id", "k-2026-06"))
    .uint32(26)
    .bytes(entry("cause", "missing_key"))
    .finish();
  const err = Object.assign(serviceError([any("type.googleapis.com/google.rpc.ErrorInfo", info)]), { code: status.DATA_LOSS });
  assert.equal(isTransient(err), false);
  const typed = toOncekeyError(err);
  assert.ok(typed instanceof UnreadableRecordError && typed instanceof OncekeyError, String(typed));
  assert.deepEqual([typed.keyId, typed.unreadableCause, typed.reason, typed.grpcCode], ["k-2026-06", "missing_key", "UNREADABLE_RECORD", status.DATA_LOSS]);
});
