package pgtest_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
)

var shared *pgtest.Server

func TestMain(m *testing.M) {
	var stop func()
	shared, stop = pgtest.StartMain()
	code := m.Run()
	stop()
	os.Exit(code)
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestSharedServer(t *testing.T) {
	if err := shared.Err(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var version string
	if err := connect(t, shared.DSN()).QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("server_version %s on port %d", version, shared.Port())

	// Each database is fresh and separate from the others.
	a, b := shared.NewDatabase(t), shared.NewDatabase(t)
	if a == b {
		t.Fatalf("NewDatabase returned %q twice", a)
	}
	ca, cb := connect(t, a), connect(t, b)
	if _, err := ca.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("table created in one database is visible in another")
	}
}

func TestListensOnLoopbackOnly(t *testing.T) {
	if err := shared.Err(); err != nil {
		t.Fatal(err)
	}
	var addrs string
	if err := connect(t, shared.DSN()).QueryRow(context.Background(), "SHOW listen_addresses").Scan(&addrs); err != nil {
		t.Fatal(err)
	}
	if addrs != "127.0.0.1" {
		t.Fatalf("listen_addresses = %q, want 127.0.0.1", addrs)
	}
}

// TestStartStop starts a second server, stops it, and checks that it no
// longer answers.
func TestStartStop(t *testing.T) {
	srv := pgtest.Start(t)
	c := connect(t, srv.NewDatabase(t))
	if _, err := c.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port())), time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("port %d still accepts connections after Stop", srv.Port())
	}
}

func TestPool(t *testing.T) {
	if err := shared.Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := pgtest.NewPool(t, shared.NewDatabase(t), 4)
	if _, err := p.Exec(ctx, "CREATE TABLE n (v int)"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			tx, err := p.Begin(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "INSERT INTO n VALUES ($1)", i); err != nil {
				t.Error(err)
				return
			}
			if err := tx.Commit(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var n int
	if err := p.QueryRow(ctx, "SELECT count(*) FROM n").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 16 {
		t.Fatalf("count = %d, want 16", n)
	}
}
