/**
 * The operation fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of an operation's
 * significant arguments, the same 32 bytes the server computes from `payload_json`; and the
 * default arguments and key of a wrapped function's call (docs/api.md#default-arguments-and-key),
 * the same in every client library, so that one operation claimed from two languages is one.
 *
 * Values are first reduced to plain JSON here (`toJSON` applied, byte strings as base64, numbers
 * judged lossless or refused, `numbers.ts`), then serialized by the `canonicalize` package, which
 * passes every canonical vector of the shared tests/vectors. JSON texts are parsed strictly first
 * (`json.ts`).
 */
import { createHash } from "node:crypto";
import jcs from "canonicalize";
import { parseJson } from "./json";
import { checkMagnitude, formatPath, InexactNumberError, InvalidJsonError } from "./numbers";
import type { Step } from "./numbers";

export { InexactNumberError, InvalidJsonError, MAX_EXACT } from "./numbers";
export type { Inexact } from "./numbers";

/**
 * SHA-256 of the canonical JSON of `args`: objects, arrays, strings, booleans, null, numbers and
 * bigints within ±(2^53−1) (beyond: `InexactNumberError`), byte strings (`Uint8Array`, `Buffer`)
 * as base64.
 */
export function fingerprint(args: unknown): Buffer {
  return sha256(canonicalize(args));
}

/** SHA-256 of the canonical form of a JSON text. */
export function fingerprintJson(text: string): Buffer {
  return sha256(canonicalizeJson(text));
}

/**
 * The RFC 8785 canonical form of a JSON text. Besides text that is not I-JSON, refuses a number
 * beyond ±(2^53−1) or whose canonical form would change the literal's value (`0.10000000000000001`)
 * with an `InexactNumberError` naming the first such number's path.
 */
export function canonicalizeJson(text: string): string {
  return canonicalize(parseJson(text));
}

/**
 * The RFC 8785 canonical form of a JavaScript value, as `JSON.stringify` would see it (`toJSON`
 * applied, members whose value is undefined left out, undefined items as null), except that a
 * byte string is its standard base64 text, a `bigint` within ±(2^53−1) is the number, and what
 * JSON cannot hold exactly is refused: a number or bigint beyond ±(2^53−1) (`InexactNumberError`,
 * naming its path), NaN, infinities, cycles, `Map` and `Set` (`InvalidJsonError`).
 */
export function canonicalize(value: unknown): string {
  const plain = toPlain(value, [], [], "", false);
  if (plain === OMIT) throw new InvalidJsonError(`a ${typeof value} is not JSON`);
  let text: string | undefined;
  try {
    text = jcs(plain);
  } catch (e) {
    throw new InvalidJsonError((e as Error).message);
  }
  if (typeof text !== "string") throw new InvalidJsonError(`a ${typeof value} is not JSON`);
  return text;
}

/**
 * The default fingerprinted arguments of a call: its arguments in order, undefined as null, with
 * trailing nulls dropped (an optional last parameter left out and passed as null agree).
 */
export function defaultArguments(args: readonly unknown[]): unknown[] {
  let end = args.length;
  while (end > 0 && (args[end - 1] === undefined || args[end - 1] === null)) end--;
  return args.slice(0, end).map((a) => (a === undefined ? null : a));
}

/** The default key of a call: `sha256:` and the lowercase hex fingerprint of its default arguments. */
export function defaultKey(args: readonly unknown[]): string {
  return keyOf(fingerprint(defaultArguments(args)));
}

/** The key a fingerprint names by default: `sha256:<64 lowercase hex digits>`. */
export function keyOf(print: Uint8Array): string {
  return `sha256:${Buffer.from(print).toString("hex")}`;
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/** What JSON.stringify leaves out of an object (and makes null in an array). */
const OMIT = Symbol("omit");

/**
 * `value` as plain JSON values at `path` (`name` is its member name or index, for `toJSON`);
 * `ancestors` are the containers being read, to refuse cycles.
 */
function toPlain(value: unknown, path: Step[], ancestors: object[], name: string, afterToJson: boolean): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      if (!Number.isFinite(value)) throw new InvalidJsonError(`${formatPath(path)}: ${value} is not a JSON number`);
      if (checkMagnitude(value)) throw new InexactNumberError(formatPath(path), "magnitude");
      return value;
    case "bigint":
      if (checkMagnitude(value)) throw new InexactNumberError(formatPath(path), "magnitude");
      return Number(value);
    case "undefined":
    case "function":
    case "symbol":
      return OMIT;
  }
  if (value === null) return null;
  const object = value as object;
  if (object instanceof Uint8Array) return Buffer.from(object.buffer, object.byteOffset, object.byteLength).toString("base64");
  if (!afterToJson && typeof (object as { toJSON?: unknown }).toJSON === "function") {
    return toPlain((object as { toJSON: (key: string) => unknown }).toJSON(name), path, ancestors, name, true);
  }
  if (object instanceof Map || object instanceof Set) {
    throw new InvalidJsonError(`${formatPath(path)}: a ${object.constructor.name} has no JSON form; pass an object or an array`);
  }
  if (object instanceof Number || object instanceof String || object instanceof Boolean) {
    return toPlain(object.valueOf(), path, ancestors, name, true);
  }
  if (ancestors.includes(object)) throw new InvalidJsonError(`${formatPath(path)}: circular reference`);
  ancestors.push(object);
  let plain: unknown;
  if (Array.isArray(object)) {
    plain = object.map((item: unknown, i) => {
      path.push(i);
      const v = toPlain(item, path, ancestors, String(i), false);
      path.pop();
      return v === OMIT ? null : v;
    });
  } else {
    const members: { [k: string]: unknown } = Object.create(null);
    for (const [k, item] of Object.entries(object)) {
      path.push(k);
      const v = toPlain(item, path, ancestors, k, false);
      path.pop();
      if (v !== OMIT) members[k] = v;
    }
    plain = members;
  }
  ancestors.pop();
  return plain;
}
