/**
 * Retrying a transient failure by resending the identical request after an exponential backoff
 * with full jitter, or after exactly the delay the server asked for in `grpc-retry-pushback-ms`
 * (gRFC A6; a negative pushback stops retrying). The same policy as the Rust client.
 *
 * Only `isTransient` failures are retried: never INVALID_ARGUMENT, UNAUTHENTICATED,
 * PERMISSION_DENIED, FAILED_PRECONDITION, nor a call the circuit breaker refused.
 */
import { isTransient, pushback } from "./status";
import { CircuitOpenError } from "./breaker";

/** How transient failures are retried. All durations in milliseconds. */
export interface RetryPolicy {
  /** Attempts in total, the first included (default 5); 1 disables retries. */
  maxAttempts: number;
  /** The backoff ceiling before the first retry (default 500); it doubles on each retry. */
  initialBackoff: number;
  /** The largest backoff ceiling (default 15 000). */
  maxBackoff: number;
}

/** 5 attempts, 500 ms, doubling up to 15 s, full jitter: the Rust client's defaults. */
export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({ maxAttempts: 5, initialBackoff: 500, maxBackoff: 15_000 });

/** The backoff ceiling before retry number `retry` (1-based): `initial * 2^(retry-1)`, capped. */
export function ceiling(policy: RetryPolicy, retry: number): number {
  return Math.min(policy.initialBackoff * 2 ** Math.min(Math.max(retry - 1, 0), 52), policy.maxBackoff);
}

/** A full-jitter backoff before retry number `retry`: uniform in `[0, ceiling(retry)]`. */
export function backoff(policy: RetryPolicy, retry: number): number {
  return Math.random() * ceiling(policy, retry);
}

/** How long to wait before attempt `attempts + 1` after `error`, or undefined to give up. */
export function retryDelay(policy: RetryPolicy, attempts: number, error: unknown): number | undefined {
  if (error instanceof CircuitOpenError || !isTransient(error) || attempts >= policy.maxAttempts) return undefined;
  const asked = pushback(error);
  if (asked === null) return undefined;
  return asked ?? backoff(policy, attempts);
}

/**
 * Runs `attempt` until it succeeds, fails for good, or the policy gives up; rejects with the last
 * error. `signal` aborts the waits between attempts (and is handed to each attempt).
 */
export async function retrying<T>(policy: RetryPolicy, signal: AbortSignal | undefined, attempt: (n: number) => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    signal?.throwIfAborted();
    try {
      return await attempt(n);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const delay = retryDelay(policy, n, error);
      if (delay === undefined) throw error;
      await sleep(delay, signal);
    }
  }
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
