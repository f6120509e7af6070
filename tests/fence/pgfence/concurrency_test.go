package pgfence_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence/pgfence"
)

// TestConcurrentWriters races 16 writers through the guard on one resource
// under READ COMMITTED. Some hold the newest token, some a superseded one.
// Every accepted write also inserts a row in the same transaction; afterwards
// the rows, in commit order, must carry non-decreasing tokens: no older token
// got through after a newer one committed.
//
// Commit order comes from two independent clocks: Postgres's commit
// timestamp of the row's transaction (track_commit_timestamp, set by pgtest),
// and a sequence value the transaction took after its check.
func TestConcurrentWriters(t *testing.T) {
	const (
		writers  = 16
		maxIters = 150             // per writer
		runFor   = 3 * time.Second // whichever ends first
		resource = "hot"
	)
	dsn, conn := migrated(t)
	ctx := testCtx(t, 40*time.Second)
	g := &pgfence.Guard{}

	conns := make([]*pgx.Conn, writers)
	for i := range conns {
		conns[i] = connect(t, dsn)
	}

	var (
		grant              atomic.Uint64 // leasehold's token counter
		accepted, rejected atomic.Int64
		mu                 sync.Mutex
		maxAccepted        uint64
	)
	grant.Store(1)
	deadline := time.Now().Add(runFor)
	var wg sync.WaitGroup
	for w := range writers {
		c := conns[w]
		wg.Go(func() {
			for i := 0; i < maxIters && time.Now().Before(deadline); i++ {
				// Half the time a fresh grant; otherwise a token a few
				// grants old, as held by a holder that was superseded.
				var token uint64
				if rand.IntN(2) == 0 {
					token = grant.Add(1)
				} else if cur := grant.Load(); cur > 3 {
					token = cur - rand.Uint64N(4)
				} else {
					token = cur
				}
				tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
				if err != nil {
					t.Error(err)
					return
				}
				err = g.Check(ctx, tx, resource, token)
				var st *pgfence.StaleTokenError
				if errors.As(err, &st) {
					if st.Current <= token {
						t.Errorf("rejected %d with current %d", token, st.Current)
					}
					rejected.Add(1)
					tx.Rollback(ctx)
					continue
				}
				if err != nil {
					t.Error(err)
					tx.Rollback(ctx)
					return
				}
				if _, err := tx.Exec(ctx, "INSERT INTO writes (resource, token) VALUES ($1, $2)", resource, int64(token)); err != nil {
					t.Error(err)
					tx.Rollback(ctx)
					return
				}
				if rand.IntN(4) == 0 {
					// Linger while holding the row lock, so others queue.
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				accepted.Add(1)
				mu.Lock()
				maxAccepted = max(maxAccepted, token)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d accepted, %d rejected", accepted.Load(), rejected.Load())
	if accepted.Load() == 0 || rejected.Load() == 0 {
		t.Fatalf("the race exercised only one path: %d accepted, %d rejected", accepted.Load(), rejected.Load())
	}

	for _, order := range []string{"pg_xact_commit_timestamp(xmin), seq", "seq"} {
		rows, _ := conn.Query(ctx, "SELECT token FROM writes ORDER BY "+order)
		tokens, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(tokens)) != accepted.Load() {
			t.Fatalf("%d rows for %d accepted writes", len(tokens), accepted.Load())
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] < tokens[i-1] {
				t.Fatalf("ordered by %s, token %d committed after %d (row %d)", order, tokens[i], tokens[i-1], i)
			}
		}
	}
	if m, _, err := g.Current(ctx, conn, resource); err != nil || m != maxAccepted {
		t.Fatalf("final mark %d (%v), want the largest accepted token %d", m, err, maxAccepted)
	}
}
