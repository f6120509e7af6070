package faults

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/procs"
	"github.com/leasehold/leasehold/internal/testutil"
)

// readyTimeout bounds a serve process's wait for /readyz 200 (roomy: 2 shared cores).
const readyTimeout = 60 * time.Second

// checkFor polls f every 50ms until it returns nil, and returns f's last
// error if that takes longer than timeout.
func checkFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still failing after %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr is for child processes, which are given addresses, not listeners.
var freeAddr = testutil.FreeAddr

// The child processes: shared with cmd/leasehold's end-to-end tests.
type proc = procs.Proc

var (
	childEnv  = procs.ChildEnv
	startProc = procs.Start
	why       = procs.Why
	lastLines = procs.LastLines
)

// node is a `leasehold serve` process with a fixed data dir and ports
// across restarts.
type node struct {
	t        testing.TB
	id       string
	dir      string
	dataDir  string
	apiAddr  string
	raftAddr string
	url      string
	args     []string // extra serve flags
	wrap     []string // a command to run serve under (unshare ...), or none
	starts   int
	p        *proc
}

func newNode(t testing.TB, id, dataDir string, args ...string) *node {
	t.Helper()
	dir := t.TempDir()
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
	}
	n := &node{t: t, id: id, dir: dir, dataDir: dataDir, apiAddr: freeAddr(t), raftAddr: freeAddr(t), args: args}
	n.url = "http://" + n.apiAddr
	return n
}

// launch starts serve without waiting for it to be ready.
func (n *node) launch() error {
	n.starts++
	bin, args := wrapCmd(n.wrap, lhBin, append([]string{"serve", "--node-id", n.id, "--data-dir", n.dataDir, "--api-addr", n.apiAddr,
		"--raft-addr", n.raftAddr, "--log-level", "warn"}, n.args...)...)
	p, err := startProc(n.t, n.dir, fmt.Sprintf("%s-serve-%d", n.id, n.starts), childEnv(), bin, args...)
	if err != nil {
		return err
	}
	n.p = p
	return nil
}

// start launches serve and waits until it is ready; the error says why not
// (serve exited first, with its stderr, or never became ready).
func (n *node) start() error {
	if err := n.launch(); err != nil {
		return err
	}
	return n.waitReady(readyTimeout)
}

func (n *node) waitReady(timeout time.Duration) error { return procs.WaitReady(n.p, n.url, timeout) }

// startCluster starts a cluster of size nodes (bootstrapped from a peer
// list) and waits until every node is ready.
func startCluster(t testing.TB, size int, args ...string) []*node {
	t.Helper()
	nodes := make([]*node, size)
	var peers []string
	for i := range nodes {
		nodes[i] = newNode(t, fmt.Sprintf("n%d", i+1), "", args...)
		peers = append(peers, nodes[i].id+"="+nodes[i].raftAddr)
	}
	for _, n := range nodes {
		n.args = append(n.args, "--peers", strings.Join(peers, ","))
		if err := n.launch(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := n.waitReady(readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

func urls(nodes []*node) []string {
	var u []string
	for _, n := range nodes {
		u = append(u, n.url)
	}
	return u
}

// runLH runs a leasehold CLI command to completion (bounded by timeout).
func runLH(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, lhBin, args...)
	cmd.Env = childEnv()
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && ctx.Err() == nil {
		return string(out), err
	}
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("leasehold %s: did not finish within %v", strings.Join(args, " "), timeout)
	}
	if err != nil {
		return string(out), fmt.Errorf("leasehold %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
