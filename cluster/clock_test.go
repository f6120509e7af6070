package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// Leader timers run on the node's clock: with a fake clock a one-hour TTL
// expires when the clock says so, without the test sleeping an hour.
func TestExpiryFollowsTheNodeClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = fake
	n := openNode(t, cfg)
	defer n.Close()
	ctx := context.Background()
	r, err := n.Propose(ctx, acquireCmd("a", time.Hour, 0, "x"))
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	fake.Advance(59 * time.Minute)
	if held(t, n) != 1 {
		t.Fatal("the lease expired before its TTL on the node's clock")
	}
	fake.Advance(2 * time.Minute)
	waitHeld(t, n, 0)
}

// Invariant 5: a new leader (here the same node after a restart) restarts
// every countdown from its takeover, so a leader change never shortens a
// lease.
func TestTakeoverRestartsCountdowns(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = fake
	n := openNode(t, cfg)
	ctx := context.Background()
	if r, err := n.Propose(ctx, acquireCmd("a", time.Hour, 0, "x")); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	fake.Advance(50 * time.Minute) // 10 minutes left on the old leader
	n.Close()

	n2 := openNode(t, cfg) // takes over at the fake clock's "now"
	defer n2.Close()
	if d, ok := n2.ExpiresIn(onlyLease(t, n2)); !ok || d != time.Hour {
		t.Fatalf("countdown after takeover: %v %v, want a full hour", d, ok)
	}
	fake.Advance(30 * time.Minute) // past the old leader's deadline
	if held(t, n2) != 1 {
		t.Fatal("the lease expired on the old leader's schedule")
	}
	fake.Advance(31 * time.Minute)
	waitHeld(t, n2, 0)
}

func held(t *testing.T, n *Node) int {
	t.Helper()
	var c int
	if err := n.Read(context.Background(), func(s *fsm.State) { c = s.Counts().Leases }); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitHeld waits (bounded) for the expiry the fake clock triggered to be
// committed.
func waitHeld(t *testing.T, n *Node, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for held(t, n) != want {
		if time.Now().After(deadline) {
			t.Fatalf("leases held %d, want %d", held(t, n), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func onlyLease(t *testing.T, n *Node) uint64 {
	t.Helper()
	var id uint64
	n.Read(context.Background(), func(s *fsm.State) {
		s.EachLease(func(l *leasehold.Lease, _ time.Duration) { id = l.ID })
	})
	return id
}
