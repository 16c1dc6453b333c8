/**
 * The channel to one server and how every unary RPC is sent over it: credentials on each call, a
 * bounded wait for a connection, a per-attempt deadline, the circuit breaker, and retries of
 * transient failures with the identical request (same key, fingerprint and lease token).
 *
 * Streams (KeepAlive) are opened here but never retried here: `lease.ts` reopens them when safe.
 */
import { credentials as grpcCredentials, InterceptingCall, Metadata, status as Code } from "@grpc/grpc-js";
import type { ChannelCredentials, ClientDuplexStream, ClientOptions, Interceptor, ServiceError } from "@grpc/grpc-js";
import { LedgerClient } from "./gen/oncekey/v1/ledger";
import type { KeepAliveRequest, Lease } from "./gen/oncekey/v1/ledger";
import { CircuitBreaker, DEFAULT_BREAKER } from "./breaker";
import type { BreakerPolicy } from "./breaker";
import { DEFAULT_RETRY, retrying } from "./retry";
import type { RetryPolicy } from "./retry";
import { isTransient, toOncekeyError } from "./status";

/** The metadata header naming the tenant against a dev-mode server (no tokens). */
export const TENANT_HEADER = "x-oncekey-tenant";

/** How to reach and authenticate to a server. Durations in milliseconds. */
export interface ConnectOptions {
  /** Sends `authorization: Bearer <token>` (servers with a tokens file). */
  token?: string;
  /** Sends the tenant header (dev-mode servers without tokens). */
  tenant?: string;
  /** TLS (`credentials.createSsl(...)` of `@grpc/grpc-js`); plaintext by default. */
  credentials?: ChannelCredentials;
  /** Extra grpc-js channel options. */
  channelOptions?: ClientOptions;
  /** Deadline of one attempt of a unary call (default 10 000; a Claim's `wait` is added). */
  timeout?: number;
  /** How long one attempt waits for a connection before it counts as UNAVAILABLE (default 5000). */
  connectTimeout?: number;
  /** How transient failures are retried (default: 5 attempts, 500 ms doubling to 15 s, full jitter). */
  retry?: Partial<RetryPolicy>;
  /** When the circuit breaker opens (default: 10 consecutive failures, 5 s cool-down). */
  breaker?: Partial<BreakerPolicy>;
  /** Names this process in the records it holds (default `typescript-client/<pid>`). */
  owner?: string;
}

type UnaryMethod =
  | "claim"
  | "complete"
  | "fail"
  | "renew"
  | "lookup"
  | "listRecords"
  | "listDuplicateIntents"
  | "approve"
  | "reject"
  | "purge";

/** How one unary call is sent. */
export interface CallOptions {
  /** Aborts the call and its retries (rejecting with the signal's reason). */
  signal?: AbortSignal;
  /** Ask the circuit breaker first (new work); settling calls only report to it. */
  gated: boolean;
  /** Extra milliseconds the server may legitimately hold the call (a Claim's `wait`). */
  held?: number;
  /** The lease token of the call, so that LEASE_LOST becomes a `LeaseLostError` naming it. */
  token?: bigint;
}

export class Transport {
  readonly ledger: LedgerClient;
  readonly owner: string;
  readonly retry: RetryPolicy;
  readonly connectTimeout: number;
  private readonly timeout: number;
  private readonly breaker: CircuitBreaker;

  constructor(target: string, options: ConnectOptions = {}) {
    const headers: [string, string][] = [];
    if (options.token) headers.push(["authorization", `Bearer ${options.token}`]);
    if (options.tenant) headers.push([TENANT_HEADER, options.tenant]);
    const addHeaders: Interceptor = (callOptions, nextCall) =>
      new InterceptingCall(nextCall(callOptions), {
        start(metadata, listener, next) {
          for (const [k, v] of headers) metadata.set(k, v);
          next(metadata, listener);
        },
      });
    this.ledger = new LedgerClient(target.replace(/^https?:\/\//, ""), options.credentials ?? grpcCredentials.createInsecure(), {
      "grpc.keepalive_time_ms": 20_000,
      "grpc.keepalive_timeout_ms": 10_000,
      // Reconnect soon after a server restart: a lease is kept alive only by a reopened stream.
      "grpc.initial_reconnect_backoff_ms": 200,
      "grpc.max_reconnect_backoff_ms": 2_000,
      ...options.channelOptions,
      interceptors: [addHeaders, ...(options.channelOptions?.interceptors ?? [])],
    });
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.breaker = new CircuitBreaker({ ...DEFAULT_BREAKER, ...options.breaker });
    this.timeout = options.timeout ?? 10_000;
    this.connectTimeout = options.connectTimeout ?? 5_000;
    this.owner = options.owner ?? `typescript-client/${process.pid}`;
  }

  /** Sends `request` with retries; rejects with a typed error (or the signal's reason). */
  async unary<Req, Res>(method: UnaryMethod, request: Req, options: CallOptions): Promise<Res> {
    try {
      return await retrying(this.retry, options.signal, () => this.attempt<Req, Res>(method, request, options));
    } catch (e) {
      if (options.signal?.aborted && e === options.signal.reason) throw e;
      throw toOncekeyError(e, options.token);
    }
  }

  private async attempt<Req, Res>(method: UnaryMethod, request: Req, options: CallOptions): Promise<Res> {
    const probe = options.gated ? this.breaker.admit() : false;
    let failed = false;
    try {
      await this.ready(options.signal);
      return await this.send<Req, Res>(method, request, options);
    } catch (e) {
      failed = isTransient(e);
      throw e;
    } finally {
      this.breaker.record(failed, probe);
    }
  }

  private send<Req, Res>(method: UnaryMethod, request: Req, options: CallOptions): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      const signal = options.signal;
      if (signal?.aborted) return reject(signal.reason);
      const deadline = new Date(Date.now() + this.timeout + (options.held ?? 0));
      const fn = this.ledger[method] as unknown as (
        req: Req,
        metadata: Metadata,
        opts: { deadline: Date },
        cb: (err: ServiceError | null, res: Res) => void,
      ) => { cancel(): void };
      const onAbort = () => call.cancel();
      const call = fn.call(this.ledger, request, new Metadata(), { deadline }, (err, res) => {
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(signal?.aborted ? signal.reason : err);
        else resolve(res);
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Waits until the channel is connected, at most `connectTimeout` ms (a server restarting or
   * not up yet is waited for rather than failed at once); rejects with an UNAVAILABLE error.
   */
  ready(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => reject(signal!.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.ledger.waitForReady(Date.now() + this.connectTimeout, (err) => {
        signal?.removeEventListener("abort", onAbort);
        if (!err) return resolve();
        reject(Object.assign(new Error(`no connection to the server within ${this.connectTimeout} ms`), {
          code: Code.UNAVAILABLE,
          details: `no connection within ${this.connectTimeout} ms`,
          metadata: new Metadata(),
        }));
      });
    });
  }

  /** Opens a KeepAlive stream (not retried here). */
  keepAlive(): ClientDuplexStream<KeepAliveRequest, Lease> {
    return this.ledger.keepAlive();
  }

  close(): void {
    this.ledger.close();
  }
}
