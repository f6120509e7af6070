package faults

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fence/pgfence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/testutil"
)

// downstreamTable is the protected resource of TestDownstreamWriteFromExpiredOwner:
// rows in commit order (id), each with the token it was written under.
const downstreamTable = `CREATE TABLE downstream (id bigserial PRIMARY KEY, key text NOT NULL, token bigint NOT NULL)`

// pgWriter writes a row to downstream in a transaction that pgfence checks
// first.
type pgWriter struct {
	dsn   string
	conn  *pgx.Conn
	guard *pgfence.Guard
}

// idleTxTimeout ends the session of a writer stopped inside its
// transaction (Postgres's idle_in_transaction_session_timeout), as
// examples/ledger does: its row lock on the fence's mark would otherwise
// keep the next holder from claiming the resource until the test's end.
const idleTxTimeout = listTTL

func newPGWriter(ctx context.Context, dsn string) (writer, error) {
	w := &pgWriter{dsn: dsn, guard: &pgfence.Guard{}}
	return w, w.connect(ctx)
}

func (w *pgWriter) connect(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(w.dsn)
	if err != nil {
		return err
	}
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(idleTxTimeout.Milliseconds(), 10)
	w.conn, err = pgx.ConnectConfig(ctx, cfg)
	return err
}

func (w *pgWriter) write(ctx context.Context, key, resource string, token uint64) (uint64, error) {
	if w.conn.IsClosed() { // its session ended while it was stopped: its next write goes to the fence again
		if err := w.connect(ctx); err != nil {
			return 0, err
		}
	}
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := w.guard.Check(ctx, tx, resource, token); err != nil {
		return 0, err
	}
	var id uint64
	if err := tx.QueryRow(ctx, `INSERT INTO downstream (key, token) VALUES ($1, $2) RETURNING id`, key, int64(token)).Scan(&id); err != nil {
		return 0, err
	}
	return id, tx.Commit(ctx)
}

// TestDownstreamWriteFromExpiredOwner pauses a client process that writes
// to Postgres through pgfence until its lease expires and the next holder
// has claimed the resource there: when it wakes, every write it makes with
// its old token is refused by the database, and the table holds the
// writes in token order.
func TestDownstreamWriteFromExpiredOwner(t *testing.T) {
	db := pgtest.Start(t)
	dsn := db.NewDatabase(t)
	ctx := testutil.Context(t, time.Minute)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, downstreamTable); err != nil {
		t.Fatal(err)
	}
	if err := pgfence.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	n := startOne(t)
	c := newClient(t, "", n.url)
	const r = "list/downstream"
	old, err := startWritingClient(t, r, []*node{n}, clientOpts{TTL: listTTL, PG: dsn})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next, err := c.Acquire(ctx, r, client.TTL(time.Minute), client.Wait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(context.WithoutCancel(ctx))
	// The new holder claims the resource at the database before it works
	// (pgfence's Claim): from then on the old token is below the mark.
	guard := &pgfence.Guard{}
	if err := guard.Claim(ctx, conn, r, next.Token()); err != nil {
		t.Fatal(err)
	}
	w := pgWriter{conn: conn, guard: guard}
	if _, err := w.write(ctx, r+"/next", r, next.Token()); err != nil {
		t.Fatal(err)
	}
	before := old.output()
	if err := old.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err = old.waitOutput(progressTimeout, "written 3 times after waking", func(o clientOutput) bool {
		return len(o.acks)+o.refused >= len(before.acks)+before.refused+3
	})
	old.Kill()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT id, token FROM downstream ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var high int64
	for rows.Next() {
		var id, token int64
		if err := rows.Scan(&id, &token); err != nil {
			t.Fatal(err)
		}
		if token < high {
			t.Errorf("row %d was written under the expired owner's token %d after the next holder's %d", id, token, high)
		}
		high = max(high, token)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if uint64(high) != next.Token() {
		t.Errorf("the newest row's token is %d, want the new holder's %d", high, next.Token())
	}
}
