/** The connection to an Oncekey server and the claim → run → complete/fail helper. */
import { credentials as grpcCredentials, InterceptingCall } from "@grpc/grpc-js";
import type { ChannelCredentials, ClientOptions, Interceptor, ServiceError } from "@grpc/grpc-js";
import {
  ClaimOutcome,
  ClaimRequest,
  ClaimResponse,
  CompleteRequest,
  CompleteResponse,
  Disposition,
  FailRequest,
  FailResponse,
  Lease,
  LedgerClient,
  OperationError,
  OperationResult,
  Semantics,
} from "./gen/oncekey/v1/ledger";
import type { Duration } from "./gen/google/protobuf/duration";
import { fingerprint } from "./fingerprint";
import { FinalError, InProgressError, NeedsReconciliationError, OperationFailedError } from "./errors";

/** The metadata header naming the tenant against a dev-mode server (no tokens). */
export const TENANT_HEADER = "x-oncekey-tenant";

/** How to reach and authenticate to a server. */
export interface ConnectOptions {
  /** Sends `authorization: Bearer <token>` (servers with a tokens file). */
  token?: string;
  /** Sends the tenant header (dev-mode servers without tokens). */
  tenant?: string;
  /** TLS; plaintext by default. */
  credentials?: ChannelCredentials;
  /** grpc-js client options. */
  options?: ClientOptions;
}

/** A Claim, without the key's identity. `args` are fingerprinted here; or pass `payloadJson`. */
export interface ClaimOptions {
  args?: unknown;
  payloadJson?: string;
  /** Lease length in milliseconds (default 30 000). */
  leaseTtlMs?: number;
  /** Retention after settling, in milliseconds. */
  retentionMs?: number;
  /** Hold an IN_PROGRESS answer up to this many milliseconds for the outcome. */
  waitMs?: number;
  owner?: string;
  semantics?: Semantics;
  reconcile?: boolean;
}

/** The lease the caller holds while `run`'s function performs the side effect. */
export interface Held {
  /** The latest lease, renewed by the server over the KeepAlive stream. */
  lease: Lease;
  /** Aborted when the lease is lost: stop the side effect. */
  signal: AbortSignal;
}

/** What `run` returns. */
export interface Outcome {
  /** The operation's result: the one the function returned, or the stored one replayed. */
  result: OperationResult;
  /** True when the function did not run because the operation had already succeeded. */
  replayed: boolean;
}

/** A connection to an Oncekey server. `ledger` is the generated oncekey.v1.Ledger client. */
export class OncekeyClient {
  readonly ledger: LedgerClient;

  constructor(target: string, connect: ConnectOptions = {}) {
    const headers: [string, string][] = [];
    if (connect.token) headers.push(["authorization", `Bearer ${connect.token}`]);
    if (connect.tenant) headers.push([TENANT_HEADER, connect.tenant]);
    const addHeaders: Interceptor = (options, nextCall) =>
      new InterceptingCall(nextCall(options), {
        start(metadata, listener, next) {
          for (const [k, v] of headers) metadata.set(k, v);
          next(metadata, listener);
        },
      });
    this.ledger = new LedgerClient(target, connect.credentials ?? grpcCredentials.createInsecure(), {
      "grpc.keepalive_time_ms": 20_000,
      ...connect.options,
      interceptors: [addHeaders, ...(connect.options?.interceptors ?? [])],
    });
  }

  close(): void {
    this.ledger.close();
  }

  /** Claims `key` in `namespace`. */
  claim(namespace: string, key: string, claim: ClaimOptions): Promise<ClaimResponse> {
    const request: ClaimRequest = {
      namespace,
      key,
      semantics: claim.semantics ?? Semantics.SEMANTICS_UNSPECIFIED,
      owner: claim.owner ?? "",
      reconcile: claim.reconcile ?? false,
      leaseTtl: duration(claim.leaseTtlMs),
      retention: duration(claim.retentionMs),
      wait: duration(claim.waitMs),
    };
    if (claim.payloadJson !== undefined) request.payloadJson = claim.payloadJson;
    else request.fingerprint = fingerprint(claim.args ?? null);
    return unary<ClaimRequest, ClaimResponse>((r, cb) => this.ledger.claim(r, cb), request);
  }

  /**
   * Claims `key` and calls `fn` only when the claim acquired it, keeping the lease alive over the
   * KeepAlive stream meanwhile; then completes the key with `fn`'s result, or fails it when `fn`
   * throws (`FinalError`: for good; anything else: released for a retry).
   *
   * A key that already succeeded resolves to its stored result without calling `fn`; one that
   * failed for good rejects with `OperationFailedError`; one in flight elsewhere with
   * `InProgressError` (set `waitMs` to wait for its outcome instead).
   */
  async run(
    namespace: string,
    key: string,
    claim: ClaimOptions,
    fn: (held: Held) => Promise<OperationResult> | OperationResult,
  ): Promise<Outcome> {
    const leaseTtlMs = claim.leaseTtlMs ?? 30_000;
    const claimed = await this.claim(namespace, key, { ...claim, leaseTtlMs });
    switch (claimed.outcome) {
      case ClaimOutcome.CLAIM_OUTCOME_ACQUIRED:
        break;
      case ClaimOutcome.CLAIM_OUTCOME_COMPLETED:
        return { result: claimed.record!.result!, replayed: true };
      case ClaimOutcome.CLAIM_OUTCOME_FAILED:
        throw new OperationFailedError(claimed.record!.error!);
      case ClaimOutcome.CLAIM_OUTCOME_IN_PROGRESS:
        throw new InProgressError(millis(claimed.retryAfter));
      case ClaimOutcome.CLAIM_OUTCOME_NEEDS_RECONCILIATION:
        throw new NeedsReconciliationError(`${namespace}/${key} needs reconciliation`);
      default:
        throw new Error(`unknown claim outcome ${claimed.outcome}`);
    }
    const token = claimed.lease!.token;
    const abort = new AbortController();
    const held: Held = { lease: claimed.lease!, signal: abort.signal };
    const stream = this.ledger.keepAlive();
    let closed = false;
    const lost = () => {
      if (!closed) abort.abort(new Error("lease lost"));
    };
    stream.on("data", (lease: Lease) => (held.lease = lease));
    stream.on("error", lost);
    stream.on("end", lost);
    stream.write({ namespace, key, leaseToken: token, leaseTtl: duration(leaseTtlMs) });
    const stop = () => {
      closed = true;
      stream.cancel();
    };

    let result: OperationResult;
    try {
      result = await fn(held);
    } catch (e) {
      stop();
      const final = e instanceof FinalError;
      const error: OperationError = final
        ? { code: e.code, message: e.message, details: e.details }
        : { code: 0, message: String(e), details: Buffer.alloc(0) };
      await unary<FailRequest, FailResponse>((r, cb) => this.ledger.fail(r, cb), {
        namespace,
        key,
        leaseToken: token,
        error,
        disposition: final ? Disposition.DISPOSITION_FINAL : Disposition.DISPOSITION_RETRYABLE,
      });
      throw final ? new OperationFailedError(error) : e;
    }
    stop();
    await unary<CompleteRequest, CompleteResponse>((r, cb) => this.ledger.complete(r, cb), {
      namespace,
      key,
      leaseToken: token,
      result,
    });
    return { result, replayed: false };
  }
}

function unary<Req, Res>(
  call: (request: Req, callback: (err: ServiceError | null, response: Res) => void) => unknown,
  request: Req,
): Promise<Res> {
  return new Promise((resolve, reject) => call(request, (err, res) => (err ? reject(err) : resolve(res))));
}

function duration(ms: number | undefined): Duration | undefined {
  if (ms === undefined) return undefined;
  return { seconds: BigInt(Math.floor(ms / 1000)), nanos: Math.round((ms % 1000) * 1e6) };
}

function millis(d: Duration | undefined): number {
  return d ? Number(d.seconds) * 1000 + d.nanos / 1e6 : 0;
}


