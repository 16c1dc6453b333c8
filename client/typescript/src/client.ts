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
import { claimedFromWire, duration, leaseFromWire, recordFromWire, semanticsToWire } from "./types";
import type { Claimed, LeaseGrant, OperationRecord, OperationRef, Semantics, StoredError, StoredResult } from "./types";
import { execute } from "./run";
import type { Done, Operation, RunOptions } from "./run";
import { makeIdempotent } from "./wrap";
import type { Idempotent, IdempotentOptions } from "./wrap";

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
  /** Hold an IN_PROGRESS answer up to this long (at most 60 000) for the outcome. */
  wait?: number;
  /** Aborts the Claim and its retries. */
  signal?: AbortSignal;
}

const DISPOSITION: { [k in Disposition]: v1.Disposition } = {
  retryable: v1.Disposition.DISPOSITION_RETRYABLE,
  final: v1.Disposition.DISPOSITION_FINAL,
  abandon: v1.Disposition.DISPOSITION_ABANDON,
};

/** The longest `wait` the server honors. */
export const MAX_WAIT = 60_000;

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

  /** Claims an operation: ACQUIRED, COMPLETED, FAILED, IN_PROGRESS or NEEDS_RECONCILIATION. */
  async claim(key: KeyLike, options: ClaimOptions = {}): Promise<Claimed> {
    const op = toKey(key);
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
      // Approval gate, dry run and attempt cap: not offered by this client yet.
      requireApproval: false,
      dryRun: false,
      maxAttempts: 0,
    };
    if (options.payloadJson !== undefined) request.payloadJson = options.payloadJson;
    else if (options.fingerprint !== undefined) request.fingerprint = Buffer.from(options.fingerprint);
    else request.fingerprint = fingerprint(options.args ?? null);
    const res = await this.transport.unary<v1.ClaimRequest, v1.ClaimResponse>("claim", request, {
      signal: options.signal,
      gated: true,
      held: wait,
    });
    return claimedFromWire(res);
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

  /** Fails an operation held with `token`: `retryable` releases it, `final` stores the error, `abandon` forgets it. */
  async fail(key: KeyLike, token: bigint, error: Partial<StoredError>, disposition: Disposition): Promise<OperationRecord | undefined> {
    const op = toKey(key);
    const res = await this.transport.unary<v1.FailRequest, v1.FailResponse>(
      "fail",
      {
        namespace: op.namespace,
        key: op.key,
        leaseToken: token,
        error: { code: error.code ?? 0, message: error.message ?? "", details: Buffer.from(error.details ?? Buffer.alloc(0)) },
        disposition: DISPOSITION[disposition],
      },
      { gated: false, token },
    );
    return res.record ? recordFromWire(res.record) : undefined;
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
   * Runs `fn` once per key: claims `key` with `args`, calls `fn` only when the claim acquired it
   * (keeping the lease alive meanwhile), then records its result (JSON) or its failure; later runs
   * get the stored result without calling `fn`. See `RunOptions` and the README.
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
   * Wraps `fn` so that each logical call runs once: `client.makeIdempotent(sendEmail, {namespace:
   * "email.send", key: (to, subject) => ...})` returns a function with `fn`'s parameters.
   */
  makeIdempotent<A extends unknown[], R>(fn: (...args: A) => R | Promise<R>, options: IdempotentOptions<A>): Idempotent<A, Awaited<R>> {
    return makeIdempotent(this, fn, options);
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
