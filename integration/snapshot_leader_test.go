package integration

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// A snapshot asked of one follower alone (the only endpoint, as `leasehold
// snapshot save --endpoints FOLLOWER` asks) comes from the leader: the node
// id in its header is the leader's, and it holds a write acknowledged just
// before.
func TestSnapshotAskedOfAFollowerComesFromTheLeader(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader(15 * time.Second)
	follower := (leader + 1) % 3
	cl, err := client.New(client.Config{Endpoints: []string{c.URL(follower)}, Logger: testcluster.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxFor(t, 30*time.Second)
	if _, err := cl.Put(ctx, "backup/marker", []byte("v")); err != nil {
		t.Fatal(err)
	}
	var state bytes.Buffer
	info, err := cl.Snapshot(ctx, func(client.SnapshotInfo) (io.Writer, error) { return &state, nil })
	if err != nil {
		t.Fatal(err)
	}
	if info.NodeID != c.ID(leader) {
		t.Fatalf("the snapshot asked of follower %s came from %s, want the leader %s", c.ID(follower), info.NodeID, c.ID(leader))
	}
	if !bytes.Contains(state.Bytes(), []byte("backup/marker")) {
		t.Fatal("the snapshot lacks the write acknowledged before it")
	}
}
