package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// gathered reads one series (summed over label sets matching labels) from
// a node's registry.
func gathered(t testing.TB, n *testcluster.Node, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// TestAdminThroughFollower: Locks, ForceRelease and Audit sent to a
// follower are answered by the leader (the countdown is the leader's); the
// leader counts the forced release, and every node applies it.
func TestAdminThroughFollower(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	term := c.Node(lead).Cluster.Stats().Term
	f := (lead + 1) % 3
	cl := newTestClient(t, 2*time.Second, c.URL(f))
	ctx := ctxFor(t, 20*time.Second)

	l, err := cl.Acquire(ctx, "adm/fw", client.TTL(30*time.Second), client.ManualRenew(), client.Owner("o"))
	if err != nil {
		t.Fatal(err)
	}
	locks, err := cl.Locks(ctx, client.LocksQuery{Resource: "adm/fw"})
	if err != nil || len(locks) != 1 || locks[0].Holder == nil || locks[0].Holder.ID != l.ID() || !locks[0].Holder.ExpiresKnown {
		t.Fatalf("locks through a follower: %v, %v", locks, err)
	}
	if all, err := cl.Locks(ctx, client.LocksQuery{Prefix: "adm/"}); err != nil || len(all) != 1 {
		t.Fatalf("locks list through a follower: %v, %v", all, err)
	}
	if _, err := cl.ForceRelease(ctx, "adm/fw", l.ID(), "via follower"); err != nil {
		t.Fatalf("forced release through a follower: %v", err)
	}
	recs, _, err := cl.Audit(ctx, 0, 0)
	if err != nil || len(recs) != 1 || recs[0].Reason != "via follower" || recs[0].LeaseID != l.ID() {
		t.Fatalf("audit through a follower: %v, %v", recs, err)
	}
	var counted [3]float64
	for i := range 3 {
		counted[i] = gathered(t, c.Node(i), "leasehold_forced_releases_total", nil)
	}
	if c.Leader() == lead && c.Node(lead).Cluster.Stats().Term == term {
		if counted[f] != 0 {
			t.Fatalf("the follower counted %v forced releases; the leader carries them out", counted[f])
		}
		if counted[lead] != 1 {
			t.Fatalf("the leader counted %v forced releases, want 1", counted[lead])
		}
	} else if counted[0]+counted[1]+counted[2] != 1 {
		// A loaded machine moved leadership: the node that led then
		// carried it out, and only it counted it.
		t.Fatalf("with leadership moved from %s, the nodes counted %v forced releases; want it counted once", c.ID(lead), counted)
	}
	for i := range 3 {
		n := c.Node(i)
		waitFor(t, 5*time.Second, fmt.Sprintf("node %d applies the forced release", i), func() (bool, string) {
			got := gathered(t, n, "leasehold_leases_ended_total", map[string]string{"reason": "forced"})
			return got == 1, fmt.Sprintf("leases ended (forced) = %v", got)
		})
		if got := gathered(t, n, "leasehold_raft_term", nil); got < 1 {
			t.Fatalf("node %d: leasehold_raft_term = %v", i, got)
		}
	}
	if got := gathered(t, c.Node(lead), "leasehold_raft_leader_changes_total", nil); got < 1 {
		t.Fatalf("the leader counted %v leader changes", got)
	}
}
