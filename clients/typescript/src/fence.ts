// Fencing at the resource: the header a fenced HTTP service checks
// (fence/httpfence), a fetch that sends it, and the Postgres guard's SQL
// (fence/pgfence) for any client with a query(text, values) method, such as
// pg's Client or PoolClient, run inside the caller's own transaction.

import { LeaseholdError } from "./errors.js";

/** The header fence/httpfence reads. */
export const fenceHeader = "Leasehold-Fence";

/** Something with a token and resources: a Lease, a Leadership, an Attempt. */
export interface TokenSource {
  readonly token: bigint;
}

/** The header's value for resource and token. */
export function fenceHeaderValue(resource: string, token: bigint): string {
  return `resource=${resource}; token=${token}`;
}

/**
 * A fetch that sends every request with the Leasehold-Fence header of
 * source's current token for resource. A stale token is answered 409 by
 * the service (its JSON body says "stale_token").
 */
export function fencedFetch(source: TokenSource, resource: string, f: typeof fetch = fetch): typeof fetch {
  return (input, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set(fenceHeader, fenceHeaderValue(resource, source.token));
    return f(input, { ...init, headers });
  };
}

/** What the Postgres guard needs of a connection: pg's Client and PoolClient have it. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null }>;
}

/** The table pgfence makes; the same for every language. */
export const pgFenceTableSQL = `CREATE TABLE IF NOT EXISTS leasehold_fence (
  resource text PRIMARY KEY, token bigint NOT NULL CHECK (token >= 0),
  updated_at timestamptz NOT NULL DEFAULT now())`;

const pgFenceCheckSQL = `INSERT INTO leasehold_fence AS f (resource, token, updated_at) VALUES ($1, $2, now())
ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = excluded.updated_at
  WHERE f.token <= excluded.token
RETURNING f.token`;

/**
 * Checks token for resource and records it, inside the caller's
 * transaction: run it before the protected write, in the same transaction.
 * A stale token (a newer one was recorded) rejects with code "stale_token":
 * roll back.
 */
export async function pgFenceCheck(tx: Queryable, resource: string, token: bigint): Promise<void> {
  const r = await tx.query(pgFenceCheckSQL, [resource, token.toString()]);
  if (!r.rowCount) {
    throw new LeaseholdError("stale_token", `stale fencing token ${token} for "${resource}": a newer holder has written`);
  }
}
