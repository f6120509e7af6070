package pgfence_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence/pgfence"
	"github.com/leasehold/leasehold/internal/pgtest"

	"github.com/leasehold/leasehold/internal/testutil"
)

// srv is one Postgres for the whole package; each test takes a fresh
// database on it.
var srv *pgtest.Server

func TestMain(m *testing.M) {
	var stop func()
	srv, stop = pgtest.StartMain()
	code := m.Run()
	stop()
	os.Exit(code)
}

// exampleDatabase creates a fresh database for an example, which has no
// *testing.T for srv.NewDatabase. The server's removal cleans it up.
func exampleDatabase(ctx context.Context) string {
	if err := srv.Err(); err != nil {
		panic(err)
	}
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("example_%d", exampleSeq.Add(1))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		panic(err)
	}
	return srv.DatabaseDSN(name)
}

var exampleSeq atomic.Int64

// testCtx bounds a test's database work, so a lock wait that never ends fails
// the test instead of hanging it.
var testCtx = testutil.Context

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// migrated returns the DSN of a fresh database with the default table and a
// "writes" table standing for the protected resource.
func migrated(t testing.TB) (dsn string, conn *pgx.Conn) {
	t.Helper()
	dsn = srv.NewDatabase(t)
	conn = connect(t, dsn)
	ctx := testCtx(t, 10*time.Second)
	if err := pgfence.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		CREATE SEQUENCE write_seq;
		CREATE TABLE writes (
			id       bigserial PRIMARY KEY,
			resource text   NOT NULL,
			token    bigint NOT NULL,
			seq      bigint NOT NULL DEFAULT nextval('write_seq'),
			note     text   UNIQUE
		)`); err != nil {
		t.Fatal(err)
	}
	return dsn, conn
}
