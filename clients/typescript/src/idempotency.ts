// Idempotency keys: begin, complete, abandon, and idempotent(), which runs
// a function once per key (as the Go client.Idempotent does).

import { createHash } from "node:crypto";
import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";

import { randomHex, type CallOpts, type Core } from "./core.js";
import { fromConnect, isCode, LeaseholdError } from "./errors.js";
import { IdemState } from "./gen/leasehold/v1/idempotency_pb.js";
import { Lease } from "./lease.js";
import { performance } from "node:perf_hooks";

/** Another attempt owns the key (and the wait, if any, ran out). */
export class InProgressError extends Error {
  override name = "InProgressError";
  constructor(key: string, readonly ownerToken: bigint) { super(`idempotency key "${key}" is owned by attempt ${ownerToken}`); }
}

/** The key was first used for a different request. */
export class FingerprintMismatchError extends Error {
  override name = "FingerprintMismatchError";
  constructor(message: string) { super(`idempotency key reused with a different request: ${message}`); }
}

export interface BeginOptions extends CallOpts {
  /** The attempt lease's TTL (default 15000). */
  attemptTtlMs?: number;
  /** How long a completed result is kept (default: the node's, 24h). */
  retentionMs?: number;
  /** Wait up to this long for another attempt to complete or lapse. */
  waitMs?: number;
  owner?: string;
}

/** An attempt this caller owns on a key. Its lease renews only with progress, like any lease. */
export class Attempt {
  constructor(private readonly c: Core, readonly key: string, readonly lease: Lease) {}

  /** The attempt's fencing token: write it with the effect. */
  get token(): bigint { return this.lease.token; }

  /** Aborted if the attempt is lost (a LeaseLostError). */
  get signal(): AbortSignal { return this.lease.signal; }

  /** Stores result as the key's answer; a stale attempt is refused with code "stale_token". */
  async complete(result: Uint8Array | string, o: CallOpts = {}): Promise<void> {
    const req = { key: this.key, attempt: this.lease.id, secret: this.lease.secret,
      result: typeof result === "string" ? new TextEncoder().encode(result) : result };
    await this.lease.releaseWith((signal) => this.c.call((e, co) => e.idem.complete(req, co), this.c.requestTimeoutMs, signal), o.signal);
  }

  /** Frees the key for a retry at once. */
  async abandon(o: CallOpts = {}): Promise<void> {
    const req = { key: this.key, attempt: this.lease.id, secret: this.lease.secret, requestId: randomHex() };
    await this.lease.releaseWith((signal) => this.c.call((e, co) => e.idem.abandon(req, co), this.c.requestTimeoutMs, signal), o.signal);
  }
}

/** What begin answers: an attempt to run, or the stored result of a completed one. */
export type BeginResult = { attempt: Attempt; result?: undefined } | { attempt?: undefined; result: Uint8Array };

/** A fingerprint of parts (a method, a path, a body), the same as the Go client's FingerprintOf. */
export function fingerprintOf(...parts: (Uint8Array | string)[]): Uint8Array {
  const h = createHash("sha256");
  for (const p of parts) {
    const b = typeof p === "string" ? Buffer.from(p) : p;
    h.update(`${b.length}:`);
    h.update(b);
  }
  return new Uint8Array(h.digest());
}

export class IdempotencyApi {
  constructor(private readonly c: Core) {}

  /**
   * Starts an attempt on key, or answers the stored result of a completed
   * one. Throws InProgressError if another attempt owns it, and
   * FingerprintMismatchError if the key was first used for another request.
   * The attempt renews in the background while its holder reports progress
   * (attempt.lease.progress()), as a lease does.
   */
  async begin(key: string, fingerprint: Uint8Array, o: BeginOptions & { progressTimeoutMs?: number } = {}): Promise<BeginResult> {
    const ttlMs = o.attemptTtlMs ?? 15000;
    // The secret is made here, so a retried Begin (after a lost reply) is the same attempt.
    const secret = randomHex();
    const req = { key, fingerprint, attemptTtl: durationFromMs(ttlMs), owner: o.owner ?? "", secret,
      retention: o.retentionMs ? durationFromMs(o.retentionMs) : undefined,
      wait: o.waitMs ? durationFromMs(o.waitMs) : undefined };
    const sentAt = performance.now();
    let r;
    try {
      r = await this.c.call((e, co) => e.idem.begin(req, co), this.c.requestTimeoutMs + (o.waitMs ?? 0), o.signal);
    } catch (err) {
      const e = fromConnect(err);
      if (isCode(e, "not_holder")) throw new FingerprintMismatchError(e.message);
      throw e;
    }
    switch (r.state) {
      case IdemState.STARTED: {
        const expires = r.expiresIn ? durationMs(r.expiresIn) : ttlMs;
        const lease = new Lease(this.c, r.attempt, secret, [key], r.token, sentAt, expires, ttlMs,
          { failOpen: false, progressTimeoutMs: o.progressTimeoutMs ?? ttlMs, autoRenew: true });
        if (!this.c.track(lease)) throw new LeaseholdError("canceled", "client: closed");
        lease.start();
        return { attempt: new Attempt(this.c, key, lease) };
      }
      case IdemState.COMPLETED:
        return { result: r.result };
    }
    throw new InProgressError(key, r.ownerToken);
  }

  /**
   * Runs fn once per key: begins an attempt, runs fn with its fencing token
   * and a signal that aborts if the attempt is lost, then completes with
   * fn's result, or abandons if fn throws so a retry runs it again. A key
   * already completed answers its stored result without running fn. The
   * attempt renews while fn runs without needing progress.
   */
  async idempotent(key: string, fingerprint: Uint8Array, fn: (token: bigint, signal: AbortSignal) => Promise<Uint8Array | string>,
    o: BeginOptions = {}): Promise<Uint8Array> {
    const b = await this.begin(key, fingerprint, { ...o, progressTimeoutMs: 0 });
    if (!b.attempt) return b.result;
    const a = b.attempt;
    let result: Uint8Array | string;
    try {
      result = await fn(a.token, a.signal);
    } catch (err) {
      await a.abandon().catch((aerr) => this.c.log.warn("could not abandon an idempotency attempt; it lapses after its TTL", { key, err: String(aerr) }));
      throw err;
    }
    a.lease.throwIfLost(); // the attempt was lost while fn ran
    const bytes = typeof result === "string" ? new TextEncoder().encode(result) : result;
    await a.complete(bytes);
    return bytes;
  }
}
