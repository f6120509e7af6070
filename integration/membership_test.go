package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestMembershipGrowAndShrinkUnderLoad: 3 voters grow to 5 and shrink back
// to 3 (the leader itself removed once directly and once after handing
// leadership over) while 4 clients acquire and release. Clients see no error
// other than ones their library retried away; Members shows the expected
// set after every step.
func TestMembershipGrowAndShrinkUnderLoad(t *testing.T) {
	c := testcluster.Start(t, 3)
	n4, n5 := c.AddNode(), c.AddNode() // addresses now, started later
	all := []string{c.URL(0), c.URL(1), c.URL(2), c.URL(n4), c.URL(n5)}
	admin := newTestClient(t, 2*time.Second, c.URLs()...)

	// The load: every client knows all five endpoints from the start.
	var (
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		grants   atomic.Int64
		held     atomic.Int64
		mu       sync.Mutex
		surfaced []string
	)
	transports := make([]*countingTransport, 4)
	for i := range 4 {
		transports[i] = &countingTransport{}
		cl := newCountingClient(t, 2*time.Second, transports[i], all...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			fail := func(what string, err error) {
				mu.Lock()
				surfaced = append(surfaced, fmt.Sprintf("client %d %s: %v", i, what, err))
				mu.Unlock()
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				res := fmt.Sprintf("member/%d", rng.IntN(8))
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				l, err := cl.Acquire(ctx, res, client.TTL(5*time.Second), client.ManualRenew())
				cancel()
				if errors.Is(err, leasehold.ErrHeld) {
					held.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if err != nil {
					fail("acquire", err)
					continue
				}
				grants.Add(1)
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
				err = l.Release(ctx)
				cancel()
				if err != nil {
					fail("release", err)
				}
			}
		}()
	}
	stopLoad := func() {
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			t.Fatal("load clients did not stop within 40s")
		}
	}
	defer func() {
		select {
		case <-stop:
		default:
			stopLoad()
		}
	}()
	ids := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, c.ID(i))
		}
		return out
	}
	step := func(format string, args ...any) {
		t.Logf("%s (grants so far: %d)", fmt.Sprintf(format, args...), grants.Load())
	}
	time.Sleep(500 * time.Millisecond)

	// Grow: 3 -> 4 -> 5.
	members := []int{0, 1, 2}
	for _, n := range []int{n4, n5} {
		c.StartJoining(n)
		if err := admin.AddVoter(ctxFor(t, 40*time.Second), c.ID(n), c.RaftAddr(n)); err != nil {
			t.Fatalf("add %s: %v", c.ID(n), err)
		}
		members = append(members, n)
		waitMembers(t, c, admin, 10*time.Second, ids(members...)...)
		if err := c.WaitApplied(leaderIndex(t, c), 15*time.Second); err != nil {
			t.Fatal(err)
		}
		step("added %s: members %v", c.ID(n), ids(members...))
		time.Sleep(300 * time.Millisecond)
	}
	admin = newTestClient(t, 2*time.Second, all...)

	// Shrink 1: remove the leader itself; it steps down and the rest elect.
	old := c.WaitLeader(10 * time.Second)
	if err := admin.RemoveServer(ctxFor(t, 40*time.Second), c.ID(old)); err != nil {
		// The answer may be lost as the leader steps down; the outcome
		// shows in the configuration.
		t.Logf("remove of the leader %s answered: %v", c.ID(old), err)
	}
	members = without(members, old)
	next := c.WaitNewLeader(old, 10*time.Second)
	waitMembers(t, c, admin, 10*time.Second, ids(members...)...)
	c.Kill(old)
	c.MarkRemoved(old)
	step("removed the leader %s; %s leads; members %v", c.ID(old), c.ID(next), ids(members...))
	time.Sleep(300 * time.Millisecond)

	// Shrink 2: hand leadership over first, then remove the old leader.
	old = c.WaitLeader(10 * time.Second)
	if err := admin.TransferLeader(ctxFor(t, 20*time.Second), ""); err != nil {
		t.Fatalf("transfer leadership away from %s: %v", c.ID(old), err)
	}
	next = c.WaitNewLeader(old, 10*time.Second)
	if err := admin.RemoveServer(ctxFor(t, 40*time.Second), c.ID(old)); err != nil {
		t.Fatalf("remove %s after the transfer: %v", c.ID(old), err)
	}
	members = without(members, old)
	waitMembers(t, c, admin, 10*time.Second, ids(members...)...)
	c.Kill(old)
	c.MarkRemoved(old)
	step("moved leadership from %s to %s and removed %s; members %v", c.ID(old), c.ID(next), c.ID(old), ids(members...))
	time.Sleep(500 * time.Millisecond)

	stopLoad()
	var retried, failedTrips, total int64
	for _, ct := range transports {
		retried += ct.unavail.Load()
		failedTrips += ct.failures.Load()
		total += ct.total.Load()
	}
	t.Logf("load: %d grants, %d held answers; %d round trips, of which %d transport failures and %d Unavailable answers, all retried by the client",
		grants.Load(), held.Load(), total, failedTrips, retried)
	if len(surfaced) > 0 {
		sort.Strings(surfaced)
		t.Errorf("%d errors reached the clients:\n%s", len(surfaced), strings.Join(surfaced, "\n"))
	}
	if grants.Load() < 20 {
		t.Errorf("only %d grants under membership changes", grants.Load())
	}
	if got := len(members); got != 3 {
		t.Fatalf("%d members at the end, want 3", got)
	}
	idx, size := waitSameState(t, c, 15*time.Second)
	t.Logf("final members %v at index %d with identical state (%d bytes)", ids(members...), idx, size)
}

func without(s []int, x int) []int {
	var out []int
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}
