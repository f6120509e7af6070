package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testutil"
)

// A 3-node cluster of real `leasehold serve` processes, so a leader can be
// SIGKILLed. This is the smallest helper the leader-kill test needs; it
// should move to the shared test-support package for the binary once that
// lands (branch cleanup: internal/procs).

// serveNode is one `leasehold serve` process.
type serveNode struct {
	id, url string
	cmd     *exec.Cmd
	stderr  bytes.Buffer
	done    chan struct{}
}

// startServeCluster starts three serve processes bootstrapped from one peer
// list and waits until each answers /readyz.
func startServeCluster(t *testing.T) []*serveNode {
	t.Helper()
	nodes := make([]*serveNode, 3)
	var peers, raftAddrs, apiAddrs []string
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		apiAddrs = append(apiAddrs, testutil.FreeAddr(t))
		raftAddrs = append(raftAddrs, testutil.FreeAddr(t))
		peers = append(peers, id+"="+raftAddrs[i])
		nodes[i] = &serveNode{id: id, url: "http://" + apiAddrs[i], done: make(chan struct{})}
	}
	for i, n := range nodes {
		n.cmd = exec.Command(leaseholdBin, "serve", "--node-id", n.id, "--data-dir", filepath.Join(t.TempDir(), "data"),
			"--api-addr", apiAddrs[i], "--raft-addr", raftAddrs[i], "--peers", strings.Join(peers, ","), "--log-level", "warn")
		n.cmd.Stderr = &n.stderr
		n.cmd.WaitDelay = 5 * time.Second
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { n.cmd.Wait(); close(n.done) }()
		t.Cleanup(func() {
			n.cmd.Process.Kill()
			<-n.done
			if t.Failed() {
				t.Logf("leasehold %s stderr:\n%s", n.id, n.stderr.String())
			}
		})
	}
	for _, n := range nodes {
		testutil.Eventually(t, 60*time.Second, "leasehold "+n.id+" is ready", func() bool {
			res, err := http.Get(n.url + "/readyz")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK
		})
	}
	return nodes
}

// serveLeader is the node that leads now, as the cluster reports it.
func serveLeader(t *testing.T, nodes []*serveNode, c *client.Client) *serveNode {
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
				if m.Leader && m.ID == n.id {
					select {
					case <-n.done: // a dead node still listed as leader
					default:
						found = n
						return true
					}
				}
			}
		}
		return false
	})
	return found
}

// kill SIGKILLs the node and waits for its process to end.
func (n *serveNode) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("leasehold %s still runs 30s after SIGKILL", n.id)
	}
}
