/**
 * Lossless numbers (docs/api.md#numbers): RFC 8785 compares numbers as IEEE 754 doubles, so two
 * arguments whose numbers differ beyond what a double holds would share a fingerprint. A number is
 * fingerprinted only when its magnitude is at most 2^53 − 1 and, in a JSON text, its canonical form
 * keeps the literal's exact value; any other is refused with an `InexactNumberError` naming its JSON
 * path (the same path the server names for `payload_json`), so the caller sends it as a string.
 *
 * This module judges numbers and names where they are; it parses and serializes nothing.
 */

/** The largest magnitude a fingerprinted number may have: 2^53 − 1 (`Number.MAX_SAFE_INTEGER`). */
export const MAX_EXACT = Number.MAX_SAFE_INTEGER;

/** The value or text has no canonical form: not JSON, or not I-JSON. */
export class InvalidJsonError extends Error {
  override name = "InvalidJsonError";
}

/** Why a number cannot be fingerprinted: beyond ±(2^53−1), or more digits than a double keeps. */
export type Inexact = "magnitude" | "precision";

const WHY: { [w in Inexact]: string } = {
  magnitude: "a number beyond ±(2^53−1) (9007199254740991) cannot be fingerprinted exactly",
  precision: "a number with more digits than a double keeps cannot be fingerprinted exactly",
};

/**
 * A number the fingerprint cannot keep exactly; `path` says where it is (`$.order.id`). The message
 * names the path, never the number (arguments are the caller's data).
 */
export class InexactNumberError extends InvalidJsonError {
  override name = "InexactNumberError";
  /** Where the number is, as a JSONPath from the arguments' root, e.g. `$[1].id`. */
  readonly path: string;
  /** What a double cannot hold of it. */
  readonly why: Inexact;
  constructor(path: string, why: Inexact) {
    super(`${path}: ${WHY[why]}; send it as a string`);
    this.path = path;
    this.why = why;
  }
}

/** One step of a path: a member name or an array index. */
export type Step = string | number;

/** A JSONPath: members that are identifiers as `.name`, others as `["name"]` (JSON string syntax), items as `[i]`. */
export function formatPath(steps: readonly Step[]): string {
  let out = "$";
  for (const step of steps) {
    if (typeof step === "number") out += `[${step}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(step)) out += `.${step}`;
    else out += `[${JSON.stringify(step)}]`;
  }
  return out;
}

/** Judges a number that already is a double (a JavaScript number, or a bigint's value). */
export function checkMagnitude(value: number | bigint): Inexact | undefined {
  const magnitude = value < 0 ? -value : value;
  return magnitude > MAX_EXACT ? "magnitude" : undefined;
}

/** Judges a JSON number literal that denotes the finite double `value`. */
export function checkLiteral(literal: string, value: number): Inexact | undefined {
  const big = checkMagnitude(value);
  if (big) return big;
  const canonical = value === 0 ? "0" : String(value); // ECMAScript Number::toString, as RFC 8785 prints it
  return sameDecimal(decimal(literal), decimal(canonical)) ? undefined : "precision";
}

/** The exact value of a number literal: zero, or a sign, significant digits, the power of ten of the last. */
interface Decimal {
  negative: boolean;
  digits: string; // empty for zero
  exponent: number;
}

function decimal(literal: string): Decimal {
  const negative = literal.startsWith("-");
  const unsigned = negative ? literal.slice(1) : literal;
  const e = unsigned.search(/[eE]/);
  const mantissa = e < 0 ? unsigned : unsigned.slice(0, e);
  // Beyond any double's range, the exponent only needs to stay beyond it: cap it (no overflow).
  const exponent = e < 0 ? 0 : Math.max(-1e9, Math.min(1e9, Number(unsigned.slice(e + 1))));
  const [whole, fraction = ""] = mantissa.split(".");
  const significant = (whole + fraction).replace(/^0+/, "");
  const digits = significant.replace(/0+$/, "");
  return { negative, digits, exponent: exponent - fraction.length + (significant.length - digits.length) };
}

function sameDecimal(a: Decimal, b: Decimal): boolean {
  if (a.digits === "" || b.digits === "") return a.digits === b.digits; // zero has no sign
  return a.negative === b.negative && a.digits === b.digits && a.exponent === b.exponent;
}
