/**
 * The typed errors of the client, all subclasses of `OncekeyError` so that `instanceof` works on
 * the base and on each kind, and the two errors a wrapped function throws to choose how its
 * failure settles the operation (`FinalError`, `AbandonError`).
 *
 * This module only defines errors; turning a gRPC status into one of them is `status.ts`'s job.
 */
import type { IntentMatch, OperationRecord, StoredError } from "./types";

/** Common base of every error the client itself raises. */
export class OncekeyError extends Error {
  override name = "OncekeyError";
  /** The gRPC status code (`status` of `@grpc/grpc-js`) behind this error, when a server answered. */
  readonly grpcCode?: number;
  /** The google.rpc.ErrorInfo reason the server attached, e.g. `KEY_REUSED`. */
  readonly reason?: string;
  /** The request field a google.rpc.BadRequest names (INVALID_ARGUMENT only). */
  readonly field?: string;

  constructor(message: string, options: { cause?: unknown; grpcCode?: number; reason?: string; field?: string } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    if (options.grpcCode !== undefined) this.grpcCode = options.grpcCode;
    if (options.reason !== undefined) this.reason = options.reason;
    if (options.field !== undefined) this.field = options.field;
  }
}

/** The key was first claimed with other arguments (another intent reused it); nothing changed. */
export class KeyReusedError extends OncekeyError {
  override name = "KeyReusedError";
}

/**
 * The lease is no longer this caller's: another holder took the operation over (or it was
 * reconciled, or settled with this token). The outcome of this run was not recorded; the side
 * effect may have happened, and `token` is how fencing downstream systems tell the holders apart.
 * `cause` is the function's own error when it failed. Also thrown by `run` (without `cause`) when
 * every lease acquired within `wait` had run out, on this machine's clock, before its Claim's
 * answer arrived: the function then never ran, and each such lease was released for a retry.
 */
export class LeaseLostError extends OncekeyError {
  override name = "LeaseLostError";
  /** The fencing token of the lost lease. */
  readonly token: bigint;
  constructor(message: string, token: bigint, options: { cause?: unknown; grpcCode?: number; reason?: string } = {}) {
    super(message, options);
    this.token = token;
  }
}

/** Another holder is performing the operation; try again after `retryAfter` milliseconds. */
export class InProgressError extends OncekeyError {
  override name = "InProgressError";
  /** The server's hint, in milliseconds. */
  readonly retryAfter: number;
  /** The record at the last Claim. */
  readonly record?: OperationRecord;
  constructor(retryAfter: number, record?: OperationRecord) {
    super(`the operation is in progress elsewhere; retry after ${retryAfter} ms`);
    this.retryAfter = retryAfter;
    if (record) this.record = record;
  }
}

/**
 * An at-most-once operation's holder vanished mid-run: its outcome is unknown. Check the outside
 * world by the key, then settle it with `client.reconcile`.
 */
export class NeedsReconciliationError extends OncekeyError {
  override name = "NeedsReconciliationError";
  /** The record (status `UNKNOWN`). */
  readonly record?: OperationRecord;
  constructor(message: string, record?: OperationRecord) {
    super(message);
    if (record) this.record = record;
  }
}

/** The operation failed for good earlier; `error` is the stored failure (nothing ran this time). */
export class OperationFailedError extends OncekeyError {
  override name = "OperationFailedError";
  /** The stored error: the code, message and details the failing run recorded. */
  readonly error: StoredError;
  constructor(error: StoredError) {
    super(`the operation failed earlier: ${error.message}${error.code ? ` (code ${error.code})` : ""}`);
    this.error = error;
  }
}

/**
 * The operation waits for an approval that did not come within the wait: the function did not
 * run. Run it again once someone approved it (`client.approve`); a rejection makes it an
 * `OperationFailedError` (code 403, the approver's note).
 */
export class AwaitingApprovalError extends OncekeyError {
  override name = "AwaitingApprovalError";
  /** The record (status `AWAITING_APPROVAL`). */
  readonly record?: OperationRecord;
  constructor(message: string, record?: OperationRecord) {
    super(message);
    if (record) this.record = record;
  }
}

/**
 * The intent guard refused the run (`intentGuard: "refuse"`): the same arguments were claimed
 * under another key of the namespace within the intent window, as when an agent makes up a fresh
 * key for a retry. The function did not run and nothing was written for the key. Use the other
 * key (its outcome is that intent's), or run again with `repeatIntent` if the repeat is deliberate.
 */
export class DuplicateIntentError extends OncekeyError {
  override name = "DuplicateIntentError";
  /** The refused run's namespace and key. */
  readonly namespace: string;
  readonly key: string;
  /** The other keys, most recent first (at most 8). */
  readonly matches: IntentMatch[];
  constructor(message: string, namespace: string, key: string, matches: IntentMatch[]) {
    super(message);
    this.namespace = namespace;
    this.key = key;
    this.matches = matches;
  }
}

/**
 * A Claim of a new child operation beyond its parent's run budget (FAILED_PRECONDITION
 * `BUDGET_EXHAUSTED`): nothing ran and nothing was written for the child. Never retried: it fails
 * again while the parent's record lives. The fields are the server's ErrorInfo metadata.
 */
export class BudgetExhaustedError extends OncekeyError {
  override name = "BudgetExhaustedError";
  /** The parent operation whose budget is spent. */
  readonly parentNamespace: string;
  readonly parentKey: string;
  /** The cap that was hit: `max_children`, or the child namespace whose `maxPerNamespace` cap it was. */
  readonly limit: string;
  /** How many children that cap had counted. */
  readonly spent: number;
  /** The cap. */
  readonly max: number;
  constructor(
    message: string,
    budget: { parentNamespace: string; parentKey: string; limit: string; spent: number; max: number },
    options: { cause?: unknown; grpcCode?: number; reason?: string } = {},
  ) {
    super(message, options);
    this.parentNamespace = budget.parentNamespace;
    this.parentKey = budget.parentKey;
    this.limit = budget.limit;
    this.spent = budget.spent;
    this.max = budget.max;
  }
}

/**
 * The record's sealed fields cannot be opened (DATA_LOSS `UNREADABLE_RECORD`): the key they were
 * sealed with is not in the server's key ring, or the ciphertext was altered or moved. `keyId`
 * and `unreadableCause` (`missing_key` or `tampered`) are the server's ErrorInfo metadata (its
 * `key_id` and `cause`; `cause` itself is the gRPC error, as on every `OncekeyError`). Never
 * retried: the same read fails the same way until the key ring changes.
 */
export class UnreadableRecordError extends OncekeyError {
  override name = "UnreadableRecordError";
  /** The key id the stored envelope names. */
  readonly keyId: string;
  /** Why it cannot be opened: `missing_key` or `tampered`. */
  readonly unreadableCause: string;
  constructor(
    message: string,
    unreadable: { keyId: string; cause: string },
    options: { cause?: unknown; grpcCode?: number; reason?: string } = {},
  ) {
    super(message, options);
    this.keyId = unreadable.keyId;
    this.unreadableCause = unreadable.cause;
  }
}

/**
 * An Approve or Reject of an operation that does not await approval: it never did, was decided
 * otherwise, or has moved on since (FAILED_PRECONDITION `NOT_AWAITING_APPROVAL`). Never retried.
 */
export class NotAwaitingApprovalError extends OncekeyError {
  override name = "NotAwaitingApprovalError";
}

/**
 * A Purge of an unsettled at-most-once operation without `force` (FAILED_PRECONDITION
 * `UNSETTLED_AT_MOST_ONCE`): purging it would let its effect run again. Never retried.
 */
export class UnsettledAtMostOnceError extends OncekeyError {
  override name = "UnsettledAtMostOnceError";
}

/**
 * The token lacks the scope the call needs (PERMISSION_DENIED `MISSING_SCOPE`): `approve` for
 * Approve and Reject, `admin` for Purge, `ledger` for the rest; the message names it. Never retried.
 */
export class MissingScopeError extends OncekeyError {
  override name = "MissingScopeError";
}

/**
 * The server could not be reached (or stayed overloaded) through every retry, or the circuit
 * breaker is open after consecutive failures. Safe to retry later with the same key.
 * `result`, when set, is the output of a function whose outcome could not be recorded.
 */
export class UnavailableError extends OncekeyError {
  override name = "UnavailableError";
  /** True when the function ran and succeeded but its outcome could not be recorded. */
  readonly unsettled: boolean;
  /** The function's output, when `unsettled`. */
  readonly result?: unknown;
  constructor(
    message: string,
    options: { cause?: unknown; grpcCode?: number; reason?: string; unsettled?: boolean; result?: unknown } = {},
  ) {
    super(message, options);
    this.unsettled = options.unsettled ?? false;
    if (options.unsettled) this.result = options.result;
  }
}

/** A stored result that is not JSON, or not of the expected shape, was replayed. */
export class ResultDecodeError extends OncekeyError {
  override name = "ResultDecodeError";
}

/**
 * Throw from a wrapped function to fail the operation for good: the failure is recorded and
 * replayed to every later run as `OperationFailedError`. (Any other error releases the key for a
 * retry: the next run acquires it again.)
 */
export class FinalError extends Error {
  override name = "FinalError";
  /** Your own error code, stored with the failure (default 0). */
  readonly code: number;
  /** Opaque details stored with the failure (at most 64 KiB). */
  readonly details: Uint8Array;
  constructor(message: string, options: { code?: number; details?: Uint8Array; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code ?? 0;
    this.details = options.details ?? new Uint8Array();
  }
}

/**
 * Throw from a wrapped function when it failed before any side effect (e.g. validation): the key
 * is forgotten, and may be claimed again, even with other arguments.
 */
export class AbandonError extends Error {
  override name = "AbandonError";
}

/** How a failed run settles the operation. */
export type Disposition = "retryable" | "final" | "abandon";

/** The disposition of a thrown value: `FinalError` → final, `AbandonError` → abandon, else retryable. */
export function dispositionOf(error: unknown): Disposition {
  if (error instanceof FinalError) return "final";
  if (error instanceof AbandonError) return "abandon";
  return "retryable";
}
