package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/procs"
	"github.com/leasehold/leasehold/internal/testutil"
)

// serveNode is one `leasehold serve` process of a 3-node cluster.
type serveNode struct {
	id, url string
	*procs.Proc
}

// startServeCluster starts three serve processes bootstrapped from one peer
// list and waits until each answers /readyz.
func startServeCluster(t *testing.T, dir string) []*serveNode {
	t.Helper()
	nodes := make([]*serveNode, 3)
	var peers, raftAddrs, apiAddrs []string
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		apiAddrs = append(apiAddrs, testutil.FreeAddr(t))
		raftAddrs = append(raftAddrs, testutil.FreeAddr(t))
		peers = append(peers, id+"="+raftAddrs[i])
		nodes[i] = &serveNode{id: id, url: "http://" + apiAddrs[i]}
	}
	for i, n := range nodes {
		p, err := procs.Start(t, dir, "leasehold-"+n.id, procs.ChildEnv(), leaseholdBin, "serve", "--node-id", n.id,
			"--data-dir", filepath.Join(dir, n.id), "--api-addr", apiAddrs[i], "--raft-addr", raftAddrs[i],
			"--peers", strings.Join(peers, ","), "--log-level", "warn")
		if err != nil {
			t.Fatal(err)
		}
		n.Proc = p
	}
	for _, n := range nodes {
		if err := procs.WaitReady(n.Proc, n.url, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// leaderOf is the node that leads now, as the cluster reports it.
func leaderOf(t *testing.T, nodes []*serveNode, c *client.Client) *serveNode {
	t.Helper()
	var found *serveNode
	testutil.Eventually(t, 60*time.Second, "the cluster has a leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		members, err := c.Members(ctx)
		if err != nil {
			return false
		}
		for _, m := range members {
			for _, n := range nodes {
				if m.Leader && m.ID == n.id && !n.Exited() { // a dead node may still be listed as leader
					found = n
					return true
				}
			}
		}
		return false
	})
	return found
}
