/**
 * The operation fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of an operation's
 * significant arguments, the same 32 bytes the server computes from `payload_json`.
 *
 * Values are serialized by the `canonicalize` package (it passes every canonical vector of the
 * shared tests/vectors). JSON texts are parsed here first, strictly, following I-JSON (RFC 7493)
 * as RFC 8785 requires: duplicate member names (which JSON.parse would silently collapse), lone
 * surrogates and numbers outside the IEEE 754 double range are refused.
 */
import { createHash } from "node:crypto";
import jcs from "canonicalize";

/** The value or text has no canonical form: not JSON, or not I-JSON. */
export class InvalidJsonError extends Error {
  override name = "InvalidJsonError";
}

/** SHA-256 of the canonical JSON of `args` (objects, arrays, strings, numbers, bigints, booleans, null). */
export function fingerprint(args: unknown): Buffer {
  return sha256(canonicalize(args));
}

/** SHA-256 of the canonical form of a JSON text. */
export function fingerprintJson(text: string): Buffer {
  return sha256(canonicalizeJson(text));
}

/** The RFC 8785 canonical form of a JSON text. */
export function canonicalizeJson(text: string): string {
  const parser = new Parser(text);
  const value = parser.document();
  return canonicalize(value);
}

/**
 * The RFC 8785 canonical form of a JavaScript value, serialized by the `canonicalize` package
 * (members whose value is undefined are left out, as JSON.stringify does). A `bigint` is a JSON
 * number: RFC 8785 prints every number as the IEEE 754 double it denotes, so 2^64-1 becomes
 * 18446744073709552000, exactly what the server makes of the same JSON text.
 */
export function canonicalize(value: unknown): string {
  let text: string | undefined;
  try {
    text = jcs(bigintsAsNumbers(value, []));
  } catch (e) {
    if (e instanceof InvalidJsonError) throw e;
    throw new InvalidJsonError((e as Error).message);
  }
  if (typeof text !== "string") throw new InvalidJsonError(`a ${typeof value} is not JSON`);
  return text;
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/**
 * `value` with every bigint replaced by the double it denotes (copying only what contains one);
 * toJSON is applied on the way, as JSON.stringify and `canonicalize` do.
 */
function bigintsAsNumbers(value: unknown, ancestors: object[]): unknown {
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "function" || typeof value === "symbol") {
    if (ancestors.length === 0) throw new InvalidJsonError(`a ${typeof value} is not JSON`);
    return value;
  }
  if (value === null || typeof value !== "object") return value;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") {
    return bigintsAsNumbers((value as { toJSON: () => unknown }).toJSON(), ancestors);
  }
  if (ancestors.includes(value)) throw new InvalidJsonError("circular reference");
  ancestors.push(value);
  let copy: { [k: string]: unknown } | undefined;
  if (Array.isArray(value)) {
    value.forEach((item: unknown, i) => {
      const v = bigintsAsNumbers(item, ancestors);
      if (v !== item) (copy ??= value.slice() as unknown as { [k: string]: unknown })[i] = v;
    });
  } else {
    for (const [name, item] of Object.entries(value)) {
      const v = bigintsAsNumbers(item, ancestors);
      if (v !== item) (copy ??= Object.assign(Object.create(null), value) as { [k: string]: unknown })[name] = v;
    }
  }
  ancestors.pop();
  return copy ?? value;
}

/** A strict RFC 8259 parser that refuses duplicate member names and out-of-range numbers. */
class Parser {
  private pos = 0;
  constructor(private readonly text: string) {}

  document(): unknown {
    this.space();
    const value = this.value();
    this.space();
    if (this.pos !== this.text.length) this.fail("trailing characters");
    return value;
  }

  private fail(why: string): never {
    throw new InvalidJsonError(`invalid JSON at ${this.pos}: ${why}`);
  }

  private space(): void {
    while (this.pos < this.text.length && " \t\n\r".includes(this.text[this.pos])) this.pos++;
  }

  private value(): unknown {
    const c = this.text[this.pos];
    if (c === "{") return this.object();
    if (c === "[") return this.array();
    if (c === '"') return this.string();
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    for (const [lit, v] of [["true", true], ["false", false], ["null", null]] as const) {
      if (this.text.startsWith(lit, this.pos)) {
        this.pos += lit.length;
        return v;
      }
    }
    return this.fail(c === undefined ? "unexpected end" : `unexpected character ${JSON.stringify(c)}`);
  }

  private object(): Record<string, unknown> {
    this.pos++; // {
    const obj: Record<string, unknown> = Object.create(null);
    this.space();
    if (this.text[this.pos] === "}") {
      this.pos++;
      return obj;
    }
    for (;;) {
      this.space();
      if (this.text[this.pos] !== '"') this.fail("expected a member name");
      const name = this.string();
      if (Object.prototype.hasOwnProperty.call(obj, name)) this.fail(`duplicate member name ${JSON.stringify(name)}`);
      this.space();
      if (this.text[this.pos] !== ":") this.fail("expected ':'");
      this.pos++;
      this.space();
      obj[name] = this.value();
      this.space();
      const c = this.text[this.pos++];
      if (c === "}") return obj;
      if (c !== ",") this.fail("expected ',' or '}'");
    }
  }

  private array(): unknown[] {
    this.pos++; // [
    const items: unknown[] = [];
    this.space();
    if (this.text[this.pos] === "]") {
      this.pos++;
      return items;
    }
    for (;;) {
      this.space();
      items.push(this.value());
      this.space();
      const c = this.text[this.pos++];
      if (c === "]") return items;
      if (c !== ",") this.fail("expected ',' or ']'");
    }
  }

  private string(): string {
    const start = this.pos;
    this.pos++; // "
    for (;;) {
      const c = this.text.charCodeAt(this.pos);
      if (Number.isNaN(c)) this.fail("unterminated string");
      if (c < 0x20) this.fail("control character in string");
      if (c === 0x5c) {
        this.pos += 2;
        if (this.text[this.pos - 1] === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(this.text.slice(this.pos, this.pos + 4))) this.fail("invalid \\u escape");
          this.pos += 4;
        } else if (!'"\\/bfnrt'.includes(this.text[this.pos - 1] ?? "x")) {
          this.fail("invalid escape");
        }
        continue;
      }
      this.pos++;
      if (c === 0x22) break;
    }
    // The literal is valid JSON now: let JSON.parse decode it, then refuse lone surrogates.
    const s = JSON.parse(this.text.slice(start, this.pos)) as string;
    for (let i = 0; i < s.length; i++) {
      const u = s.charCodeAt(i);
      if (u >= 0xd800 && u <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) i++;
      else if (u >= 0xd800 && u <= 0xdfff) this.fail("lone surrogate");
    }
    return s;
  }

  private number(): number {
    const m = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/.exec(this.text.slice(this.pos));
    if (!m) this.fail("invalid number");
    const n = Number(m[0]);
    if (!Number.isFinite(n)) this.fail("number out of the double range");
    this.pos += m[0].length;
    return n;
  }
}
