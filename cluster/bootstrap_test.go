package cluster

import (
	"net"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// TestPeerStartingLateStillBootstraps: a peer whose raft port already
// holds requests from peers that started first (its listener was bound
// early, as testcluster and a socket-activated service do) still
// bootstraps. A bootstrap after raft starts lost that race: the queued
// heartbeat of the others' leader carried a newer term, and raft then
// refused to bootstrap "a cluster with existing state".
func TestPeerStartingLateStillBootstraps(t *testing.T) {
	var lns []net.Listener
	var peers []Peer
	for _, id := range []string{"n1", "n2", "n3"} {
		ln := testutil.Listen(t)
		lns = append(lns, ln)
		peers = append(peers, Peer{ID: id, Addr: ln.Addr().String()})
	}
	open := func(i int) *Node {
		cfg := testConfig(t, t.TempDir())
		cfg.NodeID, cfg.Peers, cfg.RaftAddr, cfg.RaftListener = peers[i].ID, peers, peers[i].Addr, lns[i]
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
		n, err := Open(cfg, nil)
		if err != nil {
			t.Fatalf("open %s: %v", peers[i].ID, err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	agree := func(what string, ns ...*Node) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, what, func() bool {
			first, _ := ns[0].Leader()
			for _, n := range ns {
				if id, _ := n.Leader(); id == "" || id != first {
					return false
				}
			}
			return true
		})
	}

	// n1 and n2 elect a leader. Its vote request and heartbeats to n3,
	// sent as it won, wait in n3's listen queue.
	n1, n2 := open(0), open(1)
	agree("n1 and n2 agree on a leader", n1, n2)
	n3 := open(2)
	agree("all three agree on a leader after n3 started", n1, n2, n3)
}
