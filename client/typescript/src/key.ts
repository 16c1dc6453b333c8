/**
 * Deterministic operation keys: a namespace plus a key built from stable business parts and an
 * operation version, with child keys derived from a parent key and a step name (the same scheme as
 * the Rust client, so keys built in either language agree).
 *
 * A key names one logical intent; every retry of that intent must compute the same key. Nothing
 * here makes a key up, except the explicit `OperationKey.random`.
 */
import { randomBytes } from "node:crypto";

/** The longest key the server accepts, in bytes. */
export const MAX_KEY_BYTES = 256;

const NAMESPACE = /^[a-z0-9][a-z0-9._-]{0,127}$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** A key or namespace that the server would refuse. */
export class InvalidKeyError extends TypeError {
  override name = "InvalidKeyError";
}

/**
 * One operation in the ledger: a namespace (the kind of operation, e.g. `payments.charge`) and an
 * idempotency key, with the parent operation it was derived from, if any.
 *
 * ```ts
 * const task = OperationKey.of("tasks.create", "ticket-481", "create-task", "v1");
 * task.key;                                   // "ticket-481:create-task:v1"
 * const email = task.childIn("email.send", "notify-assignee");
 * email.key;                                  // "ticket-481:create-task:v1/notify-assignee"
 * email.parent?.key;                          // "ticket-481:create-task:v1"
 * ```
 *
 * Parts are joined with `:` and steps with `/`; a `%`, `:` or `/` inside a part is
 * percent-encoded, so different parts never produce the same key.
 */
export class OperationKey {
  readonly namespace: string;
  readonly key: string;
  readonly parent?: OperationKey;

  private constructor(namespace: string, key: string, parent?: OperationKey) {
    if (typeof namespace !== "string" || !NAMESPACE.test(namespace)) {
      throw new InvalidKeyError(`invalid namespace ${JSON.stringify(namespace)}: expected ^[a-z0-9][a-z0-9._-]{0,127}$`);
    }
    if (typeof key !== "string" || key.length === 0) throw new InvalidKeyError("a key needs at least one part and no empty part");
    const bytes = Buffer.byteLength(key, "utf8");
    if (bytes > MAX_KEY_BYTES) throw new InvalidKeyError(`the key is ${bytes} bytes long; at most ${MAX_KEY_BYTES} are allowed`);
    if (CONTROL.test(key)) throw new InvalidKeyError("a key must not contain control characters");
    this.namespace = namespace;
    this.key = key;
    if (parent) this.parent = new OperationKey(parent.namespace, parent.key);
  }

  /** A key from stable business parts, the last of which should be the operation version. */
  static of(namespace: string, ...parts: (string | number | bigint)[]): OperationKey {
    const texts = parts.map(String);
    if (texts.length === 0 || texts.some((p) => p.length === 0)) throw new InvalidKeyError("a key needs at least one part and no empty part");
    return new OperationKey(namespace, texts.map(escape).join(":"));
  }

  /** A key taken verbatim (e.g. an `Idempotency-Key` header your own caller sent): validated, not escaped. */
  static raw(namespace: string, key: string): OperationKey {
    return new OperationKey(namespace, key);
  }

  /**
   * A random key (`random-<32 hex digits>`). Only for intents without a stable identity of their
   * own, and only if you store it before the first attempt and reuse it for every retry: a key
   * made up again on retry is a new intent, and the side effect would happen twice.
   */
  static random(namespace: string): OperationKey {
    return new OperationKey(namespace, `random-${randomBytes(16).toString("hex")}`);
  }

  /** The key of a step of this operation in the same namespace: `<this key>/<step>`, with this one as parent. */
  child(step: string): OperationKey {
    return this.childIn(this.namespace, step);
  }

  /** The key of a step of this operation in another namespace, with this one as parent. */
  childIn(namespace: string, step: string): OperationKey {
    if (typeof step !== "string" || step.length === 0) throw new InvalidKeyError("a step name must not be empty");
    return new OperationKey(namespace, `${this.key}/${escape(step)}`, this);
  }

  /** This key with `parent` recorded as its parent (the key itself does not change). */
  withParent(parent: OperationKey | { namespace: string; key: string }): OperationKey {
    return new OperationKey(this.namespace, this.key, new OperationKey(parent.namespace, parent.key));
  }

  /** `namespace/key`. */
  toString(): string {
    return `${this.namespace}/${this.key}`;
  }
}

function escape(part: string): string {
  return part.replace(/[%:/]/g, (c) => (c === "%" ? "%25" : c === ":" ? "%3A" : "%2F"));
}
