package main

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// pool lends out up to cap(conns) Postgres connections, made as needed:
// enough for one transaction per handler running, without pulling in a
// pool library for an example.
type pool struct {
	dsn   string
	conns chan *pgx.Conn // idle ones
	slots chan struct{}  // one per connection lent or idle
}

func newPool(dsn string, size int) *pool {
	return &pool{dsn: dsn, conns: make(chan *pgx.Conn, size), slots: make(chan struct{}, size)}
}

// with runs f on a connection; a connection f failed on is closed, not
// kept, since it may be broken.
func (p *pool) with(ctx context.Context, f func(*pgx.Conn) error) error {
	var c *pgx.Conn
	select {
	case c = <-p.conns:
	case p.slots <- struct{}{}:
		var err error
		if c, err = pgx.Connect(ctx, p.dsn); err != nil {
			<-p.slots
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	err := f(c)
	if err != nil {
		c.Close(context.WithoutCancel(ctx))
		<-p.slots
		return err
	}
	p.conns <- c
	return nil
}

func (p *pool) close() {
	for {
		select {
		case c := <-p.conns:
			c.Close(context.Background())
		default:
			return
		}
	}
}
