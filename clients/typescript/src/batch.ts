// The coalescer sends the acquires, renewals and releases that a client's
// callers make at the same moment in one Leases.Batch request (as the Go
// client's client/batch.go): one round trip and, on the node, one log entry
// and one fsync for all of them. A call made while the line is idle goes out
// at once, alone; while batchInflight requests are out, calls wait and go
// together in the next one. Every op carries its request id, so a batch
// retried after a lost answer acts once.

import type { MessageInitShape } from "@bufbuild/protobuf";

import { randomHex, type Core } from "./core.js";
import { fromBatchError } from "./errors.js";
import type { BatchOpSchema, BatchResult } from "./gen/leasehold/v1/leases_pb.js";

/** How many Batch requests a client keeps out at once (the Go client's batchInflight). */
const batchInflight = 4;

type Op = MessageInitShape<typeof BatchOpSchema>;

interface Pending {
  op: Op;
  resolve(r: BatchResult): void;
  reject(err: unknown): void;
  left: boolean; // the caller gave up: what the op gets is given back
}

export class Coalescer {
  private queue: Pending[] = [];
  private inflight = 0;

  constructor(private readonly c: Core, private readonly max: number) {}

  /** Sends op with whatever else is waiting and answers its result (an error result is thrown). */
  do(op: Op, signal?: AbortSignal): Promise<BatchResult> {
    return new Promise<BatchResult>((resolve, reject) => {
      const p: Pending = { op, resolve, reject, left: false };
      if (signal) {
        if (signal.aborted) return reject(signal.reason);
        signal.addEventListener("abort", () => { p.left = true; reject(signal.reason); }, { once: true });
      }
      this.queue.push(p);
      if (this.inflight < batchInflight) {
        this.inflight++;
        void this.send();
      }
    }).then((r) => {
      if (r.result.case === "error") throw fromBatchError(r.result.value);
      return r;
    });
  }

  // send posts what is waiting, until nothing is; then gives its slot up.
  private async send(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.max);
      try {
        const res = await this.c.call((e, co) => e.leases.batch({ ops: batch.map((p) => p.op) }, co), this.c.requestTimeoutMs);
        batch.forEach((p, i) => {
          const r = res.results[i];
          if (p.left) this.giveBack(p.op, r);
          else p.resolve(r);
        });
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    this.inflight--;
  }

  // giveBack releases a grant whose caller left. (A place in line nobody
  // waits for is withdrawn by the node after its grace.)
  private giveBack(op: Op, r: BatchResult): void {
    if (op.op?.case !== "acquire" || r.result.case !== "acquire") return;
    const req = { leaseId: r.result.value.lease!.id, secret: op.op.value.secret!, requestId: randomHex() };
    void this.c.call((e, co) => e.leases.release(req, co), this.c.requestTimeoutMs).catch(() => {});
  }
}
