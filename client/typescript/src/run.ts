/**
 * The one-call API behind `run`, `reconcile` and `idempotent`: Claim an operation, run the
 * function only when acquired (its lease kept alive meanwhile), then Complete it with the
 * function's value as JSON or Fail it with the disposition its error chooses (`settle.ts`).
 * Every other outcome comes back without running the function.
 *
 * A lease that had already run out (on this machine's clock) when the Claim's answer arrived runs
 * nothing, since another holder may be taking the operation over: it is released for a retry
 * (saying nothing ran, so not counted against `maxAttempts`) and the key claimed again while `wait`
 * lasts, then the call rejects with a `LeaseLostError` (no `cause`).
 *
 * Settling never depends on the caller: a cancelled or timed-out call rejects at once with the
 * caller's reason, while the function is told to stop (its `AbortSignal`) and its outcome is still
 * recorded in the background, with the client's own retries (`client.close()` waits for it).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import { MAX_WAIT } from "./options";
import type { Done, Operation, RunClient, RunOptions } from "./options";
export type { Done, Operation, RunOptions } from "./options";
import {
  AbandonError,
  AwaitingApprovalError,
  DuplicateIntentError,
  FinalError,
  InProgressError,
  LeaseLostError,
  NeedsReconciliationError,
  OncekeyError,
  OperationFailedError,
  ResultDecodeError,
} from "./errors";
import { fingerprint } from "./fingerprint";
import type { OperationKey } from "./key";
import { KeepAlive } from "./lease";
import type { Lease } from "./lease";
import { sleep } from "./retry";
import { complete, fail } from "./settle";
import { budgetToWire, intentGuardToWire, intentWindowToWire, maxAttemptsToWire } from "./types";
import type { IntentMatch, LeaseGrant, StoredResult } from "./types";

/** Milliseconds between Claims while an approval is awaited and the server's hold ran out early. */
const APPROVAL_POLL = 100;

/**
 * The longest pause, in ms, before claiming again after releasing a lease that had run out before
 * its Claim's answer arrived: whatever made the answer late may still be going on.
 */
const LAPSED_PAUSE = 100;

/** The error a lease that had run out before its Claim's answer arrived is released with. */
const LAPSED_MESSAGE = "the lease ran out before the Claim's answer arrived: the operation did not run";

const current = new AsyncLocalStorage<Lease>();

/** The lease of the operation the calling code runs in (inside a wrapped function), if any. */
export function currentLease(): Lease | undefined {
  return current.getStore();
}

export async function execute<T>(
  client: RunClient,
  key: OperationKey,
  args: unknown,
  fn: Operation<T>,
  options: RunOptions,
  reconcile: boolean,
): Promise<Done<T>> {
  const print = options.fingerprint ? pinned(options.fingerprint) : fingerprint(args); // throws before anything is sent
  maxAttemptsToWire(options.maxAttempts); // these throw before anything is sent
  intentGuardToWire(options.intentGuard);
  intentWindowToWire(options.intentWindow);
  budgetToWire(options.budget);
  const signal = callerSignal(options);
  signal?.throwIfAborted();
  // A per-run owner: a Claim whose answer was lost and was retried recognizes its own lease.
  const owner = `${options.owner ?? client.transport.owner}#${randomBytes(8).toString("hex")}`;
  const deadline = Date.now() + (options.wait ?? 60_000);
  // The intent guard's matches, from the Claim that created the key (later Claims of the key,
  // existing by then, have none).
  let matches: IntentMatch[] = [];
  for (;;) {
    const wait = Math.min(Math.max(deadline - Date.now(), 0), MAX_WAIT);
    let claimed;
    try {
      claimed = await client.claim(key, {
        fingerprint: print,
        leaseTtl: options.leaseTtl,
        retention: options.retention,
        semantics: options.semantics,
        owner,
        reconcile,
        wait: wait > 0 ? wait : undefined,
        requireApproval: options.requireApproval,
        maxAttempts: options.maxAttempts,
        intentGuard: options.intentGuard,
        intentWindow: options.intentWindow,
        repeatIntent: options.repeatIntent,
        budget: options.budget,
        signal,
      });
    } catch (e) {
      // Cancelled with a Claim in flight: the server may have acquired the key for us, and the
      // answer is lost. Release it if so (our per-run owner tells), so it is not held for a lease.
      if (signal?.aborted) client.track(releaseIfOurs(client, key, owner));
      throw e;
    }
    const record = claimed.record;
    if (claimed.intentMatches.length > 0) matches = claimed.intentMatches;
    switch (claimed.outcome) {
      case "ACQUIRED":
        if (!claimed.lease) throw new OncekeyError("malformed answer: ACQUIRED without a lease");
        if (lapsed(claimed.lease)) {
          await releaseLapsed(client, key, claimed.lease, deadline, signal);
          break; // claim again
        }
        return withMatches(await acquired(client, key, claimed.lease, fn, options, signal), matches);
      case "COMPLETED":
        return withMatches({ value: decode<T>(record?.result, options.raw), replayed: true, outcome: "COMPLETED", record: record! }, matches);
      case "DUPLICATE_INTENT": {
        // Refused by the intent guard: nothing was written for the key, and nothing runs.
        const others = matches.length > 1 ? `${matches.length} other keys` : "another key";
        throw new DuplicateIntentError(
          `the same arguments were claimed under ${others} of ${key.namespace} within the intent window: ` +
            "use that key, or run again with repeatIntent if the repeat is deliberate",
          key.namespace,
          key.key,
          matches,
        );
      }
      case "FAILED":
        throw new OperationFailedError(record?.error ?? { code: 0, message: "", details: Buffer.alloc(0) });
      case "NEEDS_RECONCILIATION":
        throw new NeedsReconciliationError(`the outcome of this ${key.namespace} operation is unknown and needs reconciliation`, record);
      case "AWAITING_APPROVAL": {
        // The server held the Claim until the wait ran out (or it drained): nothing runs.
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          throw new AwaitingApprovalError(`this ${key.namespace} operation awaits approval: run it again once approved`, record);
        }
        await sleep(Math.min(APPROVAL_POLL, remaining), signal);
        break;
      }
      case "IN_PROGRESS": {
        if (record && record.leaseOwner === owner && record.status === "PROCESSING") {
          // Our own earlier Claim acquired it, but its answer was lost: the lease is ours.
          const grant = { token: record.fencingToken, expiresAt: record.leaseExpiresAt ?? new Date(), attempt: record.attempt };
          if (lapsed(grant)) {
            await releaseLapsed(client, key, grant, deadline, signal);
            break; // claim again
          }
          return withMatches(await acquired(client, key, grant, fn, options, signal), matches);
        }
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new InProgressError(claimed.retryAfter, record);
        await sleep(Math.min(Math.max(claimed.retryAfter, 50), remaining), signal);
      }
    }
  }
}

/** `done` with the intent guard's matches, when there are any. */
function withMatches<T>(done: Done<T>, matches: IntentMatch[]): Done<T> {
  if (matches.length > 0) done.intentMatches = matches;
  return done;
}

/**
 * True when `grant`'s lease had already run out on this machine's clock when its Claim's answer
 * arrived (an answer slower than the lease: an overloaded server, a store failing over). Another
 * holder may be taking the operation over right now, so nothing may run under it: a holder stops
 * acting when its lease ends on its own clock (docs/reliability.md, "Clocks").
 */
function lapsed(grant: LeaseGrant): boolean {
  return grant.expiresAt.getTime() <= Date.now();
}

/**
 * Releases a lease that had run out before its Claim's answer arrived (see `lapsed`): Fail
 * RETRYABLE with `nothingRan` (`releaseUnused`), since nothing ran under it, so the release does
 * not use up one of the operation's `maxAttempts`; unless it is already gone (taken over or
 * settled). Past the deadline it throws a `LeaseLostError`; otherwise it pauses briefly and the
 * caller claims again.
 */
async function releaseLapsed(
  client: RunClient,
  key: OperationKey,
  grant: LeaseGrant,
  deadline: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  try {
    await client.releaseUnused(key, grant.token, { code: 0, message: LAPSED_MESSAGE });
  } catch (e) {
    if (!(e instanceof LeaseLostError)) throw e; // LEASE_LOST or ALREADY_SETTLED: it is gone anyway
  }
  const remaining = deadline - Date.now();
  if (remaining <= 0) {
    throw new LeaseLostError(
      `the lease (token ${grant.token}) on ${key.namespace} ran out before the Claim's answer arrived: the operation did not run`,
      grant.token,
    );
  }
  await sleep(Math.min(remaining, LAPSED_PAUSE), signal);
}

/** Runs `fn` under `grant`, then settles; the caller's abort rejects at once, the settle goes on. */
async function acquired<T>(
  client: RunClient,
  key: OperationKey,
  grant: LeaseGrant,
  fn: Operation<T>,
  options: RunOptions,
  signal: AbortSignal | undefined,
): Promise<Done<T>> {
  const stop = new AbortController();
  const keepAlive = new KeepAlive(client.transport, key, grant, options.leaseTtl, (lost) => stop.abort(lost));
  const lease: Lease = {
    key,
    token: grant.token,
    attempt: grant.attempt,
    get expiresAt() {
      return keepAlive.expiresAt;
    },
    get lost() {
      return keepAlive.lost;
    },
    signal: stop.signal,
  };
  const onCallerAbort = () => stop.abort(signal!.reason);
  if (signal?.aborted) onCallerAbort();
  else signal?.addEventListener("abort", onCallerAbort, { once: true });

  const settled = (async (): Promise<Done<T>> => {
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    let started = false;
    try {
      stop.signal.throwIfAborted(); // cancelled before it started: release the key untouched
      started = true;
      outcome = { ok: true, value: await current.run(lease, () => fn(lease)) };
    } catch (error) {
      outcome = { ok: false, error };
    } finally {
      signal?.removeEventListener("abort", onCallerAbort);
      // Stop renewing before settling, so the keep-alive never sees our own settle.
      keepAlive.stop();
    }
    const chosen = !outcome.ok && (outcome.error instanceof FinalError || outcome.error instanceof AbandonError);
    if (!outcome.ok && !chosen && started && signal?.aborted && options.semantics === "AT_MOST_ONCE") {
      // The caller cancelled an at-most-once run that had started and it failed: its request may have
      // reached the remote side, so the key is not released for a retry (a function that knows
      // nothing went out throws AbandonError). The lease lapses and the
      // operation waits for reconciliation (docs/agents.md#cancellation-the-remote-side-may-already-have-acted).
      throw new NeedsReconciliationError(
        "cancelled while it ran: the outcome is unknown and the operation awaits reconciliation",
      );
    }
    return outcome.ok ? complete(client, key, grant.token, outcome.value, options) : fail(client, key, grant.token, outcome.error, options);
  })();

  if (!signal) return settled;
  client.track(settled);
  return new Promise<Done<T>>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    settled.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Releases (Fail RETRYABLE) `key` if this run's owner holds it. */
async function releaseIfOurs(client: RunClient, key: OperationKey, owner: string): Promise<void> {
  const record = await client.lookup(key);
  if (record?.status === "PROCESSING" && record.leaseOwner === owner) {
    await client.fail(key, record.fencingToken, { message: "cancelled by the caller before it started" }, "retryable");
  }
}

function decode<T>(result: StoredResult | undefined, raw: boolean | undefined): T {
  if (!result) throw new ResultDecodeError("malformed answer: COMPLETED without a result");
  if (raw) return result as T;
  try {
    return JSON.parse(result.body.toString("utf8")) as T;
  } catch (e) {
    throw new ResultDecodeError(`the stored result (${result.contentType || "no content type"}) is not JSON`, { cause: e });
  }
}

function pinned(print: Uint8Array): Buffer {
  if (print.length !== 32) throw new RangeError(`fingerprint: must be 32 bytes (a SHA-256), not ${print.length}`);
  return Buffer.from(print);
}

/** The caller's signal combined with its timeout. */
function callerSignal(options: RunOptions): AbortSignal | undefined {
  const signals: AbortSignal[] = [];
  if (options.signal) signals.push(options.signal);
  if (options.timeout !== undefined) signals.push(AbortSignal.timeout(options.timeout));
  if (signals.length <= 1) return signals[0];
  return AbortSignal.any(signals);
}
