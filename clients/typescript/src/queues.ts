// Keyed queues: send, receive, ack, nack, extend, and consume, which keeps
// a delivery visible only while its handler reports progress (as the Go
// queue.Consume does).

import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";

import { randomHex, timeoutSignal, type CallOpts, type Core } from "./core.js";
import { fromConnect, LeaseholdError } from "./errors.js";
import { DeadLetterMode } from "./gen/leasehold/v1/queues_pb.js";

export { DeadLetterMode };

export interface QueueSettings {
  visibilityMs?: number;
  maxReceives?: number;
  retentionMs?: number;
  maxDepth?: bigint;
  maxBytes?: bigint;
  maxInFlightPerConsumer?: number;
  dedupWindowMs?: number;
  deadLetter?: DeadLetterMode;
}

export interface Message {
  key: string;
  body: Uint8Array | string;
  dedupId?: string;
  delayMs?: number;
}

export interface ReceiveOptions extends CallOpts {
  max?: number;
  visibilityMs?: number;
  /** Wait up to this long if nothing is ready (0 to 20000). */
  waitMs?: number;
  consumer?: string;
}

/** One message handed out by receive. */
export interface Delivery {
  queue: string;
  key: string;
  sequence: bigint;
  /** The delivery's fencing token: write it with the effect. */
  token: bigint;
  receives: number;
  body: Uint8Array;
  consumer: string;
  visibilityMs: number;
  /** The local safe deadline of its visibility, on performance.now()'s clock (counted from before the receive was sent). */
  deadline: number;
}

const bytes = (v: Uint8Array | string): Uint8Array => (typeof v === "string" ? new TextEncoder().encode(v) : v);
const dur = (ms?: number) => (ms ? durationFromMs(ms) : undefined);

/** The visibility of a delivery ran out before its handler finished (a handler's signal reason). */
export class VisibilityLostError extends Error {
  override name = "VisibilityLostError";
  constructor(d: Delivery) { super(`visibility lost: message ${d.sequence} of key "${d.key}" may go to another consumer`); }
}

/** consume is stopping and the handler's drain time ran out (a handler's signal reason). */
export class DrainingError extends Error {
  override name = "DrainingError";
  constructor() { super("consume is stopping"); }
}

export class QueuesApi {
  constructor(private readonly c: Core) {}

  /** Makes a queue (admin); one that exists with the same settings is answered as it is. */
  async create(queue: string, s: QueueSettings = {}, o: CallOpts = {}): Promise<void> {
    const settings = { visibility: dur(s.visibilityMs), maxReceives: s.maxReceives ?? 0, retention: dur(s.retentionMs),
      maxDepth: s.maxDepth ?? 0n, maxBytes: s.maxBytes ?? 0n, maxInFlightPerConsumer: s.maxInFlightPerConsumer ?? 0,
      dedupWindow: dur(s.dedupWindowMs), deadLetter: s.deadLetter ?? DeadLetterMode.UNSPECIFIED };
    await this.c.call((e, co) => e.queues.create({ queue, settings, requestId: randomHex() }, co), this.c.requestTimeoutMs, o.signal);
  }

  /** Enqueues m and answers its sequence once committed; a retry never enqueues twice. */
  async send(queue: string, m: Message, o: CallOpts = {}): Promise<{ sequence: bigint; duplicate: boolean }> {
    const req = { queue, key: m.key, body: bytes(m.body), dedupId: m.dedupId ?? "", delay: dur(m.delayMs), requestId: randomHex() };
    const r = await this.c.call((e, co) => e.queues.send(req, co), this.c.requestTimeoutMs, o.signal);
    return { sequence: r.sequence, duplicate: r.duplicate };
  }

  /** Hands out up to max messages (one per key), each with a safe deadline counted from before the send. */
  async receive(queue: string, o: ReceiveOptions = {}): Promise<Delivery[]> {
    const consumer = o.consumer ?? "";
    const req = { queue, max: o.max ?? 1, visibility: dur(o.visibilityMs), wait: dur(o.waitMs), consumer, requestId: randomHex() };
    // The clock starts before the send: the deliveries cannot be older.
    const sentAt = performance.now();
    const r = await this.c.call((e, co) => e.queues.receive(req, co), this.c.requestTimeoutMs + (o.waitMs ?? 0), o.signal);
    return r.deliveries.map((d) => {
      const visibilityMs = d.visibility ? durationMs(d.visibility) : 0;
      return { queue: d.queue, key: d.key, sequence: d.sequence, token: d.token, receives: d.receives, body: d.body,
        consumer, visibilityMs, deadline: this.c.safeDeadline(sentAt, visibilityMs) };
    });
  }

  /** Removes a delivered message; a stale delivery is refused with code "stale_token". */
  async ack(d: Delivery, o: CallOpts = {}): Promise<void> {
    const req = { queue: d.queue, sequence: d.sequence, token: d.token, consumer: d.consumer, requestId: randomHex() };
    await this.c.call((e, co) => e.queues.ack(req, co), this.c.requestTimeoutMs, o.signal);
  }

  /** Returns a delivered message to the head of its key, deliverable again after delayMs. */
  async nack(d: Delivery, n: { delayMs?: number; error?: string } & CallOpts = {}): Promise<void> {
    const req = { queue: d.queue, sequence: d.sequence, token: d.token, consumer: d.consumer, delay: dur(n.delayMs),
      error: n.error ?? "", requestId: randomHex() };
    await this.c.call((e, co) => e.queues.nack(req, co), this.c.requestTimeoutMs, n.signal);
  }

  /** Gives d visibilityMs more from now; answers the new safe deadline. */
  async extend(d: Delivery, visibilityMs: number, progress = "", o: CallOpts = {}): Promise<number> {
    const req = { queue: d.queue, sequence: d.sequence, token: d.token, consumer: d.consumer, visibility: durationFromMs(visibilityMs), progress };
    const sentAt = performance.now();
    await this.c.call((e, co) => e.queues.extend(req, co), this.c.requestTimeoutMs, o.signal);
    return this.c.safeDeadline(sentAt, visibilityMs);
  }

  /**
   * Runs handler for each message of queue until signal ends: up to
   * concurrency keys at once, each key's messages in send order. A handler
   * that resolves acks its message; one that throws nacks it (again after a
   * backoff). The delivery is extended every third of its visibility only if
   * the handler called progress() since the last extension; otherwise its
   * signal aborts at the safe deadline (VisibilityLostError), before the
   * node hands the message to another consumer. On stop, running handlers
   * get drainTimeoutMs to finish, then are aborted and nacked at once.
   */
  async consume(queue: string, handler: (m: ConsumedMessage) => Promise<void>, o: ConsumeOptions = {}): Promise<void> {
    const concurrency = o.concurrency ?? 1;
    const running = new Set<Promise<void>>();
    const handlers = new Set<ConsumedMessage>();
    const stop = o.signal;
    const stopping = stopped(stop);
    while (!stop?.aborted) {
      if (running.size >= concurrency) {
        await Promise.race([...running, stopping]);
        continue;
      }
      let ds: Delivery[];
      try {
        ds = await this.receive(queue, { max: concurrency - running.size, visibilityMs: o.visibilityMs,
          waitMs: o.pollWaitMs ?? 10_000, consumer: o.consumer, signal: stop });
      } catch (err) {
        if (stop?.aborted) break;
        const e = fromConnect(err);
        if (e.code !== "unavailable" && e.code !== "limit") throw e;
        await sleep(200, undefined, { signal: stop }).catch(() => {});
        continue;
      }
      for (const d of ds) {
        const m = new ConsumedMessage(this, d);
        handlers.add(m);
        const p: Promise<void> = this.handle(m, handler, o).finally(() => { running.delete(p); handlers.delete(m); });
        running.add(p);
      }
    }
    // Drain: let handlers finish, then abort and nack the rest at once.
    const drained = await Promise.race([Promise.all(running).then(() => true), sleep(o.drainTimeoutMs ?? 10_000).then(() => false)]);
    if (!drained) for (const m of handlers) m.abort(new DrainingError());
    await Promise.all(running);
  }

  private async handle(m: ConsumedMessage, handler: (m: ConsumedMessage) => Promise<void>, o: ConsumeOptions): Promise<void> {
    m.keep();
    let failure: unknown;
    try {
      await handler(m);
    } catch (err) {
      failure = err;
    } finally {
      m.stopKeeping();
    }
    try {
      if (m.signal.reason instanceof VisibilityLostError) return; // its ack would be stale: it went to another consumer
      if (failure === undefined) await this.ack(m.delivery);
      else {
        const draining = m.signal.reason instanceof DrainingError;
        const [base, max] = o.backoffMs ?? [1000, 60_000];
        const delayMs = draining ? 0 : Math.min(max, base * 2 ** Math.max(0, m.delivery.receives - 1));
        await this.nack(m.delivery, { delayMs, error: String((failure as Error)?.message ?? failure).slice(0, 512) });
      }
    } catch (err) {
      this.c.log.warn("could not settle a delivery", { queue: m.delivery.queue, sequence: m.delivery.sequence, err: String(err) });
    }
  }
}

export interface ConsumeOptions {
  concurrency?: number;
  visibilityMs?: number;
  pollWaitMs?: number;
  consumer?: string;
  /** [base, max] of the nack delay, doubled per earlier receive (default [1000, 60000]). */
  backoffMs?: [number, number];
  drainTimeoutMs?: number;
  /** Stops consuming. */
  signal?: AbortSignal;
}

/** A delivery being handled by consume. */
export class ConsumedMessage {
  private readonly ac = new AbortController();
  /** Aborted at the delivery's safe deadline (VisibilityLostError) or when draining times out. */
  readonly signal = this.ac.signal;
  private progressed = false;
  private note = "";
  private extendTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;

  constructor(private readonly q: QueuesApi, readonly delivery: Delivery) {}

  get key(): string { return this.delivery.key; }
  get body(): Uint8Array { return this.delivery.body; }
  get token(): bigint { return this.delivery.token; }

  /** Whether the delivery's visibility has run out (reads the clock). */
  get lost(): boolean {
    if (!this.signal.aborted && performance.now() >= this.delivery.deadline) this.abort(new VisibilityLostError(this.delivery));
    return this.signal.reason instanceof VisibilityLostError;
  }

  /** Records progress: the next extension goes ahead only if there was some. */
  progress(note = ""): void {
    this.progressed = true;
    if (note) this.note = note;
  }

  /** @internal */
  abort(reason: Error): void {
    clearTimeout(this.extendTimer);
    clearTimeout(this.deadlineTimer);
    this.ac.abort(reason);
  }

  /** @internal Arms the deadline and the extension timers. */
  keep(): void {
    const d = this.delivery;
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(() => this.abort(new VisibilityLostError(d)), Math.max(0, d.deadline - performance.now()));
    clearTimeout(this.extendTimer);
    this.extendTimer = setTimeout(() => void this.extendIfProgressed(), d.visibilityMs / 3);
  }

  /** @internal */
  stopKeeping(): void {
    clearTimeout(this.extendTimer);
    clearTimeout(this.deadlineTimer);
  }

  private async extendIfProgressed(): Promise<void> {
    if (this.signal.aborted) return;
    if (!this.progressed) return; // no progress: the deadline timer ends it
    this.progressed = false;
    const note = this.note;
    this.note = "";
    try {
      this.delivery.deadline = await this.q.extend(this.delivery, this.delivery.visibilityMs, note,
        { signal: timeoutSignal(this.delivery.deadline - performance.now()) });
    } catch (err) {
      if (err instanceof LeaseholdError && err.code !== "unavailable") {
        this.abort(new VisibilityLostError(this.delivery));
        return;
      }
    }
    if (!this.signal.aborted) this.keep();
  }
}

function stopped(signal?: AbortSignal): Promise<void> {
  if (!signal) return new Promise(() => {});
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}
