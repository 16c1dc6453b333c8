/**
 * The operation fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of an operation's
 * significant arguments, the same 32 bytes the server computes from `payload_json`.
 *
 * Parsing follows I-JSON (RFC 7493) as RFC 8785 requires: duplicate member names, lone surrogates
 * and numbers outside the IEEE 754 double range are refused. Numbers print as ECMAScript's
 * `Number.prototype.toString` prints them, which is what RFC 8785 specifies.
 */
import { createHash } from "node:crypto";

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

/** The RFC 8785 canonical form of a JavaScript value (members whose value is undefined are left out, as JSON.stringify does). */
export function canonicalize(value: unknown): string {
  const out: string[] = [];
  write(value, out);
  return out.join("");
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

function write(value: unknown, out: string[]): void {
  if (value !== null && typeof value === "object" && typeof (value as { toJSON?: unknown }).toJSON === "function") {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof value) {
    case "boolean":
      out.push(value ? "true" : "false");
      return;
    case "bigint":
      value = Number(value);
    // falls through
    case "number":
      if (!Number.isFinite(value)) throw new InvalidJsonError(`number ${String(value)} is out of the double range`);
      out.push(String(value)); // ECMAScript Number-to-String; -0 prints as 0
      return;
    case "string":
      writeString(value, out);
      return;
    case "object":
      if (value === null) {
        out.push("null");
      } else if (Array.isArray(value)) {
        out.push("[");
        value.forEach((item, i) => {
          if (i) out.push(",");
          write(item === undefined ? null : item, out);
        });
        out.push("]");
      } else {
        // Default sort compares UTF-16 code units, as RFC 8785 §3.2.3 requires.
        const names = Object.keys(value).filter((n) => (value as Record<string, unknown>)[n] !== undefined).sort();
        out.push("{");
        names.forEach((name, i) => {
          if (i) out.push(",");
          writeString(name, out);
          out.push(":");
          write((value as Record<string, unknown>)[name], out);
        });
        out.push("}");
      }
      return;
    default:
      throw new InvalidJsonError(`a ${typeof value} is not JSON`);
  }
}

const ESCAPES: Record<string, string> = { '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function writeString(s: string, out: string[]): void {
  let text = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      text += s[i] + s[i + 1];
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      throw new InvalidJsonError("lone surrogate");
    } else if (ESCAPES[s[i]] !== undefined) {
      text += ESCAPES[s[i]];
    } else if (c < 0x20) {
      text += "\\u" + c.toString(16).padStart(4, "0");
    } else {
      text += s[i];
    }
  }
  out.push(text + '"');
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
