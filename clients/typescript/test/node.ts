// Starts a real `leasehold serve` for the tests: the binary in
// LEASEHOLD_BIN, or one built from this repository with go build.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { after, before } from "node:test";

import { Client } from "../src/index.js";

const repo = resolve(fileURLToPath(import.meta.url), "../../../../..");

/** The leasehold binary: LEASEHOLD_BIN, or built once into a temporary directory. */
export function leaseholdBin(): string {
  const bin = process.env.LEASEHOLD_BIN;
  if (bin) return bin;
  const out = join(tmpdir(), "leasehold-ts-test", "leasehold");
  if (!existsSync(out)) {
    execFileSync("go", ["build", "-o", out, "./cmd/leasehold"], { cwd: repo, stdio: "inherit",
      env: { ...process.env, PATH: `${process.env.PATH}:/usr/local/go/bin` } });
  }
  process.env.LEASEHOLD_BIN = out;
  return out;
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

export interface Node {
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/** Starts a one-node cluster and waits until it answers /readyz. */
export async function startNode(): Promise<Node> {
  const bin = leaseholdBin();
  const dir = mkdtempSync(join(tmpdir(), "leasehold-ts-"));
  for (let attempt = 1; ; attempt++) {
    const api = `127.0.0.1:${await freePort()}`;
    const raft = `127.0.0.1:${await freePort()}`;
    const proc = spawn(bin, ["serve", "--data-dir", join(dir, `data${attempt}`), "--api-addr", api, "--raft-addr", raft],
      { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    proc.stderr!.on("data", (b) => { stderr += b; });
    const url = `http://${api}`;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && proc.exitCode === null) {
      try {
        if ((await fetch(`${url}/readyz`)).ok) {
          return {
            url, proc, stop: async () => {
              if (proc.exitCode === null) {
                const exited = new Promise((r) => proc.once("exit", r));
                proc.kill("SIGKILL");
                await exited;
              }
              rmSync(dir, { recursive: true, force: true });
            },
          };
        }
      } catch { /* not listening yet */ }
      await sleep(50);
    }
    proc.kill("SIGKILL");
    if (attempt === 3 || !stderr.includes("address already in use")) throw new Error(`leasehold serve did not get ready: ${stderr}`);
  }
}

/** Polls f until it returns true, failing after timeoutMs. */
export async function eventually(what: string, timeoutMs: number, f: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await f())) {
    if (performance.now() > deadline) throw new Error(`still not true after ${timeoutMs}ms: ${what}`);
    await sleep(10);
  }
}

/** One node and a client of it for a test file: started before its tests, stopped after. */
export function useNode(): { node: Node; c: Client } {
  const env = {} as { node: Node; c: Client };
  before(async () => {
    env.node = await startNode();
    env.c = new Client({ endpoints: [env.node.url] });
  });
  after(async () => {
    env.c.close();
    await env.node.stop();
  });
  return env;
}
