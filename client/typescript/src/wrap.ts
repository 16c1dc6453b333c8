/**
 * `client.idempotent` (also `makeIdempotent`): wraps an existing async function so that each
 * logical call runs once, in one line, the way AWS Powertools' `makeIdempotent` does, with the
 * ledger's guarantees behind it (fingerprints, fencing tokens, server-renewed leases).
 *
 * The wrapped function keeps the original's parameters and returns its value (a JSON round trip
 * on replays); `.detailed(...)` also says whether the value was replayed. Without `args` and
 * `key`, a call's arguments and key are derived as in every client library
 * (docs/api.md#default-arguments-and-key). Inside the function, `currentLease()` gives the lease
 * and the `AbortSignal` to stop on.
 */
import { defaultArguments, fingerprint, keyOf } from "./fingerprint";
import { OperationKey } from "./key";
import type { Done, Operation, RunOptions } from "./options";

/** What a wrapped function needs of its client (an `OncekeyClient`): its run. */
export interface Runner {
  runDetailed<T>(key: OperationKey, args: unknown, fn: Operation<T>, options?: RunOptions): Promise<Done<T>>;
}

/** How a wrapped function's calls map to operations. */
export interface IdempotentOptions<A extends unknown[]> extends Omit<RunOptions, "signal" | "timeout"> {
  /** The kind of operation, e.g. `email.send`. */
  namespace: string;
  /**
   * The idempotency key of a call: a string (used verbatim), a list of stable parts (joined as
   * `OperationKey.of` does), or an `OperationKey` (its own namespace and parent are used).
   * Default: `sha256:` and the hex fingerprint of the significant arguments, so equal arguments
   * are one operation (as in every client library); give a key when one intent may carry other
   * arguments.
   */
  key?: (...args: A) => string | (string | number | bigint)[] | OperationKey;
  /**
   * The significant arguments of a call, fingerprinted to detect a key reused for another intent.
   * Default: the call's arguments as an array, undefined as null, trailing nulls dropped. Leave
   * out anything that differs between retries of the same intent: request ids, timestamps,
   * attempt numbers, signals.
   */
  args?: (...args: A) => unknown;
  /** The caller's `AbortSignal` of a call, when the arguments carry one (e.g. an MCP tool's `extra.signal`). */
  signal?: (...args: A) => AbortSignal | undefined;
  /** Rejects a call with a `TimeoutError` after this many milliseconds. */
  timeout?: number;
}

/** Per-call options of a wrapped function. */
export interface CallOptions {
  /** Aborts the call (it rejects with the signal's reason; the function's own signal fires). */
  signal?: AbortSignal;
  /** Rejects the call with a `TimeoutError` after this many milliseconds. */
  timeout?: number;
}

/**
 * A wrapped function: call it as the original. `.detailed(...args)` resolves to a `Done` (the
 * value, whether it was replayed, the Claim outcome it came from, the record); `.with({signal,
 * timeout})` is the same function with one call's options.
 */
export type Idempotent<A extends unknown[], R> = ((...args: A) => Promise<R>) & {
  /** Calls the function, resolving to the value and where it came from. */
  detailed(...args: A): Promise<Done<R>>;
  /** The same function, with a caller signal and/or timeout for the calls made through it. */
  with(options: CallOptions): Idempotent<A, R>;
};

export function makeIdempotent<A extends unknown[], R>(
  client: Runner,
  fn: (...args: A) => R | Promise<R>,
  options: IdempotentOptions<A>,
): Idempotent<A, Awaited<R>> {
  const { namespace, key: keyOf_, args: argsOf, signal: signalOf, timeout, ...run } = options;
  OperationKey.of(namespace, "x"); // validates the namespace now, not at the first call
  const name = `idempotent ${fn.name || "function"}`;

  const call = (callOptions: CallOptions, args: A): Promise<Done<Awaited<R>>> => {
    let significant: unknown;
    let key: OperationKey;
    try {
      significant = argsOf ? argsOf(...args) : defaultArguments(args);
      key = toOperationKey(namespace, keyOf_ ? keyOf_(...args) : keyOf(fingerprint(significant)));
    } catch (e) {
      return Promise.reject(e); // a refused argument rejects the call; nothing was sent
    }
    const signals = [callOptions.signal, signalOf?.(...args)].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    return client.runDetailed<Awaited<R>>(key, significant, async (): Promise<Awaited<R>> => (await fn(...args)) as Awaited<R>, {
      ...run,
      signal,
      timeout: callOptions.timeout ?? timeout,
    });
  };
  const bind = (callOptions: CallOptions): Idempotent<A, Awaited<R>> => {
    const wrapped = async (...args: A): Promise<Awaited<R>> => (await call(callOptions, args)).value;
    wrapped.detailed = (...args: A) => call(callOptions, args);
    wrapped.with = (more: CallOptions) => bind({ ...callOptions, ...more });
    Object.defineProperty(wrapped, "name", { value: name });
    return wrapped;
  };
  return bind({});
}

function toOperationKey(namespace: string, key: string | (string | number | bigint)[] | OperationKey): OperationKey {
  if (key instanceof OperationKey) return key;
  if (Array.isArray(key)) return OperationKey.of(namespace, ...key);
  return OperationKey.raw(namespace, key);
}
