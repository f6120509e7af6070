package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestPrimitivesSurviveRestartsFromSnapshots: with a queue mid-flight (a
// delivery in flight, a delayed message, a dead letter), a group
// mid-rebalance (revocations pending) and a semaphore fully held, every
// node snapshots, more entries follow, and then a follower and the leader
// are each killed and restarted from their snapshot and log. Every
// replica ends with identical state bytes, and nothing was lost: the
// delivery is still in flight and its token still acks it, the pending
// revocations still hand their partitions over (with larger epochs), and
// the semaphore still has its two holders and no third.
func TestPrimitivesSurviveRestartsFromSnapshots(t *testing.T) {
	c := testcluster.Start(t, 3, func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 16
		cfg.TrailingLogs = 8
		cfg.SnapshotInterval = 200 * time.Millisecond
	})
	lead := c.WaitLeader(15 * time.Second)
	cl := newTestClient(t, 2*time.Second, c.URLs()...)
	ctx := func() context.Context { return ctxFor(t, 20*time.Second) }

	// The queue: maxReceives 1, so a nack makes a dead letter.
	if _, err := cl.CreateQueue(ctx(), "q", client.QueueSettings{MaxReceives: 1, Visibility: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []leasehold.Message{{Key: "flight", Body: []byte("f")}, {Key: "dead", Body: []byte("d")},
		{Key: "later", Body: []byte("l"), Delay: 10 * time.Minute}} {
		if _, err := cl.Send(ctx(), "q", m); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := cl.Receive(ctx(), "q", 10)
	if err != nil || len(ds) != 2 {
		t.Fatalf("receive: %v %v, want the two ready messages", ds, err)
	}
	var inFlight leasehold.Delivery
	for _, d := range ds {
		if d.Key == "dead" {
			if err := cl.Nack(ctx(), d, 0, "poison"); err != nil {
				t.Fatal(err)
			}
		} else {
			inFlight = d
		}
	}

	// The group: b's join leaves two of a's partitions revoking.
	if _, err := cl.CreateGroup(ctx(), "g", 4, client.RevokeTimeout(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	a, err := cl.Join(ctx(), "g", "a", client.TTL(10*time.Minute), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Join(ctx(), "g", "b", client.TTL(10*time.Minute), client.ManualRenew()); err != nil {
		t.Fatal(err)
	}
	before, err := cl.Group(ctx(), "g")
	if err != nil || before.PendingRevocations != 2 {
		t.Fatalf("group before the restarts: %+v %v, want 2 revocations pending", before.GroupInfo, err)
	}

	// The semaphore: both slots held.
	var slots []*client.Lease
	for range 2 {
		l, err := cl.Acquire(ctx(), "pool", client.Semaphore(2), client.TTL(10*time.Minute), client.ManualRenew())
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, l)
	}

	// Snapshots everywhere, then log after them.
	for i := range 3 {
		if err := c.Node(i).Cluster.Snapshot(); err != nil {
			t.Logf("snapshot of %s: %v", c.ID(i), err)
		}
	}
	for i := range 20 {
		if _, err := cl.Send(ctx(), "q", leasehold.Message{Key: fmt.Sprintf("tail/%d", i), Body: []byte("t")}); err != nil {
			t.Fatal(err)
		}
	}

	follower := (lead + 1) % 3
	c.Kill(follower)
	c.Restart(follower)
	waitSameState(t, c, 30*time.Second)
	c.Kill(lead)
	c.WaitNewLeader(lead, 20*time.Second)
	c.Restart(lead)
	if err := c.WaitApplied(leaderIndex(t, c), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitSameState(t, c, 30*time.Second)

	info, err := cl.Queue(ctx(), "q", 10)
	if err != nil {
		t.Fatal(err)
	}
	if info.Depth != 23 || info.InFlight != 1 || info.Dead != 1 {
		t.Fatalf("queue after the restarts: depth %d, in flight %d, dead %d; want 23, 1, 1", info.Depth, info.InFlight, info.Dead)
	}
	if len(info.InFlightKeys) != 1 || info.InFlightKeys[0].Token != inFlight.Token {
		t.Fatalf("in flight after the restarts: %+v, want %q with token %d", info.InFlightKeys, inFlight.Key, inFlight.Token)
	}
	if err := cl.Ack(ctx(), inFlight); err != nil {
		t.Fatalf("ack of the delivery in flight across the restarts: %v", err)
	}

	after, err := cl.Group(ctx(), "g")
	if err != nil || after.PendingRevocations != 2 {
		t.Fatalf("group after the restarts: %+v %v, want the 2 revocations still pending", after.GroupInfo, err)
	}
	for _, p := range before.PartitionList {
		if p.Revoking {
			if err := a.AckRevocation(ctx(), p.Partition, p.Epoch); err != nil {
				t.Fatalf("ack revocation of %d after the restarts: %v", p.Partition, err)
			}
		}
	}
	handed, err := cl.Group(ctx(), "g")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range handed.PartitionList {
		was := before.PartitionList[i]
		if was.Revoking && (p.Owner != "b" || p.Epoch <= was.Epoch) {
			t.Fatalf("partition %d after its acknowledgement: %+v, want b with an epoch above %d", i, p, was.Epoch)
		}
	}

	if _, err := cl.Acquire(ctx(), "pool", client.Semaphore(2), client.TTL(time.Minute), client.ManualRenew()); err == nil {
		t.Fatal("a third holder of a 2-slot semaphore after the restarts")
	}
	for _, l := range slots {
		if err := l.Release(ctx()); err != nil {
			t.Fatalf("release of %s after the restarts: %v", l.Slot(), err)
		}
	}
}
