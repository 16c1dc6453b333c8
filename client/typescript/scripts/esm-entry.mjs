// Writes the package's ES module entry point, dist/esm/, after `tsc` built the CommonJS one
// (dist/src/): an ES module that re-exports, by name, every export of the CommonJS build, with
// its types and a {"type": "module"} marker. One implementation serves `import` and `require`,
// so an application that does both (itself, or through a dependency) shares one OncekeyClient,
// one set of error classes (`instanceof` works across them) and one `currentLease()` context.
// The names are read from the built module itself, so the two entry points cannot drift apart.
import { createRequire } from "node:module";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");
const cjs = createRequire(import.meta.url)(join(dist, "src", "index.js"));
const names = Object.keys(cjs).filter((name) => name !== "__esModule" && name !== "default").sort();
if (names.length === 0) throw new Error("esm-entry: the CommonJS build exports nothing");
for (const name of names) {
  if (!/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name)) throw new Error(`esm-entry: ${name} is not an identifier`);
}

const esm = join(dist, "esm");
mkdirSync(esm, { recursive: true });
writeFileSync(join(esm, "package.json"), `${JSON.stringify({ type: "module" })}\n`);
writeFileSync(
  join(esm, "index.js"),
  "// The ES module entry point of @oncekey/client: the CommonJS build's exports, by name (scripts/esm-entry.mjs).\n" +
    'import cjs from "../src/index.js";\n\n' +
    `export const {\n${names.map((n) => `  ${n},`).join("\n")}\n} = cjs;\n`,
);
writeFileSync(join(esm, "index.d.ts"), 'export * from "../src/index.js";\n');
console.log(`esm-entry: dist/esm re-exports ${names.length} names`);
