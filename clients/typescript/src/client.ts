// Client puts the primitives together over one Core.

import { Core, randomHex, type CallOpts, type ClientConfig } from "./core.js";
import { ElectionsApi } from "./elections.js";
import { fromConnect, isCode } from "./errors.js";
import type { GetResponse } from "./gen/leasehold/v1/leases_pb.js";
import { IdempotencyApi } from "./idempotency.js";
import { KVApi } from "./kv.js";
import { acquire, type AcquireOptions, type Lease } from "./lease.js";
import { QueuesApi } from "./queues.js";
import { watch, type WatchEvent, type WatchOptions } from "./watch.js";

/** Client talks to a leasehold cluster. One client is meant to be shared by every caller of a process. */
export class Client extends Core {
  readonly kv = new KVApi(this);
  readonly elections = new ElectionsApi(this);
  readonly queues = new QueuesApi(this);
  readonly idempotency = new IdempotencyApi(this);

  constructor(cfg: ClientConfig) {
    super(cfg);
  }

  /**
   * Takes every resource at once, or none. With waitMs it queues (in one
   * global arrival order) until granted, or rejects with code
   * "wait_timeout". Unless manualRenew, the lease renews in the background
   * at a third of its TTL while the holder calls progress() within
   * progressTimeoutMs (default: the TTL), until release.
   */
  acquire(resources: string | string[], o: AcquireOptions = {}): Promise<Lease> {
    return acquire(this, typeof resources === "string" ? [resources] : resources, o);
  }

  /** Acquires resource, runs fn with the lease, and releases. */
  async withLock<T>(resource: string, fn: (lease: Lease) => Promise<T>, o: AcquireOptions = {}): Promise<T> {
    const lease = await this.acquire(resource, o);
    try {
      return await fn(lease);
    } finally {
      await lease.release();
    }
  }

  /** One resource: its holder (undefined when free), token, waiters, lock-delay. */
  async get(resource: string, o: CallOpts = {}): Promise<GetResponse> {
    return this.call((e, co) => e.leases.get({ resource }, co), this.requestTimeoutMs, o.signal);
  }

  /** Every event under prefixes, resuming from the last index seen. */
  watch(prefixes: string[], o: WatchOptions = {}): AsyncGenerator<WatchEvent> {
    return watch(this, prefixes, o);
  }

  /** Ends the lease holding resource (operator), recorded in the audit log with reason. */
  async forceRelease(resource: string, leaseId: bigint, reason: string, o: CallOpts = {}): Promise<void> {
    const requestId = randomHex();
    try {
      await this.call((e, co) => e.admin.forceRelease({ resource, leaseId, reason, requestId }, co), this.requestTimeoutMs, o.signal);
    } catch (err) {
      if (!isCode(fromConnect(err), "not_found")) throw err;
    }
  }
}
