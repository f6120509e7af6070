package main

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/procs"
	"github.com/leasehold/leasehold/internal/testutil"
)

// A 3-node cluster of real `leasehold serve` processes, so a leader can be
// SIGKILLed.

// serveLeader is the node that leads now, as the cluster reports it.
func serveLeader(t *testing.T, nodes []*procs.ServeNode, c *client.Client) *procs.ServeNode {
	t.Helper()
	var found *procs.ServeNode
	testutil.Eventually(t, 60*time.Second, "the cluster has a leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		members, err := c.Members(ctx)
		if err != nil {
			return false
		}
		for _, m := range members {
			for _, n := range nodes {
				if m.Leader && m.ID == n.ID && !n.Exited() { // a dead node may still be listed as leader
					found = n
					return true
				}
			}
		}
		return false
	})
	return found
}
