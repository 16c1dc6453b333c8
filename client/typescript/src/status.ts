/**
 * Reading a gRPC error: its google.rpc.ErrorInfo reason and BadRequest field (from the
 * `grpc-status-details-bin` trailer), its `grpc-retry-pushback-ms`, whether it is transient, and
 * the typed `OncekeyError` it stands for.
 *
 * This module classifies errors only; whether to retry is `retry.ts`'s decision.
 */
import { status as Code } from "@grpc/grpc-js";
import type { ServiceError } from "@grpc/grpc-js";
import { BinaryReader } from "@bufbuild/protobuf/wire";
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
} from "./errors";
import { ErrorReason, errorReasonFromJSON, errorReasonToJSON } from "./gen/oncekey/v1/ledger";

/** A reason of the proto's `ErrorReason` (the one list of ErrorInfo reasons), the zero value aside. */
export type KnownReason = Exclude<ErrorReason, ErrorReason.ERROR_REASON_UNSPECIFIED | ErrorReason.UNRECOGNIZED>;

const PREFIX = "ERROR_REASON_";

/** The `ErrorReason` of an ErrorInfo reason as the wire spells it (`KEY_REUSED`); UNRECOGNIZED for one this version does not know. */
export function errorReasonOf(name: string): ErrorReason {
  const r = errorReasonFromJSON(PREFIX + name);
  return r === ErrorReason.ERROR_REASON_UNSPECIFIED ? ErrorReason.UNRECOGNIZED : r;
}

/** The wire spelling of a reason: its `ErrorReason` name without the prefix (`KEY_REUSED`). */
export function reasonName(r: ErrorReason): string {
  return errorReasonToJSON(r).slice(PREFIX.length);
}

type Options = { cause: unknown; grpcCode: number; reason: string; field?: string };

/**
 * The error each reason becomes, given its message. Total over `ErrorReason`: a reason added to
 * the proto does not compile until it is mapped here. Without an entry's `make`, the reason has no
 * class of its own: an `OncekeyError` whose message names the code and reason. (Transient codes
 * become `UnavailableError` whatever the reason.)
 */
const REASONS: { [r in KnownReason]: { make?: (message: string, options: Options, token?: bigint) => OncekeyError | undefined } } = {
  [ErrorReason.ERROR_REASON_INVALID_FIELD]: {},
  [ErrorReason.ERROR_REASON_TOO_LARGE]: {},
  [ErrorReason.ERROR_REASON_KEY_REUSED]: { make: (m, o) => new KeyReusedError(m, o) },
  [ErrorReason.ERROR_REASON_LEASE_LOST]: { make: lost },
  [ErrorReason.ERROR_REASON_ALREADY_SETTLED]: { make: lost },
  [ErrorReason.ERROR_REASON_NOT_FOUND]: {},
  [ErrorReason.ERROR_REASON_UNAUTHENTICATED]: {},
  [ErrorReason.ERROR_REASON_PERMISSION_DENIED]: {},
  [ErrorReason.ERROR_REASON_STORE_UNAVAILABLE]: { make: (m, o) => new UnavailableError(m, o) },
  [ErrorReason.ERROR_REASON_RATE_LIMITED]: { make: (m, o) => new UnavailableError(m, o) },
  [ErrorReason.ERROR_REASON_KEEPALIVE_REPLACED]: {},
  [ErrorReason.ERROR_REASON_NOT_AWAITING_APPROVAL]: { make: (m, o) => new NotAwaitingApprovalError(m, o) },
  [ErrorReason.ERROR_REASON_UNSETTLED_AT_MOST_ONCE]: { make: (m, o) => new UnsettledAtMostOnceError(m, o) },
  [ErrorReason.ERROR_REASON_MISSING_SCOPE]: { make: (m, o) => new MissingScopeError(m, o) },
  [ErrorReason.ERROR_REASON_INTERNAL]: {},
  [ErrorReason.ERROR_REASON_BUDGET_EXHAUSTED]: { make: budgetExhausted },
  [ErrorReason.ERROR_REASON_UNREADABLE_RECORD]: { make: unreadableRecord },
};

/** UNREADABLE_RECORD, with the key id and the cause from its ErrorInfo metadata. */
function unreadableRecord(message: string, options: Options): OncekeyError {
  const metadata = errorInfo(options.cause)?.metadata ?? {};
  return new UnreadableRecordError(message, { keyId: metadata.key_id ?? "", cause: metadata.cause ?? "" }, options);
}

/** BUDGET_EXHAUSTED, with its ErrorInfo metadata (a count that is not a number reads as 0). */
function budgetExhausted(message: string, options: Options): OncekeyError {
  const metadata = errorInfo(options.cause)?.metadata ?? {};
  const count = (name: string) => {
    const n = Number(metadata[name]);
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  };
  const budget = {
    parentNamespace: metadata.parent_namespace ?? "",
    parentKey: metadata.parent_key ?? "",
    limit: metadata.limit ?? "",
    spent: count("spent"),
    max: count("max"),
  };
  return new BudgetExhaustedError(message, budget, options);
}

/** LEASE_LOST and ALREADY_SETTLED on a call made with a lease token: that lease is lost. */
function lost(message: string, options: Options, token?: bigint): OncekeyError | undefined {
  return token === undefined ? undefined : new LeaseLostError(`${message} (token ${token})`, token, options);
}

/** The google.rpc.ErrorInfo domain of every Oncekey error. */
export const ERROR_DOMAIN = "oncekey";

/** The trailer by which a server asks the client to wait before retrying (gRFC A6). */
export const RETRY_PUSHBACK_HEADER = "grpc-retry-pushback-ms";

/** google.rpc.ErrorInfo: why a call failed, in machine-readable form. */
export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: { [key: string]: string };
}

const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo";
const BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest";

/** The `google.protobuf.Any` details of a server error's google.rpc.Status. */
function details(err: unknown): { typeUrl: string; value: Uint8Array }[] {
  const metadata = (err as Partial<ServiceError> | undefined)?.metadata;
  const raw = typeof metadata?.get === "function" ? metadata.get("grpc-status-details-bin")[0] : undefined;
  if (!Buffer.isBuffer(raw)) return [];
  try {
    // google.rpc.Status { int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3; }
    // google.protobuf.Any { string type_url = 1; bytes value = 2; }
    return fields(raw, 3).map((any) => ({ typeUrl: text(fields(any, 1)[0]), value: fields(any, 2)[0] ?? new Uint8Array() }));
  } catch {
    return []; // malformed details: classify by the code alone
  }
}

/** The google.rpc.ErrorInfo of a server error, or undefined when it carries none. */
export function errorInfo(err: unknown): ErrorInfo | undefined {
  const any = details(err).find((d) => d.typeUrl === ERROR_INFO_TYPE);
  if (!any) return undefined;
  // google.rpc.ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
  const entries = fields(any.value, 3).map((entry) => [text(fields(entry, 1)[0]), text(fields(entry, 2)[0])]);
  return { reason: text(fields(any.value, 1)[0]), domain: text(fields(any.value, 2)[0]), metadata: Object.fromEntries(entries) };
}

/** The ErrorInfo reason of an Oncekey server error as sent (e.g. "KEY_REUSED"), or undefined. */
export function reason(err: unknown): string | undefined {
  if (err instanceof OncekeyError) return err.reason;
  const info = errorInfo(err);
  return info && info.domain === ERROR_DOMAIN ? info.reason : undefined;
}

/** The `ErrorReason` of an Oncekey server error (UNRECOGNIZED for a reason this version does not know), or undefined. */
export function reasonOf(err: unknown): ErrorReason | undefined {
  const why = reason(err);
  return why === undefined ? undefined : errorReasonOf(why);
}

/** The first field a google.rpc.BadRequest names, or undefined. */
export function badField(err: unknown): string | undefined {
  const any = details(err).find((d) => d.typeUrl === BAD_REQUEST_TYPE);
  if (!any) return undefined;
  // google.rpc.BadRequest { repeated FieldViolation field_violations = 1; } FieldViolation { string field = 1; ... }
  const violation = fields(any.value, 1)[0];
  return violation ? text(fields(violation, 1)[0]) : undefined;
}

/**
 * The server's `grpc-retry-pushback-ms`: a number of milliseconds to wait before retrying, `null`
 * when it asks not to retry at all (negative or malformed), undefined when absent.
 */
export function pushback(err: unknown): number | null | undefined {
  const metadata = (err as Partial<ServiceError> | undefined)?.metadata;
  if (typeof metadata?.get !== "function") return undefined;
  const value = metadata.get(RETRY_PUSHBACK_HEADER)[0];
  if (value === undefined) return undefined;
  const ms = Number(String(value).trim());
  return Number.isInteger(ms) && ms >= 0 ? ms : null;
}

/** The gRPC code of an error, or undefined when it did not come from a call. */
export function grpcCode(err: unknown): number | undefined {
  if (err instanceof OncekeyError) return err.grpcCode;
  const code = (err as Partial<ServiceError> | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}

/**
 * True for failures that resending the identical request may cure: UNAVAILABLE,
 * DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (and connection drops grpc-js reports as INTERNAL or
 * UNKNOWN). Never INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED or FAILED_PRECONDITION,
 * nor a spent run budget (`BUDGET_EXHAUSTED`) whatever its code: only a new parent makes room.
 */
export function isTransient(err: unknown): boolean {
  if (reason(err) === "BUDGET_EXHAUSTED") return false;
  switch (grpcCode(err)) {
    case Code.UNAVAILABLE:
    case Code.DEADLINE_EXCEEDED:
    case Code.RESOURCE_EXHAUSTED:
      return true;
    case Code.INTERNAL:
    case Code.UNKNOWN:
      return reason(err) === undefined && /RST_STREAM|connection|socket|ECONNRESET|EPIPE|GOAWAY/i.test(String((err as Error).message));
    default:
      return false;
  }
}

/** The gRPC code's canonical name, e.g. `FAILED_PRECONDITION`. */
export function codeName(code: number | undefined): string | undefined {
  if (code === undefined) return undefined;
  return Object.keys(Code).find((k) => (Code as unknown as { [k: string]: number })[k] === code);
}

/**
 * The typed error a gRPC failure stands for, by its reason (`REASONS`): `KeyReusedError`,
 * `LeaseLostError` (LEASE_LOST and ALREADY_SETTLED, with `token`), `NotAwaitingApprovalError`,
 * `UnsettledAtMostOnceError`, `MissingScopeError`, `BudgetExhaustedError` (with the parent and
 * the cap from the ErrorInfo metadata), `UnreadableRecordError` (with the key id and the cause),
 * `UnavailableError` for transient failures,
 * `OncekeyError` for the rest (with `grpcCode`, `reason` and `field`). A typed error's message is
 * the server's own sentence (the class names the kind); an `OncekeyError`'s starts with the code
 * and reason. A value that is not a gRPC error is returned unchanged.
 */
export function toOncekeyError(err: unknown, token?: bigint): unknown {
  const code = grpcCode(err);
  if (code === undefined || err instanceof OncekeyError) return err;
  const why = reason(err);
  const message = (err as ServiceError).details || (err as Error).message;
  const known = why === undefined ? undefined : REASONS[errorReasonOf(why) as KnownReason];
  const typed = why === undefined ? undefined : known?.make?.(message, { cause: err, grpcCode: code, reason: why }, token);
  if (typed) return typed;
  const options = { cause: err, grpcCode: code, ...(why === undefined ? {} : { reason: why }) };
  if (isTransient(err)) return new UnavailableError(why === undefined ? `${codeName(code)}: ${message}` : message, options);
  const field = badField(err);
  return new OncekeyError(`${codeName(code)}${why ? ` ${why}` : ""}: ${message}`, { ...options, ...(field === undefined ? {} : { field }) });
}

function text(bytes: Uint8Array | undefined): string {
  return new TextDecoder().decode(bytes ?? new Uint8Array());
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
