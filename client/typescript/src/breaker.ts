/**
 * A circuit breaker shared by every call of one client: after `failureThreshold` consecutive
 * transient failures (the server or the network is down) it refuses new work at once with
 * `CircuitOpenError` for `coolDown` ms, then lets one probe through (half-open): its success
 * closes the circuit, its failure opens it again. Answers that prove the server is up (a success
 * or a non-transient error such as FAILED_PRECONDITION) reset the count.
 *
 * Only new work (Claim, Lookup) asks the breaker for admission. Settling calls (Complete, Fail,
 * Renew) are never refused by it, only counted: refusing a settlement could lose an outcome.
 */
import { status as Code } from "@grpc/grpc-js";
import { UnavailableError } from "./errors";

/** When the breaker opens and how long it stays open (milliseconds). */
export interface BreakerPolicy {
  /** Consecutive transient failures that open the circuit (default 10; `Infinity` disables it). */
  failureThreshold: number;
  /** How long an open circuit refuses calls before letting one probe through (default 5000). */
  coolDown: number;
}

export const DEFAULT_BREAKER: Readonly<BreakerPolicy> = Object.freeze({ failureThreshold: 10, coolDown: 5000 });

/** The breaker refused the call without sending it. */
export class CircuitOpenError extends UnavailableError {
  override name = "CircuitOpenError";
  /** Milliseconds until the next probe may go through. */
  readonly retryIn: number;
  constructor(retryIn: number) {
    super(`circuit open after consecutive failures; next probe in ${Math.ceil(retryIn)} ms`, { grpcCode: Code.UNAVAILABLE });
    this.retryIn = retryIn;
  }
}

export type CircuitState = "closed" | "open" | "half-open";

export class CircuitBreaker {
  private failures = 0;
  private openUntil = 0;
  private probing = false;

  constructor(private readonly policy: BreakerPolicy = DEFAULT_BREAKER) {}

  /** The state now. */
  get state(): CircuitState {
    if (this.openUntil === 0) return "closed";
    return Date.now() < this.openUntil && !this.probing ? "open" : "half-open";
  }

  /**
   * Admits a call (returns true when it is the half-open probe) or throws `CircuitOpenError`.
   * Every admitted call must be followed by `record`.
   */
  admit(): boolean {
    if (this.openUntil === 0) return false;
    const now = Date.now();
    if (this.probing) throw new CircuitOpenError(0);
    if (now < this.openUntil) throw new CircuitOpenError(this.openUntil - now);
    this.probing = true;
    return true;
  }

  /** Records the answer of a call: `failed` when it failed transiently. */
  record(failed: boolean, probe = false): void {
    if (probe) this.probing = false;
    if (!failed) {
      this.failures = 0;
      this.openUntil = 0;
      return;
    }
    this.failures++;
    if (this.openUntil !== 0 || this.failures >= this.policy.failureThreshold) {
      this.openUntil = Date.now() + this.policy.coolDown;
    }
  }
}
