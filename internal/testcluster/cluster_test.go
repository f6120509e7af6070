package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// The harness itself: a follower forwards, a killed leader is replaced, and
// a cut link isolates a node.
func TestClusterHarness(t *testing.T) {
	c := Start(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	follower := (leader + 1) % 3
	cl, err := client.New(client.Config{Endpoints: []string{c.URL(follower)}, Logger: Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := cl.Acquire(ctx, "x", client.TTL(10*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatalf("acquire through a follower: %v", err)
	}
	c.Kill(leader)
	next := c.WaitNewLeader(leader, 10*time.Second)
	cl2, _ := client.New(client.Config{Endpoints: []string{c.URL(next)}, Logger: Logger()})
	l2, err := cl2.Acquire(ctx, "y", client.TTL(10*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatalf("acquire after failover: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token after failover %d is not above %d", l2.Token(), l.Token())
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("the lease did not survive the failover: %v", err)
	}
	c.Restart(leader)
	idx, _ := c.Node(next).Cluster.EncodedState()
	if err := c.WaitApplied(idx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
