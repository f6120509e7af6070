// KV: versioned values with compare-and-swap, fenced writes, transactions
// and lease-bound keys.

import { randomHex, type CallOpts, type Core } from "./core.js";
import { fromConnect, isCode } from "./errors.js";
import { CompareOp, type Fence as WireFence } from "./gen/leasehold/v1/kv_pb.js";
import type { Lease } from "./lease.js";

export { CompareOp };

/** A fence names one target; the write applies only while token is current for it. */
export interface Fence {
  token: bigint;
  resource?: string;
  /** A partition of a group, instead of resource. */
  group?: string;
  partition?: number;
  /** A key of a keyed queue, instead of resource. */
  queue?: string;
  key?: string;
}

/** The fence of lease on resource (default: its first resource). */
export function fencedBy(lease: Lease, resource = lease.resources[0]): Fence {
  return { resource, token: lease.token };
}

export interface WriteOptions extends CallOpts {
  /** The key must be at this version (0n: must not exist), else code "version_mismatch". */
  ifVersion?: bigint;
  fence?: Fence;
  /** Bind the key to this lease: it is deleted when the lease ends. */
  bindLease?: Lease;
}

export interface KeyValue {
  value: Uint8Array;
  version: bigint;
  /** The lease the key is bound to (0n: none). */
  leaseId: bigint;
}

export type TxnOp =
  | { put: { key: string; value: Uint8Array | string; lease?: Lease } }
  | { delete: { key: string } };

export interface Compare {
  key: string;
  op: CompareOp;
  version?: bigint;
  value?: Uint8Array | string;
}

export interface TxnRequest extends CallOpts {
  compares: Compare[];
  then?: TxnOp[];
  else?: TxnOp[];
  fence?: Fence;
}

export interface TxnResult {
  succeeded: boolean;
  compares: boolean[];
  results: { key: string; version: bigint }[];
  index: bigint;
}

const bytes = (v: Uint8Array | string): Uint8Array => (typeof v === "string" ? new TextEncoder().encode(v) : v);

function wireFence(f?: Fence): WireFence | undefined {
  if (!f) return undefined;
  return { $typeName: "leasehold.v1.Fence", token: f.token, resource: f.resource ?? "", group: f.group ?? "",
    partition: f.partition ?? 0, queue: f.queue ?? "", key: f.key ?? "" };
}

function wireOp(op: TxnOp) {
  if ("put" in op) {
    const l = op.put.lease;
    return { op: { case: "put" as const, value: { key: op.put.key, value: bytes(op.put.value), leaseId: l?.id ?? 0n, leaseSecret: l?.secret ?? "" } } };
  }
  return { op: { case: "delete" as const, value: { key: op.delete.key } } };
}

export class KVApi {
  constructor(private readonly c: Core) {}

  /** Writes value under key and answers its version (the log index). */
  async put(key: string, value: Uint8Array | string, o: WriteOptions = {}): Promise<bigint> {
    const req = { key, value: bytes(value), ifVersion: o.ifVersion, fence: wireFence(o.fence), requestId: randomHex(),
      leaseId: o.bindLease?.id ?? 0n, leaseSecret: o.bindLease?.secret ?? "" };
    const r = await this.c.call((e, co) => e.kv.put(req, co), this.c.requestTimeoutMs, o.signal);
    return r.version;
  }

  /** Reads key; null if it does not exist. */
  async get(key: string, o: CallOpts = {}): Promise<KeyValue | null> {
    try {
      const r = await this.c.call((e, co) => e.kv.get({ key }, co), this.c.requestTimeoutMs, o.signal);
      return { value: r.value, version: r.version, leaseId: r.leaseId };
    } catch (err) {
      if (isCode(fromConnect(err), "not_found")) return null;
      throw err;
    }
  }

  /** Deletes key and answers the version it had. */
  async delete(key: string, o: WriteOptions = {}): Promise<bigint> {
    const req = { key, ifVersion: o.ifVersion, fence: wireFence(o.fence), requestId: randomHex() };
    const r = await this.c.call((e, co) => e.kv.delete(req, co), this.c.requestTimeoutMs, o.signal);
    return r.version;
  }

  /** Runs then if every compare holds, else else: in one log entry. */
  async txn(t: TxnRequest): Promise<TxnResult> {
    const req = {
      compares: t.compares.map((c) => ({ key: c.key, op: c.op, version: c.version ?? 0n, value: c.value ? bytes(c.value) : new Uint8Array() })),
      thenOps: (t.then ?? []).map(wireOp), elseOps: (t.else ?? []).map(wireOp),
      fence: wireFence(t.fence), requestId: randomHex(),
    };
    const r = await this.c.call((e, co) => e.kv.txn(req, co), this.c.requestTimeoutMs, t.signal);
    return { succeeded: r.succeeded, compares: r.compares, results: r.results.map((x) => ({ key: x.key, version: x.version })), index: r.index };
  }

  /** Every key under prefix in key order, a page at a time. */
  async *list(prefix: string, o: CallOpts = {}): AsyncGenerator<{ key: string } & KeyValue> {
    let pageToken = "";
    do {
      const r = await this.c.call((e, co) => e.kv.list({ prefix, pageToken, pageSize: 1000 }, co), this.c.requestTimeoutMs, o.signal);
      for (const it of r.items) yield { key: it.key, value: it.value, version: it.version, leaseId: it.leaseId };
      pageToken = r.nextPageToken;
    } while (pageToken);
  }

  /**
   * Resolves if token is current for the fence's target right now (like
   * Chubby's CheckSequencer); rejects with code "stale_token" otherwise.
   */
  async checkFence(f: Fence, o: CallOpts = {}): Promise<void> {
    const { $typeName: _, ...req } = wireFence(f)!;
    await this.c.call((e, co) => e.kv.checkFence(req, co), this.c.requestTimeoutMs, o.signal);
  }
}
