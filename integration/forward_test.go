package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestFollowerForwardsWaitingAcquire: a waiting Acquire sent to a follower
// is granted when the holder releases through another node; the same
// request retried through another node (same request ID) returns the same
// lease, both while it waits and after the grant (invariant 7).
func TestFollowerForwardsWaitingAcquire(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	f1, f2 := (lead+1)%3, (lead+2)%3

	holderVia := newTestClient(t, time.Second, c.URL(lead))
	holder, err := holderVia.Acquire(ctxFor(t, 10*time.Second), "fwd/x", client.TTL(30*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}

	// 1. The Go client, through a follower only.
	waiterVia := newTestClient(t, time.Second, c.URL(f1))
	got := acquireInBackground(waiterVia, "fwd/x", 20*time.Second, client.TTL(30*time.Second), client.Wait(5*time.Second))
	waitWaiters(t, holderVia, "fwd/x", 1)
	releaseVia := newTestClient(t, time.Second, c.URL(f2))
	releasing := time.Now()
	if err := releaseVia.ReleaseByID(ctxFor(t, 10*time.Second), holder.ID(), holder.Secret()); err != nil {
		t.Fatalf("release through the other follower: %v", err)
	}
	var w acquireResult
	select {
	case w = <-got:
	case <-time.After(8 * time.Second):
		t.Fatal("the waiting acquire through the follower was not answered within 8s")
	}
	if w.err != nil {
		t.Fatalf("waiting acquire through the follower: %v", w.err)
	}
	if w.l.Token() <= holder.Token() {
		t.Errorf("waiter's token %d not above the holder's %d", w.l.Token(), holder.Token())
	}
	t.Logf("waiter granted through %s %v after the release through %s was sent (token %d -> %d)",
		c.ID(f1), w.at.Sub(releasing).Round(time.Millisecond), c.ID(f2), holder.Token(), w.l.Token())

	// 2. The raw API: one waiting request sent twice (a client that moved
	// to another node), once through each follower, and once more after the
	// grant through the leader. All three answers name one lease.
	secret := "00112233445566778899aabbccddeeff"
	req := func() *connect.Request[pb.AcquireRequest] {
		return connect.NewRequest(&pb.AcquireRequest{
			Resources: []string{"fwd/x"}, Ttl: durationpb.New(30 * time.Second), Wait: durationpb.New(5 * time.Second),
			Secret: secret, RequestId: "fwd-retry-1",
		})
	}
	type rawResult struct {
		resp *pb.AcquireResponse
		err  error
	}
	raw := make(chan rawResult, 2)
	for _, via := range []int{f1, f2} {
		rl := rawLeases(t, c.URL(via))
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := rl.Acquire(ctx, req())
			if err != nil {
				raw <- rawResult{err: err}
				return
			}
			raw <- rawResult{resp: resp.Msg}
		}()
		time.Sleep(100 * time.Millisecond)
	}
	waitWaiters(t, holderVia, "fwd/x", 1) // one place in the queue, not two
	if err := w.l.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	var answers []*pb.AcquireResponse
	for range 2 {
		select {
		case r := <-raw:
			if r.err != nil {
				t.Fatalf("waiting acquire with a shared request ID: %v", r.err)
			}
			answers = append(answers, r.resp)
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting acquire with a shared request ID was not answered")
		}
	}
	after, err := rawLeases(t, c.URL(lead)).Acquire(ctxFor(t, 10*time.Second), req())
	if err != nil {
		t.Fatalf("the same request retried through the leader after the grant: %v", err)
	}
	answers = append(answers, after.Msg)
	first := answers[0].GetLease()
	for i, a := range answers {
		if a.GetLease().GetId() != first.GetId() || a.GetLease().GetToken() != first.GetToken() {
			t.Errorf("answer %d names lease %d token %d; answer 0 names lease %d token %d",
				i, a.GetLease().GetId(), a.GetLease().GetToken(), first.GetId(), first.GetToken())
		}
		if a.GetSecret() != secret {
			t.Errorf("answer %d does not hand back the caller's secret", i)
		}
	}
	if first.GetToken() <= w.l.Token() {
		t.Errorf("token %d not above the previous holder's %d", first.GetToken(), w.l.Token())
	}
	// Exactly one lease holds the resource.
	g, err := holderVia.Get(ctxFor(t, 10*time.Second), "fwd/x")
	if err != nil {
		t.Fatal(err)
	}
	if holderID(g) != first.GetId() || len(g.Waiters) != 0 {
		t.Errorf("fwd/x: holder %d with %d waiters; want lease %d and none waiting", holderID(g), len(g.Waiters), first.GetId())
	}
	t.Logf("one request ID through %s, %s and %s: one lease %d (token %d)", c.ID(f1), c.ID(f2), c.ID(lead), first.GetId(), first.GetToken())
}

// acquireResult is the answer to an Acquire made in the background.
type acquireResult struct {
	l   *client.Lease
	err error
	at  time.Time // when it came
}

// acquireInBackground sends a (manually renewed) Acquire of resource
// through c, bounded by timeout, and returns where its answer will come.
func acquireInBackground(c *client.Client, resource string, timeout time.Duration, opts ...client.Option) <-chan acquireResult {
	got := make(chan acquireResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		l, err := c.Acquire(ctx, resource, append(opts, client.ManualRenew())...)
		got <- acquireResult{l, err, time.Now()}
	}()
	return got
}

// waitWaiters waits until resource has exactly n waiters.
func waitWaiters(t *testing.T, cl *client.Client, resource string, n int) {
	t.Helper()
	waitFor(t, 5*time.Second, "waiters on "+resource, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		g, err := cl.Get(ctx, resource)
		if err != nil {
			return false, err.Error()
		}
		return len(g.Waiters) == n, fmt.Sprintf("waiters: %+v", g.Waiters)
	})
}

// TestForwardedWaitSurvivesLeaderKill: a waiting Acquire that a follower
// forwarded is in flight at the leader when the leader dies. The client
// must see a retryable failure, retry with the same request ID, keep its
// place in the queue on the new leader, and be granted when the holder's
// lease expires there.
func TestForwardedWaitSurvivesLeaderKill(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	f := (lead + 1) % 3
	holderVia := newTestClient(t, time.Second, c.URL(f))
	holder, err := holderVia.Acquire(ctxFor(t, 10*time.Second), "fwd/kill", client.TTL(2*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	waiterVia := newTestClient(t, time.Second, c.URL(f)) // the follower only
	got := acquireInBackground(waiterVia, "fwd/kill", 20*time.Second, client.TTL(10*time.Second), client.Wait(15*time.Second))
	waitWaiters(t, holderVia, "fwd/kill", 1)
	killed := time.Now()
	c.Kill(lead)
	t.Logf("killed leader %s in %v with a forwarded waiting acquire in flight", c.ID(lead), time.Since(killed).Round(time.Millisecond))
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiting acquire failed when the leader died (%v after the kill): %v", time.Since(killed).Round(time.Millisecond), r.err)
		}
		if r.l.Token() <= holder.Token() {
			t.Errorf("waiter's token %d not above the holder's %d", r.l.Token(), holder.Token())
		}
		t.Logf("waiter granted %v after the kill", time.Since(killed).Round(time.Millisecond))
	case <-time.After(25 * time.Second):
		t.Fatal("the waiting acquire was not answered within 25s")
	}
}

// TestForwardedWaitSurvivesLinkCut: the link between the follower that
// forwarded a waiting Acquire and the leader breaks for a moment while the
// request waits. Nothing was decided and the caller is still there: its
// client must see a retryable failure, retry with the same request ID, and
// be granted when the holder releases.
func TestForwardedWaitSurvivesLinkCut(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	f := (lead + 1) % 3
	holderVia := newTestClient(t, time.Second, c.URL(lead))
	holder, err := holderVia.Acquire(ctxFor(t, 10*time.Second), "fwd/cut", client.TTL(30*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	waiterVia := newTestClient(t, time.Second, c.URL(f)) // the follower only
	got := acquireInBackground(waiterVia, "fwd/cut", 20*time.Second, client.TTL(10*time.Second), client.Wait(15*time.Second))
	waitWaiters(t, holderVia, "fwd/cut", 1)
	c.Net.Cut(c.RaftAddr(f), c.RaftAddr(lead))
	time.Sleep(300 * time.Millisecond)
	c.Net.Heal(c.RaftAddr(f), c.RaftAddr(lead))
	select {
	case r := <-got:
		t.Fatalf("the waiting acquire ended when the forwarding link broke: lease %v, err %v", r.l != nil, r.err)
	case <-time.After(time.Second):
	}
	if err := holder.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiting acquire failed: %v", r.err)
		}
		if r.l.Token() <= holder.Token() {
			t.Errorf("waiter's token %d not above the holder's %d", r.l.Token(), holder.Token())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting acquire was not answered within 10s of the release")
	}
}
