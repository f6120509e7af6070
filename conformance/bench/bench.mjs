// The TypeScript client's acquire+release benchmark: CALLERS async callers
// sharing one client take and give back a lease of their own for SECONDS,
// then it prints the pairs per second as JSON.

import { Client } from "../../clients/typescript/dist/src/index.js";

const [callers, secs] = [Number(process.argv[2]), Number(process.argv[3])];
const c = new Client({ endpoints: [process.env.LEASEHOLD_ENDPOINT] });
let pairs = 0, failures = 0;
const start = performance.now(), end = start + secs * 1000;
await Promise.all(Array.from({ length: callers }, async (_, i) => {
  while (performance.now() < end) {
    try {
      const l = await c.acquire(`bench/typescript/${i}`, { ttlMs: 10_000 });
      await l.release();
      pairs++;
    } catch {
      failures++;
    }
  }
}));
const took = (performance.now() - start) / 1000;
console.log(JSON.stringify({ pairs, failures, seconds: took, per_second: pairs / took }));
c.close();
