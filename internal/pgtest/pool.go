package pgtest

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pool is a minimal fixed-size pool of connections, safe for concurrent use,
// for tests that need what *pgxpool.Pool offers. (pgxpool needs
// github.com/jackc/puddle/v2, which this module does not require; a test
// helper is no reason to add it.) Its Exec, QueryRow and Begin have the
// signatures of *pgxpool.Pool's.
type Pool struct {
	dsn   string
	conns chan *pgx.Conn

	mu  sync.Mutex
	all []*pgx.Conn // every connection opened, to close at cleanup
}

// NewPool opens size connections to dsn and closes them when the test ends.
func NewPool(t testing.TB, dsn string, size int) *Pool {
	t.Helper()
	p := &Pool{dsn: dsn, conns: make(chan *pgx.Conn, size)}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.all {
			c.Close(context.Background())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	for range size {
		c, err := p.connect(ctx)
		if err != nil {
			t.Fatalf("pgtest: pool connect: %v", err)
		}
		p.conns <- c
	}
	return p
}

func (p *Pool) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.all = append(p.all, c)
	p.mu.Unlock()
	return c, nil
}

// get takes a connection from the pool. A connection that broke (pgx closes
// one when a context is canceled mid-query) is replaced by a fresh one, so one
// failed test step does not poison the rest.
func (p *Pool) get(ctx context.Context) (*pgx.Conn, error) {
	var c *pgx.Conn
	select {
	case c = <-p.conns:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !c.IsClosed() {
		return c, nil
	}
	fresh, err := p.connect(ctx)
	if err != nil {
		p.release(c) // keep the slot; the next get tries again
		return nil, err
	}
	return fresh, nil
}

func (p *Pool) release(c *pgx.Conn) { p.conns <- c }

// Exec runs sql on a pooled connection.
func (p *Pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.get(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer p.release(c)
	return c.Exec(ctx, sql, args...)
}

// QueryRow runs sql on a pooled connection, which goes back to the pool when
// the row is scanned.
func (p *Pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.get(ctx)
	if err != nil {
		return errRow{err}
	}
	return &poolRow{row: c.QueryRow(ctx, sql, args...), release: func() { p.release(c) }}
}

// Begin starts a transaction on a pooled connection, which goes back to the
// pool when the transaction commits or rolls back.
func (p *Pool) Begin(ctx context.Context) (pgx.Tx, error) {
	return p.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx is Begin with options, such as the isolation level.
func (p *Pool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.BeginTx(ctx, opts)
	if err != nil {
		p.release(c)
		return nil, err
	}
	pt := &poolTx{Tx: tx}
	pt.release = func() { pt.once.Do(func() { p.release(c) }) }
	return pt, nil
}

type poolTx struct {
	pgx.Tx
	once    sync.Once
	release func()
}

func (t *poolTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.release()
	return err
}

func (t *poolTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.release()
	return err
}

type poolRow struct {
	row     pgx.Row
	release func()
}

func (r *poolRow) Scan(dest ...any) error {
	defer r.release()
	return r.row.Scan(dest...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
