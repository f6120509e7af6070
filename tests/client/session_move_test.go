package client_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// hostCounter counts requests by node and RPC method over HTTP/2 without
// TLS (the client's own session transport).
type hostCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	hits map[string]int // "host method"
}

func newHostCounter(t *testing.T) *hostCounter {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &hostCounter{next: tr, hits: map[string]int{}}
}

func (h *hostCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	h.mu.Lock()
	h.hits[r.URL.Host+" "+method]++
	h.mu.Unlock()
	return h.next.RoundTrip(r)
}

// count is the requests for method sent to the node at url.
func (h *hostCounter) count(url, method string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[strings.TrimPrefix(url, "http://")+" "+method]
}

func (h *hostCounter) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.hits)
}

// sessionsOpen is node n's leasehold_sessions gauge.
func sessionsOpen(t *testing.T, n *testcluster.Node) int {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "leasehold_sessions" {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	t.Fatal("no leasehold_sessions gauge")
	return 0
}

// A client whose first endpoint is a follower moves its stream to the
// leader after the follower's first answers name it, and sends what the
// follower left unanswered there with the same request IDs: every op is
// answered once (each acquire with the one lease the leader granted, each
// waiter in its turn), and the follower serves no stream afterwards.
func TestSessionMovesToTheLeader(t *testing.T) {
	tc := testcluster.Start(t, 3)
	lead := tc.Leader()
	follower, other := (lead+1)%3, (lead+2)%3
	hc := newHostCounter(t)
	c := sessionClient(t, hc, client.Config{}, tc.URL(follower), tc.URL(lead), tc.URL(other))
	direct := nodeClient(t, tc.Node(lead))

	// Ops in flight as the first answers come: some are answered by the
	// follower's relay, the rest move with the stream.
	const workers, waiters = 24, 4
	leases := make([]*client.Lease, workers)
	errs := make(chan error, workers+waiters)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctxFor(t, callTimeout), fmt.Sprintf("move/%d", w), client.TTL(30*time.Second))
			if err != nil {
				errs <- fmt.Errorf("acquire move/%d: %w", w, err)
				return
			}
			leases[w] = hold(t, l)
		}()
	}
	// Waiters on one resource, each answered in turn.
	var tokens []uint64
	var mu sync.Mutex
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctxFor(t, 20*time.Second)
			l, err := c.Acquire(ctx, "move/shared", client.TTL(30*time.Second), client.Wait(15*time.Second))
			if err != nil {
				errs <- fmt.Errorf("acquire move/shared: %w", err)
				return
			}
			mu.Lock()
			tokens = append(tokens, l.Token())
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				errs <- fmt.Errorf("release move/shared: %w", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if len(tokens) != waiters {
		t.Fatalf("%d waiters granted, want %d", len(tokens), waiters)
	}
	for w, l := range leases {
		if h := holderOf(t, direct, fmt.Sprintf("move/%d", w)); h.ID != l.ID() || h.Token != l.Token() {
			t.Fatalf("move/%d is held by lease %d token %d; the client was answered lease %d token %d",
				w, h.ID, h.Token, l.ID(), l.Token())
		}
	}
	// Ops after the move: renew and release each lease on the leader.
	for w, l := range leases {
		if err := l.Renew(ctxFor(t, callTimeout)); err != nil {
			t.Fatalf("renew move/%d: %v", w, err)
		}
		if err := l.Release(ctxFor(t, callTimeout)); err != nil {
			t.Fatalf("release move/%d: %v", w, err)
		}
	}
	if hc.count(tc.URL(follower), "Session") != 1 || hc.count(tc.URL(lead), "Session") < 1 ||
		hc.count(tc.URL(other), "Session") != 0 {
		t.Fatalf("want one stream to the follower, then streams to the leader only; got %v", hc)
	}
	for _, m := range []string{"Batch", "Acquire", "Renew", "Release"} {
		for i := range 3 {
			if n := hc.count(tc.URL(i), m); n != 0 {
				t.Fatalf("%d unary %s calls to node %d, want none: %v", n, m, i, hc)
			}
		}
	}
	eventually(t, 10*time.Second, "the follower's stream ended and the leader's serves", func() bool {
		return sessionsOpen(t, tc.Node(follower)) == 0 && sessionsOpen(t, tc.Node(lead)) == 1
	})
}

// A client that knows only a follower keeps its stream there: the
// follower relays its ops to the leader.
func TestSessionStaysOnAFollowerItOnlyKnows(t *testing.T) {
	tc := testcluster.Start(t, 3)
	follower := (tc.Leader() + 1) % 3
	hc := newHostCounter(t)
	c := sessionClient(t, hc, client.Config{}, tc.URL(follower))
	for i := range 3 {
		l := mustAcquire(t, c, []string{fmt.Sprintf("stay/%d", i)}, client.TTL(30*time.Second))
		if err := l.Release(ctxFor(t, callTimeout)); err != nil {
			t.Fatal(err)
		}
	}
	if n := hc.count(tc.URL(follower), "Session"); n != 1 {
		t.Fatalf("%d streams to the follower, want the one it keeps: %v", n, hc)
	}
	if n := sessionsOpen(t, tc.Node(follower)); n != 1 {
		t.Fatalf("the follower serves %d streams, want 1", n)
	}
}
