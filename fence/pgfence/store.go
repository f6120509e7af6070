package pgfence

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Beginner starts transactions: *pgxpool.Pool does, and so does *pgx.Conn,
// though a Conn is not safe for concurrent use and so cannot back a Store
// that serves concurrent requests.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store keeps marks in Postgres for a checker that is not itself a Postgres
// transaction, such as the HTTP middleware: it satisfies httpfence.Store.
// Each Advance is a transaction of its own, so the mark is durable and shared
// by every process using the table, but (as with any store outside the
// protected write's transaction) it is raised whether or not the write that
// follows succeeds.
type Store struct {
	db    Beginner
	guard *Guard
}

// NewStore makes a Store running g's statements on db. A nil g is the zero
// Guard: DefaultTable and no rejection callback.
func NewStore(db Beginner, g *Guard) *Store {
	if g == nil {
		g = &Guard{}
	}
	return &Store{db: db, guard: g}
}

// Advance applies the rule in a transaction of its own: if token is >= the
// resource's mark it raises the mark and returns (token, true, nil),
// otherwise it returns (mark, false, nil). Errors are Postgres's, or match
// leasehold.ErrInvalid for a bad name or a token above MaxToken.
func (s *Store) Advance(ctx context.Context, resource string, token uint64) (current uint64, ok bool, err error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("pgfence: begin: %w", err)
	}
	// Rollback after a commit is a no-op; after anything else it is the
	// point. If ctx is done, pgx closes the connection instead, which ends
	// the transaction just the same.
	defer tx.Rollback(ctx)
	current, ok, err = s.guard.advance(ctx, tx, resource, token)
	if err != nil || !ok {
		return current, ok, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, fmt.Errorf("pgfence: commit: %w", err)
	}
	return current, true, nil
}
