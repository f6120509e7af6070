// leasehold's TypeScript client for Node.

export { Client } from "./client.js";
export type { ClientConfig, CallOpts, Logger } from "./core.js";
export { LeaseholdError, LeaseLostError, LeaseReleasedError, isCode, type ErrorCode, type LostReason } from "./errors.js";
export { Lease, type AcquireOptions } from "./lease.js";
export { CompareOp, fencedBy, type Fence, type WriteOptions, type KeyValue, type TxnOp, type Compare, type TxnRequest, type TxnResult } from "./kv.js";
export type { WatchEvent, WatchOptions } from "./watch.js";
export { Leadership, type Election } from "./elections.js";
export { ConsumedMessage, DeadLetterMode, DrainingError, VisibilityLostError, type ConsumeOptions, type Delivery, type Message, type QueueSettings, type ReceiveOptions } from "./queues.js";
export { Attempt, FingerprintMismatchError, InProgressError, fingerprintOf, type BeginOptions, type BeginResult } from "./idempotency.js";
export { idempotencyMiddleware, idempotencyKeyHeader, replayedHeader, type IdempotencyMiddlewareConfig, type IdempotentRequest } from "./middleware.js";
export { fenceHeader, fenceHeaderValue, fencedFetch, pgFenceCheck, pgFenceTableSQL, type Queryable, type TokenSource } from "./fence.js";
