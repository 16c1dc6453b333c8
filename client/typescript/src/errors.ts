/** Errors of the Node client, and the google.rpc.ErrorInfo that every server error carries. */
import type { ServiceError } from "@grpc/grpc-js";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import type { OperationError } from "./gen/oncekey/v1/ledger";

/** The google.rpc.ErrorInfo domain of every Oncekey error. */
export const ERROR_DOMAIN = "oncekey";

/** google.rpc.ErrorInfo: why a call failed, in machine-readable form. */
export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo";

/**
 * The google.rpc.ErrorInfo of a server error, decoded from its `grpc-status-details-bin` trailer
 * (a google.rpc.Status), or undefined when it carries none.
 */
export function errorInfo(err: unknown): ErrorInfo | undefined {
  const metadata = (err as Partial<ServiceError> | undefined)?.metadata;
  const raw = metadata?.get("grpc-status-details-bin")[0];
  if (!Buffer.isBuffer(raw)) return undefined;
  // google.rpc.Status { int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3; }
  for (const any of fields(raw, 3)) {
    // google.protobuf.Any { string type_url = 1; bytes value = 2; }
    const typeUrl = new TextDecoder().decode(fields(any, 1)[0] ?? new Uint8Array());
    if (typeUrl !== ERROR_INFO_TYPE) continue;
    // google.rpc.ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
    const value = fields(any, 2)[0] ?? new Uint8Array();
    const text = (bytes: Uint8Array | undefined) => new TextDecoder().decode(bytes ?? new Uint8Array());
    const entries = fields(value, 3).map((entry) => [text(fields(entry, 1)[0]), text(fields(entry, 2)[0])]);
    return { reason: text(fields(value, 1)[0]), domain: text(fields(value, 2)[0]), metadata: Object.fromEntries(entries) };
  }
  return undefined;
}

/** The ErrorInfo reason of a server error (e.g. "KEY_REUSED"), or undefined. */
export function reason(err: unknown): string | undefined {
  return errorInfo(err)?.reason;
}

/** The length-delimited fields numbered `field` of an encoded message. */
function fields(bytes: Uint8Array, field: number): Uint8Array[] {
  const reader = new BinaryReader(bytes);
  const found: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    if (number === field && wireType === 2) found.push(reader.bytes());
    else reader.skip(wireType);
  }
  return found;
}

/** The operation failed for good, now or earlier; `error` is the stored OperationError. */
export class OperationFailedError extends Error {
  override name = "OperationFailedError";
  constructor(readonly error: OperationError) {
    super(`operation failed: ${error.code} ${error.message}`);
  }
}

/** Another holder is performing the operation; claim again after `retryAfterMs`. */
export class InProgressError extends Error {
  override name = "InProgressError";
  constructor(readonly retryAfterMs: number) {
    super(`operation in progress elsewhere; retry after ${retryAfterMs} ms`);
  }
}

/** An at-most-once operation's outcome is unknown: check the outside world, then reconcile. */
export class NeedsReconciliationError extends Error {
  override name = "NeedsReconciliationError";
}

/**
 * Throw from `run`'s function to fail the key for good: the error is replayed to later runs.
 * Any other error releases the key for a retry (the next run acquires it again).
 */
export class FinalError extends Error {
  override name = "FinalError";
  constructor(message: string, readonly code = 0, readonly details: Buffer = Buffer.alloc(0)) {
    super(message);
  }
}
