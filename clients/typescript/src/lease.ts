// Leases: acquire, renewal in the background only while the holder reports
// progress, and the safe deadline on performance.now() from before the
// send (invariant 3), as the Go client (client/lease.go) does.

import { performance } from "node:perf_hooks";
import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";

import { randomHex, timeoutSignal, type CallOpts, type Closer, type Core } from "./core.js";
import { fromConnect, isCode, LeaseholdError, LeaseLostError, LeaseReleasedError, type LostReason } from "./errors.js";
import type { AcquireResponse } from "./gen/leasehold/v1/leases_pb.js";

/** Options of one acquire. Durations are in milliseconds. */
export interface AcquireOptions extends CallOpts {
  /** Time to live: 100ms to 1h (default 15000). */
  ttlMs?: number;
  /** Queue up to this long if a resource is held (default 0: fail at once, code "held"). */
  waitMs?: number;
  owner?: string;
  operation?: string;
  metadata?: Record<string, string>;
  /** After an expiry (not a release) the resources stay blocked this long. */
  lockDelayMs?: number;
  /** The lease ends at this age however often it is renewed. */
  maxHoldMs?: number;
  /**
   * Availability over safety when the store is unreachable: a degraded
   * lease (token 0n) instead of an error, and a lease whose renewals cannot
   * get through degrades instead of ending. Default false (fail closed).
   */
  failOpen?: boolean;
  /** How long renewal goes on without progress() (default: the TTL; 0 renews without progress). */
  progressTimeoutMs?: number;
  /** No background renewal: the caller renews with renew(). */
  manualRenew?: boolean;
  /** One of up to n holders of the one resource (a semaphore slot). */
  semaphore?: number;
}

const maxProgressBytes = 256;

/** A granted lease. */
export class Lease implements Closer {
  /** Aborted when the lease ends: with a LeaseLostError at the safe deadline or when lost, a LeaseReleasedError on release. */
  readonly signal: AbortSignal;
  private readonly ac = new AbortController();
  private tokenValue: bigint;
  private deadlineAt: number;
  private nextRenewAt: number;
  private lastProgress = performance.now();
  private note = "";
  private renewing: boolean;
  private degradedValue: boolean;
  private ended: Error | undefined;
  private releaseDone = false;
  private renewTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private inFlight: AbortController | undefined;
  private retryMs = 0;

  /** @internal Leases come from Client.acquire, campaign or begin. */
  constructor(
    private readonly c: Core,
    readonly id: bigint,
    readonly secret: string,
    readonly resources: string[],
    token: bigint,
    sentAt: number,
    expiresInMs: number,
    private readonly ttlMs: number,
    private readonly opts: { failOpen: boolean; progressTimeoutMs: number; autoRenew: boolean },
    degraded = false,
  ) {
    this.signal = this.ac.signal;
    this.tokenValue = token;
    this.deadlineAt = c.safeDeadline(sentAt, expiresInMs);
    this.nextRenewAt = sentAt + expiresInMs / 3;
    this.renewing = opts.autoRenew && !degraded;
    this.degradedValue = degraded;
  }

  /** The fencing token to present to the protected resource (0n when degraded). */
  get token(): bigint {
    return this.degradedValue ? 0n : this.tokenValue;
  }

  /** Whether the lease was handed out (or kept) under failOpen without the store's confirmation. */
  get degraded(): boolean {
    return this.degradedValue;
  }

  /** The local safe deadline, on performance.now()'s clock. */
  get deadline(): number {
    return this.deadlineAt;
  }

  /**
   * Whether the lease is over. It reads the clock, so a holder that was
   * paused past its deadline sees the loss the moment it resumes, before
   * any timer has run. Check it (or throwIfLost) before each protected write.
   */
  get lost(): boolean {
    if (!this.ended && !this.degradedValue && performance.now() >= this.deadlineAt) this.lapse();
    return this.ended !== undefined && !(this.ended instanceof LeaseReleasedError);
  }

  /** Why the lease ended, or undefined while it holds. */
  get err(): Error | undefined {
    void this.lost;
    return this.ended;
  }

  /** Throws the reason if the lease has ended. */
  throwIfLost(): void {
    const err = this.err;
    if (err) throw err;
  }

  /**
   * Records that the holder makes progress: renewal goes on only while it
   * does. note (up to 256 bytes) is shown to operators with the next renewal.
   */
  progress(note = ""): void {
    this.lastProgress = performance.now();
    if (note) this.note = truncate(note, maxProgressBytes);
  }

  /** @internal Starts the timers once the caller has the lease. */
  start(): void {
    if (this.degradedValue) return;
    this.armDeadline();
    this.scheduleRenewal();
  }

  /** Extends the lease now, bounded by the local deadline. */
  async renew(o: CallOpts = {}): Promise<void> {
    await this.renewOnce(true, o.signal);
  }

  /** @internal Extends the lease; unbounded only before acquire returns. */
  async renewOnce(bounded: boolean, signal?: AbortSignal): Promise<void> {
    const note = this.note;
    const req = { leaseId: this.id, secret: this.secret, progress: note, requestId: randomHex() };
    const signals = signal ? [signal] : [];
    if (bounded) signals.push(timeoutSignal(this.deadlineAt - performance.now()));
    const sentAt = performance.now();
    const resp = await renewCall(this.c, req, signals.length ? AbortSignal.any(signals) : undefined);
    const expires = resp.expiresIn ? durationMs(resp.expiresIn) : this.ttlMs;
    this.deadlineAt = this.c.safeDeadline(sentAt, expires);
    this.nextRenewAt = sentAt + expires / 3;
    if (this.note === note) this.note = "";
    if (this.deadlineTimer) this.armDeadline();
  }

  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(() => this.atDeadline(), Math.max(0, this.deadlineAt - performance.now()));
  }

  // atDeadline lapses the lease. Node may fire a timer up to a millisecond
  // before its delay on performance.now()'s clock (it counts from the
  // event loop's cached, whole-millisecond time): an early firing waits
  // out the rest, so the signal never aborts before the deadline it shows.
  private atDeadline(): void {
    if (performance.now() < this.deadlineAt) {
      this.armDeadline();
      return;
    }
    this.lapse();
  }

  private scheduleRenewal(): void {
    clearTimeout(this.renewTimer);
    if (this.ended || !this.renewing) return;
    const at = this.retryMs > 0 ? performance.now() + this.retryMs : this.nextRenewAt;
    if (at >= this.deadlineAt) return; // the deadline timer ends it
    this.renewTimer = setTimeout(() => void this.renewTick(), Math.max(0, at - performance.now()));
  }

  private async renewTick(): Promise<void> {
    if (this.ended) return;
    const pt = this.opts.progressTimeoutMs;
    if (pt > 0 && performance.now() - this.lastProgress > pt) {
      this.renewing = false;
      this.c.log.warn("lease holder reported no progress; renewal stops and the lease will lapse",
        { lease: this.id, progressTimeoutMs: pt });
      return;
    }
    this.inFlight = new AbortController();
    try {
      await this.renewOnce(true, this.inFlight.signal);
      this.retryMs = 0;
    } catch (err) {
      if (this.ended) return;
      const e = fromConnect(err);
      if (definitive(e)) {
        this.end(new LeaseLostError("ended", e.message, { cause: e }));
        return;
      }
      // Unreachable or slow: try again soon, never past the deadline.
      this.retryMs = Math.min(Math.max(2 * this.retryMs, 50), 1000);
      this.c.log.warn("lease renewal failed; retrying until the local deadline", { lease: this.id, err: e.message });
    } finally {
      this.inFlight = undefined;
    }
    this.scheduleRenewal();
  }

  // lapse ends the lease at its local deadline, or degrades it under
  // failOpen when renewals could not reach the store.
  private lapse(): void {
    if (this.ended || this.degradedValue) return;
    if (!this.renewing) {
      if (!this.opts.autoRenew) this.end(new LeaseLostError("not_renewed", "not renewed before the local deadline"));
      else this.end(new LeaseLostError("no_progress", "no progress reported: renewal stopped"));
      return;
    }
    if (this.opts.failOpen) {
      this.degradedValue = true;
      this.stopTimers();
      this.c.log.warn("leasehold unreachable past the lease's deadline: failOpen keeps it as a degraded lease with token 0",
        { lease: this.id });
      return;
    }
    this.end(new LeaseLostError("deadline", "no renewal succeeded before the local deadline"));
  }

  private stopTimers(): void {
    clearTimeout(this.renewTimer);
    clearTimeout(this.deadlineTimer);
    this.inFlight?.abort();
  }

  /** @internal Marks the lease over; the first reason wins. */
  end(err: Error): void {
    if (this.ended) return;
    this.ended = err;
    this.stopTimers();
    this.c.untrack(this);
    this.ac.abort(err);
    if (!(err instanceof LeaseReleasedError)) this.c.log.warn("lease ended before release", { lease: this.id, why: err.message });
  }

  /** @internal Client.close ends the lease without releasing it. */
  closeByClient(): void {
    this.end(new LeaseLostError("closed", "the client was closed"));
  }

  /**
   * Stops renewal and gives the lease back. If the node had already ended
   * the lease, it throws a LeaseLostError: the work done since then ran
   * without the lease. A second call does nothing.
   */
  async release(o: CallOpts = {}): Promise<void> {
    await this.releaseWith((signal) => releaseCall(this.c, this.id, this.secret, signal), o.signal);
  }

  /** @internal release with the call that gives the lease back (a release, a resign). */
  async releaseWith(send: (signal?: AbortSignal) => Promise<unknown>, signal?: AbortSignal): Promise<void> {
    this.renewing = false;
    this.stopTimers();
    if (this.releaseDone || this.ended instanceof LeaseReleasedError) return;
    if (this.degradedValue && this.id === 0n) {
      this.end(new LeaseReleasedError());
      return;
    }
    try {
      await send(signal);
    } catch (err) {
      const e = fromConnect(err);
      if (isCode(e, "not_found")) {
        this.releaseDone = true;
        const lost = new LeaseLostError("ended", `lease ${this.id} had already ended when released; work done after that ran without it`, { cause: e });
        this.end(lost);
        throw lost;
      }
      // Renewal has stopped, so the lease ends at its deadline either way.
      this.end(new LeaseLostError("release_unconfirmed", "the release could not be confirmed", { cause: e }));
      throw e;
    }
    this.releaseDone = true;
    this.end(new LeaseReleasedError());
  }
}

/** Whether a renewal error means the lease is over. */
function definitive(e: LeaseholdError): boolean {
  return ["not_found", "not_holder", "limit", "invalid"].includes(e.code);
}

/** Cuts s to at most n bytes of UTF-8 without splitting a character. */
function truncate(s: string, n: number): string {
  while (Buffer.byteLength(s) > n) s = s.slice(0, -1);
  return s;
}

/** What hold needs of a grant: an acquire's answer, or a campaign's. */
export type Grant = Pick<AcquireResponse, "lease" | "secret" | "expiresIn">;

/**
 * hold sends a request for a lease (an acquire, a campaign) and keeps what
 * it grants as a Lease renewed in the background: the clock starts before
 * the send, and a long wait is followed by a renewal.
 */
export async function hold(c: Core, resources: string[], o: AcquireOptions, secret: string,
  send: (signal?: AbortSignal) => Promise<Grant>): Promise<Lease> {
  const ttlMs = o.ttlMs ?? 15000;
  const opts = {
    failOpen: o.failOpen ?? false,
    progressTimeoutMs: o.progressTimeoutMs ?? ttlMs,
    autoRenew: !o.manualRenew,
  };
  let signal = o.signal;
  if (opts.failOpen) {
    // failOpen must answer even when the caller gives no bound.
    const bound = timeoutSignal((o.waitMs ?? 0) + c.requestTimeoutMs);
    signal = signal ? AbortSignal.any([signal, bound]) : bound;
  }
  // The clock starts before the send: the grant cannot be earlier.
  const sentAt = performance.now();
  let resp: Grant;
  try {
    resp = await send(signal);
  } catch (err) {
    const e = err instanceof LeaseholdError ? err : fromConnect(err);
    const timedOut = signal?.aborted && !o.signal?.aborted;
    if (opts.failOpen && (e.code === "unavailable" || timedOut)) {
      c.log.warn("leasehold unreachable: failOpen hands out a degraded lease with token 0; fenced resources will refuse it",
        { resources, err: e.message });
      return new Lease(c, 0n, "", resources, 0n, sentAt, 0, ttlMs, opts, true);
    }
    throw err;
  }
  const granted = resp.lease!;
  // A semaphore's lease holds its slot, not the name asked for.
  const held = granted.limit > 0 && granted.resources.length === 1 ? granted.resources : resources;
  const expires = resp.expiresIn ? durationMs(resp.expiresIn) : ttlMs;
  const l = new Lease(c, granted.id, secret || resp.secret, held, granted.token, sentAt, expires, ttlMs, opts);
  // After a long wait the deadline counted from the send is near or past:
  // renew at once to count from a fresh send instead.
  if (l.deadline - performance.now() < expires / 2) {
    try {
      await l.renewOnce(false, o.signal);
    } catch (err) {
      l.end(new LeaseLostError("ended", "renewing right after a long wait failed", { cause: err }));
      // Give the grant back so waiters need not sit out its TTL.
      void releaseCall(c, l.id, l.secret).catch(() => {});
      throw err;
    }
  }
  if (!c.track(l)) {
    l.end(new LeaseLostError("closed", "the client was closed"));
    throw new LeaseholdError("canceled", "client: closed");
  }
  l.start();
  return l;
}

/** Sends an acquire of every resource at once, or none. */
export function acquire(c: Core, resources: string[], o: AcquireOptions = {}): Promise<Lease> {
  const limit = o.semaphore ?? 0;
  if (limit < 0 || limit > 1000) {
    return Promise.reject(new LeaseholdError("invalid", `semaphore limit ${limit} is outside 1 to 1000`));
  }
  const secret = randomHex();
  const req = {
    resources, ttl: durationFromMs(o.ttlMs ?? 15000), owner: o.owner ?? "", operation: o.operation ?? "",
    metadata: o.metadata ?? {}, secret, requestId: randomHex(), limit,
    wait: o.waitMs ? durationFromMs(o.waitMs) : undefined,
    lockDelay: o.lockDelayMs ? durationFromMs(o.lockDelayMs) : undefined,
    maxHold: o.maxHoldMs ? durationFromMs(o.maxHoldMs) : undefined,
  };
  const perTry = (o.waitMs ?? 0) + c.requestTimeoutMs;
  return hold(c, resources, o, secret, async (signal) => {
    const r = await c.batch?.do({ op: { case: "acquire", value: req } }, signal);
    if (r?.result.case === "acquire") return r.result.value;
    // Alone, or queued by a batch: the same request (same id and secret)
    // to Acquire waits for its place in line.
    return c.call((e, co) => e.leases.acquire(req, co), perTry, signal);
  });
}

// The lease ops, in a batch unless the client sends each alone.

type RenewRequest = { leaseId: bigint; secret: string; progress: string; requestId: string };

async function renewCall(c: Core, req: RenewRequest, signal?: AbortSignal) {
  const r = await c.batch?.do({ op: { case: "renew", value: req } }, signal);
  if (r?.result.case === "renew") return r.result.value;
  return c.call((e, co) => e.leases.renew(req, co), c.requestTimeoutMs, signal);
}

async function releaseCall(c: Core, leaseId: bigint, secret: string, signal?: AbortSignal): Promise<void> {
  const req = { leaseId, secret, requestId: randomHex() };
  if (c.batch) await c.batch.do({ op: { case: "release", value: req } }, signal);
  else await c.call((e, co) => e.leases.release(req, co), c.requestTimeoutMs, signal);
}
