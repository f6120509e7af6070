package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestPartitionedLeaderCannotRenew: a client keeps renewing through the
// leader while the leader is cut off from the majority. The old leader's
// renewals fail fast and never succeed (invariant 4); the majority elects a
// leader, serves, and expires the lease after its TTL, counted from the
// takeover (invariant 5); after healing, the old leader rejoins as a
// follower and every replica holds the same state at the same index.
func TestPartitionedLeaderCannotRenew(t *testing.T) {
	const ttl = 2 * time.Second
	c := testcluster.Start(t, 3)
	old := c.WaitLeader(10 * time.Second)
	var majority []string
	for i := range 3 {
		if i != old {
			majority = append(majority, c.URL(i))
		}
	}
	viaOld := newTestClient(t, 500*time.Millisecond, c.URL(old))
	lease, err := viaOld.Acquire(ctxFor(t, 10*time.Second), "part/held", client.TTL(ttl), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	lastOK := time.Now()
	if err := lease.Renew(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("renew through the leader before the partition: %v", err)
	}

	c.Isolate(old)
	isolated := time.Now()
	t.Logf("isolated leader %s", c.ID(old))

	// Keep renewing through the old leader for as long as it is cut off.
	type attempt struct {
		sent, back time.Time
		err        error
	}
	var (
		mu       sync.Mutex
		attempts []attempt
	)
	stopRenew := make(chan struct{})
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		for {
			select {
			case <-stopRenew:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
			sent := time.Now()
			err := lease.Renew(ctx)
			cancel()
			mu.Lock()
			attempts = append(attempts, attempt{sent: sent, back: time.Now(), err: err})
			mu.Unlock()
			select {
			case <-stopRenew:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	// The raw API answers a renewal on the cut-off leader with Unavailable,
	// promptly, rather than hanging or succeeding.
	raw := rawLeases(t, c.URL(old))
	rawStart := time.Now()
	_, rawErr := raw.Renew(ctxFor(t, 5*time.Second), connect.NewRequest(&pb.RenewRequest{
		LeaseId: lease.ID(), Secret: lease.Secret(), RequestId: "partition-raw-renew-1"}))
	rawTook := time.Since(rawStart)
	if rawErr == nil {
		t.Fatalf("a renewal through the isolated leader succeeded (%v after the cut)", time.Since(isolated))
	}
	if connect.CodeOf(rawErr) != connect.CodeUnavailable || rawTook > 3*time.Second {
		t.Errorf("raw renewal through the isolated leader: %v after %v; want Unavailable within 3s", rawErr, rawTook)
	}
	t.Logf("raw renewal on the isolated leader: %v after %v", connect.CodeOf(rawErr), rawTook.Round(time.Millisecond))

	waitFor(t, 5*time.Second, "the isolated leader steps down", func() (bool, string) {
		st := c.Node(old).Cluster.LocalStatus()
		return st.State != "Leader" && !c.Node(old).Cluster.IsLeader(), "state " + st.State
	})
	stepDown := time.Since(isolated)

	next := c.WaitNewLeader(old, 10*time.Second)
	elected := time.Since(isolated)
	viaMajority := newTestClient(t, time.Second, majority...)
	other, err := viaMajority.Acquire(ctxFor(t, 10*time.Second), "part/other", client.TTL(10*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatalf("the majority does not serve acquires: %v", err)
	}

	// The lease held through the old leader expires on the new one, not
	// before its TTL: the resource goes to a new holder with a larger token.
	sent := time.Now()
	taken, err := viaMajority.Acquire(ctxFor(t, 15*time.Second), "part/held",
		client.TTL(10*time.Second), client.Wait(10*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatalf("the partitioned holder's resource was never granted on the majority: %v", err)
	}
	ack := time.Now()
	if taken.Token() <= lease.Token() {
		t.Errorf("new holder's token %d is not above the old holder's %d", taken.Token(), lease.Token())
	}
	if held := ack.Sub(lastOK); held < ttl {
		t.Errorf("the lease was re-granted %v after its last renewal was sent; its TTL is %v", held, ttl)
	}
	if d := lease.Deadline(); !d.Before(ack) {
		t.Errorf("the old holder's local deadline is %v after the new grant", d.Sub(ack))
	}
	t.Logf("re-granted %v after the cut (%v after the last successful renewal was sent), waited %v",
		ack.Sub(isolated).Round(time.Millisecond), ack.Sub(lastOK).Round(time.Millisecond), ack.Sub(sent).Round(time.Millisecond))

	close(stopRenew)
	<-renewDone
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) < 3 {
		t.Errorf("only %d renewals attempted through the isolated leader", len(attempts))
	}
	for _, a := range attempts {
		took := a.back.Sub(a.sent)
		switch {
		case a.err == nil:
			t.Errorf("a renewal through the isolated leader SUCCEEDED: sent %v after the cut", a.sent.Sub(isolated))
		case !errors.Is(a.err, leasehold.ErrUnavailable) && !errors.Is(a.err, context.DeadlineExceeded):
			t.Errorf("renewal through the isolated leader: %v; want Unavailable or the deadline", a.err)
		case took > 1500*time.Millisecond:
			t.Errorf("a renewal through the isolated leader took %v, past its 700ms bound", took)
		}
	}
	t.Logf("%d renewals through the isolated leader, all failed; first answer %v after the cut: %v",
		len(attempts), attempts[0].back.Sub(isolated).Round(time.Millisecond), attempts[0].err)
	t.Logf("old leader stepped down %v after the cut; %s elected %v after it",
		stepDown.Round(time.Millisecond), c.ID(next), elected.Round(time.Millisecond))

	for _, l := range []*client.Lease{taken, other} {
		if err := l.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}

	c.HealAll()
	healed := time.Now()
	waitFor(t, 10*time.Second, "the old leader rejoins as a follower", func() (bool, string) {
		st := c.Node(old).Cluster.LocalStatus()
		lead := c.Leader()
		if lead < 0 || lead == old {
			return false, "leader index " + st.State
		}
		return st.State == "Follower" && st.LeaderID == c.ID(lead), st.State + " following " + st.LeaderID
	})
	t.Logf("old leader follows again %v after healing", time.Since(healed).Round(time.Millisecond))
	// The old lease is gone everywhere: asking through the old leader (which
	// now forwards) gets not-found.
	_, err = raw.Renew(ctxFor(t, 5*time.Second), connect.NewRequest(&pb.RenewRequest{
		LeaseId: lease.ID(), Secret: lease.Secret(), RequestId: "partition-raw-renew-2"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("renewing the expired lease through the healed old leader: %v; want NotFound", err)
	}
	if err := c.WaitApplied(leaderIndex(t, c), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	idx, size := waitSameState(t, c, 10*time.Second)
	t.Logf("no divergence: all replicas at index %d with identical state (%d bytes)", idx, size)
	waitFor(t, 5*time.Second, "one term on every replica", func() (bool, string) {
		var terms []uint64
		for i := range 3 {
			terms = append(terms, c.Node(i).Cluster.LocalStatus().Term)
		}
		return terms[0] == terms[1] && terms[1] == terms[2], fmt.Sprint(terms)
	})
}
