// Watch: the changes a node applies, as an async iterator that resumes
// from the last index it saw (on the next node when one fails).

import { setTimeout as sleep } from "node:timers/promises";

import type { Core, Endpoint } from "./core.js";
import { fromConnect } from "./errors.js";
import type { WatchEvent } from "./gen/leasehold/v1/watch_pb.js";

export type { WatchEvent };

export interface WatchOptions {
  /** Start after this log index: every event after it comes. Default: from now. */
  fromIndex?: bigint;
  /** Include renewals (left out by default: they are many). */
  renewed?: boolean;
  /** Ends the iteration. */
  signal?: AbortSignal;
}

/**
 * resumable runs open(e, from) against the current node and yields what it
 * streams; when the stream breaks (unavailable) it opens it again on the
 * next node from the last index seen, so nothing is missed or repeated.
 */
export async function* resumable<R extends { index: bigint }>(c: Core, from: bigint | undefined, signal: AbortSignal | undefined,
  open: (e: Endpoint, from: bigint | undefined, signal?: AbortSignal) => AsyncIterable<R>): AsyncGenerator<R> {
  let backoff = 20;
  for (;;) {
    const e = c.endpoint();
    try {
      for await (const r of open(e, from, signal)) {
        backoff = 20;
        from = r.index;
        yield r;
      }
    } catch (err) {
      if (signal?.aborted) return;
      const le = fromConnect(err);
      if (le.code !== "unavailable") throw le;
      c.moveOn(e);
    }
    if (signal?.aborted) return;
    await sleep(backoff, undefined, { signal }).catch(() => {});
    backoff = Math.min(2 * backoff, 1000);
  }
}

/** Every event under prefixes ("" watches everything), each with its log index. */
export async function* watch(c: Core, prefixes: string[], o: WatchOptions = {}): AsyncGenerator<WatchEvent> {
  const stream = resumable(c, o.fromIndex, o.signal, (e, fromIndex, signal) =>
    e.watch.watch({ prefixes, fromIndex, renewed: o.renewed ?? false }, { signal }));
  for await (const r of stream) yield* r.events;
}
