/**
 * What a Claim is given besides its client: the operation (`KeyLike`), the Claim's options and
 * the longest wait the server honors; and what a run needs of the client (`RunClient`). A leaf,
 * so that the client, the run loop and its settling share them without importing each other.
 */

import type { Disposition } from "./errors";
import type { OperationKey } from "./key";
import type { Lease } from "./lease";
import type { Transport } from "./transport";
import type { Claimed, IntentGuard, IntentMatch, OperationRecord, OperationRef, RunBudget, Semantics, StoredError, StoredResult } from "./types";

/** An operation: an `OperationKey`, or a plain `{namespace, key}` (with an optional parent). */
export type KeyLike = OperationKey | { namespace: string; key: string; parent?: OperationRef };

/** A Claim, without the operation's identity. Durations in milliseconds. */
export interface ClaimOptions {
  /** The significant arguments, fingerprinted here (RFC 8785 + SHA-256). */
  args?: unknown;
  /** Or their fingerprint, computed earlier with `fingerprint(args)` (32 bytes). */
  fingerprint?: Uint8Array;
  /** Or the arguments as a JSON text, fingerprinted by the server. */
  payloadJson?: string;
  /** Lease length (1 s ..= 1 h; server default 30 s). */
  leaseTtl?: number;
  /** How long the record is kept after it settles (server default 24 h). */
  retention?: number;
  /** Fixed by the first Claim of a key (default `AT_LEAST_ONCE`). */
  semantics?: Semantics;
  /** Names the holder in the record (default: the client's owner). */
  owner?: string;
  /** The parent operation, recorded for audit (default: the key's parent). */
  parent?: OperationRef;
  /** Take over an UNKNOWN at-most-once operation to reconcile it. */
  reconcile?: boolean;
  /** Hold an IN_PROGRESS answer up to this long (at most 60 000) for the outcome, or an AWAITING_APPROVAL one for the decision. */
  wait?: number;
  /**
   * Create the record awaiting approval: nobody acquires it before someone approves it
   * (`client.approve`); until then Claims answer `AWAITING_APPROVAL`. Fixed by the first Claim of a key.
   */
  requireApproval?: boolean;
  /**
   * Answer what this Claim would get now without writing anything (no record, lease, dedup hit or
   * receipt): `Claimed.dryRun` is true and there is no lease.
   */
  dryRun?: boolean;
  /**
   * Cap the acquisitions of the operation (reconciliations not counted; 0 or undefined: no cap):
   * past it a released operation fails for good with code 429 ("attempts exhausted"). Fixed by the
   * first Claim of a key.
   */
  maxAttempts?: number;
  /**
   * The intent guard for this Claim (default: the namespace's setting): with `refuse`, a Claim of
   * a new key whose arguments another key of the namespace was claimed with within the intent
   * window answers `DUPLICATE_INTENT` (nothing written); with `warn` it goes on, and
   * `Claimed.intentMatches` names the other keys. Stricter than the setting, never looser.
   */
  intentGuard?: IntentGuard;
  /** The intent window this Claim asks for (1 000 ..= 86 400 000 ms): the longer of it and the namespace's. */
  intentWindow?: number;
  /** The repeat is deliberate: `refuse` acts as `warn` for this Claim. */
  repeatIntent?: boolean;
  /**
   * The run budget of the operation's children (Claims naming it as `parent`): a Claim of a new
   * child beyond it rejects with `BudgetExhaustedError`. Only the first Claim of a key sets it.
   */
  budget?: RunBudget;
  /** Aborts the Claim and its retries. */
  signal?: AbortSignal;
}

/** The longest `wait` the server honors. */
export const MAX_WAIT = 60_000;

/** What a run and its settling need of the client (an `OncekeyClient`), so that they do not import it. */
export interface RunClient {
  readonly transport: Transport;
  claim(key: OperationKey, options?: ClaimOptions): Promise<Claimed>;
  fail(
    key: OperationKey,
    token: bigint,
    error: Partial<StoredError>,
    disposition: Disposition,
  ): Promise<OperationRecord | undefined>;
  complete(key: OperationKey, token: bigint, result: Partial<StoredResult>): Promise<OperationRecord>;
  releaseUnused(key: OperationKey, token: bigint, error: Partial<StoredError>): Promise<OperationRecord | undefined>;
  lookup(key: OperationKey): Promise<OperationRecord | undefined>;
  track(settling: Promise<unknown>): void;
}

/** The function run under a lease. */
export type Operation<T> = (lease: Lease) => T | Promise<T>;

/** How `run` claims and runs an operation. Durations in milliseconds. */
export interface RunOptions {
  /** Aborts the call: it rejects at once with the signal's reason; the function's own signal fires too. */
  signal?: AbortSignal;
  /** Rejects the call with a `TimeoutError` DOMException after this long (as `AbortSignal.timeout`). */
  timeout?: number;
  /** Lease length (server default 30 s); the server renews it every third of that while the function runs. */
  leaseTtl?: number;
  /** How long the outcome is kept after it settles (server default 24 h); must outlast every retry. */
  retention?: number;
  /** `AT_MOST_ONCE`: a vanished holder's operation needs reconciliation instead of running again. */
  semantics?: Semantics;
  /**
   * How long to wait for another holder's outcome, or for an approval (default 60 000); 0 rejects
   * with `InProgressError` (or `AwaitingApprovalError`) at once.
   */
  wait?: number;
  /** Names the holder in the record (default: the client's owner). */
  owner?: string;
  /**
   * Nobody runs the operation before someone approves it (`client.approve`): a run waits up to
   * `wait` for the decision, then rejects with `AwaitingApprovalError`. Fixed by the first Claim of a key.
   */
  requireApproval?: boolean;
  /**
   * Caps the runs of the operation (reconciliations not counted; 0 or undefined: no cap): past it,
   * a released operation fails for good with code 429, "attempts exhausted" (`OperationFailedError`).
   */
  maxAttempts?: number;
  /**
   * The intent guard (default: the namespace's setting; see docs/api.md#intent-guard): with
   * `refuse`, a run of a new key whose arguments another key of the namespace was claimed with
   * within the intent window rejects with `DuplicateIntentError` and the function does not run;
   * with `warn` it runs, and `Done.intentMatches` names the other keys.
   */
  intentGuard?: IntentGuard;
  /** The intent window to ask for (1 000 ..= 86 400 000 ms; the longer of it and the namespace's). */
  intentWindow?: number;
  /** The repeat is deliberate: `refuse` acts as `warn` for this run. */
  repeatIntent?: boolean;
  /**
   * The run budget of this operation's children (keys made with `child`, or naming it as parent):
   * a run of a new child beyond it rejects with `BudgetExhaustedError` (never retried) and its
   * function does not run. Only the first Claim of a key sets it.
   */
  budget?: RunBudget;
  /** How a thrown error settles the operation (default: `FinalError` final, `AbandonError` abandon, else retryable). */
  disposition?: (error: unknown) => Disposition;
  /**
   * The arguments' fingerprint (32 bytes), used instead of fingerprinting `args`: e.g. a listed
   * record's `fingerprint`, to reconcile it without knowing its arguments.
   */
  fingerprint?: Uint8Array;
  /**
   * Store the function's value verbatim instead of as JSON: it returns a `StoredResult` (code,
   * body bytes, content type, metadata), and replays give the stored `StoredResult` back.
   */
  raw?: boolean;
}

/** The value of an operation and where it came from. */
export interface Done<T> {
  value: T;
  /** True when the value is a stored result replayed from an earlier run (the function did not run). */
  replayed: boolean;
  /**
   * The Claim outcome the value came from: `ACQUIRED` (the function ran in this call) or
   * `COMPLETED` (an earlier run's stored result, replayed).
   */
  outcome: "ACQUIRED" | "COMPLETED";
  /** The SUCCEEDED record. */
  record: OperationRecord;
  /**
   * The other keys of the namespace claimed with the same arguments within the intent window,
   * when the intent guard let this new key through anyway (`warn`, or `repeatIntent`): a hint that
   * the caller made up a new key for a retry. Absent otherwise.
   */
  intentMatches?: IntentMatch[];
}
