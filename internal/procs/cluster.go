package procs

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/freeport"
)

// ServeNode is one `leasehold serve` process of a cluster started by
// StartServeCluster.
type ServeNode struct {
	ID, URL string
	*Proc
}

// StartServeCluster starts three `bin serve` processes bootstrapped from
// one peer list, with their data and output under dir and args added to
// each, and waits until each answers /readyz.
func StartServeCluster(t testing.TB, bin, dir string, args ...string) []*ServeNode {
	t.Helper()
	nodes := make([]*ServeNode, 3)
	var peers, raftAddrs, apiAddrs []string
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		apiAddrs = append(apiAddrs, freeAddr(t))
		raftAddrs = append(raftAddrs, freeAddr(t))
		peers = append(peers, id+"="+raftAddrs[i])
		nodes[i] = &ServeNode{ID: id, URL: "http://" + apiAddrs[i]}
	}
	for i, n := range nodes {
		serve := append([]string{"serve", "--node-id", n.ID, "--data-dir", filepath.Join(dir, n.ID), "--api-addr", apiAddrs[i],
			"--raft-addr", raftAddrs[i], "--peers", strings.Join(peers, ","), "--log-level", "warn"}, args...)
		p, err := Start(t, dir, "leasehold-"+n.ID, ChildEnv(), bin, serve...)
		if err != nil {
			t.Fatal(err)
		}
		n.Proc = p
	}
	for _, n := range nodes {
		if err := WaitReady(n.Proc, n.URL, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
