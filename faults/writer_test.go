package faults

import (
	"context"

	"github.com/leasehold/leasehold/client"
)

// writer is where a client process's fenced writes go: leasehold's own KV
// (fenced by the resource's holder), or a Postgres table behind pgfence.
type writer interface {
	// write stores key under resource's token and returns where it landed
	// (the KV version, the row id).
	write(ctx context.Context, key, resource string, token uint64) (uint64, error)
}

type kvWriter struct{ c *client.Client }

func (w kvWriter) write(ctx context.Context, key, resource string, token uint64) (uint64, error) {
	return w.c.Put(ctx, key, []byte(key), client.Fence(resource, token))
}

// newWriter is a Postgres writer if dsn is set, else the KV one.
func newWriter(ctx context.Context, c *client.Client, dsn string) (writer, error) {
	if dsn == "" {
		return kvWriter{c}, nil
	}
	return newPGWriter(ctx, dsn)
}
