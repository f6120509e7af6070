package integration

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// sessionTestClient is newTestClient with the session stream on, every
// call over h2c, counting unary lease calls in unary.
func sessionTestClient(t testing.TB, unary *atomic.Int64, urls ...string) *client.Client {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasPrefix(r.URL.Path, "/leasehold.v1.Leases/") {
			unary.Add(1)
		}
		return tr.RoundTrip(r)
	})
	c, err := client.New(client.Config{Endpoints: urls, Logger: testcluster.Logger(), Session: client.SessionOn,
		HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// followerKnowingTheLeader is a follower that has heard from the leader: a
// follower that has not refuses a stream as unavailable, and the client
// then sends unary calls for a while, which is not what these tests are
// about.
func followerKnowingTheLeader(t *testing.T, tc *testcluster.Cluster, lead int) int {
	t.Helper()
	f := (lead + 1) % 3
	waitFor(t, 10*time.Second, "the follower to hear from the leader", func() (bool, string) {
		id, _ := tc.Node(f).Cluster.Leader()
		return id == tc.ID(lead), "it names leader " + id
	})
	return f
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A renewal answered on the session stream is committed: the leader is
// killed right after the answer, and the new leader has the renewal (its
// count and progress note).
func TestSessionRenewalCommittedBeforeAnswered(t *testing.T) {
	tc := testcluster.Start(t, 3)
	lead := tc.WaitLeader(10 * time.Second)
	var unary atomic.Int64
	c := sessionTestClient(t, &unary, tc.URL(lead))
	ctx := ctxFor(t, 10*time.Second)
	l, err := c.Acquire(ctx, "s/renew", client.TTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l.Progress("rows 1-1000")
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	tc.Kill(lead)
	next := tc.WaitNewLeader(lead, 20*time.Second)
	r, err := newTestClient(t, 5*time.Second, tc.URL(next)).Get(ctxFor(t, 10*time.Second), "s/renew")
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Holder; h == nil || h.ID != l.ID() || h.RenewCount < 1 || h.Progress != "rows 1-1000" {
		t.Fatalf("new leader has %+v; want lease %d renewed with progress %q", h, l.ID(), "rows 1-1000")
	}
	if n := unary.Load(); n != 0 {
		t.Fatalf("%d unary lease calls; want the acquire and the renewal on the stream", n)
	}
}

// A stream to a follower works: its ops are relayed to the leader, a
// waiting acquire included, and answered on the stream.
func TestSessionThroughFollower(t *testing.T) {
	tc := testcluster.Start(t, 3)
	lead := tc.WaitLeader(10 * time.Second)
	f := followerKnowingTheLeader(t, tc, lead)
	var unary atomic.Int64
	c := sessionTestClient(t, &unary, tc.URL(f))
	other := newTestClient(t, 5*time.Second, tc.URL(lead))
	ctx := ctxFor(t, 20*time.Second)
	holder, err := other.Acquire(ctx, "s/relay", client.TTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var l *client.Lease
	go func() {
		var err error
		l, err = c.Acquire(ctx, "s/relay", client.TTL(20*time.Second), client.Wait(15*time.Second))
		got <- err
	}()
	waitFor(t, 10*time.Second, "the waiter in line", func() (bool, string) {
		r, err := other.Get(ctx, "s/relay")
		return err == nil && len(r.Waiters) == 1, ""
	})
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting acquire through the follower: %v", err)
	}
	if l.Token() <= holder.Token() {
		t.Fatalf("token %d after %d", l.Token(), holder.Token())
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := unary.Load(); n != 0 {
		t.Fatalf("%d unary lease calls; want every op on the stream to the follower", n)
	}
}
