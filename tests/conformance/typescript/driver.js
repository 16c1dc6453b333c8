// Conformance driver of the TypeScript client (see ../README.md); runs the client's compiled
// output (client/typescript/dist, built by `npm test` or `npm run build` there, and by
// scripts/polyglot-setup).
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");
const clientDir = path.join(__dirname, "../../../client/typescript");
const { OncekeyClient, OncekeyError, OperationKey, codeName, currentLease, defaultKey, fingerprint, reason } = require(path.join(clientDir, "dist/src"));

const STRINGS = {
  currency: "EUR", "\u20ac": "euro", "\u{1F600}": "emoji", "\u00e9": "e-acute", "\ufb01": "ligature",
  text: "line\nbreak \"q\" \\ \u0001 </> \u2028",
};
const NUMBERS = { amount: 1250, rate: 0.1, big: 9007199254740991, tiny: 5e-324, neg: -12.5, small: 1e-7 };
const ARGS = [STRINGS, NUMBERS, [true, false], null, "order-481", "18446744073709551615"];
const OTHER_ARGS = [STRINGS, NUMBERS, [true, false], null, "order-482", "18446744073709551615"];

const outcomeName = (claimed) => `CLAIM_OUTCOME_${claimed.outcome}`;
const errorCode = (e) => codeName(e.grpcCode ?? e.code) ?? String(e.grpcCode ?? e.code);
const resultJson = (r) => ({
  code: r.code, body: Buffer.from(r.body).toString("hex"), content_type: r.contentType, metadata: r.metadata,
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function scenario(client, key, body) {
  const out = {};
  const got = await client.runDetailed(key, ARGS, async (lease) => {
    const expires = lease.expiresAt.getTime();
    await sleep(2500); // 2.5 lease lengths: only the keep-alive keeps the lease
    out.during = outcomeName(await client.claim(key, { args: ARGS }));
    out.renewed = lease.expiresAt.getTime() > expires;
    out.token = Number(lease.token);
    return { code: 201, body, contentType: "application/octet-stream", metadata: { lang: "typescript" } };
  }, { leaseTtl: 1000, raw: true });
  out.first_replayed = got.replayed;

  let called = false;
  const again = await client.runDetailed(key, ARGS, () => {
    called = true;
    return { code: 0, body: Buffer.alloc(0), contentType: "", metadata: {} };
  }, { raw: true });
  out.replay_replayed = again.replayed;
  out.replay = resultJson(again.value);
  out.fn_called_on_replay = called;

  try {
    await client.claim(key, { args: OTHER_ARGS });
    out.reuse = { code: "OK", reason: null };
  } catch (e) {
    out.reuse = { code: errorCode(e), reason: reason(e) ?? null };
  }
  return out;
}

async function race(client, key, n) {
  console.log("ready");
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once("line", resolve));
  rl.close();
  const outcomes = [];
  const errors = [];
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      client.claim(key, { args: ARGS, owner: `typescript-${i}` }).then(
        (r) => outcomes.push(outcomeName(r)),
        (e) => errors.push(`${errorCode(e)} ${reason(e)}`),
      ),
    ),
  );
  return { outcomes, errors };
}

/** One JSON line on stdout, flushed at once (stdout is a pipe: write synchronously). */
function emit(value) {
  fs.writeSync(1, JSON.stringify(value) + "\n");
}

/** Lines read from stdin, one at a time. */
function stdinLines() {
  const queue = [];
  const waiting = [];
  readline.createInterface({ input: process.stdin }).on("line", (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else queue.push(line);
  });
  return () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve) => waiting.push(resolve)));
}

/** Resolves with the next stdin line, or rejects with the signal's reason when it aborts first. */
function lineOrAbort(nextLine, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    nextLine().then(resolve);
  });
}

// driver fault TARGET TENANT NS KEY EFFECT_FILE [--lease-ms N] [--cancel-after-ms N]
async function fault(client, ns, key, effectFile, flags) {
  const nextLine = stdinLines();
  const effect = async () => {
    const lease = currentLease();
    emit({ event: "started", token: Number(lease.token) });
    await lineOrAbort(nextLine, lease.signal); // "go"
    const fd = fs.openSync(effectFile, "a");
    try {
      fs.writeSync(fd, `${key}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    emit({ event: "effect" });
    await lineOrAbort(nextLine, lease.signal); // "finish"
    return { done: key };
  };
  let called = false;
  // The one-line wrapper, as a user would write it (the key and arguments are the shared ones).
  const sendOnce = client.makeIdempotent(
    async () => {
      called = true;
      return effect();
    },
    { namespace: ns, key: () => key, args: () => ARGS, leaseTtl: flags.leaseMs },
  );
  const controller = new AbortController();
  if (flags.cancelAfterMs !== undefined) setTimeout(() => controller.abort(), flags.cancelAfterMs);
  let done;
  try {
    const result = await sendOnce.with({ signal: controller.signal })();
    done = { event: "done", replayed: !called, result, error: null };
  } catch (e) {
    done = { event: "done", replayed: false, result: null, error: errorJson(e) };
  }
  await client.close(); // the outcome is recorded (a cancelled call settles in the background)
  return done;
}

function errorJson(e) {
  if (e && (e.name === "AbortError" || e.name === "TimeoutError")) return { type: "Cancelled", code: null, reason: null };
  if (!(e instanceof OncekeyError)) throw e; // not a client error: a driver bug
  const type = e.name === "CircuitOpenError" ? "Unavailable" : e.name.replace(/Error$/, "");
  return { type, code: e.grpcCode === undefined ? null : codeName(e.grpcCode), reason: e.reason ?? null };
}

function flags(rest) {
  const out = { leaseMs: 2000, cancelAfterMs: undefined };
  for (let i = 0; i < rest.length; i += 2) {
    const value = Number(rest[i + 1]);
    if (!Number.isInteger(value) || value < 0) throw new Error(`${rest[i]} needs a number of milliseconds`);
    if (rest[i] === "--lease-ms") out.leaseMs = value;
    else if (rest[i] === "--cancel-after-ms") out.cancelAfterMs = value;
    else throw new Error(`unknown flag ${rest[i]}`);
  }
  return out;
}

// send_email(to, subject) through client.idempotent with its defaults: no key, no arguments given.
async function call(client, ns, to, subject, effectFile) {
  const sendEmail = client.idempotent(
    async (to, subject) => {
      fs.appendFileSync(effectFile, "typescript\n");
      return { sent_by: "typescript" };
    },
    { namespace: ns },
  );
  const done = await sendEmail.detailed(to, subject);
  return { replayed: done.replayed, value: done.value, key: defaultKey([to, subject]) };
}

async function main(argv) {
  const [command] = argv;
  if (command === "fingerprint") return { fingerprint: fingerprint(ARGS).toString("hex") };
  if (command === "call") {
    const client = new OncekeyClient(argv[1], { tenant: argv[2] });
    try {
      return await call(client, argv[3], argv[4], argv[5], argv[6]);
    } finally {
      await client.close();
    }
  }
  const [target, tenant, ns, keyText] = [argv[1], argv[2], argv[3], argv[4]];
  const key = OperationKey.raw(ns, keyText);
  const client = new OncekeyClient(target, { tenant });
  try {
    switch (command) {
      case "scenario":
        return await scenario(client, key, Buffer.from(argv[5], "hex"));
      case "complete": {
        const body = Buffer.from(argv[5], "hex");
        const got = await client.runDetailed(key, ARGS, () => ({ code: 200, body, contentType: "", metadata: {} }), { raw: true });
        return { replayed: got.replayed, result: resultJson(got.value) };
      }
      case "replay": {
        const r = await client.claim(key, { args: ARGS });
        const none = { code: 0, body: Buffer.alloc(0), contentType: "", metadata: {} };
        return { outcome: outcomeName(r), result: resultJson(r.record?.result ?? none) };
      }
      case "race":
        return await race(client, key, Number(argv[5]));
      case "fault":
        return await fault(client, ns, keyText, argv[5], flags(argv.slice(6)));
      default:
        throw new Error(`unknown command ${command}`);
    }
  } finally {
    await client.close();
  }
}

main(process.argv.slice(2)).then(
  (out) => {
    emit(out);
    process.exit(0);
  },
  (e) => {
    console.error("driver:", e);
    process.exit(1);
  },
);
