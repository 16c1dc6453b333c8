// Type-level test (`tsc -p types-test`, part of `npm test`; never run): the wrapper keeps the
// wrapped function's parameter and return types, on the call itself, on `.detailed` and through
// `.with`, and refuses misuse at compile time. Each `@ts-expect-error` line must be an error: tsc
// fails when one compiles.
import { OncekeyClient } from "@oncekey/client";
import type { Done, Idempotent, OperationRecord } from "@oncekey/client";

declare const client: OncekeyClient;

interface Receipt {
  messageId: string;
  accepted: number;
}

const send = client.idempotent(async (to: string, subject: string, copies?: number): Promise<Receipt> => ({ messageId: `${to}${subject}`, accepted: copies ?? 1 }), {
  namespace: "email.send",
  key: (to, subject) => [to, subject],
  args: (to, subject, copies?) => ({ to, subject, copies }),
});

export async function keepsTypes(): Promise<void> {
  const wrapped: Idempotent<[to: string, subject: string, copies?: number], Receipt> = send;
  const value: Receipt = await wrapped("ada@example.com", "Welcome");
  const id: string = value.messageId;

  const done: Done<Receipt> = await send.detailed("ada@example.com", "Welcome", 2);
  const accepted: number = done.value.accepted;
  const replayed: boolean = done.replayed;
  const outcome: "ACQUIRED" | "COMPLETED" = done.outcome;
  const record: OperationRecord = done.record;
  const viaWith: Receipt = (await send.with({ timeout: 1000 }).detailed("ada@example.com", "Welcome")).value;

  // A synchronous function's value comes back awaited.
  const double = client.idempotent((n: number) => n * 2, { namespace: "math.double" });
  const doubled: number = (await double.detailed(21)).value;
  void [id, accepted, replayed, outcome, record, viaWith, doubled];
}

export async function refusesMisuse(): Promise<void> {
  // @ts-expect-error the first parameter is a string
  await send.detailed(42, "Welcome");
  // @ts-expect-error the subject is required
  await send.detailed("ada@example.com");
  // @ts-expect-error too many arguments
  await send("ada@example.com", "Welcome", 1, "extra");
  // @ts-expect-error the value is a Receipt, which has no `nope`
  (await send.detailed("a", "b")).value.nope;
  // @ts-expect-error `replayed` is a boolean
  const replayed: string = (await send.detailed("a", "b")).replayed;
  // @ts-expect-error the outcome is ACQUIRED or COMPLETED, never IN_PROGRESS
  const outcome: "IN_PROGRESS" = (await send.detailed("a", "b")).outcome;
  // @ts-expect-error `.with` keeps the parameters
  await send.with({ timeout: 1 })(1, 2);
  void [replayed, outcome];

  client.idempotent(async (to: string) => to, {
    namespace: "email.send",
    // @ts-expect-error the key function gets the wrapped function's parameters
    key: (to: number) => String(to),
  });
  client.idempotent(async (to: string) => to, {
    namespace: "email.send",
    // @ts-expect-error a key is a string, a list of parts or an OperationKey
    key: (to) => ({ to }),
  });
}
