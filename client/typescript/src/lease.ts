/**
 * The lease an operation runs under, and the KeepAlive stream that the server renews it over
 * while the operation runs.
 *
 * The stream is reopened after a transport failure or a server restart (the server's first renewal
 * then says whether the lease still holds). The lease counts as lost only when the server answers
 * LEASE_LOST or ALREADY_SETTLED; then the operation's `AbortSignal` fires with a `LeaseLostError`.
 * A stream replaced by a newer one for the same lease (ABORTED, KEEPALIVE_REPLACED) stops without
 * reopening and without counting as lost. Anything else that is not transport trouble stops the
 * renewals (the lease then simply runs out); nothing is retried blindly.
 */
import { status as Code } from "@grpc/grpc-js";
import type { ClientDuplexStream, ServiceError, StatusObject } from "@grpc/grpc-js";
import type { KeepAliveRequest, Lease as WireLease } from "./gen/oncekey/v1/ledger";
import { LeaseLostError } from "./errors";
import type { OperationKey } from "./key";
import { ErrorReason } from "./gen/oncekey/v1/ledger";
import { errorReasonOf, grpcCode, isTransient, reason } from "./status";
import type { Transport } from "./transport";
import { duration } from "./types";
import type { LeaseGrant } from "./types";

/** The lease a wrapped function runs under. */
export interface Lease {
  /** The operation. */
  readonly key: OperationKey;
  /** The fencing token: pass it to downstream systems that can reject writes of older holders. */
  readonly token: bigint;
  /** Which acquisition this is (1 for the first; more after takeovers and retryable failures). */
  readonly attempt: number;
  /** When the lease runs out unless renewed again (updated by every renewal). */
  readonly expiresAt: Date;
  /** True once the server said the lease is lost (another holder took the operation over). */
  readonly lost: boolean;
  /**
   * Aborted when the function should stop: the lease was lost (reason: a `LeaseLostError`) or the
   * caller cancelled the call (reason: the caller's own).
   */
  readonly signal: AbortSignal;
}

/** Keeps one lease alive until stopped. */
export class KeepAlive {
  private stream?: ClientDuplexStream<KeepAliveRequest, WireLease>;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private backoff: number;
  private readonly maxBackoff: number;
  expiresAt: Date;
  lost = false;

  /**
   * Starts renewing `grant` of `key` to `leaseTtl` ms (server default when undefined); calls
   * `onLost` once if the lease is lost.
   */
  constructor(
    private readonly transport: Transport,
    private readonly key: OperationKey,
    private readonly grant: LeaseGrant,
    private readonly leaseTtl: number | undefined,
    private readonly onLost: (error: LeaseLostError) => void,
  ) {
    this.expiresAt = grant.expiresAt;
    this.maxBackoff = Math.min(Math.max((leaseTtl ?? 30_000) / 3, 100), 5_000);
    this.backoff = Math.min(100, this.maxBackoff);
    this.open();
  }

  /** Stops renewing (the lease then runs out, unless settled first). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.stream?.cancel();
    this.stream = undefined;
  }

  private open(): void {
    if (this.stopped) return;
    this.transport.ready().then(
      () => this.openStream(),
      (e) => this.ended(e),
    );
  }

  private openStream(): void {
    if (this.stopped) return;
    const stream = this.transport.keepAlive();
    this.stream = stream;
    let done = false;
    const end = (e: ServiceError | StatusObject) => {
      if (done || this.stream !== stream) return;
      done = true;
      this.stream = undefined;
      this.ended(e);
    };
    stream.on("data", (lease: WireLease) => {
      this.backoff = Math.min(100, this.maxBackoff);
      if (lease.expiresAt) this.expiresAt = lease.expiresAt;
    });
    stream.on("error", end);
    stream.on("status", (s: StatusObject) => {
      // Ended OK while we still hold it: the server is shutting down (or the record settled);
      // reopening tells which.
      if (s.code === Code.OK) end(s);
    });
    stream.write({ namespace: this.key.namespace, key: this.key.key, leaseToken: this.grant.token, leaseTtl: duration(this.leaseTtl) });
  }

  private ended(e: unknown): void {
    if (this.stopped) return;
    const code = grpcCode(e);
    const why = reason(e);
    const known = why === undefined ? undefined : errorReasonOf(why);
    if (known === ErrorReason.ERROR_REASON_LEASE_LOST || known === ErrorReason.ERROR_REASON_ALREADY_SETTLED) {
      this.lost = true;
      this.stopped = true;
      this.onLost(
        new LeaseLostError(`the lease (token ${this.grant.token}) on ${this.key.namespace} was lost`, this.grant.token, {
          cause: e,
          grpcCode: code,
          reason: why,
        }),
      );
      return;
    }
    if (known === ErrorReason.ERROR_REASON_KEEPALIVE_REPLACED || code === Code.ABORTED) {
      this.stopped = true; // a newer stream renews this lease now
      return;
    }
    const reopenable = code === Code.OK || isTransient(e) || code === Code.UNKNOWN || code === Code.INTERNAL || code === Code.CANCELLED;
    if (!reopenable) {
      this.stopped = true;
      process.emitWarning(`oncekey: keep-alive of ${this.key.namespace} stopped: ${(e as Error).message ?? code}`, {
        code: "ONCEKEY_KEEPALIVE_STOPPED",
      });
      return;
    }
    const jittered = this.backoff * (0.5 + Math.random() / 2);
    this.backoff = Math.min(this.backoff * 2, this.maxBackoff);
    this.timer = setTimeout(() => this.open(), jittered);
  }
}
