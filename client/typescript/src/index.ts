/**
 * Node.js client of Oncekey, the shared idempotency ledger.
 *
 * `client.makeIdempotent(fn, {namespace, key})` wraps a side-effecting function so that each
 * logical call runs once; `client.run(key, args, fn)` does the same for one call. Both claim the
 * key, run the function only when the claim acquired it (the server renews the lease meanwhile
 * over the KeepAlive stream, reopened after server restarts), and record its JSON value or its
 * failure, retrying transient failures; later calls get the stored value. Errors are typed
 * (`OncekeyError` and its subclasses). `fingerprint` computes the RFC 8785 fingerprint of an
 * operation's arguments; `v1` is the generated oncekey.v1 code (ts-proto), for full control.
 */
export { OncekeyClient } from "./client";
export { MAX_WAIT } from "./options";
export type { DecisionOptions, FailOptions } from "./client";
export type { ClaimOptions, KeyLike } from "./options";
export { TENANT_HEADER } from "./transport";
export { MAX_PAGE_SIZE } from "./list";
export type { DuplicateIntent, DuplicateIntentListOptions, DuplicateIntentPage, ListedStatus, ListOptions, RecordPage } from "./list";
export type { ConnectOptions } from "./transport";
export { currentLease } from "./run";
export type { Done, Operation, RunOptions } from "./run";
export type { CallOptions, Idempotent, IdempotentOptions } from "./wrap";
export type { Lease } from "./lease";
export { OperationKey, InvalidKeyError, MAX_KEY_BYTES } from "./key";
export {
  OncekeyError,
  KeyReusedError,
  LeaseLostError,
  InProgressError,
  NeedsReconciliationError,
  OperationFailedError,
  UnavailableError,
  ResultDecodeError,
  AwaitingApprovalError,
  NotAwaitingApprovalError,
  UnsettledAtMostOnceError,
  MissingScopeError,
  DuplicateIntentError,
  BudgetExhaustedError,
  UnreadableRecordError,
  FinalError,
  AbandonError,
} from "./errors";
export type { Disposition } from "./errors";
export { CircuitOpenError, DEFAULT_BREAKER } from "./breaker";
export type { BreakerPolicy, CircuitState } from "./breaker";
export { DEFAULT_RETRY } from "./retry";
export type { RetryPolicy } from "./retry";
export {
  ERROR_DOMAIN,
  RETRY_PUSHBACK_HEADER,
  errorInfo,
  errorReasonOf,
  reason,
  reasonName,
  reasonOf,
  badField,
  pushback,
  isTransient,
  codeName,
} from "./status";
export type { ErrorInfo, KnownReason } from "./status";
export { ErrorReason } from "./gen/oncekey/v1/ledger";
export { MAX_ATTEMPTS_LIMIT, MAX_INTENT_WINDOW, MAX_NOTE_BYTES, MIN_INTENT_WINDOW } from "./types";
export type {
  Approval,
  BudgetUsage,
  Claimed,
  ClaimOutcome,
  IntentGuard,
  IntentMatch,
  LeaseGrant,
  OperationRecord,
  OperationRef,
  RecordStatus,
  RunBudget,
  Semantics,
  StoredError,
  StoredResult,
} from "./types";
export {
  canonicalize,
  canonicalizeJson,
  defaultArguments,
  defaultKey,
  fingerprint,
  fingerprintJson,
  InexactNumberError,
  InvalidJsonError,
  MAX_EXACT,
} from "./fingerprint";
export type { Inexact } from "./fingerprint";
export * as v1 from "./gen/oncekey/v1/ledger";
