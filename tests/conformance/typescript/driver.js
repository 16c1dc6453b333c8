// Conformance driver of the TypeScript client (see ../README.md); runs the client's compiled
// output (client/typescript/dist, built by `npm test` or `npm run build` there).
"use strict";
const path = require("node:path");
const readline = require("node:readline");
const clientDir = path.join(__dirname, "../../../client/typescript");
const { OncekeyClient, fingerprint, reason, v1 } = require(path.join(clientDir, "dist/src"));
const { status } = require(require.resolve("@grpc/grpc-js", { paths: [clientDir] }));

const STRINGS = {
  currency: "EUR", "\u20ac": "euro", "\u{1F600}": "emoji", "\u00e9": "e-acute", "\ufb01": "ligature",
  text: "line\nbreak \"q\" \\ \u0001 </> \u2028",
};
const NUMBERS = { amount: 1250, rate: 0.1, big: 1e21, tiny: 5e-324, neg: -12.5, small: 1e-7 };
const ARGS = [STRINGS, NUMBERS, [true, false], null, "order-481", 18446744073709551615n];
const OTHER_ARGS = [STRINGS, NUMBERS, [true, false], null, "order-482", 18446744073709551615n];

const outcomeName = (r) => v1.claimOutcomeToJSON(r.outcome);
const codeName = (err) => Object.keys(status).find((k) => status[k] === err.code) ?? String(err.code);
const resultJson = (r) => ({
  code: r.code, body: Buffer.from(r.body).toString("hex"), content_type: r.contentType, metadata: r.metadata,
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function scenario(client, ns, key, body) {
  const out = {};
  const got = await client.run(ns, key, { args: ARGS, leaseTtlMs: 1000 }, async (held) => {
    const token = held.lease.token;
    const expires = held.lease.expiresAt.getTime();
    await sleep(2500); // 2.5 lease lengths: only the keep-alive keeps the lease
    out.during = outcomeName(await client.claim(ns, key, { args: ARGS }));
    out.renewed = held.lease.expiresAt.getTime() > expires;
    out.token = Number(token);
    return { code: 201, body, contentType: "application/octet-stream", metadata: { lang: "typescript" } };
  });
  out.first_replayed = got.replayed;

  let called = false;
  const again = await client.run(ns, key, { args: ARGS }, () => {
    called = true;
    return { code: 0, body: Buffer.alloc(0), contentType: "", metadata: {} };
  });
  out.replay_replayed = again.replayed;
  out.replay = resultJson(again.result);
  out.fn_called_on_replay = called;

  try {
    await client.claim(ns, key, { args: OTHER_ARGS });
    out.reuse = { code: "OK", reason: null };
  } catch (e) {
    out.reuse = { code: codeName(e), reason: reason(e) ?? null };
  }
  return out;
}

async function race(client, ns, key, n) {
  console.log("ready");
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once("line", resolve));
  rl.close();
  const outcomes = [];
  const errors = [];
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      client.claim(ns, key, { args: ARGS, owner: `typescript-${i}` }).then(
        (r) => outcomes.push(outcomeName(r)),
        (e) => errors.push(`${codeName(e)} ${reason(e)}`),
      ),
    ),
  );
  return { outcomes, errors };
}

async function main(argv) {
  const [command] = argv;
  if (command === "fingerprint") return { fingerprint: fingerprint(ARGS).toString("hex") };
  const [target, tenant, ns, key] = [argv[1].replace(/^http:\/\//, ""), argv[2], argv[3], argv[4]];
  const client = new OncekeyClient(target, { tenant });
  try {
    switch (command) {
      case "scenario":
        return await scenario(client, ns, key, Buffer.from(argv[5], "hex"));
      case "complete": {
        const body = Buffer.from(argv[5], "hex");
        const got = await client.run(ns, key, { args: ARGS }, () => ({ code: 200, body, contentType: "", metadata: {} }));
        return { replayed: got.replayed, result: resultJson(got.result) };
      }
      case "replay": {
        const r = await client.claim(ns, key, { args: ARGS });
        return { outcome: outcomeName(r), result: resultJson(r.record.result) };
      }
      case "race":
        return await race(client, ns, key, Number(argv[5]));
      default:
        throw new Error(`unknown command ${command}`);
    }
  } finally {
    client.close();
  }
}

main(process.argv.slice(2)).then(
  (out) => console.log(JSON.stringify(out)),
  (e) => {
    console.error("driver:", e);
    process.exit(1);
  },
);
