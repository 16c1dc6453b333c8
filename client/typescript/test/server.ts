// A real `oncekey serve` (embedded store) for the tests, which can be killed and restarted on the
// same port and data directory. The binary is $ONCEKEY_BIN, else the cargo build the repository's
// scripts make ($CARGO_TARGET_DIR or ~/.cache/oncekey/target, then ./target); a missing binary
// fails the tests loudly, never skips them.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { v1 } from "../src";
import type { OncekeyClient } from "../src";

const REPO = join(__dirname, "..", "..", "..", "..");

export function serverBinary(): string {
  const candidates = [
    process.env.ONCEKEY_BIN,
    join(process.env.CARGO_TARGET_DIR ?? join(homedir(), ".cache", "oncekey", "target"), "debug", "oncekey"),
    join(REPO, "target", "debug", "oncekey"),
  ].filter((p): p is string => !!p);
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new Error(`no oncekey binary (looked at ${candidates.join(", ")}): run \`cargo build --bin oncekey\` or set ONCEKEY_BIN`);
  }
  return found;
}

export class TestServer {
  readonly dataDir = mkdtempSync(join(tmpdir(), "oncekey-ts-test-"));
  private child?: ChildProcess;
  private port = 0;

  /**
   * `extraArgs` are added to `oncekey serve` (e.g. `--tokens-file`), `env` to its environment
   * (e.g. the test-only `ONCEKEY_TEST_CLOCK_SKEW_MS`).
   */
  constructor(
    private readonly extraArgs: string[] = [],
    private readonly env: Record<string, string> = {},
  ) {}

  /** `host:port` of the gRPC listener (fixed after the first start). */
  get target(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Starts the server (on its previous port after the first start); resolves once it listens. */
  async start(port = this.port): Promise<this> {
    const child = spawn(
      serverBinary(),
      ["serve", "--listen", `127.0.0.1:${port}`, "--admin-listen", "127.0.0.1:0", "--data-dir", this.dataDir, "--log-format", "json", ...this.extraArgs],
      { stdio: ["ignore", "pipe", "ignore"], env: { ...process.env, ...this.env } },
    );
    this.child = child;
    const listening = await new Promise<string>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout! });
      lines.on("line", (line) => {
        const m = /listening grpc=(\S+)/.exec(line);
        if (m) resolve(m[1]);
      });
      child.once("exit", (code) => reject(new Error(`oncekey serve exited with ${code} before listening`)));
    });
    this.port = Number(listening.split(":").pop());
    return this;
  }

  /** SIGKILLs the server (no draining: like a crash). */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }

  /** Kills the server and removes its data. */
  async dispose(): Promise<void> {
    await this.kill();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** A fresh key per test, so tests never share records. */
let counter = 0;
export function uniqueKey(prefix: string): string {
  return `${prefix}-${process.pid}-${Date.now()}-${++counter}`;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The outcome and reason of each Fail receipt in an operation's history, oldest first
 * (`"RETRYABLE NOTHING_RAN"`): Lookup with `includeHistory` through the generated client
 * (`client.lookup` reads no history).
 */
export function failReceipts(client: OncekeyClient, namespace: string, key: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    client.ledger.lookup({ namespace, key, includeHistory: true }, (err, res) => {
      if (err) return reject(err);
      resolve(res.history.filter((e) => e.kind === v1.EventKind.EVENT_KIND_FAIL).map((e) => `${e.outcome} ${e.reason}`));
    });
  });
}
