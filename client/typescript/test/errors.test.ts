// Reading the google.rpc.ErrorInfo reason of a server error from grpc-status-details-bin.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Metadata, status } from "@grpc/grpc-js";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { errorInfo, reason, toOncekeyError } from "../src/status";
import { KeyReusedError, LeaseLostError, OncekeyError, UnavailableError } from "../src/errors";

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
