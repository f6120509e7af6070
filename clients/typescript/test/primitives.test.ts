import assert from "node:assert/strict";
import { createServer, request, type Server } from "node:http";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import {
  Client, CompareOp, fenceHeader, fencedBy, fencedFetch, fingerprintOf, idempotencyMiddleware, InProgressError,
  FingerprintMismatchError, isCode, LeaseLostError, type IdempotentRequest,
} from "../src/index.js";
import { eventually, useNode } from "./node.js";

const env = useNode();

const text = (b?: Uint8Array) => Buffer.from(b ?? []).toString();

describe("kv", () => {
  it("compares and swaps, runs transactions, and refuses a stale fence", async () => {
    const v1 = await env.c.kv.put("kv/a", "one", { ifVersion: 0n });
    await assert.rejects(env.c.kv.put("kv/a", "again", { ifVersion: 0n }), (e) => isCode(e, "version_mismatch") || isCode(e, "stale_token"));
    const v2 = await env.c.kv.put("kv/a", "two", { ifVersion: v1 });
    assert.equal(text((await env.c.kv.get("kv/a"))!.value), "two");
    assert.equal(await env.c.kv.get("kv/missing"), null);
    const t = await env.c.kv.txn({
      compares: [{ key: "kv/a", op: CompareOp.VERSION_EQUAL, version: v2 }],
      then: [{ put: { key: "kv/b", value: "b" } }, { delete: { key: "kv/a" } }],
      else: [{ put: { key: "kv/else", value: "x" } }],
    });
    assert.equal(t.succeeded, true);
    assert.deepEqual(t.compares, [true]);
    const keys: string[] = [];
    for await (const kv of env.c.kv.list("kv/")) keys.push(kv.key);
    assert.deepEqual(keys, ["kv/b"]);

    const old = await env.c.acquire("kv/res", { ttlMs: 5000 });
    await env.c.kv.put("kv/fenced", "old", { fence: fencedBy(old) });
    await old.release();
    const cur = await env.c.acquire("kv/res", { ttlMs: 5000 });
    await env.c.kv.checkFence(fencedBy(cur));
    await assert.rejects(env.c.kv.put("kv/fenced", "stale", { fence: fencedBy(old) }), (e) => isCode(e, "stale_token"));
    await assert.rejects(env.c.kv.checkFence(fencedBy(old)), (e) => isCode(e, "stale_token"));
    await cur.release();
  });
});

describe("watch", () => {
  it("iterates events and resumes from an index", async () => {
    const ac = new AbortController();
    const seen: string[] = [];
    let firstIndex = 0n;
    const it = env.c.watch(["w/"], { signal: ac.signal });
    const reading = (async () => {
      for await (const ev of it) {
        seen.push(`${ev.kind} ${ev.key}`);
        if (!firstIndex) firstIndex = ev.index;
        if (seen.length === 2) ac.abort();
      }
    })();
    await sleep(200); // the stream opens at the node's last index
    await env.c.kv.put("w/1", "a");
    await env.c.kv.put("w/2", "b");
    await reading;
    assert.deepEqual(seen, ["put w/1", "put w/2"]);
    // From the first event's index: the second comes again, and nothing else.
    const ac2 = new AbortController();
    for await (const ev of env.c.watch(["w/"], { fromIndex: firstIndex, signal: ac2.signal })) {
      assert.equal(ev.key, "w/2");
      ac2.abort();
    }
  });
});

describe("elections", () => {
  it("campaigns in order, observes the leader, resigns", async () => {
    const one = await env.c.elections.campaign("el/x", "one", { ttlMs: 2000 });
    const twoP = env.c.elections.campaign("el/x", "two", { ttlMs: 2000 });
    const ac = new AbortController();
    const values: string[] = [];
    const observing = (async () => {
      for await (const { election } of env.c.elections.observe("el/x", { signal: ac.signal })) {
        values.push(election.value);
        if (election.value === "two") ac.abort();
      }
    })();
    await eventually("observed the first leader", 3000, () => values.includes("one"));
    await one.resign();
    const two = await twoP;
    assert.ok(two.token > one.token);
    await observing;
    assert.equal((await env.c.elections.leader("el/x"))?.value, "two");
    await two.resign();
  });
});

describe("queues", () => {
  it("keeps per-key order and refuses a stale ack", async () => {
    await env.c.queues.create("q1", { visibilityMs: 1000 });
    for (const b of ["m1", "m2"]) await env.c.queues.send("q1", { key: "k", body: b });
    const [d1] = await env.c.queues.receive("q1", { visibilityMs: 1000 });
    assert.equal(text(d1.body), "m1");
    assert.deepEqual(await env.c.queues.receive("q1"), [], "one in flight per key");
    await sleep(1200); // its visibility runs out: delivered again with a larger token
    const [again] = await env.c.queues.receive("q1", { waitMs: 2000 });
    assert.equal(text(again.body), "m1");
    assert.ok(again.token > d1.token);
    await assert.rejects(env.c.queues.ack(d1), (e) => isCode(e, "stale_token"));
    await env.c.queues.ack(again);
    const [d2] = await env.c.queues.receive("q1", { waitMs: 2000 });
    assert.equal(text(d2.body), "m2");
    await env.c.queues.nack(d2, { error: "try later" });
  });

  it("consume extends a delivery only while its handler reports progress", async () => {
    await env.c.queues.create("q2", { visibilityMs: 1000 });
    await env.c.queues.send("q2", { key: "slow", body: "busy" });
    await env.c.queues.send("q2", { key: "idle", body: "stuck" });
    const ac = new AbortController();
    const outcome: Record<string, string> = {};
    const consuming = env.c.queues.consume("q2", async (m) => {
      const body = text(m.body);
      const until = performance.now() + 2500;
      while (performance.now() < until && !m.lost) {
        if (body === "busy") m.progress("step");
        await sleep(50);
      }
      outcome[body] = m.lost ? "lost" : "kept";
      if (Object.keys(outcome).length === 2) ac.abort();
    }, { concurrency: 2, visibilityMs: 1000, pollWaitMs: 500, signal: ac.signal });
    await consuming;
    assert.deepEqual(outcome, { busy: "kept", stuck: "lost" });
  });
});

describe("idempotency", () => {
  it("begins, completes once, replays, and refuses another fingerprint", async () => {
    const fp = fingerprintOf("POST", "/pay", "10");
    const b = await env.c.idempotency.begin("id/1", fp, { attemptTtlMs: 5000 });
    assert.ok(b.attempt);
    await assert.rejects(env.c.idempotency.begin("id/1", fp), InProgressError);
    await b.attempt.complete("paid");
    const again = await env.c.idempotency.begin("id/1", fp);
    assert.equal(text(again.result), "paid");
    await assert.rejects(env.c.idempotency.begin("id/1", fingerprintOf("POST", "/pay", "20")), FingerprintMismatchError);
    const ab = await env.c.idempotency.begin("id/2", fp);
    await ab.attempt!.abandon();
    assert.ok((await env.c.idempotency.begin("id/2", fp)).attempt, "abandoned: the next begin starts anew");
  });

  it("idempotent() runs the function once for concurrent callers", async () => {
    let runs = 0;
    const fn = async (token: bigint) => { runs++; await sleep(300); return `done ${token}`; };
    const fp = fingerprintOf("x");
    const results = await Promise.all([0, 1, 2].map(() => env.c.idempotency.idempotent("id/once", fp, fn, { waitMs: 5000 })));
    assert.equal(runs, 1);
    assert.equal(new Set(results.map(text)).size, 1);
  });

  it("the middleware stores the first response and replays it (IETF Idempotency-Key)", async () => {
    let runs = 0;
    const mw = idempotencyMiddleware({ idempotency: env.c.idempotency, prefix: "http/", required: true });
    const server: Server = createServer((req, res) => {
      void mw(req as IdempotentRequest, res, () => {
        runs++;
        res.setHeader("Content-Type", "text/plain");
        res.statusCode = 201;
        res.end(`charged ${(req as IdempotentRequest).rawBody} with token ${(req as IdempotentRequest).idempotency!.token}`);
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    const post = (key: string | undefined, body: string) => new Promise<{ status: number; body: string; replayed?: string }>((resolve, reject) => {
      const req = request({ port, host: "127.0.0.1", method: "POST", path: "/pay", headers: key ? { "Idempotency-Key": key } : {} }, (res) => {
        let b = "";
        res.on("data", (d) => (b += d));
        res.on("end", () => resolve({ status: res.statusCode!, body: b, replayed: res.headers["idempotency-replayed"] as string }));
      });
      req.on("error", reject);
      req.end(body);
    });
    const first = await post('"k-1"', "10");
    assert.equal(first.status, 201);
    const retry = await post('"k-1"', "10");
    assert.deepEqual([retry.status, retry.body, retry.replayed], [201, first.body, "true"]);
    assert.equal((await post('"k-1"', "20")).status, 422);
    assert.equal((await post(undefined, "10")).status, 400);
    assert.equal(runs, 1);
    server.close();
  });
});

describe("fencing", () => {
  it("fencedFetch sends the Leasehold-Fence header of the lease's token", async () => {
    let got = "";
    const server = createServer((req, res) => { got = req.headers[fenceHeader.toLowerCase()] as string; res.end(); });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const l = await env.c.acquire("fence/http", { ttlMs: 5000 });
    const f = fencedFetch(l, "fence/http");
    await f(`http://127.0.0.1:${(server.address() as { port: number }).port}/`);
    assert.equal(got, `resource=fence/http; token=${l.token}`);
    await l.release();
    server.close();
  });
});

describe("lost leases", () => {
  it("withLock releases after the work", async () => {
    const token = await env.c.withLock("wl/x", async (l) => l.token);
    assert.ok(token > 0n);
    assert.equal((await env.c.get("wl/x")).holder, undefined);
  });

  it("a lease given back after loss throws LeaseLostError", async () => {
    const l = await env.c.acquire("wl/lost", { ttlMs: 300, manualRenew: true });
    await eventually("lost", 2000, () => l.lost);
    await eventually("expired on the node", 2000, async () => (await env.c.get("wl/lost")).holder === undefined);
    await assert.rejects(l.release(), LeaseLostError);
  });
});
