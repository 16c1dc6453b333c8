/**
 * Recording the outcome of a run under a lease: its value (Complete, as JSON or verbatim with
 * `raw`) or its error (Fail, with the disposition the error chooses). The caller of `run` sees the
 * value, or the function's own error once recorded; a value that cannot be stored is recorded as a
 * final failure, so that the effect is not run again.
 */
import type { Done, RunClient, RunOptions } from "./options";
import { dispositionOf, FinalError, LeaseLostError, UnavailableError } from "./errors";
import type { Disposition } from "./errors";
import type { OperationKey } from "./key";
import { codeName, grpcCode, reason } from "./status";
import type { StoredResult } from "./types";

/** The longest error message the server stores, in bytes; longer ones are cut. */
const MAX_MESSAGE_BYTES = 16 * 1024;

export async function complete<T>(client: RunClient, key: OperationKey, token: bigint, value: T, options: RunOptions): Promise<Done<T>> {
  let result: Partial<StoredResult>;
  try {
    if (options.raw && (typeof value !== "object" || value === null)) throw new TypeError("with `raw`, the function must return a StoredResult");
    result = options.raw ? (value as Partial<StoredResult>) : { code: 0, body: Buffer.from(encode(value), "utf8"), contentType: "application/json" };
  } catch (e) {
    // The effect happened but its output cannot be stored: record a final failure, so that it is
    // not run again, and say why.
    await settleFailure(client, key, token, { code: 0, message: `the output cannot be serialized: ${(e as Error).message}` }, "final");
    throw e;
  }
  try {
    const record = await client.complete(key, token, result);
    return { value: options.raw && record.result ? (record.result as T) : value, replayed: false, outcome: "ACQUIRED", record };
  } catch (e) {
    if (e instanceof LeaseLostError) throw e;
    if (!(e instanceof UnavailableError)) {
      // Refused for good (e.g. INVALID_ARGUMENT TOO_LARGE): never storable, so record a final
      // failure instead of leaving the key held until its lease runs out and the effect repeats.
      const why = reason(e) ?? codeName(grpcCode(e)) ?? "refused";
      await settleFailure(client, key, token, { code: 0, message: `the result cannot be stored: ${why}` }, "final");
      throw e;
    }
    throw new UnavailableError(`the operation succeeded but its outcome could not be recorded: ${(e as Error).message}`, {
      cause: e,
      grpcCode: grpcCode(e),
      reason: reason(e),
      unsettled: true,
      result: value,
    });
  }
}

export async function fail<T>(client: RunClient, key: OperationKey, token: bigint, error: unknown, options: RunOptions): Promise<Done<T>> {
  const disposition = options.disposition?.(error) ?? dispositionOf(error);
  const stored = {
    code: error instanceof FinalError ? error.code : 0,
    message: truncate(error instanceof Error ? error.message : String(error)),
    details: error instanceof FinalError ? Buffer.from(error.details) : Buffer.alloc(0),
  };
  try {
    await client.fail(key, token, stored, disposition);
  } catch (e) {
    if (e instanceof LeaseLostError) {
      if (error instanceof LeaseLostError && error.token === token) throw error;
      throw new LeaseLostError(e.message, token, { cause: error, grpcCode: e.grpcCode, reason: e.reason });
    }
    warnUnsettled(key, e);
  }
  throw error; // the function's own error is what the caller sees
}

export /** Fails without throwing (the caller throws its own error afterwards). */
async function settleFailure(
  client: RunClient,
  key: OperationKey,
  token: bigint,
  error: { code: number; message: string },
  disposition: Disposition,
): Promise<void> {
  try {
    await client.fail(key, token, { ...error, message: truncate(error.message) }, disposition);
  } catch (e) {
    warnUnsettled(key, e);
  }
}

export function warnUnsettled(key: OperationKey, e: unknown): void {
  process.emitWarning(`oncekey: the outcome of a ${key.namespace} operation could not be recorded: ${(e as Error).message}`, {
    code: "ONCEKEY_UNSETTLED",
  });
}

/** JSON of a function's value (`undefined` is stored as `null`). */
function encode(value: unknown): string {
  const text = JSON.stringify(value === undefined ? null : value);
  if (text === undefined) throw new TypeError(`a ${typeof value} cannot be stored as JSON`);
  return text;
}

function truncate(text: string): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= MAX_MESSAGE_BYTES) return text;
  let end = MAX_MESSAGE_BYTES;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--; // back to a character boundary
  return bytes.subarray(0, end).toString("utf8");
}

