// The TypeScript client's conformance driver: runs one scenario file
// against LEASEHOLD_ENDPOINT with the client's public API (compiled into
// clients/typescript/dist), reporting each step as a JSON line.

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";

import { Client, LeaseholdError, fencedBy, fencedFetch, fingerprintOf } from "../../../clients/typescript/dist/src/index.js";

const scenario = JSON.parse(readFileSync(process.argv[2], "utf8"));
const prefix = process.env.LEASEHOLD_PREFIX ?? "";
const c = new Client({ endpoints: [process.env.LEASEHOLD_ENDPOINT] });
const emit = (m) => process.stdout.write(JSON.stringify(m, (_, v) => (typeof v === "bigint" ? Number(v) : v)) + "\n");
const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const leases = new Map();
const pending = new Map();
const order = [];
const deliveries = new Map();

const code = (err) => (err === undefined ? "ok" : err instanceof LeaseholdError ? err.code : String(err));
function expect(s, err) {
  const want = s.expect ?? "ok";
  if (code(err) !== want) throw new Error(`${s.op}: got ${code(err)} (${err}), want ${want}`);
}
async function settle(p) {
  try { await p; return undefined; } catch (err) { return err; }
}
function lease(name) {
  const l = leases.get(name);
  if (!l) throw new Error(`no lease ${name}`);
  return l;
}
// What a holder checks before each protected write: lease.lost reads the clock.
const lost = (l) => l.lost;
const reason = (l) => l.err?.reason ?? "released";
async function poll(withinMs, f) {
  const end = performance.now() + withinMs;
  for (;;) {
    let err;
    try { if ((await f()) === true) return; } catch (e) { err = e; }
    if (performance.now() > end) throw err ?? new Error("condition not met in time");
    await sleep(10);
  }
}
async function acquire(s) {
  const l = await c.acquire(prefix + s.resource, { ttlMs: s.ttl_ms, waitMs: s.wait_ms, progressTimeoutMs: s.progress_timeout_ms ?? undefined });
  leases.set(s.as, l);
  return l;
}

const ops = {
  acquire: async (s) => expect(s, await settle(acquire(s))),
  acquire_async: async (s) => {
    pending.set(s.as, (async () => {
      const l = await acquire(s);
      order.push(s.as);
      await l.release();
    })());
  },
  await: async (s) => { await pending.get(s.as); },
  waiters: (s) => poll(s.within_ms, async () => {
    const n = (await c.get(prefix + s.resource)).waiters.length;
    if (n !== s.count) throw new Error(`${n} waiters, want ${s.count}`);
    return true;
  }),
  expect_order: async (s) => {
    if (JSON.stringify(order) !== JSON.stringify(s.names)) throw new Error(`granted in order ${order}, want ${s.names}`);
  },
  release: async (s) => expect(s, await settle(lease(s.lease).release())),
  progress_for: async (s) => {
    const l = lease(s.lease);
    for (const end = performance.now() + s.ms; performance.now() < end; await sleep(s.every_ms)) {
      if (lost(l)) throw new Error(`lost while reporting progress: ${l.err}`);
      l.progress("working");
    }
  },
  expect_lost: async (s) => {
    const l = lease(s.lease);
    await poll(s.within_ms, () => l.signal.aborted).catch(() => { throw new Error(`not lost within ${s.within_ms}ms`); });
    if (s.reason && reason(l) !== s.reason) throw new Error(`lost as ${reason(l)} (${l.err}), want ${s.reason}`);
  },
  expect_free: (s) => poll(s.within_ms, async () => {
    const h = (await c.get(prefix + s.resource)).holder;
    if (h) throw new Error(`still held by lease ${h.id}`);
    return true;
  }),
  emit: async (s) => { const l = lease(s.lease); emit({ lease: s.lease, id: l.id, token: l.token, resource: prefix + s.resource }); },
  sync: async (s) => {
    emit({ sync: s.name });
    if (s.wait) await stdin.next();
  },
  work_until_lost: async (s) => {
    const l = lease(s.lease);
    for (const end = performance.now() + s.max_ms; performance.now() < end; await sleep(s.every_ms)) {
      if (lost(l)) return emit({ event: "lost", reason: reason(l) });
      emit({ event: "work" });
      l.progress("working");
    }
    throw new Error("never lost");
  },
  fenced_put: async (s) => expect(s, await settle(c.kv.put(prefix + s.key, "v", { fence: fencedBy(lease(s.lease), prefix + s.resource) }))),
  check_fence: async (s) => expect(s, await settle(c.kv.checkFence(fencedBy(lease(s.lease), prefix + s.resource)))),
  http_fence: async (s) => {
    const res = await fencedFetch(lease(s.lease), prefix + s.resource)(process.env.LEASEHOLD_FENCE_URL, { method: "POST" });
    await res.arrayBuffer();
    if (res.status !== s.expect_status) throw new Error(`fenced request answered ${res.status}, want ${s.expect_status}`);
  },
  queue_create: async (s) => expect(s, await settle(c.queues.create(prefix + s.queue, { visibilityMs: s.visibility_ms }))),
  queue_send: async (s) => expect(s, await settle(c.queues.send(prefix + s.queue, { key: s.key, body: s.body }))),
  queue_receive: async (s) => {
    const ds = await c.queues.receive(prefix + s.queue, { max: s.max ?? 1, visibilityMs: s.visibility_ms, waitMs: s.wait_ms });
    const bodies = ds.map((d) => Buffer.from(d.body).toString());
    ds.forEach((d, i) => deliveries.set(s.as + bodies[i], d));
    const got = [...bodies].sort().join(","), want = [...s.expect_bodies].sort().join(",");
    if (got !== want) throw new Error(`received [${got}], want [${want}]`);
  },
  queue_ack: async (s) => {
    const d = deliveries.get(s.delivery);
    if (!d) throw new Error(`no delivery ${s.delivery}`);
    expect(s, await settle(c.queues.ack(d)));
  },
  sleep: (s) => sleep(s.ms),
  idem_concurrent: async (s) => {
    let runs = 0;
    const fn = async (token) => { runs++; await sleep(s.work_ms); return `done by ${token}`; };
    const key = prefix + s.key, fp = fingerprintOf("conformance");
    const results = await Promise.all(Array.from({ length: s.callers }, () => c.idempotency.idempotent(key, fp, fn, { waitMs: 10_000 })));
    results.push(await c.idempotency.idempotent(key, fp, fn));
    const texts = results.map((r) => Buffer.from(r).toString());
    if (runs !== 1) throw new Error(`the work ran ${runs} times`);
    if (new Set(texts).size !== 1) throw new Error(`results differ: ${texts}`);
  },
  expect_deadline_from_send: async (s) => {
    const resource = prefix + s.resource;
    const h = await c.acquire(resource, { ttlMs: s.ttl_ms });
    const sent = performance.now();
    const waiting = c.acquire(resource, { ttlMs: s.ttl_ms, waitMs: 60_000 });
    await sleep(s.held_for_ms);
    await h.release();
    const l = await waiting;
    await l.release();
    const after = l.deadline - sent, bound = s.ttl_ms - 10 - s.ttl_ms * 0.02;
    if (after > bound + s.slack_ms) throw new Error(`deadline ${after.toFixed(1)}ms after the send, more than ttl less the drift allowance (${bound}ms): counted from later than the send`);
    if (after < bound - s.held_for_ms / 2) throw new Error(`deadline ${after.toFixed(1)}ms after the send, far less than ${bound}ms`);
  },
};

let failed = false;
for (const [i, s] of scenario.steps.entries()) {
  try {
    const op = ops[s.op];
    if (!op) throw new Error(`unknown op ${s.op}`);
    await op(s);
    emit({ step: i, op: s.op, ok: true });
  } catch (err) {
    emit({ step: i, op: s.op, ok: false, error: String(err?.stack ?? err) });
    failed = true;
    break;
  }
}
if (!failed) emit({ done: true });
c.close();
process.exit(failed ? 1 : 0);
