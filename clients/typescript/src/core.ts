// The core of the client: endpoints, retries with request ids, and the
// safe deadline (invariant 3). Each primitive's calls live in a file of its
// own, and client.ts puts them together.

import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient, type CallOptions, type Client as ServiceClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

import { Admin } from "./gen/leasehold/v1/admin_pb.js";
import { Elections } from "./gen/leasehold/v1/elections_pb.js";
import { Idempotency } from "./gen/leasehold/v1/idempotency_pb.js";
import { KV } from "./gen/leasehold/v1/kv_pb.js";
import { Leases } from "./gen/leasehold/v1/leases_pb.js";
import { Queues } from "./gen/leasehold/v1/queues_pb.js";
import { Watch } from "./gen/leasehold/v1/watch_pb.js";
import { Coalescer } from "./batch.js";
import { fromConnect, LeaseholdError } from "./errors.js";

/** Configures a Client. Only endpoints is required. */
export interface ClientConfig {
  /** Base URLs of leasehold nodes ("http://127.0.0.1:7420"). Calls move to the next when one is unavailable. */
  endpoints: string[];
  /** Bearer token sent with every request, if the cluster requires one. */
  token?: string;
  /** Subtracted from every expiry a node reports, on top of driftRatio of it (default 10ms). */
  driftMs?: number;
  /** The share of each reported expiry treated as unsafe (default 0.02). */
  driftRatio?: number;
  /** Bounds one attempt of a call that does not wait (default 5000ms). */
  requestTimeoutMs?: number;
  /** "1.1" (default: works through any proxy) or "2" (h2c on http://). */
  httpVersion?: "1.1" | "2";
  /**
   * The most acquires, renewals and releases sent together in one
   * Leases.Batch request (default 128): calls made while earlier requests
   * are out go together in the next one, sharing one round trip and one
   * commit on the node. 1 sends each as a call of its own.
   */
  maxBatch?: number;
  /** Receives warnings about lost and degraded leases and failed renewals (default: none). */
  logger?: Logger;
}

export interface Logger {
  warn(message: string, attrs?: Record<string, unknown>): void;
}

/** Per-call options: a signal that ends the call (and its retries). */
export interface CallOpts {
  signal?: AbortSignal;
}

// One node's service clients.
export interface Endpoint {
  url: string;
  leases: ServiceClient<typeof Leases>;
  kv: ServiceClient<typeof KV>;
  watch: ServiceClient<typeof Watch>;
  elections: ServiceClient<typeof Elections>;
  queues: ServiceClient<typeof Queues>;
  idem: ServiceClient<typeof Idempotency>;
  admin: ServiceClient<typeof Admin>;
}

/** The header naming the leader, so the client can save a forwarding hop. */
const leaderHeader = "leasehold-leader";

/** Something that stops when the client closes (a lease's renewal). */
export interface Closer {
  closeByClient(): void;
}

/** The connection to a cluster that every primitive's calls go through. */
export class Core {
  readonly driftMs: number;
  readonly driftRatio: number;
  readonly requestTimeoutMs: number;
  readonly log: Logger;
  /** Sends lease ops together (undefined with maxBatch 1). */
  readonly batch: Coalescer | undefined;
  private readonly nodes: Endpoint[];
  private cur = 0;
  private closed = false;
  private readonly held = new Set<Closer>();

  constructor(cfg: ClientConfig) {
    if (!cfg.endpoints?.length) throw new LeaseholdError("invalid", "client: at least one endpoint is required");
    this.driftMs = cfg.driftMs ?? 10;
    this.driftRatio = cfg.driftRatio ?? 0.02;
    this.requestTimeoutMs = cfg.requestTimeoutMs ?? 5000;
    this.log = cfg.logger ?? { warn() {} };
    const maxBatch = cfg.maxBatch ?? 128;
    if (maxBatch < 1 || maxBatch > 256) throw new LeaseholdError("invalid", `client: maxBatch ${maxBatch} must be 1 to 256`);
    this.batch = maxBatch > 1 ? new Coalescer(this, maxBatch) : undefined;
    const interceptors: Interceptor[] = [];
    if (cfg.token) {
      const token = cfg.token;
      interceptors.push((next) => (req) => {
        req.header.set("Authorization", `Bearer ${token}`);
        return next(req);
      });
    }
    this.nodes = cfg.endpoints.map((raw) => {
      const url = raw.trim().replace(/\/+$/, "");
      if (!/^https?:\/\//.test(url)) {
        throw new LeaseholdError("invalid", `client: endpoint "${url}" must start with http:// or https://`);
      }
      const transport = createConnectTransport({ baseUrl: url, httpVersion: cfg.httpVersion ?? "1.1", interceptors });
      return {
        url,
        leases: createClient(Leases, transport), kv: createClient(KV, transport),
        watch: createClient(Watch, transport), elections: createClient(Elections, transport),
        queues: createClient(Queues, transport), idem: createClient(Idempotency, transport),
        admin: createClient(Admin, transport),
      };
    });
  }

  /**
   * The local safe deadline (invariant 3): expiresInMs counted from sentAt,
   * a performance.now() read before the request was sent, less the drift
   * allowance, so it is never later than the node's expiry.
   */
  safeDeadline(sentAt: number, expiresInMs: number): number {
    return sentAt + expiresInMs - (this.driftMs + expiresInMs * this.driftRatio);
  }

  /**
   * Runs f against the current endpoint, moving to the next and trying
   * again while the answer is unavailable (no leader, or no answer at all),
   * until signal ends. The request f sends is the same on every attempt, so
   * its request id makes a retry answer as the first attempt did. perTryMs
   * bounds each attempt.
   */
  async call<T>(f: (e: Endpoint, o: CallOptions) => Promise<T>, perTryMs: number, signal?: AbortSignal): Promise<T> {
    if (this.closed) throw new LeaseholdError("canceled", "client: closed");
    let backoff = 20;
    for (;;) {
      const i = this.cur % this.nodes.length;
      let leader: string | null = null;
      try {
        // timeoutMs bounds the attempt (connect clears its timer when the
        // call ends) and tells the node how long the caller waits.
        const res = await f(this.nodes[i], { signal, timeoutMs: Math.max(1, Math.floor(perTryMs)),
          onHeader: (h) => { leader = h.get(leaderHeader); } });
        this.follow(leader);
        return res;
      } catch (err) {
        if (signal?.aborted) throw signal.reason ?? fromConnect(err);
        const e = fromConnect(err);
        if (e.code !== "unavailable" || this.closed) throw e;
        if (this.nodes.length > 1 && this.cur % this.nodes.length === i) this.cur = (i + 1) % this.nodes.length;
        await sleep(backoff, undefined, { signal }).catch(() => { throw signal?.reason ?? e; });
        backoff = Math.min(2 * backoff, 1000);
      }
    }
  }

  /** Each node's service clients, for a stream that resumes on the next node. */
  endpoint(): Endpoint {
    return this.nodes[this.cur % this.nodes.length];
  }

  /** Moves to the next node after endpoint e failed. */
  moveOn(e: Endpoint): void {
    if (this.nodes[this.cur % this.nodes.length] === e) this.cur = (this.cur + 1) % this.nodes.length;
  }

  private follow(leader: string | null): void {
    if (!leader) return;
    const i = this.nodes.findIndex((n) => n.url === leader.replace(/\/+$/, ""));
    if (i >= 0) this.cur = i;
  }

  /** Registers something to stop on close (false if already closed). */
  track(c: Closer): boolean {
    if (this.closed) return false;
    this.held.add(c);
    return true;
  }

  untrack(c: Closer): void {
    this.held.delete(c);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * Stops renewing the leases still held, which end at once (lost, reason
   * "closed") but are not released: release them first. Calls after close
   * fail. Idempotent.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const c of [...this.held]) c.closeByClient();
    this.held.clear();
  }
}

/** A signal that aborts after ms (rounded down: never later than asked). */
export function timeoutSignal(ms: number): AbortSignal {
  return AbortSignal.timeout(Math.max(0, Math.floor(ms)));
}

/** A fresh request id (or lease secret): n random bytes in hex. */
export function randomHex(n = 16): string {
  return randomBytes(n).toString("hex");
}
