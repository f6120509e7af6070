import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

import { Client, LeaseholdError, LeaseLostError, LeaseReleasedError, isCode } from "../src/index.js";
import { eventually, useNode } from "./node.js";

const env = useNode();

describe("leases", () => {
  it("acquires, refuses a second holder, releases, and tokens increase", async () => {
    const a = await env.c.acquire("t/basic", { ttlMs: 5000 });
    await assert.rejects(env.c.acquire("t/basic", { ttlMs: 5000 }), (e) => isCode(e, "held"));
    const info = await env.c.get("t/basic");
    assert.equal(info.holder?.id, a.id);
    await a.release();
    assert.ok(a.signal.aborted && a.signal.reason instanceof LeaseReleasedError);
    assert.equal(a.lost, false);
    const b = await env.c.acquire(["t/basic", "t/basic2"], { ttlMs: 5000 });
    assert.ok(b.token > a.token, `token ${b.token} after ${a.token}`);
    await b.release();
    await b.release(); // a second release does nothing
  });

  // Breaking it on purpose: in hold() (src/lease.ts), read sentAt after
  // `await send(signal)` instead of before it; this test then fails, as the
  // deadline moves by the wait (about 500ms) past the bound.
  it("counts the safe deadline from before the send, not from the reply", async () => {
    const ttlMs = 10_000;
    const holder = await env.c.acquire("t/deadline", { ttlMs });
    const before = performance.now();
    const waiting = env.c.acquire("t/deadline", { ttlMs, waitMs: 5000 });
    const sent = performance.now(); // the acquire read its clock by now, and has not sent yet
    await sleep(500);
    await holder.release();
    const l = await waiting;
    const bound = sent + ttlMs - (10 + ttlMs * 0.02);
    assert.ok(l.deadline <= bound, `deadline ${(l.deadline - before).toFixed(1)}ms after the send, more than ${(bound - before).toFixed(1)}`);
    assert.ok(l.deadline > before + ttlMs - (10 + ttlMs * 0.02) - 200, "the deadline is counted from the send, not much earlier");
    await l.release();
  });

  it("renews while the holder reports progress, and stops without it", async () => {
    const ttlMs = 600;
    const busy = await env.c.acquire("t/progress", { ttlMs });
    const until = performance.now() + 3 * ttlMs;
    while (performance.now() < until) {
      busy.progress("working");
      await sleep(50);
    }
    assert.equal(busy.lost, false, "a holder reporting progress keeps its lease");
    assert.ok((await env.c.get("t/progress")).holder!.renewCount > 0n);
    const t0 = performance.now();
    // No more progress: renewal stops and the lease lapses at its deadline.
    await eventually("the idle lease is lost", 4 * ttlMs, () => busy.lost);
    assert.ok(busy.signal.reason instanceof LeaseLostError && busy.signal.reason.reason === "no_progress", String(busy.signal.reason));
    assert.match(busy.signal.reason.message, /lease lost/);
    assert.ok(performance.now() - t0 < 3 * ttlMs);
    await eventually("the node expires the idle lease", 4 * ttlMs, async () => (await env.c.get("t/progress")).holder === undefined);
    await assert.rejects(busy.release(), LeaseLostError);
  });

  it("aborts its signal at the safe deadline, before the node frees the resource", async () => {
    const l = await env.c.acquire("t/signal", { ttlMs: 1000, manualRenew: true });
    const lostAt = await new Promise<number>((resolve) => l.signal.addEventListener("abort", () => resolve(performance.now())));
    assert.ok(lostAt >= l.deadline, "not before the deadline");
    assert.ok(l.signal.reason instanceof LeaseLostError && l.signal.reason.reason === "not_renewed");
    let freeAt = 0;
    await eventually("the node frees it", 3000, async () => {
      freeAt = performance.now();
      return (await env.c.get("t/signal")).holder === undefined;
    });
    assert.ok(lostAt <= freeAt);
  });

  // Node fires a timer up to a millisecond early on performance.now()'s
  // clock; here the mocked timers fire it a whole TTL early (the real
  // clock has not moved), and the lease must still be held.
  it("does not end a lease when its deadline timer fires early", async (t) => {
    const l = await env.c.acquire("t/early", { ttlMs: 5000, manualRenew: true });
    t.mock.timers.enable({ apis: ["setTimeout"] });
    try {
      await l.renew(); // re-arms the deadline timer under the mocked clock
      t.mock.timers.tick(6000);
      assert.equal(l.signal.aborted, false, `aborted ${(l.deadline - performance.now()).toFixed(0)}ms before its deadline: ${l.signal.reason}`);
    } finally {
      t.mock.timers.reset();
    }
    await l.release();
  });

  it("aborts the holder's signal when an operator force-releases the lease", async () => {
    const l = await env.c.acquire("t/forced", { ttlMs: 900, progressTimeoutMs: 0 });
    await env.c.forceRelease("t/forced", l.id, "test");
    await eventually("the holder sees the loss", 2000, () => l.signal.aborted);
    assert.ok(l.signal.reason instanceof LeaseLostError && l.signal.reason.reason === "ended", String(l.signal.reason));
  });

  it("fails closed by default and open when asked, when no node answers", async () => {
    const dead = new Client({ endpoints: ["http://127.0.0.1:9"], requestTimeoutMs: 300 });
    await assert.rejects(dead.acquire("t/fail", { signal: AbortSignal.timeout(500) }));
    const l = await dead.acquire("t/fail", { failOpen: true });
    assert.equal(l.degraded, true);
    assert.equal(l.token, 0n);
    await l.release();
    dead.close();
  });

  it("ends a lease with reason closed when the client closes", async () => {
    const own = new Client({ endpoints: [env.node.url] });
    const l = await own.acquire("t/close", { ttlMs: 2000 });
    own.close();
    assert.ok(l.lost && (l.err as LeaseLostError).reason === "closed");
    await assert.rejects(own.acquire("t/close2"), LeaseholdError);
  });
});
