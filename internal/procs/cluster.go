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
// StartServeCluster or StartServeNodes.
type ServeNode struct {
	ID, URL string
	*Proc
}

// StartServeCluster starts three `bin serve` processes bootstrapped from
// one peer list, with their data and output under dir and args added to
// each, and waits until each answers /readyz.
func StartServeCluster(t testing.TB, bin, dir string, args ...string) []*ServeNode {
	t.Helper()
	specs := make([]NodeSpec, 3)
	var peers []string
	for i := range specs {
		specs[i] = NodeSpec{ID: fmt.Sprintf("n%d", i+1), APIAddr: freeAddr(t), RaftAddr: freeAddr(t), Args: args}
		peers = append(peers, specs[i].ID+"="+specs[i].RaftAddr)
	}
	for i := range specs {
		specs[i].Peers = strings.Join(peers, ",")
	}
	return StartServeNodes(t, bin, dir, specs)
}

// NodeSpec is one node of StartServeNodes: where it listens, its peer
// list as it reaches them (ID=RAFTADDR,...), and, if Wrap is set, how its
// command is run elsewhere (for example in a network namespace: it gets
// the command and returns the one to run).
type NodeSpec struct {
	ID, APIAddr, RaftAddr string
	Peers                 string
	Wrap                  func(bin string, args ...string) (string, []string)
	Args                  []string // more serve flags
}

// StartServeNodes starts `bin serve` for every spec, with their data and
// output under dir, and waits until each answers /readyz at its APIAddr.
func StartServeNodes(t testing.TB, bin, dir string, specs []NodeSpec) []*ServeNode {
	t.Helper()
	nodes := make([]*ServeNode, len(specs))
	for i, s := range specs {
		nodes[i] = &ServeNode{ID: s.ID, URL: "http://" + s.APIAddr}
		name, args := bin, append([]string{"serve", "--node-id", s.ID, "--data-dir", filepath.Join(dir, s.ID),
			"--api-addr", s.APIAddr, "--raft-addr", s.RaftAddr, "--peers", s.Peers, "--log-level", "warn"}, s.Args...)
		if s.Wrap != nil {
			name, args = s.Wrap(name, args...)
		}
		p, err := Start(t, dir, "leasehold-"+s.ID, ChildEnv(), name, args...)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i].Proc = p
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
