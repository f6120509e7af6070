package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// nextUpdate reads the next assignment update, failing the test after d.
func nextUpdate(t *testing.T, s *client.AssignmentStream, d time.Duration) client.AssignmentUpdate {
	t.Helper()
	select {
	case u, ok := <-s.Updates():
		if !ok {
			t.Fatalf("the assignment stream ended: %v", s.Err())
		}
		return u
	case <-time.After(d):
		t.Fatalf("no assignment update within %v", d)
	}
	return client.AssignmentUpdate{}
}

// A group's life through the client: create (again, otherwise: ErrHeld),
// grow, list,
// a member's session and its assignment stream (first its partitions, then
// a revocation when a second member joins), the acknowledgement that hands
// the partition over with a larger epoch, and Leave.
func TestGroupLifecycle(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := c.CreateGroup(ctx, "g", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, "g", 3); !errors.Is(err, leasehold.ErrHeld) {
		t.Fatalf("creating g again with another count: %v, want ErrHeld", err)
	}
	if g, err := c.GrowGroup(ctx, "g", 4); err != nil || g.Partitions != 4 {
		t.Fatalf("grow: %+v %v", g, err)
	}
	if gs, err := c.Groups(ctx, ""); err != nil || len(gs) != 1 || gs[0].Name != "g" {
		t.Fatalf("groups: %+v %v", gs, err)
	}
	a, err := c.Join(ctx, "g", "a", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Leave(ctxFor(t, 5*time.Second))
	s := a.Assignments(ctx)
	epochs := map[int]uint64{}
	for len(epochs) < 4 {
		for _, ch := range nextUpdate(t, s, 10*time.Second).Changes {
			if ch.State == client.Added {
				epochs[ch.Partition] = ch.Epoch
			}
		}
	}
	b, err := c.Join(ctx, "g", "b", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Leave(ctxFor(t, 5*time.Second))
	var revoked []client.Assignment
	for len(revoked) < 2 {
		for _, ch := range nextUpdate(t, s, 10*time.Second).Changes {
			if ch.State == client.Revoking {
				revoked = append(revoked, ch)
			}
		}
	}
	for _, r := range revoked {
		if err := a.AckRevocation(ctx, r.Partition, r.Epoch+1000); !errors.Is(err, leasehold.ErrStaleToken) {
			t.Fatalf("ack with a wrong epoch: %v, want ErrStaleToken", err)
		}
		if err := a.AckRevocation(ctx, r.Partition, r.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "b owns the revoked partitions with larger epochs", func() bool {
		g, err := c.Group(ctx, "g")
		if err != nil {
			return false
		}
		for _, r := range revoked {
			p := g.PartitionList[r.Partition]
			if p.Owner != "b" || p.Epoch <= epochs[r.Partition] {
				return false
			}
		}
		return g.PendingRevocations == 0
	})
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Leave(ctx); err != nil {
		t.Fatalf("a second Leave: %v, want nil", err)
	}
}
