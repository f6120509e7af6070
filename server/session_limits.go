package server

import (
	"context"
	"net"
	"sync"

	"github.com/leasehold/leasehold/api/leasehold"
)

// sessionCount bounds the session streams open on a node, in all and per
// caller, by the node's connection caps (MaxConns, MaxConnsPerClient):
// streams share HTTP/2 connections, so the connection caps alone would
// not bound them.
type sessionCount struct {
	mu       sync.Mutex
	n        int
	byCaller map[string]int
}

// open counts a new stream of caller, or refuses it over a cap (≤ 0: none).
func (c *sessionCount) open(caller string, max, perCaller int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case max > 0 && c.n >= max:
		return leasehold.Errorf(leasehold.CodeLimit,
			"this node has %d session streams open (limit max_conns); retry on another node", c.n)
	case perCaller > 0 && c.byCaller[caller] >= perCaller:
		return leasehold.Errorf(leasehold.CodeLimit,
			"%q has %d session streams open on this node (limit max_conns_per_client); share one client", caller, c.byCaller[caller])
	}
	if c.byCaller == nil {
		c.byCaller = map[string]int{}
	}
	c.n++
	c.byCaller[caller]++
	return nil
}

// count is the streams open now.
func (c *sessionCount) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *sessionCount) close(caller string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.byCaller[caller]--; c.byCaller[caller] == 0 {
		delete(c.byCaller, caller)
	}
}

// rateKeyOf is the caller's key for the rate limit and the caps: its
// token's name, or its IP address without authentication.
func rateKeyOf(ctx context.Context, peer string) string {
	if k, ok := ctx.Value(rateKey{}).(string); ok {
		return k
	}
	host, _, err := net.SplitHostPort(peer)
	if err != nil {
		return peer
	}
	return host
}
