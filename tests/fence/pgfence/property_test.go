package pgfence_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/fence/pgfence"
)

// An op is one writer's attempt: a transaction that checks its token and, if
// accepted, does the protected write, then commits, or rolls back anyway when
// abort is set (the caller's write failed for its own reasons).
type op struct {
	Writer   int
	Resource int
	Token    uint64
	Via      string // "check", "claim" or "sql" (the plain-SQL form)
	Abort    bool
}

func opGen(writers, resources int) *rapid.Generator[op] {
	return rapid.Custom(func(t *rapid.T) op {
		return op{
			Writer:   rapid.IntRange(0, writers-1).Draw(t, "writer"),
			Resource: rapid.IntRange(0, resources-1).Draw(t, "resource"),
			// Small tokens collide often (equal, just below, just above);
			// the top of the range checks the bigint edge.
			Token: rapid.OneOf(
				rapid.Uint64Range(0, 12),
				rapid.Uint64Range(pgfence.MaxToken-2, pgfence.MaxToken),
			).Draw(t, "token"),
			Via:   rapid.SampledFrom([]string{"check", "check", "claim", "sql"}).Draw(t, "via"),
			Abort: rapid.IntRange(0, 5).Draw(t, "abort") == 0,
		}
	})
}

// TestGuardProperty: over random interleavings of writers with random tokens,
// the guard accepts exactly the writes whose token is >= every token accepted
// (and committed) before on that resource, and the table holds exactly the
// accepted, committed writes.
func TestGuardProperty(t *testing.T) {
	_, conn := migrated(t)
	ctx := testCtx(t, 40*time.Second)
	var rejects int
	g, err := pgfence.New(pgfence.OnReject(func(string, uint64, uint64) { rejects++ }))
	if err != nil {
		t.Fatal(err)
	}
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		// Fresh resource names per iteration instead of a fresh database:
		// much cheaper, and marks of other iterations cannot interfere.
		names := []string{
			fmt.Sprintf("it%d/a", iteration),
			fmt.Sprintf("it%d/b c;d=e", iteration),
		}
		ops := rapid.SliceOfN(opGen(3, len(names)), 1, 16).Draw(rt, "ops")

		mark := map[string]uint64{} // the model: mark per resource, if any
		type write struct {
			Resource string
			Token    uint64
		}
		var want []write
		rejects = 0
		wantRejects := 0

		for i, o := range ops {
			res := names[o.Resource]
			m, has := mark[res]
			accept := !has || o.Token >= m

			tx, err := conn.Begin(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			var cerr error
			switch o.Via {
			case "check":
				cerr = g.Check(ctx, tx, res, o.Token)
			case "claim":
				cerr = g.Claim(ctx, tx, res, o.Token)
			case "sql":
				rows, _ := tx.Query(ctx, pgfence.CheckSQL, res, int64(o.Token))
				got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					rt.Fatal(err)
				}
				if len(got) == 0 {
					cerr = &pgfence.StaleTokenError{Resource: res, Offered: o.Token, Current: m}
				}
			}

			if !accept {
				var st *pgfence.StaleTokenError
				if !errors.As(cerr, &st) || st.Resource != res || st.Offered != o.Token || st.Current != m {
					rt.Fatalf("op %d %+v: mark %d: got %v, want stale with current %d", i, o, m, cerr, m)
				}
				if o.Via != "sql" {
					wantRejects++
				}
				tx.Rollback(ctx)
				continue
			}
			if cerr != nil {
				tx.Rollback(ctx)
				rt.Fatalf("op %d %+v: mark %d (set %v): rejected: %v", i, o, m, has, cerr)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO writes (resource, token) VALUES ($1, $2)", res, int64(o.Token)); err != nil {
				rt.Fatal(err)
			}
			if o.Abort {
				if err := tx.Rollback(ctx); err != nil {
					rt.Fatal(err)
				}
				continue
			}
			if err := tx.Commit(ctx); err != nil {
				rt.Fatal(err)
			}
			mark[res] = o.Token
			want = append(want, write{res, o.Token})
		}

		for _, res := range names {
			got, ok, err := g.Current(ctx, conn, res)
			m, has := mark[res]
			if err != nil || ok != has || got != m {
				rt.Fatalf("Current(%q) = %d, %v, %v; model %d, %v", res, got, ok, err, m, has)
			}
		}
		rows, _ := conn.Query(ctx, "SELECT resource, token FROM writes WHERE resource = ANY($1) ORDER BY id", names)
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (write, error) {
			var w write
			var tok int64
			err := r.Scan(&w.Resource, &tok)
			w.Token = uint64(tok)
			return w, err
		})
		if err != nil {
			rt.Fatal(err)
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("writes = %v, want %v", got, want)
		}
		if rejects != wantRejects {
			rt.Fatalf("OnReject called %d times, want %d", rejects, wantRejects)
		}
	})
}
