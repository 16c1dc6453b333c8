/**
 * A strict JSON parser for fingerprinting JSON texts: RFC 8259 following I-JSON (RFC 7493) as
 * RFC 8785 requires (duplicate member names, which `JSON.parse` silently collapses, lone
 * surrogates and numbers outside the double range are refused), nesting at most 128 levels as the
 * server allows, and every number judged lossless or refused (`numbers.ts`).
 *
 * Errors say what is wrong and where (an offset, or a refused number's JSON path), never the
 * values the text holds. A refused number is reported only once the whole text parsed, so a text
 * that is not JSON at all is always an `InvalidJsonError` first, as the server answers.
 */
import { checkLiteral, formatPath, InexactNumberError, InvalidJsonError } from "./numbers";
import type { Inexact, Step } from "./numbers";

/** The deepest nesting of arrays and objects a JSON text may have (the outermost counts as 1). */
export const MAX_DEPTH = 128;

/** Parses a whole JSON text into plain values (objects without prototype). */
export function parseJson(text: string): unknown {
  return new Parser(text).document();
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

class Parser {
  private pos = 0;
  private readonly path: Step[] = [];
  private inexact?: { path: string; why: Inexact };
  constructor(private readonly text: string) {}

  document(): unknown {
    this.space();
    const value = this.value();
    this.space();
    if (this.pos !== this.text.length) this.fail("trailing characters");
    if (this.inexact) throw new InexactNumberError(this.inexact.path, this.inexact.why);
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
    return this.fail(c === undefined ? "unexpected end" : "unexpected character");
  }

  private enter(): void {
    // The path holds one step per open container, so its length is the depth.
    if (this.path.length >= MAX_DEPTH) this.fail(`arrays and objects nest deeper than ${MAX_DEPTH} levels`);
  }

  private object(): Record<string, unknown> {
    this.enter();
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
      if (Object.prototype.hasOwnProperty.call(obj, name)) this.fail("duplicate member name");
      this.space();
      if (this.text[this.pos] !== ":") this.fail("expected ':'");
      this.pos++;
      this.space();
      this.path.push(name);
      obj[name] = this.value();
      this.path.pop();
      this.space();
      const c = this.text[this.pos++];
      if (c === "}") return obj;
      if (c !== ",") this.fail("expected ',' or '}'");
    }
  }

  private array(): unknown[] {
    this.enter();
    this.pos++; // [
    const items: unknown[] = [];
    this.space();
    if (this.text[this.pos] === "]") {
      this.pos++;
      return items;
    }
    for (;;) {
      this.space();
      this.path.push(items.length);
      items.push(this.value());
      this.path.pop();
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
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (!m) this.fail("invalid number");
    const n = Number(m[0]);
    if (!Number.isFinite(n)) this.fail("number out of the double range");
    const why = this.inexact ? undefined : checkLiteral(m[0], n);
    if (why) this.inexact = { path: formatPath(this.path), why };
    this.pos += m[0].length;
    return n;
  }
}
