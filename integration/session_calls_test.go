package integration

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// A stream to a follower carries queue and idempotency calls too: the
// follower relays each to the leader, as it forwards their unary calls,
// and answers it on the stream. No unary call of theirs is made.
func TestSessionCallsThroughFollower(t *testing.T) {
	tc := testcluster.Start(t, 3)
	lead := tc.WaitLeader(10 * time.Second)
	f := followerKnowingTheLeader(t, tc, lead)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	var mu sync.Mutex
	calls := map[string]int{}
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		calls[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]]++
		mu.Unlock()
		return tr.RoundTrip(r)
	})
	c, err := client.New(client.Config{Endpoints: []string{tc.URL(f)}, Logger: testcluster.Logger(),
		Session: client.SessionOn, HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := ctxFor(t, 20*time.Second)
	if _, err := c.CreateQueue(ctx, "s/q", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	sent, err := c.Send(ctx, "s/q", leasehold.Message{Key: "a", Body: []byte("1")})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, "s/q", 1)
	if err != nil || len(ds) != 1 || ds[0].Sequence != sent.Sequence {
		t.Fatalf("receive: %v, %v; want sequence %d", ds, err, sent.Sequence)
	}
	if err := c.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	a, _, err := c.Begin(ctx, "s/pay", []byte("f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, []byte("paid")); err != nil {
		t.Fatal(err)
	}
	leader := newTestClient(t, 5*time.Second, tc.URL(lead))
	if q, err := leader.Queue(ctx, "s/q", 0); err != nil || q.Depth != 0 {
		t.Fatalf("the leader's queue: depth %d, %v; want 0 (sent and acked)", q.Depth, err)
	}
	if _, res, err := leader.Begin(ctx, "s/pay", []byte("f")); err != nil || string(res) != "paid" {
		t.Fatalf("the leader's key: %q, %v; want the result", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range []string{"Send", "Ack", "Begin", "Complete"} {
		if calls[m] != 0 {
			t.Errorf("%d unary %s calls; want them on the stream to the follower (%v)", calls[m], m, calls)
		}
	}
	if calls["Session"] != 1 {
		t.Fatalf("want one Session stream; got %v", calls)
	}
}
