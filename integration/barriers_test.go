package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestBarrierSurvivesLeaderKill: on a 3-node cluster that snapshots
// often, two of three parties have arrived at a barrier, and one party of
// another barrier with a 4s timeout, when the leader is killed. After the
// takeover the two arrivals still count (their leases, renewed by the
// client through the new leader, were restored with the state), and the
// third party trips the phase exactly once: both waiting parties see the
// same trip, with a token above every token before it. The other phase
// times out on the new leader — never before 4s from its first arrival
// (the countdown restarts at the takeover). The killed node, restarted
// from its snapshot and log, ends with the same state bytes as the others.
func TestBarrierSurvivesLeaderKill(t *testing.T) {
	c := testcluster.Start(t, 3, func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 16
		cfg.TrailingLogs = 8
		cfg.SnapshotInterval = 200 * time.Millisecond
	})
	lead := c.WaitLeader(15 * time.Second)
	cl := newTestClient(t, 2*time.Second, c.URLs()...)
	ctx := func() context.Context { return ctxFor(t, 30*time.Second) }

	if _, err := cl.CreateBarrier(ctx(), "ha", 3); err != nil {
		t.Fatal(err)
	}
	const timeout = 4 * time.Second
	if _, err := cl.CreateBarrier(ctx(), "timed", 2, client.PhaseTimeout(timeout)); err != nil {
		t.Fatal(err)
	}
	var arrivals []*client.Arrival
	for _, p := range []string{"p1", "p2"} {
		a, err := cl.Arrive(ctx(), "ha", client.As(p), client.ArrivalTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		arrivals = append(arrivals, a)
	}
	firstArrival := time.Now()
	lone, err := cl.Arrive(ctx(), "timed", client.As("lone"), client.ArrivalTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	before := arrivals[1].Lease().Token()
	for i := range 3 {
		if err := c.Node(i).Cluster.Snapshot(); err != nil {
			t.Logf("snapshot of %s: %v", c.ID(i), err)
		}
	}

	type waited struct {
		end client.PhaseEnd
		err error
	}
	ends := make(chan waited, 3)
	for _, a := range append(arrivals, lone) {
		go func() {
			end, err := a.Wait(ctxFor(t, 40*time.Second))
			ends <- waited{end, err}
		}()
	}
	t.Logf("killing the leader %s with 2 of 3 parties arrived", c.ID(lead))
	c.Kill(lead)
	c.WaitNewLeader(lead, 20*time.Second)
	tookOver := time.Now()

	b, err := cl.GetBarrier(ctx(), "ha")
	if err != nil || b.Arrived != 2 || b.Phase != 1 {
		t.Fatalf("after the takeover: %+v %v; want 2 arrived at phase 1", b, err)
	}
	last, err := cl.Arrive(ctx(), "ha", client.As("p3"))
	if err != nil || last.Tripped() == nil || last.Tripped().Outcome != "tripped" {
		t.Fatalf("the third party: %+v %v", last, err)
	}
	trip := *last.Tripped()
	if trip.Token <= before {
		t.Fatalf("the trip token %d is not above the arrivals' %d", trip.Token, before)
	}
	timedOut := false
	for range 3 {
		w := <-ends
		switch {
		case errors.Is(w.err, client.ErrBarrierBroken) && w.end.Outcome == "timed_out":
			if took := time.Since(firstArrival); took < timeout {
				t.Fatalf("the timed phase ended %v after its first arrival; its timeout is %v", took, timeout)
			}
			if late := time.Since(tookOver); late > timeout+10*time.Second {
				t.Fatalf("the timed phase ended %v after the takeover (timeout %v)", late, timeout)
			}
			timedOut = true
		case w.err != nil || w.end != trip:
			t.Fatalf("a party waiting across the takeover: %+v %v; want the trip %+v", w.end, w.err, trip)
		}
	}
	if !timedOut {
		t.Fatal("the timed phase never timed out")
	}
	b, err = cl.GetBarrier(ctx(), "ha")
	if err != nil || b.Phase != 2 || b.Arrived != 0 || b.Trips != 1 || len(b.Ends) != 1 {
		t.Fatalf("after the trip: %+v %v; want phase 2, one trip", b, err)
	}
	c.Restart(lead)
	if err := c.WaitApplied(leaderIndex(t, c), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitSameState(t, c, 30*time.Second)
}
