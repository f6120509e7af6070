package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"

	"github.com/leasehold/leasehold/internal/testutil"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestStaleSnapshotInstallIsHarmless sends a follower, as the leader, a
// snapshot older than what it has applied — what a removed peer's raft
// replication goroutine does when it finishes its last pass after the same
// server was re-added. It must neither wind the follower's state back nor
// leave a hole in its log (raft used to empty the log and keep its last
// index, and the follower panicked with "log not found" on the next apply).
func TestStaleSnapshotInstallIsHarmless(t *testing.T) {
	c := testcluster.Start(t, 3, func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 1 << 40 // snapshots only when the test asks
		cfg.SnapshotInterval = time.Hour
	})
	lead := c.WaitLeader(10 * time.Second)
	follower := (lead + 1) % 3
	cl := newTestClient(t, time.Second, c.URLs()...)
	round := 0
	churn := func() {
		t.Helper()
		round++
		for i := range 5 {
			l, err := cl.Acquire(ctxFor(t, 10*time.Second), fmt.Sprintf("stale/%d/%d", round, i), client.TTL(time.Minute), client.ManualRenew())
			if err != nil {
				t.Fatalf("acquire: %v", err)
			}
			if err := l.Release(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatalf("release: %v", err)
			}
		}
		if err := c.WaitApplied(leaderIndex(t, c), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	snapshotNow := func() (*raft.SnapshotMeta, []byte) {
		t.Helper()
		if err := c.Node(lead).Cluster.Snapshot(); err != nil {
			t.Fatalf("leader snapshot: %v", err)
		}
		return latestSnapshot(t, c.Node(lead).Config.DataDir)
	}
	applied := func() uint64 { return c.Node(follower).Cluster.LocalStatus().AppliedIndex }

	churn()
	meta, data := snapshotNow()
	churn()
	before := applied()
	if err := installSnapshot(c, lead, follower, meta, data); err == nil {
		t.Errorf("%s took a snapshot at %d though it had applied up to %d", c.ID(follower), meta.Index, before)
	} else {
		t.Logf("refused as it should be: %v", err)
	}
	if now := applied(); now < before {
		t.Errorf("%s applied index went back from %d to %d", c.ID(follower), before, now)
	}
	churn()
	waitSameState(t, c, 10*time.Second)

	// Only configuration entries after the snapshot: the state in it is the
	// follower's own, so it is taken, and the entries after it must stay.
	meta, data = snapshotNow()
	ghost := testutil.FreeAddr(t)
	// Leadership may have moved on a loaded machine: change the
	// configuration through whoever leads now.
	now := c.WaitLeader(10 * time.Second)
	if err := c.Node(now).Cluster.AddVoter("ghost", ghost); err != nil {
		t.Fatal(err)
	}
	if err := c.Node(now).Cluster.RemoveServer("ghost"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(leaderIndex(t, c), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	before = applied()
	if err := installSnapshot(c, lead, follower, meta, data); err != nil {
		t.Fatalf("%s refused a snapshot at %d holding its own state: %v", c.ID(follower), meta.Index, err)
	}
	t.Logf("%s took the snapshot at %d with its log at %d", c.ID(follower), meta.Index, before)
	churn() // a hole in the follower's log panics here
	idx, _ := waitSameState(t, c, 10*time.Second)
	if last := c.Node(follower).Cluster.LocalStatus().LastIndex; last < before {
		t.Errorf("%s last index %d after the install, below the %d it had", c.ID(follower), last, before)
	}
	t.Logf("every replica at state index %d", idx)
}

// latestSnapshot reads the newest snapshot in a node's data dir.
func latestSnapshot(t *testing.T, dataDir string) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	store, err := raft.NewFileSnapshotStore(dataDir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("snapshots in %s: %v %v", dataDir, metas, err)
	}
	meta, rc, err := store.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return meta, data
}

// installSnapshot sends node to the snapshot as node lead would, in lead's
// current term, and returns what the follower answered.
func installSnapshot(c *testcluster.Cluster, lead, to int, meta *raft.SnapshotMeta, data []byte) error {
	trans := raft.NewNetworkTransport(newRaftDialer(), 1, 10*time.Second, io.Discard)
	defer trans.Close()
	leaderAddr := []byte(c.RaftAddr(lead))
	req := &raft.InstallSnapshotRequest{
		RPCHeader:          raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(c.ID(lead)), Addr: leaderAddr},
		SnapshotVersion:    meta.Version,
		Term:               c.Node(lead).Cluster.LocalStatus().Term,
		Leader:             leaderAddr,
		LastLogIndex:       meta.Index,
		LastLogTerm:        meta.Term,
		Configuration:      raft.EncodeConfiguration(meta.Configuration),
		ConfigurationIndex: meta.ConfigurationIndex,
		Size:               int64(len(data)),
	}
	var resp raft.InstallSnapshotResponse
	if err := trans.InstallSnapshot(raft.ServerID(c.ID(to)), raft.ServerAddress(c.RaftAddr(to)), req, &resp, bytes.NewReader(data)); err != nil {
		return err
	}
	if !resp.Success {
		return errors.New("answered without success")
	}
	return nil
}

// raftDialer is a raft stream layer that only dials: it opens a connection
// to a node's raft port the way cluster's mux expects raft to (first byte
// 'R'), and accepts nothing.
type raftDialer struct {
	closed chan struct{}
	once   sync.Once
}

func newRaftDialer() *raftDialer { return &raftDialer{closed: make(chan struct{})} }

func (d *raftDialer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte{'R'}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (d *raftDialer) Accept() (net.Conn, error) {
	<-d.closed
	return nil, net.ErrClosed
}

func (d *raftDialer) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

func (d *raftDialer) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
