package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/server"

	"github.com/leasehold/leasehold/internal/testutil"
)

// Cluster is N real in-process nodes (raft over TCP on loopback, fsync'd
// logs in temp dirs) whose links a test can cut and heal, and whose nodes
// it can kill, restart and wipe.
type Cluster struct {
	t       testing.TB
	Net     *Network
	opts    []Option
	srv     []func(*server.Config) // for every node's server
	mu      sync.Mutex
	nodes   []*Node // nil while stopped
	ids     []string
	raft    []string // raft address per node
	api     []string // API address per node (host:port), kept across restarts
	dirs    []string
	removed []bool
	// bound are the listeners (raft, API) bound on port 0 for a node's
	// first start; a restart listens on the same addresses again.
	bound [][2]net.Listener
}

// Start boots a cluster of n voters and waits for a leader.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	return StartServers(t, n, nil, opts...)
}

// StartServers is Start with srv applied to every node's server config
// (nil: none).
func StartServers(t testing.TB, n int, srv func(*server.Config), opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Net: NewNetwork(), opts: opts}
	if srv != nil {
		c.srv = append(c.srv, srv)
	}
	var peers []cluster.Peer
	for i := range n {
		c.ids = append(c.ids, fmt.Sprintf("n%d", i+1))
		c.bind()
		c.dirs = append(c.dirs, t.TempDir())
		c.nodes = append(c.nodes, nil)
		c.removed = append(c.removed, false)
		peers = append(peers, cluster.Peer{ID: c.ids[i], Addr: c.raft[i]})
	}
	t.Cleanup(c.unbind)
	for i := range n {
		c.start(i, func(cfg *cluster.Config) { cfg.Peers = peers })
	}
	t.Cleanup(c.StopAll)
	c.WaitLeader(15 * time.Second)
	return c
}

// bind binds the raft and API listeners of a new node on port 0; the
// caller holds c.mu or owns c.
func (c *Cluster) bind() {
	c.t.Helper()
	raft, api := testutil.Listen(c.t), testutil.Listen(c.t)
	c.raft = append(c.raft, raft.Addr().String())
	c.api = append(c.api, api.Addr().String())
	c.bound = append(c.bound, [2]net.Listener{raft, api})
}

// unbind closes the listeners of nodes that never started.
func (c *Cluster) unbind() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range c.bound {
		for _, l := range b {
			if l != nil {
				l.Close()
			}
		}
		c.bound[i] = [2]net.Listener{}
	}
}

// Size is the number of nodes ever started (stopped and removed included).
func (c *Cluster) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids)
}

// Faster timeouts than production: loopback is quick and tests are short.
// The leader lease is as long as raft allows (the heartbeat timeout): a
// leader steps down when a quorum has not answered within it, which three
// race-built nodes on a loaded 2-core machine miss at 150ms, and failover
// after a kill does not wait for it.
func fastRaft(cfg *cluster.Config) {
	cfg.HeartbeatTimeout = 300 * time.Millisecond
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.LeaderLeaseTimeout = 300 * time.Millisecond
}

func (c *Cluster) start(i int, extra ...Option) {
	c.t.Helper()
	cfg := cluster.DefaultConfig()
	cfg.NodeID = c.ids[i]
	cfg.DataDir = c.dirs[i]
	cfg.RaftAddr = c.raft[i]
	cfg.Logger = Logger().With("node", c.ids[i])
	cfg.Dial = c.Net.Dialer(c.raft[i])
	fastRaft(&cfg)
	for _, o := range c.opts {
		o(&cfg)
	}
	for _, o := range extra {
		o(&cfg)
	}
	var n *Node
	var err error
	c.mu.Lock()
	first := c.bound[i]
	c.bound[i] = [2]net.Listener{}
	c.mu.Unlock()
	if first[0] != nil {
		cfg.RaftListener = first[0]
		n, err = OpenOn(cfg, first[1], c.srv...)
	} else {
		// A restart listens on the node's addresses again; the ports of its
		// previous run may linger briefly.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err = Open(cfg, c.api[i], c.srv...)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", c.ids[i], err)
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
}

// Node returns node i, or nil if it is stopped.
func (c *Cluster) Node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// ID is node i's id.
func (c *Cluster) ID(i int) string { return c.ids[i] }

// RaftAddr is node i's raft address.
func (c *Cluster) RaftAddr(i int) string { return c.raft[i] }

// URL is node i's API URL (stable across restarts).
func (c *Cluster) URL(i int) string { return "http://" + c.api[i] }

// URLs are the API URLs of every node that is a member.
func (c *Cluster) URLs() []string {
	var out []string
	for i := range c.ids {
		if !c.removed[i] {
			out = append(out, c.URL(i))
		}
	}
	return out
}

// Leader returns the index of the node that leads and has taken over its
// timers, or -1.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n != nil && n.Cluster.IsLeader() {
			return i
		}
	}
	return -1
}

// WaitLeader waits up to timeout for a leader and returns its index.
func (c *Cluster) WaitLeader(timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if i := c.Leader(); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no leader within %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitNewLeader waits for a leader other than old.
func (c *Cluster) WaitNewLeader(old int, timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if i := c.Leader(); i >= 0 && i != old {
			return i
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no new leader (other than %s) within %v", c.ids[old], timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops node i at once (in-process close; its data stays).
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n != nil {
		n.Stop()
	}
}

// Restart starts a stopped node again on its data and addresses.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Node(i) != nil {
		c.t.Fatalf("restart %s: it is running", c.ids[i])
	}
	c.start(i)
}

// Wipe deletes a stopped node's data, as if its disk were replaced.
func (c *Cluster) Wipe(i int) {
	c.t.Helper()
	if c.Node(i) != nil {
		c.t.Fatalf("wipe %s: it is running", c.ids[i])
	}
	if err := os.RemoveAll(c.dirs[i]); err != nil {
		c.t.Fatal(err)
	}
	if err := os.MkdirAll(c.dirs[i], 0o700); err != nil {
		c.t.Fatal(err)
	}
}

// StartJoining starts node i (stopped, or a new index from AddNode) with no
// bootstrap, waiting to be added to the cluster.
func (c *Cluster) StartJoining(i int) {
	c.t.Helper()
	c.start(i, func(cfg *cluster.Config) { cfg.Join = true; cfg.Peers = nil })
}

// AddNode makes room for a new node (not started) and returns its index.
func (c *Cluster) AddNode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.ids)
	c.ids = append(c.ids, fmt.Sprintf("n%d", i+1))
	c.bind()
	c.dirs = append(c.dirs, c.t.TempDir())
	c.nodes = append(c.nodes, nil)
	c.removed = append(c.removed, false)
	return i
}

// MarkRemoved records that node i left the configuration.
func (c *Cluster) MarkRemoved(i int) { c.removed[i] = true }

// Removed reports whether node i was marked removed.
func (c *Cluster) Removed(i int) bool { return c.removed[i] }

// StartWith starts node i (made by AddNode) with extra options over the
// cluster's own, for a node that must differ from its peers.
func (c *Cluster) StartWith(i int, extra ...Option) { c.start(i, extra...) }

// Isolate cuts node i from every other node.
func (c *Cluster) Isolate(i int) {
	for j := range c.ids {
		if j != i {
			c.Net.Cut(c.raft[i], c.raft[j])
		}
	}
}

// HealAll restores every link.
func (c *Cluster) HealAll() { c.Net.HealAll() }

// StopAll stops every running node.
func (c *Cluster) StopAll() {
	for i := range c.ids {
		c.Kill(i)
	}
}

// WaitApplied waits until every running member has applied at least index.
func (c *Cluster) WaitApplied(index uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		var behind []string
		for i := range c.ids {
			n := c.Node(i)
			if n == nil || c.removed[i] {
				continue
			}
			if st := n.Cluster.LocalStatus(); st.AppliedIndex < index {
				behind = append(behind, fmt.Sprintf("%s at %d", c.ids[i], st.AppliedIndex))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not applied up to %d: %s", index, strings.Join(behind, ", "))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
