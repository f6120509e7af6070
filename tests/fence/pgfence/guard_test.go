package pgfence_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fence/pgfence"
)

func TestMigrateIsIdempotent(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	ctx := testCtx(t, 20*time.Second)
	for i := range 2 {
		if err := pgfence.Migrate(ctx, conn); err != nil {
			t.Fatalf("Migrate #%d: %v", i+1, err)
		}
	}
	// Inside a caller's transaction too, with the table already there.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgfence.Migrate(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Many processes start at once and all migrate: none may fail.
func TestMigrateConcurrently(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx := testCtx(t, 20*time.Second)
	g, err := pgfence.New(pgfence.Table("marks"))
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*pgx.Conn, 6)
	for i := range conns {
		conns[i] = connect(t, dsn)
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			if err := g.Migrate(ctx, c); err != nil {
				t.Errorf("concurrent Migrate: %v", err)
			}
		})
	}
	wg.Wait()
}

// check runs one Check in its own transaction and commits it if accepted.
func check(t *testing.T, ctx context.Context, conn *pgx.Conn, g *pgfence.Guard, resource string, token uint64) error {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := g.Check(ctx, tx, resource, token); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return nil
}

func TestCheckRule(t *testing.T) {
	_, conn := migrated(t)
	ctx := testCtx(t, 20*time.Second)
	type reject struct {
		resource         string
		offered, current uint64
	}
	var rejects []reject
	g, err := pgfence.New(pgfence.OnReject(func(r string, o, c uint64) {
		rejects = append(rejects, reject{r, o, c})
	}))
	if err != nil {
		t.Fatal(err)
	}

	mark := func(res string) uint64 {
		t.Helper()
		m, ok, err := g.Current(ctx, conn, res)
		if err != nil || !ok {
			t.Fatalf("Current(%q) = %d, %v, %v", res, m, ok, err)
		}
		return m
	}

	const r = "orders/42"
	if _, ok, err := g.Current(ctx, conn, r); ok || err != nil {
		t.Fatalf("Current before any check = %v, %v; want no mark", ok, err)
	}
	for _, tok := range []uint64{5, 5, 9} { // first, equal, greater
		if err := check(t, ctx, conn, g, r, tok); err != nil {
			t.Fatalf("Check(%d) = %v, want accepted", tok, err)
		}
		if m := mark(r); m != tok {
			t.Fatalf("mark after Check(%d) = %d", tok, m)
		}
	}

	err = check(t, ctx, conn, g, r, 8)
	var st *pgfence.StaleTokenError
	if !errors.As(err, &st) {
		t.Fatalf("Check(8) after 9 = %v, want *StaleTokenError", err)
	}
	if st.Resource != r || st.Offered != 8 || st.Current != 9 {
		t.Fatalf("StaleTokenError = %+v, want {%s 8 9}", st, r)
	}
	if !errors.Is(err, pgfence.ErrStaleToken) || !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("%v does not match ErrStaleToken", err)
	}
	if m := mark(r); m != 9 {
		t.Fatalf("mark after rejection = %d, want 9", m)
	}
	if len(rejects) != 1 || rejects[0] != (reject{r, 8, 9}) {
		t.Fatalf("OnReject calls = %+v", rejects)
	}

	// Resources are independent.
	if err := check(t, ctx, conn, g, "orders/43", 1); err != nil {
		t.Fatalf("other resource: %v", err)
	}
}

func TestTokenRange(t *testing.T) {
	_, conn := migrated(t)
	ctx := testCtx(t, 20*time.Second)
	g := &pgfence.Guard{} // the zero Guard works
	if err := check(t, ctx, conn, g, "zero", 0); err != nil {
		t.Fatalf("token 0 on a fresh resource: %v", err)
	}
	if err := check(t, ctx, conn, g, "zero", 1); err != nil {
		t.Fatal(err)
	}
	if err := check(t, ctx, conn, g, "zero", 0); !errors.Is(err, pgfence.ErrStaleToken) {
		t.Fatalf("token 0 after 1 = %v, want stale", err)
	}
	if err := check(t, ctx, conn, g, "max", pgfence.MaxToken); err != nil {
		t.Fatalf("MaxToken: %v", err)
	}
	err := check(t, ctx, conn, g, "max", pgfence.MaxToken+1)
	if !errors.Is(err, leasehold.ErrInvalid) || errors.Is(err, pgfence.ErrStaleToken) {
		t.Fatalf("MaxToken+1 = %v, want invalid", err)
	}
	if err := check(t, ctx, conn, g, "max", math.MaxUint64); !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("MaxUint64 = %v, want invalid", err)
	}
}

func TestInvalidResource(t *testing.T) {
	_, conn := migrated(t)
	ctx := testCtx(t, 10*time.Second)
	g := &pgfence.Guard{}
	for _, r := range []string{"", "a\x00b", "tab\there", strings.Repeat("x", leasehold.MaxResourceLen+1), "\xff"} {
		if err := check(t, ctx, conn, g, r, 1); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("Check(%q) = %v, want invalid", r, err)
		}
	}
	long := strings.Repeat("é", leasehold.MaxResourceLen/2)
	if err := check(t, ctx, conn, g, long, 1); err != nil {
		t.Errorf("Check of a %d-byte name: %v", len(long), err)
	}
}

// The check and the protected write commit or fail together.
func TestCheckAndWriteAreAtomic(t *testing.T) {
	_, conn := migrated(t)
	ctx := testCtx(t, 20*time.Second)
	g := &pgfence.Guard{}
	const r = "ledger"

	write := func(token uint64, note string, commit bool) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := g.Check(ctx, tx, r, token); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO writes (resource, token, note) VALUES ($1, $2, $3)", r, token, note); err != nil {
			return err
		}
		if !commit {
			return tx.Rollback(ctx)
		}
		return tx.Commit(ctx)
	}
	notes := func() []string {
		rows, _ := conn.Query(ctx, "SELECT note FROM writes ORDER BY id")
		ns, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(strings.Join(ns, " "))
	}
	mark := func() uint64 {
		m, _, err := g.Current(ctx, conn, r)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	if err := write(3, "a", true); err != nil {
		t.Fatal(err)
	}
	// Accepted, then rolled back: neither the write nor the raise survives.
	if err := write(7, "b", false); err != nil {
		t.Fatal(err)
	}
	if m := mark(); m != 3 {
		t.Fatalf("mark after rolled-back check = %d, want 3", m)
	}
	// Accepted, then the write itself fails (duplicate note): the caller
	// rolls back and the raise goes with it.
	if err := write(8, "a", true); err == nil {
		t.Fatal("duplicate note was accepted")
	}
	if m := mark(); m != 3 {
		t.Fatalf("mark after failed write = %d, want 3", m)
	}
	// So 4 still passes, and after it 3 no longer does.
	if err := write(4, "c", true); err != nil {
		t.Fatalf("write(4): %v", err)
	}
	if err := write(3, "d", true); !errors.Is(err, pgfence.ErrStaleToken) {
		t.Fatalf("write(3) after 4 = %v, want stale", err)
	}
	if got, want := strings.Join(notes(), ","), "a,c"; got != want {
		t.Fatalf("writes = %s, want %s", got, want)
	}
	if m := mark(); m != 4 {
		t.Fatalf("final mark = %d, want 4", m)
	}
}

// The window the package doc describes, and how Claim closes it.
func TestClaimClosesTheWindow(t *testing.T) {
	_, conn := migrated(t)
	ctx := testCtx(t, 10*time.Second)
	g := &pgfence.Guard{}

	// A holds token 5 and wrote; its lease passes to B with token 7.
	if err := check(t, ctx, conn, g, "without-claim", 5); err != nil {
		t.Fatal(err)
	}
	// B has not written yet: A's late write passes. This is the window.
	if err := check(t, ctx, conn, g, "without-claim", 5); err != nil {
		t.Fatalf("late write before the new holder wrote: %v (the window is documented as open)", err)
	}

	if err := check(t, ctx, conn, g, "with-claim", 5); err != nil {
		t.Fatal(err)
	}
	// B claims right after acquiring, directly on the connection: one
	// statement commits by itself.
	if err := g.Claim(ctx, conn, "with-claim", 7); err != nil {
		t.Fatal(err)
	}
	if err := check(t, ctx, conn, g, "with-claim", 5); !errors.Is(err, pgfence.ErrStaleToken) {
		t.Fatalf("late write after the claim = %v, want stale", err)
	}
	// A claim by an older holder, after the newer one claimed, fails.
	if err := g.Claim(ctx, conn, "with-claim", 6); !errors.Is(err, pgfence.ErrStaleToken) {
		t.Fatalf("older claim = %v, want stale", err)
	}
}

func TestTableOption(t *testing.T) {
	for _, bad := range []string{"", "Fence", "1fence", "fence-table", "a.b.c", "x;drop table y", `"q"`, ".t", "t.", strings.Repeat("t", 64)} {
		if _, err := pgfence.New(pgfence.Table(bad)); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("Table(%q): err = %v, want invalid", bad, err)
		}
	}

	conn := connect(t, srv.NewDatabase(t))
	ctx := testCtx(t, 20*time.Second)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA fencing"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fencing.marks", "user", strings.Repeat("t", 63)} {
		g, err := pgfence.New(pgfence.Table(name))
		if err != nil {
			t.Fatalf("Table(%q): %v", name, err)
		}
		if g.TableName() != name {
			t.Fatalf("TableName = %q", g.TableName())
		}
		for range 2 {
			if err := g.Migrate(ctx, conn); err != nil {
				t.Fatalf("Migrate %s: %v", name, err)
			}
		}
		if err := check(t, ctx, conn, g, "r", 2); err != nil {
			t.Fatal(err)
		}
		if err := check(t, ctx, conn, g, "r", 1); !errors.Is(err, pgfence.ErrStaleToken) {
			t.Fatalf("%s: Check(1) after 2 = %v", name, err)
		}
	}
	// Each table kept its own mark; the default table was never made.
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = $1", pgfence.DefaultTable).Scan(&n); err != nil || n != 0 {
		t.Fatalf("default table exists (%d, %v)", n, err)
	}
}

// The plain-SQL form, run as a non-Go client would, behaves like Check and
// shares the guard's table.
func TestPlainSQL(t *testing.T) {
	_, conn := migrated(t)
	ctx := testCtx(t, 10*time.Second)
	g := &pgfence.Guard{}

	plain := func(resource string, token int64) (accepted bool) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		rows, _ := tx.Query(ctx, pgfence.CheckSQL, resource, token)
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return false // stale: roll back
		}
		if len(got) != 1 || got[0] != token {
			t.Fatalf("CheckSQL returned %v", got)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return true
	}
	if !plain("p", 10) || !plain("p", 10) || plain("p", 9) {
		t.Fatal("plain SQL does not follow the rule")
	}
	if err := check(t, ctx, conn, g, "p", 9); !errors.Is(err, pgfence.ErrStaleToken) {
		t.Fatalf("guard after plain SQL: %v", err)
	}
	if err := check(t, ctx, conn, g, "p", 11); err != nil {
		t.Fatal(err)
	}
	if plain("p", 10) {
		t.Fatal("plain SQL accepted 10 after the guard accepted 11")
	}
}

func TestStore(t *testing.T) {
	dsn, _ := migrated(t)
	ctx := testCtx(t, 10*time.Second)
	var rejected int
	g, _ := pgfence.New(pgfence.OnReject(func(string, uint64, uint64) { rejected++ }))
	s := pgfence.NewStore(connect(t, dsn), g)
	steps := []struct {
		token, current uint64
		ok             bool
	}{{4, 4, true}, {4, 4, true}, {3, 4, false}, {6, 6, true}, {5, 6, false}}
	for _, st := range steps {
		cur, ok, err := s.Advance(ctx, "s", st.token)
		if err != nil || ok != st.ok || cur != st.current {
			t.Fatalf("Advance(%d) = %d, %v, %v; want %d, %v", st.token, cur, ok, err, st.current, st.ok)
		}
	}
	if rejected != 2 {
		t.Fatalf("OnReject called %d times, want 2", rejected)
	}
	if _, _, err := s.Advance(ctx, "s", math.MaxUint64); !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("Advance(MaxUint64) = %v, want invalid", err)
	}
}
