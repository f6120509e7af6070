// Package pgfence guards a Postgres resource with fencing tokens, inside the
// caller's own transaction.
//
// A table (DefaultTable, "leasehold_fence") holds one row per resource with
// its high-water mark: the largest token accepted so far. Guard.Check,
// called in the transaction that does the protected write, accepts the write
// iff its token is >= the mark, raising the mark as it accepts; otherwise it
// returns a *StaleTokenError (errors.Is ErrStaleToken, which is
// leasehold.ErrStaleToken) and the caller rolls back. Because the mark lives
// in the same transaction as the write, the two commit or fail together, and
// the row lock the check takes makes concurrent writers of one resource queue
// up, so an older token can never land after a newer one committed.
//
//	tx, err := pool.Begin(ctx)
//	...
//	defer tx.Rollback(ctx)
//	if err := guard.Check(ctx, tx, "reports/nightly", lease.Token()); err != nil {
//		return err // stale: someone newer holds the lease
//	}
//	... the protected write, on tx ...
//	return tx.Commit(ctx)
//
// The mark only knows tokens it has seen: until a new holder writes, an
// ex-holder's late write still passes. A new holder closes that window by
// calling Guard.Claim, committed, right after acquiring its lease. The
// package fence explains the window and when to prefer leasehold's own
// CheckFence.
//
// Tokens are stored as bigint; a token above MaxToken (2^63-1) is refused
// with an error matching leasehold.ErrInvalid. Token 0, which a degraded
// lease carries, obeys the same rule as any other token.
//
// # Plain SQL
//
// The check is one statement, CheckSQL, usable from any language inside the
// transaction that does the write: it returns one row when the token is
// accepted and zero rows when it is stale (then roll back). CreateTableSQL
// creates the table. Guard runs exactly these statements, so Go and non-Go
// writers of one resource can share the table.
//
//	BEGIN;
//	INSERT INTO leasehold_fence AS f (resource, token, updated_at)
//	VALUES ($1, $2, now())
//	ON CONFLICT (resource) DO UPDATE
//		SET token = excluded.token, updated_at = excluded.updated_at
//		WHERE f.token <= excluded.token
//	RETURNING f.token;
//	-- zero rows: ROLLBACK. One row: the protected write, then COMMIT.
//
// Store runs the same check in a transaction of its own, for the HTTP
// middleware of package httpfence.
package pgfence
