// Elections: a leadership is a lease on the election's name; its token is
// the term's fencing token.

import { durationFromMs } from "@bufbuild/protobuf/wkt";

import { randomHex, type CallOpts, type Core } from "./core.js";
import type { Election } from "./gen/leasehold/v1/elections_pb.js";
import { hold, type AcquireOptions, type Lease } from "./lease.js";
import { resumable } from "./watch.js";

export type { Election };

/** A won election. It renews, ends and is lost exactly as its lease. */
export class Leadership {
  constructor(private readonly c: Core, readonly name: string, readonly lease: Lease) {}

  /** The term's fencing token. */
  get token(): bigint { return this.lease.token; }

  /** Aborted when leadership ends (lost, lapsed or resigned). */
  get signal(): AbortSignal { return this.lease.signal; }

  /** Changes the announced value without giving up leadership. */
  async proclaim(value: string, o: CallOpts = {}): Promise<void> {
    const req = { leaseId: this.lease.id, secret: this.lease.secret, value, requestId: randomHex() };
    await this.c.call((e, co) => e.elections.proclaim(req, co), this.c.requestTimeoutMs, o.signal);
  }

  /** Gives leadership up; the next candidate in line leads. */
  resign(o: CallOpts = {}): Promise<void> {
    const req = { leaseId: this.lease.id, secret: this.lease.secret, requestId: randomHex() };
    return this.lease.releaseWith((signal) => this.c.call((e, co) => e.elections.resign(req, co), this.c.requestTimeoutMs, signal), o.signal);
  }
}

export class ElectionsApi {
  constructor(private readonly c: Core) {}

  /**
   * Waits (in arrival order, up to waitMs, default one hour) until this
   * candidate leads name with value. Leadership renews without needing
   * progress unless progressTimeoutMs is given; failOpen is ignored.
   */
  async campaign(name: string, value: string, o: AcquireOptions = {}): Promise<Leadership> {
    const opts: AcquireOptions = { waitMs: 3_600_000, progressTimeoutMs: 0, ...o, failOpen: false };
    const secret = randomHex();
    const req = { election: name, value, ttl: durationFromMs(opts.ttlMs ?? 15000), wait: durationFromMs(opts.waitMs!),
      owner: opts.owner ?? "", secret, requestId: randomHex() };
    const lease = await hold(this.c, [name], opts, secret, (signal) =>
      this.c.call((e, co) => e.elections.campaign(req, co), opts.waitMs! + this.c.requestTimeoutMs, signal));
    return new Leadership(this.c, name, lease);
  }

  /** Who leads name now; null if nobody leads or campaigns. */
  async leader(name: string, o: CallOpts = {}): Promise<Election | null> {
    try {
      const r = await this.c.call((e, co) => e.elections.leader({ election: name }, co), this.c.requestTimeoutMs, o.signal);
      return r.election ?? null;
    } catch (err) {
      if ((err as { code?: string }).code === "not_found") return null;
      throw err;
    }
  }

  /**
   * The leader of name, first as it is, then each change, with its log
   * index (leaseId 0n: nobody leads); resumes after fromIndex.
   */
  async *observe(name: string, o: { fromIndex?: bigint; signal?: AbortSignal } = {}): AsyncGenerator<{ election: Election; index: bigint }> {
    const stream = resumable(this.c, o.fromIndex, o.signal, (e, fromIndex, signal) =>
      e.elections.observe({ election: name, fromIndex }, { signal }));
    for await (const r of stream) if (r.election) yield { election: r.election, index: r.index };
  }
}
