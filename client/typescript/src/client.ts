/**
 * `OncekeyClient`: the connection to an Oncekey server, one typed method per RPC (native values
 * in and out, retried on transient failures), and the one-call APIs built on them (`run`,
 * `reconcile`, `makeIdempotent`, implemented in `run.ts` and `wrap.ts`).
 */
import { status as Code } from "@grpc/grpc-js";
import * as v1 from "./gen/oncekey/v1/ledger";
import { fingerprint } from "./fingerprint";
import { OncekeyError } from "./errors";
import type { Disposition } from "./errors";
import { OperationKey } from "./key";
import { grpcCode } from "./status";
import { Transport } from "./transport";
import type { ConnectOptions } from "./transport";
import {
  budgetToWire,
  checkNote,
  claimedFromWire,
  duration,
  intentGuardToWire,
  intentWindowToWire,
  leaseFromWire,
  maxAttemptsToWire,
  recordFromWire,
  semanticsToWire,
} from "./types";
import type { Claimed, LeaseGrant, OperationRecord, StoredError, StoredResult } from "./types";
import { listAll, listDuplicatesAll, listDuplicatesPage, listPage } from "./list";
import type { DuplicateIntent, DuplicateIntentListOptions, DuplicateIntentPage, ListOptions, RecordPage } from "./list";
import { MAX_WAIT } from "./options";
import type { ClaimOptions, KeyLike } from "./options";
import { execute } from "./run";
import type { Done, Operation, RunOptions } from "./run";
import { makeIdempotent } from "./wrap";
import type { Idempotent, IdempotentOptions } from "./wrap";

/** A Fail. */
export interface FailOptions {
  /**
   * Nothing ran under this lease (typically one that had run out before its Claim's answer
   * arrived, so the caller never started): the acquisition is then not counted against the
   * operation's `maxAttempts`, and the receipt's reason is `NOTHING_RAN`. Say it only when nothing
   * ran; `releaseUnused` is the usual way. Default false.
   */
  nothingRan?: boolean;
}

/** An Approve or Reject. */
export interface DecisionOptions {
  /** Kept with the decision (at most 1 KiB; no control characters but newline and tab); a Reject's error message. */
  note?: string;
  /** Pins the decision to the arguments the approver saw: their fingerprint (32 bytes) … */
  fingerprint?: Uint8Array;
  /** … or the arguments themselves, fingerprinted here. Another stored fingerprint is `KeyReusedError`. */
  args?: unknown;
  signal?: AbortSignal;
}

const DISPOSITION: { [k in Disposition]: v1.Disposition } = {
  retryable: v1.Disposition.DISPOSITION_RETRYABLE,
  final: v1.Disposition.DISPOSITION_FINAL,
  abandon: v1.Disposition.DISPOSITION_ABANDON,
};


/** A connection to an Oncekey server. */
export class OncekeyClient {
  /** The generated oncekey.v1.Ledger client, for full control (no retries, no breaker). */
  readonly ledger: v1.LedgerClient;
  /** @internal */
  readonly transport: Transport;
  private readonly pending = new Set<Promise<unknown>>();

  /** `target` is `host:port` (an `http://` prefix is accepted). */
  constructor(target: string, options: ConnectOptions = {}) {
    this.transport = new Transport(target, options);
    this.ledger = this.transport.ledger;
  }

  /** The RFC 8785 fingerprint of `args` (32 bytes), as Claims send it. */
  fingerprint(args: unknown): Buffer {
    return fingerprint(args);
  }

  /**
   * Claims an operation: ACQUIRED, COMPLETED, FAILED, IN_PROGRESS, NEEDS_RECONCILIATION,
   * AWAITING_APPROVAL (with `requireApproval`) or DUPLICATE_INTENT (the intent guard refused a new
   * key: `intentMatches` names the other keys). With `dryRun`, what a Claim would get now. A Claim
   * of a new child beyond its parent's run budget rejects with `BudgetExhaustedError`.
   */
  async claim(key: KeyLike, options: ClaimOptions = {}): Promise<Claimed> {
    const op = toKey(key);
    const maxAttempts = maxAttemptsToWire(options.maxAttempts);
    const intentGuard = intentGuardToWire(options.intentGuard);
    const intentWindow = intentWindowToWire(options.intentWindow);
    const budget = budgetToWire(options.budget);
    const parent = options.parent ?? op.parent;
    const wait = options.wait === undefined ? undefined : Math.min(options.wait, MAX_WAIT);
    const request: v1.ClaimRequest = {
      namespace: op.namespace,
      key: op.key,
      semantics: semanticsToWire(options.semantics),
      owner: options.owner ?? this.transport.owner,
      reconcile: options.reconcile ?? false,
      leaseTtl: duration(options.leaseTtl),
      retention: duration(options.retention),
      wait: duration(wait),
      parent: parent ? { namespace: parent.namespace, key: parent.key } : undefined,
      requireApproval: options.requireApproval ?? false,
      dryRun: options.dryRun ?? false,
      maxAttempts,
      intentGuard,
      intentWindow,
      repeatIntent: options.repeatIntent ?? false,
      budget,
    };
    if (options.payloadJson !== undefined) request.payloadJson = options.payloadJson;
    else if (options.fingerprint !== undefined) request.fingerprint = Buffer.from(options.fingerprint);
    else request.fingerprint = fingerprint(options.args ?? null);
    const res = await this.transport.unary<v1.ClaimRequest, v1.ClaimResponse>("claim", request, {
      signal: options.signal,
      gated: true,
      held: wait,
    });
    return claimedFromWire(res, options.dryRun ?? false);
  }

  /** Completes an operation held with `token`, storing `result`. An identical Complete again is OK. */
  async complete(key: KeyLike, token: bigint, result: Partial<StoredResult>): Promise<OperationRecord> {
    const op = toKey(key);
    const res = await this.transport.unary<v1.CompleteRequest, v1.CompleteResponse>(
      "complete",
      {
        namespace: op.namespace,
        key: op.key,
        leaseToken: token,
        result: {
          code: result.code ?? 0,
          body: Buffer.from(result.body ?? Buffer.alloc(0)),
          contentType: result.contentType ?? "",
          metadata: result.metadata ?? {},
        },
      },
      { gated: false, token },
    );
    return requireRecord(res.record);
  }

  /**
   * Fails an operation held with `token`: `retryable` releases it, `final` stores the error,
   * `abandon` forgets it (resolves to undefined). `options.nothingRan`: nothing ran under this
   * lease, so the acquisition does not count against `maxAttempts` (see `FailOptions`).
   */
  async fail(
    key: KeyLike,
    token: bigint,
    error: Partial<StoredError>,
    disposition: Disposition,
    options: FailOptions = {},
  ): Promise<OperationRecord | undefined> {
    const op = toKey(key);
    const res = await this.transport.unary<v1.FailRequest, v1.FailResponse>(
      "fail",
      {
        namespace: op.namespace,
        key: op.key,
        leaseToken: token,
        error: { code: error.code ?? 0, message: error.message ?? "", details: Buffer.from(error.details ?? Buffer.alloc(0)) },
        disposition: DISPOSITION[disposition],
        nothingRan: options.nothingRan ?? false,
      },
      { gated: false, token },
    );
    return res.record ? recordFromWire(res.record) : undefined;
  }

  /**
   * Fail `retryable` with `nothingRan`: releases a lease under which nothing ran (one that had run
   * out before its Claim's answer arrived, so the caller never started), so that the next Claim
   * acquires it again and the acquisition does not count against the operation's `maxAttempts`;
   * resolves to the record (RETRY), as `fail` does. For an effect that may have run, use `fail`.
   */
  async releaseUnused(key: KeyLike, token: bigint, error: Partial<StoredError>): Promise<OperationRecord | undefined> {
    return this.fail(key, token, error, "retryable", { nothingRan: true });
  }

  /** Renews a lease to `leaseTtl` ms from now (server default when undefined). */
  async renew(key: KeyLike, token: bigint, leaseTtl?: number): Promise<LeaseGrant> {
    const op = toKey(key);
    const res = await this.transport.unary<v1.RenewRequest, v1.RenewResponse>(
      "renew",
      { namespace: op.namespace, key: op.key, leaseToken: token, leaseTtl: duration(leaseTtl) },
      { gated: false, token },
    );
    if (!res.lease) throw new OncekeyError("malformed answer: Renew without a lease");
    return leaseFromWire(res.lease);
  }

  /** The record of an operation, or undefined when there is none. */
  async lookup(key: KeyLike, options: { signal?: AbortSignal } = {}): Promise<OperationRecord | undefined> {
    const op = toKey(key);
    try {
      const res = await this.transport.unary<v1.LookupRequest, v1.LookupResponse>(
        "lookup",
        { namespace: op.namespace, key: op.key, includeHistory: false },
        { gated: true, signal: options.signal },
      );
      return requireRecord(res.record);
    } catch (e) {
      if (grpcCode(e) === Code.NOT_FOUND) return undefined;
      throw e;
    }
  }

  /**
   * Every record of the caller's tenant that `options` selects (by `namespace`, `statuses`,
   * `parent`), fetched `pageSize` at a time as the loop goes: `for await (const record of
   * client.listRecords({ statuses: ["UNKNOWN"] })) …`. Records come without history, result body
   * or error details (`lookup` has them). Each page is retried like `lookup`; an error ends the
   * loop. A record that changes status while the loop pages may be missed or seen twice.
   */
  listRecords(options: ListOptions = {}): AsyncGenerator<OperationRecord, void, undefined> {
    return listAll(this.transport, options);
  }

  /** One page of the records `options` selects, with the token of the next page (undefined after the last). */
  listRecordsPage(options: ListOptions = {}): Promise<RecordPage> {
    return listPage(this.transport, options);
  }

  /**
   * Every suspected duplicate intent of the caller's tenant (of `namespace`, when given): arguments
   * claimed under more than one key within their namespace's intent window, refused Claims
   * included, fetched `pageSize` at a time as the loop goes: `for await (const dup of
   * client.listDuplicateIntents({ namespace: "email.send" })) …`. Each page is retried like
   * `lookup`; an error ends the loop.
   */
  listDuplicateIntents(options: DuplicateIntentListOptions = {}): AsyncGenerator<DuplicateIntent, void, undefined> {
    return listDuplicatesAll(this.transport, options);
  }

  /** One page of the suspected duplicate intents `options` selects, with the token of the next page (undefined after the last). */
  listDuplicateIntentsPage(options: DuplicateIntentListOptions = {}): Promise<DuplicateIntentPage> {
    return listDuplicatesPage(this.transport, options);
  }

  /**
   * Approves an operation that awaits approval: it becomes APPROVED and the next Claim acquires
   * it; resolves to the record. `approve(key, options)` or `approve(namespace, key, note)`.
   * The same decision again is OK. Rejects with `NotAwaitingApprovalError` when the operation does
   * not await approval (anymore), `MissingScopeError` without the `approve` scope, an
   * `OncekeyError` NOT_FOUND when there is no record.
   */
  approve(key: KeyLike, options?: DecisionOptions): Promise<OperationRecord>;
  approve(namespace: string, key: string, note?: string): Promise<OperationRecord>;
  approve(target: KeyLike | string, second?: DecisionOptions | string, note?: string): Promise<OperationRecord> {
    return this.decide("approve", target, second, note);
  }

  /**
   * Rejects an operation that awaits approval: it fails for good with error `{403, note}`, which
   * every later run gets as `OperationFailedError`; resolves to the FAILED record. As `approve`.
   */
  reject(key: KeyLike, options?: DecisionOptions): Promise<OperationRecord>;
  reject(namespace: string, key: string, note?: string): Promise<OperationRecord>;
  reject(target: KeyLike | string, second?: DecisionOptions | string, note?: string): Promise<OperationRecord> {
    return this.decide("reject", target, second, note);
  }

  /**
   * Purges a record and its history, in any state (the `admin` scope); its fencing sequence goes
   * on, so the old holder's Complete, Fail and Renew get `LeaseLostError`. An unsettled
   * at-most-once operation needs `force` (its effect may then run again; otherwise
   * `UnsettledAtMostOnceError`). Resolves to true when this call purged it, false when there was
   * no record (never was, expired, or purged by an earlier attempt of this call).
   */
  purge(key: KeyLike, options?: { force?: boolean; signal?: AbortSignal }): Promise<boolean>;
  purge(namespace: string, key: string, force?: boolean): Promise<boolean>;
  async purge(
    target: KeyLike | string,
    second?: { force?: boolean; signal?: AbortSignal } | string,
    force?: boolean,
  ): Promise<boolean> {
    const op = typeof target === "string" ? toKey({ namespace: target, key: String(second) }) : toKey(target);
    const options = typeof second === "object" ? second : { force };
    try {
      await this.transport.unary<v1.PurgeRequest, v1.PurgeResponse>(
        "purge",
        { namespace: op.namespace, key: op.key, force: options.force ?? false },
        { gated: true, signal: options.signal },
      );
      return true;
    } catch (e) {
      if (grpcCode(e) === Code.NOT_FOUND) return false;
      throw e;
    }
  }

  private async decide(
    verb: "approve" | "reject",
    target: KeyLike | string,
    second: DecisionOptions | string | undefined,
    note: string | undefined,
  ): Promise<OperationRecord> {
    const op = typeof target === "string" ? toKey({ namespace: target, key: String(second) }) : toKey(target);
    const options: DecisionOptions = typeof second === "object" ? second : { note };
    const pin =
      options.fingerprint !== undefined ? Buffer.from(options.fingerprint) : options.args !== undefined ? fingerprint(options.args) : Buffer.alloc(0);
    if (pin.length !== 0 && pin.length !== 32) throw new RangeError("fingerprint: must be 32 bytes (the SHA-256 the approver saw)");
    const request = { namespace: op.namespace, key: op.key, fingerprint: pin, note: checkNote(options.note ?? "") };
    const res = await this.transport.unary<v1.ApproveRequest, v1.ApproveResponse>(verb, request, { gated: true, signal: options.signal });
    return requireRecord(res.record);
  }

  /**
   * Runs `fn` once per key: claims `key` with `args`, calls `fn` only when the claim acquired it
   * (keeping the lease alive meanwhile), then records its result (JSON) or its failure; later runs
   * get the stored result without calling `fn`. A lease that had already run out when the Claim's
   * answer arrived runs nothing: it is released and the key claimed again while `wait` lasts, then
   * the call rejects with `LeaseLostError`. See `RunOptions` and the README.
   */
  async run<T>(key: KeyLike, args: unknown, fn: Operation<T>, options: RunOptions = {}): Promise<T> {
    return (await this.runDetailed(key, args, fn, options)).value;
  }

  /** Like `run`, also telling whether the value was replayed, with the record. */
  runDetailed<T>(key: KeyLike, args: unknown, fn: Operation<T>, options: RunOptions = {}): Promise<Done<T>> {
    return execute(this, toKey(key), args, fn, options, false);
  }

  /**
   * Settles an at-most-once operation whose outcome is unknown (`NeedsReconciliationError`):
   * `fn` must find out from the outside world, by the key, what happened, and return the result
   * (recorded as the outcome) or throw (`FinalError`: failed for good; `AbandonError`: forget the
   * key; anything else: it did not happen and may run again).
   */
  reconcile<T>(key: KeyLike, args: unknown, fn: Operation<T>, options: RunOptions = {}): Promise<Done<T>> {
    return execute(this, toKey(key), args, fn, options, true);
  }

  /**
   * Wraps `fn` so that each logical call runs once: `client.idempotent(sendEmail, {namespace:
   * "email.send", key: (to, subject) => ...})` returns a function with `fn`'s parameters and
   * return type, plus `.detailed(...args)` (the value and whether it was replayed) and
   * `.with({signal, timeout})`. Without `key` and `args`, a call's arguments and key are derived
   * as in every client library (docs/api.md#default-arguments-and-key).
   *
   * The parameters are `fn`'s alone (`Parameters<F>`): a `key` or `args` callback naming fewer of
   * them must not shorten the wrapper's parameter list, as inferring them from every callback would.
   */
  idempotent<F extends (...args: never[]) => unknown>(fn: F, options: IdempotentOptions<Parameters<F>>): Idempotent<Parameters<F>, Awaited<ReturnType<F>>> {
    return makeIdempotent(this, fn as (...args: Parameters<F>) => ReturnType<F>, options);
  }

  /** The same as `idempotent` (the name AWS Powertools users know). */
  makeIdempotent<F extends (...args: never[]) => unknown>(fn: F, options: IdempotentOptions<Parameters<F>>): Idempotent<Parameters<F>, Awaited<ReturnType<F>>> {
    return makeIdempotent(this, fn as (...args: Parameters<F>) => ReturnType<F>, options);
  }

  /** @internal Keeps `settling` (a background settle) counted until it ends, for `close`. */
  track(settling: Promise<unknown>): void {
    const p = settling.catch(() => undefined).finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Waits for operations still being settled in the background (cancelled calls), then closes the channel. */
  async close(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
    this.transport.close();
  }
}

function toKey(key: KeyLike): OperationKey {
  if (key instanceof OperationKey) return key;
  const op = OperationKey.raw(key.namespace, key.key);
  return key.parent ? op.withParent(key.parent) : op;
}

function requireRecord(record: v1.Record | undefined): OperationRecord {
  if (!record) throw new OncekeyError("malformed answer: no record");
  return recordFromWire(record);
}
